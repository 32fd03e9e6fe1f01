// The chart of a webhook endpoint's attempts per hour by outcome: an SVG made with DOM calls
// (colours from console.css classes, no style attribute), named and described for assistive
// technology, with the same counts as a table beside it (docs/console.md, "Webhooks").
import { call } from '../api.js';
import { el, table } from '../ui.js';

const hour = 3600 * 1000;
const svgNS = 'http://www.w3.org/2000/svg';
export const outcomes = [
  ['success', 'succeeded'],
  ['pending', 'failed, to be retried'],
  ['failed', 'failed, given up'],
];

// recentAttempts reads the endpoint's attempts of the last `hours` hours, newest first, page by
// page (List Attempts), at most max of them: capped says there were more.
export async function recentAttempts(endpointId, { hours = 24, max = 2500, now = Date.now() } = {}) {
  const since = now - hours * hour;
  const attempts = [];
  let iterator = '';
  for (;;) {
    const page = (await call('/v2/workspace/advancedwebhook/attempts/get', { endpointId, limit: 250, iterator: iterator || undefined })).data;
    for (const a of page.attempts) {
      if (Date.parse(a.timestamp) < since) return { attempts, capped: false };
      if (attempts.length === max) return { attempts, capped: true };
      attempts.push(a);
    }
    if (page.done || !page.iterator) return { attempts, capped: false };
    iterator = page.iterator;
  }
}

// buckets counts attempts per hour and outcome over the `hours` hours ending with the current
// one: [{start (ms), success, pending, failed}], oldest first.
export function buckets(attempts, { hours = 24, now = Date.now() } = {}) {
  const first = Math.floor(now / hour) * hour - (hours - 1) * hour;
  const out = Array.from({ length: hours }, (_, i) => ({ start: first + i * hour, success: 0, pending: 0, failed: 0 }));
  for (const a of attempts) {
    const i = Math.floor((Date.parse(a.timestamp) - first) / hour);
    if (i >= 0 && i < hours && a.status in out[i]) out[i][a.status]++;
  }
  return out;
}

function svg(tag, attrs, ...children) {
  const e = document.createElementNS(svgNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

const hh = (ms) => new Date(ms).toISOString().slice(11, 16);

function describe(b) {
  return `${hh(b.start)}–${hh(b.start + hour)} UTC: ` + outcomes.map(([k, l]) => `${b[k]} ${l}`).join(', ');
}

// attemptsChart draws counts (buckets' answer) as stacked bars, one per hour, with a legend
// and a table of the same numbers. id prefixes the ids the SVG's name and description use.
export function attemptsChart(counts, { id = 'attempts-chart', capped = false } = {}) {
  const W = 720, H = 200, left = 40, bottom = 24, top = 8;
  const max = Math.max(1, ...counts.map((b) => b.success + b.pending + b.failed));
  const y = (n) => top + (H - top - bottom) * (1 - n / max);
  const slot = (W - left) / counts.length;
  const totals = Object.fromEntries(outcomes.map(([k]) => [k, counts.reduce((s, b) => s + b[k], 0)]));
  const all = totals.success + totals.pending + totals.failed;
  const summary = `${all}${capped ? '+' : ''} attempts in the last ${counts.length} hours: ` +
    outcomes.map(([k, l]) => `${totals[k]} ${l}`).join(', ') + '.';
  const g = svg('g', { class: 'bars' });
  counts.forEach((b, i) => {
    const bar = svg('g', { class: 'hour' }, svg('title', {}, describe(b)));
    let base = 0;
    for (const [k] of outcomes) {
      if (!b[k]) continue;
      bar.append(svg('rect', { class: 'bar bar-' + k, x: (left + i * slot + 2).toFixed(1), y: y(base + b[k]).toFixed(1), width: (slot - 4).toFixed(1), height: (y(base) - y(base + b[k])).toFixed(1) }));
      base += b[k];
    }
    g.append(bar);
  });
  const axis = svg('g', { class: 'axis', 'aria-hidden': 'true' },
    svg('line', { x1: left, y1: y(0), x2: W, y2: y(0) }),
    svg('text', { x: left - 6, y: y(max) + 4, 'text-anchor': 'end' }, max),
    svg('text', { x: left - 6, y: y(0) + 4, 'text-anchor': 'end' }, 0),
    ...counts.map((b, i) => (i % 3 === 0 ? svg('text', { x: left + i * slot + slot / 2, y: H - 6, 'text-anchor': 'middle' }, hh(b.start)) : null))
      .filter(Boolean));
  const chart = svg('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-labelledby': `${id}-t ${id}-d` },
    svg('title', { id: id + '-t' }, 'Webhook attempts per hour by outcome (UTC)'),
    svg('desc', { id: id + '-d' }, summary), axis, g);
  const legend = el('ul', { class: 'legend' }, outcomes.map(([k, l]) =>
    el('li', {}, el('span', { class: 'swatch swatch-' + k, 'aria-hidden': 'true' }), `${k} (${l}): ${totals[k]}`)));
  const rows = counts.filter((b) => b.success + b.pending + b.failed > 0).map((b) => ({ ...b, hour: `${hh(b.start)}–${hh(b.start + hour)}` }));
  const tbl = table([{ key: 'hour', label: 'Hour (UTC)' }, ...outcomes.map(([k]) => ({ key: k, label: k }))], rows,
    { caption: 'Attempts per hour by outcome' });
  return el('figure', { class: 'chart-box', id },
    chart, el('figcaption', {}, summary), legend,
    el('details', {}, el('summary', {}, 'The same numbers as a table'), rows.length ? tbl : el('p', {}, 'No attempts.')));
}
