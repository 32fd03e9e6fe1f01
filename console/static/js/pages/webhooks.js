// Webhooks: the advanced webhook configuration, the endpoints (create; edit, where an emptied
// field is cleared with null; disable and enable; delete), an endpoint's signing secret (reveal,
// rotate), test events, recovery of failed deliveries, its messages (resend) and attempts, and a
// chart of its attempts per hour by outcome (docs/console.md, "Webhooks"; the operations and
// their rules: docs/webhooks.md).
import { call } from '../api.js';
import { actionButton, compact, el, errorBox, form, ids, json, latest, output, pager, section } from '../ui.js';
import { attemptsChart, buckets, recentAttempts } from './webhooks-chart.js';

const api = '/v2/workspace/advancedwebhook';
const list = (v) => (Array.isArray(v) ? v.join(', ') : '');
const link = (e, text) => el('a', { href: '#/webhooks/' + encodeURIComponent(e.id) }, text);

export default {
  id: 'webhooks',
  title: 'Webhooks',
  async render(body, [endpointId]) {
    if (endpointId) await renderEndpoint(body, endpointId);
    else renderList(body);
  },
};

// The fields an endpoint is created and edited with, filled from the record e.
function endpointFields(e) {
  return [
    { name: 'url', label: 'URL', value: e.url ?? '', help: 'http or https; deliveries follow no redirects.' },
    { name: 'description', label: 'Description', value: e.description ?? '' },
    { name: 'filterTypes', label: 'Event types', value: list(e.filterTypes), help: 'Comma-separated, e.g. comment.add, crdt.update_data; empty: every type.' },
    { name: 'channels', label: 'Channels', value: list(e.channels), help: 'Comma-separated; empty: every channel.' },
    { name: 'rateLimit', label: 'Rate limit (deliveries per second)', type: 'number', value: e.rateLimit ?? '', help: '1 to 10000; empty: no limit.' },
  ];
}

// endpointValues turns the form's text into the API's values ('' and [] for blank fields).
function endpointValues(v) {
  return {
    url: v.url.trim(), description: v.description.trim(), filterTypes: ids(v.filterTypes), channels: ids(v.channels),
    rateLimit: v.rateLimit === '' ? '' : Number(v.rateLimit),
  };
}

function renderList(body) {
  const endpoints = pager([
    { label: 'URL', render: (e) => link(e, e.url) },
    { key: 'description', label: 'Description' },
    { label: 'Event types', render: (e) => list(e.filterTypes) || 'all' },
    { label: 'Channels', render: (e) => list(e.channels) || 'all' },
    { key: 'rateLimit', label: 'Rate limit (/s)' },
    { label: 'State', render: (e) => (e.disabled ? 'disabled' : 'enabled') },
    { key: 'id', label: 'Id' },
  ], async (iterator) => {
    const d = (await call(api + '/endpoints/get', { limit: 50, iterator: iterator || undefined })).data;
    return { rows: d.endpoints, next: d.done ? '' : d.iterator };
  }, { caption: 'Endpoints, oldest first' });
  const create = form([...endpointFields({}), { name: 'disabled', label: 'Create it disabled', type: 'checkbox' }], 'Create endpoint', async (v) => {
    const e = (await call(api + '/endpoints/create', { ...compact(endpointValues(v)), disabled: v.disabled })).data;
    endpoints.reload();
    return el('p', {}, 'Created ', link(e, e.id), '.');
  }, { label: 'Create an endpoint' });
  create.id = 'create-endpoint';
  body.append(configSection(), section('Endpoints', endpoints), section('Create an endpoint', create));
}

