// Workspace: its details (Get Workspace), API keys (Create API Key, List API Keys, List Auth
// Tokens, Reset Auth Token), the calling key's allowed domains (Get Domains, Update Allowed
// Domains), the console switches (Update Workspace Settings) and the owner email's
// verification (Get Email Verification Status, Verify Owner Email). docs/console.md.
import { call, credentials, setCredentials } from '../api.js';
import { el, errorBox, form, ids, pager, section } from '../ui.js';
import { fields, part, wide } from '../views.js';

export default {
  id: 'workspace',
  title: 'Workspace',
  async render(body) {
    const c = credentials();
    // One Get Workspace for the details, the switches and the owner's email (it is rate
    // limited per workspace).
    const ws = c.workspaceId ? call('/v2/workspace/get', {}, 'W') : null;
    if (ws) ws.catch(() => {}); // each section shows the error
    body.append(details(ws), apiKeys(), domains(), switches(ws), emailVerification(ws));
  },
};

// later fills box with what make(value) returns once promise settles, or the error.
function later(box, promise, make) {
  const inner = el('div', {}, el('p', { class: 'muted' }, 'Loading…'));
  promise.then((v) => inner.replaceChildren(...[].concat(make(v)))).catch((e) => inner.replaceChildren(errorBox(e)));
  box.append(inner);
  return box;
}

function onOff(b) {
  return b ? 'on' : 'off';
}

function details(ws) {
  const [box, ok] = part('Details', 'W');
  if (!ok) return box;
  return later(box, ws, (r) => {
    const w = r.data || {};
    const o = w.owner || {};
    const s = w.settings || {};
    return fields([
      ['Workspace id', w.id], ['Name', w.name],
      ['Owner name', o.name], ['Owner email', o.email], ['Owner id', o.id], ['Owner avatar', o.avatar],
      ['Owner email verified', w.emailVerified ? 'yes' : 'no'],
      ['Workspace auth token', w.authToken],
      ['API keys', Object.keys(w.apiKeyList || {}).length],
      ['Advanced queries', onOff(s.advancedQueries)], ['Notifications', onOff(s.notifications)],
      ['Advanced webhooks', onOff(s.advancedWebhooks)], ['Slack webhook', s.slackWebhookUrl || 'none'],
    ], 'Get Workspace');
  });
}

// once shows a secret the API shows once, with the note that says so.
function once(lines, note) {
  return el('div', { class: 'once', role: 'alert' },
    lines.map(([k, v]) => el('p', {}, k + ': ', el('code', { class: 'secret' }, v))),
    el('p', { class: 'note' }, note));
}

function apiKeys() {
  const [box, ok] = part('API keys', 'W');
  if (!ok) return box;
  const out = el('div', { class: 'key-result', role: 'status', 'aria-live': 'polite' });
  const list = pager([
    { key: 'id', label: 'API key' },
    { key: 'apiKeyName', label: 'Name' },
    { key: 'type', label: 'Type' },
    { key: 'actions', label: 'Actions', render: (k) => [
      el('button', { type: 'button', 'aria-label': 'Reset the auth token of ' + k.id, onclick: () => resetToken(k.id, out) }, 'Reset auth token'),
      ' ',
      el('button', { type: 'button', 'aria-label': 'Show the auth tokens of ' + k.id, onclick: () => showTokens(k.id, out) }, 'Auth tokens'),
    ] },
  ], async (token) => {
    const r = await call('/v2/workspace/apikeys/get', { pageSize: 100, pageToken: token }, 'W');
    return { rows: r.data || [], next: r.nextPageToken };
  }, { caption: 'List API Keys' });
  const create = form([
    { name: 'apiKeyName', label: 'Name', placeholder: 'API key' },
    { name: 'type', label: 'Type', type: 'select', options: [['testing', 'testing'], ['production', 'production']] },
    { name: 'allowedDomains', label: 'Allowed domains', help: 'Hosts or http(s) URLs, separated by commas or spaces; none: any.' },
    { name: 'createAuthToken', label: 'Create an auth token with it', type: 'checkbox', value: true },
  ], 'Create API key', async (v) => {
    const r = await call('/v2/workspace/apikey/create', {
      apiKeyName: v.apiKeyName, type: v.type, allowedDomains: ids(v.allowedDomains), createAuthToken: v.createAuthToken,
    }, 'W');
    list.reload();
    const d = r.data || {};
    if (!d.authToken) return el('p', {}, r.message + ' API key: ' + d.apiKey + ' (no auth token yet: reset it to get one).');
    return once([['API key', d.apiKey], ['Auth token', d.authToken]],
      'The auth token is shown this once: copy it now. collab keeps only its hash.');
  }, { label: 'Create API key' });
  box.append(wide(create), list, out);
  return box;
}

async function resetToken(apiKey, out) {
  if (!confirm('Reset the auth token of ' + apiKey + '? Its current token stops working, and so do the user tokens (JWTs) made with it.')) return;
  out.replaceChildren();
  try {
    const r = await call('/v2/workspace/authtoken/reset', { apiKey }, 'W');
    const token = r.data.newAuthToken.token;
    const c = credentials();
    let note = 'The new auth token is shown this once: copy it now. The old token no longer works.';
    if (c.apiKey === apiKey) {
      setCredentials({ ...c, authToken: token });
      note += ' This tab signs its calls with the new token from now on.';
    }
    out.replaceChildren(el('h3', {}, 'New auth token'), once([['API key', apiKey], ['Auth token', token]], note));
  } catch (e) {
    out.replaceChildren(errorBox(e));
  }
}

