// Views of API answers that several pages show: the per-item results of a batch operation,
// a record as a table of fields, a list already in memory shown a page at a time, the note a
// section shows when the user signed in without the credentials it needs, and rows' action
// buttons (docs/console.md). ui.js holds the building blocks these are made of.
import { call, credentials } from './api.js';
import { el, cell, errorBox, table, pager, section } from './ui.js';

// itemResults shows a batch operation's answer (spec, conventions rule 4): its message, then
// one row per item with its id, whether it succeeded and the item's message. An item that
// failed inside an overall success is marked, never hidden.
export function itemResults(result) {
  const data = (result && result.data) || {};
  const rows = Object.entries(data).map(([id, r]) => ({ id, ...r }));
  const failed = rows.filter((r) => !r.success).length;
  const summary = (result && result.message) || '';
  return el('div', { class: 'items' },
    el('p', { class: failed ? 'error' : '' }, summary + (failed ? ` ${failed} of ${rows.length} failed.` : '')),
    rows.length ? table([
      { key: 'id', label: 'Id' },
      { key: 'success', label: 'Result', render: (r) => (r.success ? 'ok' : 'failed') },
      { key: 'message', label: 'Message' },
    ], rows) : null);
}

// fields shows a record as a two-column table: [label, value] pairs, values as text.
export function fields(pairs, caption) {
  const t = table([{ key: 'k', label: 'Field' }, { key: 'v', label: 'Value', render: (r) => cell(r.v) }],
    pairs.map(([k, v]) => ({ k, v })), { caption });
  t.classList.add('fields');
  return t;
}

// localPager shows rows held in memory (an answer the API does not page, such as Get Users
// v1, which may hold 50,000 users) a page at a time, so no list is built in one go.
export function localPager(columns, rows, opts = {}) {
  const size = opts.pageSize || 100;
  return pager(columns, async (token) => {
    const from = Number(token || 0);
    const next = from + size < rows.length ? String(from + size) : '';
    return { rows: rows.slice(from, from + size), next };
  }, opts);
}

// needs is the note a section shows instead of its content when the user signed in without
// the credentials its operations take: 'W' (workspace) or 'K' (an API key); null when they
// are there.
export function needs(kind) {
  const c = credentials();
  if (kind === 'W' && !c.workspaceId) {
    return el('p', { class: 'note' }, 'This section needs workspace credentials (the workspace id and its auth token): sign out and sign in with them.');
  }
  if (kind === 'K' && !c.apiKey) {
    return el('p', { class: 'note' }, 'This section needs an API key and its auth token: sign out and sign in with them.');
  }
  return null;
}

// part is a titled section of a page whose operations take kind's credentials ('W' or 'K'):
// [the section, whether the user signed in with them]; without them it holds needs' note.
export function part(title, kind) {
  const box = section(title);
  const n = needs(kind);
  if (n) box.append(n);
  return [box, !n];
}

// userName names an action user as the API gives one: name, else email, else id.
export function userName(u) {
  if (!u || typeof u !== 'object') return '';
  return u.name || u.email || u.userId || '';
}

// when shows epoch milliseconds as a readable local time ('' for none).
export function when(ms) {
  if (!ms) return '';
  const d = new Date(Number(ms));
  return isNaN(d) ? String(ms) : d.toLocaleString();
}

// hashLink is a link to a page of the console with its parameters encoded.
export function hashLink(text, ...parts) {
  return el('a', { href: '#/' + parts.map(encodeURIComponent).join('/') }, text);
}

// wide lays a form's fields out in columns (a form of many short fields).
export function wide(f) {
  f.classList.add('wide');
  return f;
}

// rowButton is a table row's action button, its label naming what it acts on.
export function rowButton(text, label, onclick) {
  return el('button', { type: 'button', 'aria-label': label, onclick }, text);
}

// batch runs a batch operation after the user confirms and shows its per-item results in out.
export async function batch(question, path, data, out, list) {
  if (question && !confirm(question)) return;
  out.replaceChildren();
  try {
    out.replaceChildren(itemResults(await call(path, data)));
    if (list) list.reload();
  } catch (e) {
    out.replaceChildren(errorBox(e));
  }
}