// configSection shows and changes the advanced webhook configuration of the API key.
function configSection() {
  const box = el('div', {}, el('p', { class: 'muted' }, 'Loading…'));
  (async () => {
    try {
      const c = (await call('/v2/workspace/advancedwebhookconfig/get', {})).data;
      box.replaceChildren(form([
        { name: 'isEnabled', label: 'Enabled: events are sent to the endpoints', type: 'checkbox', value: c.isEnabled },
        { name: 'encodeData', label: 'Encode payloads (base64)', type: 'checkbox', value: c.encodeData },
        { name: 'encryptData', label: 'Encrypt payloads (needs the public key)', type: 'checkbox', value: c.encryptData },
        { name: 'enableDataProtection', label: 'Strip personal data (emails, names) from payloads', type: 'checkbox', value: c.enableDataProtection },
        { name: 'publicKey', label: 'RSA public key (PEM) for encryption', type: 'textarea', value: c.publicKey },
      ], 'Save configuration', async (v) => {
        const change = { isEnabled: v.isEnabled, encodeData: v.encodeData, encryptData: v.encryptData, enableDataProtection: v.enableDataProtection };
        if (v.publicKey !== c.publicKey) change.publicKey = v.publicKey;
        Object.assign(c, (await call('/v2/workspace/advancedwebhookconfig/update', change)).data);
        return el('p', {}, 'Saved: deliveries are ' + (c.isEnabled ? 'on.' : 'off.'));
      }, { label: 'Advanced webhook configuration' }));
    } catch (e) {
      box.replaceChildren(errorBox(e));
    }
  })();
  return section('Configuration', el('p', { class: 'muted' },
    'Needs the workspace\'s advanced webhooks switch (Workspace page). While deliveries are off, endpoints can be read and deleted but not created or changed.'), box);
}

// findEndpoint reads the endpoint id from List Endpoints (there is no operation reading one).
async function findEndpoint(id) {
  let iterator = '';
  for (;;) {
    const d = (await call(api + '/endpoints/get', { limit: 250, iterator: iterator || undefined })).data;
    const e = d.endpoints.find((x) => x.id === id);
    if (e) return e;
    if (d.done || !d.iterator) throw new Error(`There is no endpoint ${id} (deleted?).`);
    iterator = d.iterator;
  }
}

async function renderEndpoint(body, id) {
  const e = await findEndpoint(id);
  const top = el('div');
  const out = output();
  const edit = el('div');
  const show = (rec) => {
    top.replaceChildren(details(rec), actions(rec, body, out, show));
    edit.replaceChildren(section('Edit', editForm(rec, show)));
  };
  show(e);
  const attempts = attemptsSection(id);
  const messages = messagesSection(id, attempts);
  const chart = chartSection(id);
  const refresh = () => Promise.all([attempts.reload(), messages.reload(), chart.reload()]);
  body.append(el('p', {}, el('a', { href: '#/webhooks' }, 'All endpoints')), top, out,
    secretSection(id), testSection(id, body, refresh), chart, attempts, messages, edit, recoverSection(id));
}

function details(e) {
  const rows = [
    ['Id', e.id], ['URL', e.url], ['Description', e.description ?? '(none)'],
    ['Event types', list(e.filterTypes) || 'all'], ['Channels', list(e.channels) || 'all'],
    ['Rate limit', e.rateLimit === null ? 'none' : `${e.rateLimit} per second`], ['State', e.disabled ? 'disabled' : 'enabled'],
    ['Uid', e.uid ?? '(none)'], ['Created', e.createdAt], ['Updated', e.updatedAt],
  ];
  return section('Endpoint', el('dl', { class: 'details', id: 'endpoint-details' }, rows.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)])),
    e.metadata ? [el('p', {}, 'Metadata:'), json(e.metadata)] : null);
}

// actions: disable or enable, and delete (asked twice, without a dialog).
function actions(e, body, out, show) {
  const toggle = actionButton(e.disabled ? 'Enable endpoint' : 'Disable endpoint', async () => {
    const rec = (await call(api + '/endpoints/update', { endpointId: e.id, disabled: !e.disabled })).data;
    show(rec);
    document.getElementById('toggle-endpoint').focus(); // the button was made anew: keep the keyboard's place
    return rec.disabled ? 'Disabled: nothing is sent to it.' : 'Enabled.';
  }, out, { id: 'toggle-endpoint' });
  const confirm = el('span', { hidden: true },
    actionButton('Yes, delete it', async () => {
      await call(api + '/endpoints/delete', { endpointId: e.id });
      body.replaceChildren(el('p', { role: 'status' }, `Endpoint ${e.id} deleted. `, el('a', { href: '#/webhooks' }, 'All endpoints')));
    }, out, { id: 'confirm-delete', class: 'danger' }),
    el('button', { type: 'button', onclick: () => { confirm.hidden = true; } }, 'Cancel'));
  const del = el('button', { type: 'button', id: 'delete-endpoint', onclick: () => { confirm.hidden = false; confirm.querySelector('button').focus(); } }, 'Delete endpoint…');
  return el('div', { class: 'actions' }, toggle, del, confirm);
}

