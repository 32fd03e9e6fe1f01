// The playground: pick an organization, a document, an editor and a user with a role; the page
// makes the organization and document if they are missing, gets the user a token (Generate
// Token v2, which grants the role), and opens a text editor on live sync (real Yjs and
// y-websocket), with who is here, their carets, and the document's comments beside it
// (docs/console.md, "Playground"). Everything goes through the public API, as any client.
import { call, config, credentials, setCredentials, signOut } from './api.js';
import { el, errorBox, form } from './ui.js';
import { Y, WebsocketProvider } from '../vendor/yjs.js';
import { colourIndex, editor, palette } from './playground-editor.js';
import { comments } from './playground-comments.js';

const main = document.getElementById('main');

// The document chosen, kept in the address's hash so that another window opened with the same
// address starts on the same document (with a user of its own).
const fields = ['org', 'doc', 'editor'];

function choices() {
  const h = new URLSearchParams(location.hash.replace(/^#/, ''));
  const user = 'user-' + Math.random().toString(36).slice(2, 6);
  const v = { org: 'playground', doc: 'welcome', editor: 'text', user, name: '', role: 'editor' };
  for (const f of fields) if (h.get(f)) v[f] = h.get(f);
  return v;
}

function remember(v) {
  const h = new URLSearchParams();
  for (const f of fields) if (v[f]) h.set(f, v[f]);
  history.replaceState(null, '', '#' + h.toString());
}

function start() {
  const c = credentials();
  if (!c.apiKey || !c.authToken) return renderSignIn(c);
  renderSetup();
}

// renderSignIn: the playground makes tokens with an API key (K credentials), signed in on the
// console, or the development workspace's, offered as one click on a local run.
async function renderSignIn(c) {
  const cfg = await config().catch(() => ({}));
  const out = el('div', { role: 'status' });
  const parts = [el('h1', {}, 'Playground'),
    el('p', {}, c.workspaceId
      ? 'The playground makes end users\' tokens with an API key and its auth token; you are signed in with workspace credentials only. '
      : 'The playground makes end users\' tokens with an API key and its auth token. ',
    el('a', { href: './' }, 'Sign in on the console'), ' with an API key, then come back.')];
  if (cfg.devWorkspace) {
    const d = cfg.devWorkspace;
    parts.push(el('p', {}, el('button', {
      type: 'button', id: 'dev-sign-in', onclick: async () => {
        setCredentials({ ...d });
        try {
          await call('/v2/workspace/domains/get', {}, 'K');
          start();
        } catch (e) {
          signOut();
          out.replaceChildren(errorBox(e));
        }
      },
    }, 'Use the development workspace')), out);
  }
  main.replaceChildren(...parts);
}

function renderSetup() {
  const v = choices();
  const f = form([
    { name: 'org', label: 'Organization id', value: v.org, required: true },
    { name: 'doc', label: 'Document id', value: v.doc, required: true },
    { name: 'editor', label: 'Editor id', value: v.editor, required: true, help: 'One editor of the document: its own Yjs data.' },
    { name: 'user', label: 'User id', value: v.user, required: true },
    { name: 'name', label: 'User name', value: v.name, help: 'Shown to the others; the user id when empty.' },
    { name: 'role', label: 'Role on the document', type: 'select', value: v.role, options: [
      ['editor', 'editor: reads and writes'], ['viewer', 'viewer: reads'], ['', 'no grant: the document\'s access type decides']] },
  ], 'Open the editor', (values) => open(values), { label: 'Open a document' });
  main.replaceChildren(el('h1', {}, 'Playground'),
    el('p', {}, 'Two windows on the same document edit it together: open this page in another window (the address keeps the document) as another user. ',
      'The organization and document are made if missing; the user gets a token (Generate Token) with the role.'),
    f);
}

// prepare makes the organization and document if they are missing, gets the user's token and
// reads the role they now have on the document (Get Permissions). Each step's refusal is shown
// as the API answered it.
async function prepare(v) {
  const added = await call('/v2/organizations/documents/add',
    { organizationId: v.org, createOrganization: true, documents: [{ documentId: v.doc, documentName: v.doc }] });
  const item = added && added.data && added.data[v.doc];
  if (item && !item.success && item.message !== 'Document already exists.') throw new Error(item.message);
  const body = { userId: v.user, userProperties: { name: v.name || v.user, organizationId: v.org } };
  if (v.role) body.permissions = { resources: [{ type: 'document', id: v.doc, organizationId: v.org, accessRole: v.role }] };
  const token = (await call('/v2/auth/generate_token', body)).data.token;
  const perms = await call('/v2/auth/permissions/get', { organizationId: v.org, userIds: [v.user], documentIds: [v.doc] });
  const entry = (((perms.data || {})[v.user] || {}).documents || {})[v.doc] || {};
  return { token, role: entry.accessRole || '', denied: entry.error || '' };
}

async function open(v) {
  v = Object.fromEntries(Object.entries(v).map(([k, x]) => [k, String(x).trim()]));
  remember(v);
  const { token, role, denied } = await prepare(v);
  renderSession(v, token, role, denied);
}

// renderSession opens the editor on live sync and the comments beside it; Leave closes both.
function renderSession(v, token, role, denied) {
  const ydoc = new Y.Doc();
  const ytext = ydoc.getText('content');
  const url = location.origin.replace(/^http/, 'ws') + '/v2/crdt/sync';
  const room = [v.org, v.doc, v.editor].map(encodeURIComponent).join('/');
  // disableBc: windows of one browser sync through the server only, as two people's would
  // (a viewer's window must not hand its edits to an editor's over BroadcastChannel).
  const provider = new WebsocketProvider(url, room, ydoc, { params: { token }, disableBc: true });
  const name = v.name || v.user;
  provider.awareness.setLocalStateField('user', { name, color: palette[colourIndex(v.user)], role: role || 'no access' });

  const status = el('p', { class: 'pg-status', id: 'pg-status', role: 'status' }, 'Connecting…');
  provider.on('status', ({ status: s }) => {
    if (s === 'connected') status.textContent = 'Connected; reading the document…';
    else if (s === 'disconnected') status.textContent = 'Disconnected; reconnecting…';
  });
  provider.on('sync', (synced) => { if (synced) status.textContent = 'Live: in sync with the server.'; });

  const readOnly = role !== 'editor';
  const ed = editor(ytext, provider.awareness, { readOnly, label: 'Text of ' + v.org + ' / ' + v.doc + ' / ' + v.editor });
  const side = comments({ org: v.org, doc: v.doc, token, denied });
  const roleText = role === 'editor' ? 'You are an editor: what you type is everyone\'s.'
    : role === 'viewer' ? 'You are a viewer: the text is read-only (the server drops a viewer\'s edits too).'
      : 'You have no role on this document' + (denied ? ' (' + denied + ')' : '') + ': the server refuses you.';
  const roleLine = el('p', { id: 'pg-role', class: 'muted' }, roleText);
  // A close the provider does not retry (4400–4499: refused, deleted, too large...) ends the
  // editing: what is typed after it would reach no one, so the text becomes read-only.
  provider.on('closed', ({ code, reason }) => {
    status.replaceChildren(el('span', { class: 'error', role: 'alert' }, `Live sync closed by the server: ${code} ${reason || ''}`));
    ed.textarea.readOnly = true;
    roleLine.textContent = roleText + ' Live sync ended: the text is read-only, and what is typed is no longer sent; Leave, then open the document again.';
  });
  const leave = el('button', {
    type: 'button', onclick: () => {
      side.destroy();
      ed.destroy();
      provider.destroy();
      ydoc.destroy();
      renderSetup();
    },
  }, 'Leave');
  main.replaceChildren(
    el('h1', {}, 'Playground: ' + name),
    el('div', { class: 'pg-bar' }, status, leave),
    roleLine,
    el('div', { class: 'pg-layout' }, el('section', { class: 'pg-main', 'aria-label': 'Editor' }, ed.node), side.node));
}

start();