async function showTokens(apiKey, out) {
  out.replaceChildren();
  try {
    const r = await call('/v2/workspace/authtokens/get', { apiKey }, 'W');
    const tokens = (r.data && r.data.authTokens) || [];
    out.replaceChildren(el('h3', {}, 'Auth tokens of ' + apiKey),
      fields(tokens.flatMap((t, i) => [['Token ' + (i + 1), t.token + ' (' + t.name + ')'],
        ['Domains', (t.domains || []).join(', ') || 'any']]), 'List Auth Tokens'));
  } catch (e) {
    out.replaceChildren(errorBox(e));
  }
}

function domains() {
  const [box, ok] = part('Allowed domains', 'K');
  if (!ok) return box;
  box.append(el('p', { class: 'muted' }, 'The domains the signed-in API key may be used from (Get Domains, Update Allowed Domains).'));
  const current = el('p', { 'aria-live': 'polite' });
  const f = form([
    { name: 'allowedDomains', label: 'Allowed domains', type: 'textarea', rows: 3, help: 'Hosts or http(s) URLs, separated by commas, spaces or lines; empty: any domain.' },
  ], 'Update allowed domains', async (v) => {
    const r = await call('/v2/workspace/domains/update', { allowedDomains: ids(v.allowedDomains) }, 'K');
    show(r.data.allowedDomains);
    return el('p', {}, r.message);
  }, { label: 'Update allowed domains' });
  const show = (list) => {
    current.textContent = 'Now: ' + (list && list.length ? list.join(', ') : 'any domain (none listed)');
    f.fields.allowedDomains.value = (list || []).join('\n');
  };
  box.append(current, f);
  call('/v2/workspace/domains/get', {}, 'K').then((r) => show(r.data.allowedDomains)).catch((e) => current.replaceChildren(errorBox(e)));
  return box;
}

function switches(ws) {
  const [box, ok] = part('Console switches', 'W');
  if (!ok) return box;
  return later(box, ws, (r) => {
    const s = (r.data && r.data.settings) || {};
    const toggles = form([
      { name: 'advancedQueries', label: 'Advanced queries (Get Documents v2)', type: 'checkbox', value: s.advancedQueries },
      { name: 'notifications', label: 'Notifications (notification config operations)', type: 'checkbox', value: s.notifications },
      { name: 'advancedWebhooks', label: 'Advanced webhooks (endpoints and deliveries)', type: 'checkbox', value: s.advancedWebhooks },
    ], 'Save switches', async (v) => {
      const u = await call('/v2/workspace/settings/update', v, 'W');
      const d = u.data || {};
      return el('p', {}, `${u.message} Advanced queries ${onOff(d.advancedQueries)}, notifications ${onOff(d.notifications)}, advanced webhooks ${onOff(d.advancedWebhooks)}.`);
    }, { label: 'Console switches' });
    const slack = form([
      { name: 'slackWebhookUrl', label: 'Slack webhook URL', help: 'Now: ' + (s.slackWebhookUrl || 'none') + '. An https://hooks.slack.com/services/… URL; empty removes it.' },
    ], 'Set Slack webhook', async (v) => {
      const u = await call('/v2/workspace/settings/update', { slackWebhookUrl: v.slackWebhookUrl.trim() }, 'W');
      return el('p', {}, u.message + ' Slack webhook: ' + (u.data.slackWebhookUrl || 'none') + '.');
    }, { label: 'Slack webhook' });
    return [el('p', { class: 'muted' }, 'Update Workspace Settings. New workspaces start with every switch on.'), toggles, slack];
  });
}

function emailVerification(ws) {
  const box = section('Owner email verification');
  box.append(el('p', { class: 'muted' }, 'Public operations: no credentials needed. API keys stop working after the grace period while the owner email is unverified; checking the status once it is verified reactivates them.'));
  const status = form([
    { name: 'ownerEmail', label: 'Owner email', autocomplete: 'email' },
  ], 'Get verification status', async (v) => {
    const r = await call('/v2/workspace/email/status', { ownerEmail: v.ownerEmail.trim() }, 'P');
    return el('p', {}, `${r.message} (verified: ${r.data.verified ? 'yes' : 'no'})`);
  }, { label: 'Get email verification status' });
  const verify = form([
    { name: 'token', label: 'Verification token', help: 'The token=… part of the link in the verification email.' },
  ], 'Verify owner email', async (v) => {
    const r = await call('/v2/workspace/email/verify', { token: v.token.trim() }, 'P');
    return el('p', {}, `${r.message} (${r.data.ownerEmail})`);
  }, { label: 'Verify owner email' });
  if (ws) ws.then((r) => { status.fields.ownerEmail.value ||= (r.data.owner || {}).email || ''; }).catch(() => {});
  box.append(status, verify);
  return box;
}