// editForm sends only the fields changed; an emptied field is sent as null, which clears it
// (docs/webhooks.md, "Clearing endpoint fields").
function editForm(e, show) {
  const before = Object.fromEntries(endpointFields(e).map((f) => [f.name, String(f.value)]));
  const f = form(endpointFields(e), 'Save changes', async (v) => {
    const now = endpointValues(v);
    const change = { endpointId: e.id };
    for (const k of Object.keys(before)) {
      if (String(v[k]).trim() === before[k]) continue;
      change[k] = String(v[k]).trim() === '' && k !== 'url' ? null : now[k];
    }
    const rec = (await call(api + '/endpoints/update', change)).data;
    show(rec);
    return null;
  }, { label: 'Edit the endpoint' });
  f.id = 'edit-endpoint';
  f.prepend(el('p', { class: 'muted' }, 'Only changed fields are sent; an emptied field is cleared.'));
  return f;
}

function secretSection(id) {
  const out = output();
  const shown = (secret, note) => el('div', {}, el('p', {}, 'Secret: ', el('code', { id: 'endpoint-secret' }, secret)), note ? el('p', {}, note) : null,
    el('button', { type: 'button', onclick: () => out.replaceChildren() }, 'Hide secret'));
  return section('Signing secret',
    el('p', { class: 'muted' }, 'Receivers verify deliveries with it (Standard Webhooks).'),
    el('div', { class: 'actions' },
      actionButton('Reveal secret', async () => shown((await call(api + '/endpoints/secret/get', { endpointId: id })).data.secret), out, { id: 'reveal-secret' }),
      actionButton('Rotate secret', async () => shown((await call(api + '/endpoints/secret/rotate', { endpointId: id })).data.secret,
        'The previous secret keeps signing beside this one for 24 hours.'), out, { id: 'rotate-secret' })),
    out);
}

// testSection sends a test event, then watches for its attempt and refreshes the lists when it
// is made (deliveries are sent by the service's workers, not by the call).
function testSection(id, body, refresh) {
  const f = form([{ name: 'eventType', label: 'Event type', value: 'test.event' }], 'Send test event', async (v, out) => {
    const m = (await call(api + '/endpoints/test', compact({ endpointId: id, eventType: v.eventType.trim() }))).data;
    const note = el('p', {}, 'Sent message ', el('code', {}, m.messageId), ': waiting for its attempt…');
    (async () => {
      for (let i = 0; i < 30 && body.isConnected; i++) {
        await new Promise((r) => setTimeout(r, 1000));
        try {
          const a = (await call(api + '/attempts/get', { messageId: m.messageId, limit: 1 })).data.attempts;
          if (a.length) {
            note.replaceChildren('Sent message ', el('code', {}, m.messageId), `: attempt ${a[0].status}, response ${a[0].responseStatusCode || 'none'}.`);
            await refresh();
            return;
          }
        } catch (e) {
          out.replaceChildren(note, errorBox(e));
          return;
        }
      }
      note.replaceChildren('Sent message ', el('code', {}, m.messageId), ': no attempt yet; refresh the attempts later.');
    })();
    return note;
  }, { label: 'Send a test event' });
  f.id = 'test-event';
  return section('Send a test event', f);
}

function recoverSection(id) {
  const f = form([
    { name: 'since', label: 'Since (ISO-8601)', value: new Date(Date.now() - 24 * 3600 * 1000).toISOString() },
    { name: 'until', label: 'Until (ISO-8601; empty: now)' },
  ], 'Recover failed deliveries', async (v) => {
    const r = (await call(api + '/endpoints/recover', compact({ endpointId: id, since: v.since.trim(), until: v.until.trim() }))).data;
    return `Queued again: ${r.count} failed ${r.count === 1 ? 'delivery' : 'deliveries'}.`;
  }, { label: 'Recover failed deliveries' });
  return section('Recover failed deliveries', f);
}

function chartSection(id) {
  const box = el('div', { id: 'attempts-chart-box' });
  const turn = latest(); // a refresh's answer is not replaced by an earlier one's
  const reload = async () => {
    const current = turn();
    try {
      const now = Date.now();
      const { attempts, capped } = await recentAttempts(id, { now });
      if (current()) box.replaceChildren(attemptsChart(buckets(attempts, { now }), { capped }));
    } catch (e) {
      if (current()) box.replaceChildren(errorBox(e));
    }
  };
  const s = section('Attempts per hour', box, el('button', { type: 'button', onclick: () => reload() }, 'Refresh chart'));
  s.reload = reload;
  reload();
  return s;
}

// attemptsSection lists the endpoint's attempts, newest first, filtered by outcome or message.
function attemptsSection(id) {
  const box = el('div', { id: 'attempts' });
  let filter = {};
  const load = () => box.replaceChildren(pager([
    { key: 'timestamp', label: 'Time' },
    { key: 'status', label: 'Status' },
    { label: 'Response code', render: (a) => (a.responseStatusCode ? String(a.responseStatusCode) : 'none') },
    { label: 'Duration (ms)', render: (a) => String(Math.round(a.durationMs)) },
    { key: 'messageId', label: 'Message' },
    { label: 'Response', render: (a) => el('span', { class: 'clip' }, a.response) },
  ], async (iterator) => {
    const d = (await call(api + '/attempts/get', { endpointId: id, ...filter, limit: 50, iterator: iterator || undefined })).data;
    return { rows: d.attempts, next: d.done ? '' : d.iterator };
  }, { caption: 'Attempts, newest first' }));
  const f = form([
    { name: 'status', label: 'Outcome', type: 'select', options: [['', 'any'], ['success', 'success'], ['pending', 'pending (to be retried)'], ['failed', 'failed (given up)']] },
    { name: 'messageId', label: 'Message id' },
  ], 'Show attempts', async (v) => {
    filter = compact({ status: v.status, messageId: v.messageId.trim() });
    load();
  }, { label: 'Filter attempts' });
  f.classList.add('inline');
  const s = section('Attempts', f, box);
  s.reload = () => { load(); };
  s.forMessage = (messageId) => {
    f.fields.messageId.value = messageId;
    f.fields.status.value = '';
    filter = { messageId };
    load();
    f.fields.messageId.focus();
  };
  load();
  return s;
}

// messagesSection lists the messages queued to the endpoint, newest first, to resend one or see
// its attempts.
function messagesSection(id, attempts) {
  const out = output();
  const box = el('div');
  const load = () => box.replaceChildren(pager([
    { key: 'timestamp', label: 'Time' },
    { key: 'eventType', label: 'Event type' },
    { key: 'id', label: 'Id' },
    { label: 'Payload', render: (m) => payload(m) },
    { label: 'Actions', render: (m) => el('div', { class: 'actions' },
      actionButton('Resend', async () => {
        await call(api + '/messages/resend', { endpointId: id, messageId: m.id });
        return `Message ${m.id} queued again.`;
      }, out, { 'aria-label': 'Resend ' + m.id }),
      el('button', { type: 'button', 'aria-label': 'Attempts of ' + m.id, onclick: () => attempts.forMessage(m.id) }, 'Attempts')) },
  ], async (iterator) => {
    const d = (await call(api + '/messages/get', { endpointId: id, limit: 50, iterator: iterator || undefined })).data;
    return { rows: d.messages, next: d.done ? '' : d.iterator };
  }, { caption: 'Messages, newest first' }));
  const s = section('Messages', out, box);
  s.reload = () => { load(); };
  load();
  return s;
}

// payload shows a message's payload as JSON when its disclosure opens (not before: a page of
// messages stays light).
function payload(m) {
  const d = el('details', {}, el('summary', {}, 'Payload'));
  d.addEventListener('toggle', () => {
    if (d.open && d.children.length === 1) d.append(json(m.payload));
  });
  return d;
}
