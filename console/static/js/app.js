// The console's shell: sign-in, the navigation, and the page the URL's hash names
// (#/workspace, #/webhooks, ...). Each page is a module of pages/ listed in pages.js.
import { call, config, credentials, setCredentials, signOut } from './api.js';
import { el, errorBox, form } from './ui.js';
import { pages } from './pages.js';

const main = document.getElementById('main');
const nav = document.getElementById('nav');

// route renders the page of the hash; without credentials, the sign-in page.
async function route() {
  const c = credentials();
  if (!c.apiKey && !c.workspaceId) {
    nav.replaceChildren();
    await renderSignIn();
    return;
  }
  const [, id = '', ...rest] = location.hash.replace(/^#/, '').split('/');
  const page = pages.find((p) => p.id === id) || pages[0];
  renderNav(page, c);
  const body = el('div', { class: 'page' });
  main.replaceChildren(el('h1', {}, page.title), body);
  document.title = page.title + ' · collab console';
  try {
    await page.render(body, rest.map(decodeURIComponent));
  } catch (e) {
    body.append(errorBox(e));
  }
}

function renderNav(current, c) {
  const links = pages.map((p) => el('a', { href: '#/' + p.id, 'aria-current': p === current ? 'page' : null }, p.title));
  const who = c.workspaceId ? 'Workspace ' + c.workspaceId : 'API key ' + c.apiKey;
  nav.replaceChildren(...links, el('a', { href: 'playground' }, 'Playground'),
    el('span', { class: 'who' }, who),
    el('button', { type: 'button', class: 'link', onclick: () => { signOut(); location.hash = ''; route(); } }, 'Sign out'));
}

// renderSignIn asks for workspace credentials (W) and/or an API key with its auth token (K);
// each pair given is tried against the API before it is kept.
async function renderSignIn() {
  document.title = 'Sign in · collab console';
  const cfg = await config().catch(() => ({}));
  const signIn = async (v) => {
    const c = {
      workspaceId: v.workspaceId.trim(), workspaceAuthToken: v.workspaceAuthToken.trim(),
      apiKey: v.apiKey.trim(), authToken: v.authToken.trim(),
    };
    if (!(c.workspaceId && c.workspaceAuthToken) && !(c.apiKey && c.authToken)) {
      throw new Error('Give the workspace id and its auth token, or an API key and its auth token, or both.');
    }
    setCredentials(c);
    try {
      if (c.workspaceId) await call('/v2/workspace/get', {}, 'W');
      if (c.apiKey) await call('/v2/workspace/domains/get', {}, 'K');
    } catch (e) {
      signOut();
      throw e;
    }
    route();
  };
  const f = form([
    { name: 'workspaceId', label: 'Workspace id', autocomplete: 'username' },
    { name: 'workspaceAuthToken', label: 'Workspace auth token', type: 'password', autocomplete: 'current-password' },
    { name: 'apiKey', label: 'API key' },
    { name: 'authToken', label: 'Auth token (of the API key)', type: 'password' },
  ], 'Sign in', signIn, { label: 'Sign in' });
  const parts = [el('h1', {}, 'Sign in'),
    el('p', {}, 'Workspace credentials open the workspace\'s settings and API keys; an API key and its auth token open every other operation. They are kept in this tab only.')];
  if (cfg.devWorkspace) {
    const d = cfg.devWorkspace;
    const out = el('div', { role: 'status' });
    parts.push(el('p', {}, el('button', { type: 'button', id: 'dev-sign-in', onclick: () => signIn(d).catch((e) => out.replaceChildren(errorBox(e))) },
      'Sign in to the development workspace')), out);
  }
  parts.push(f);
  main.replaceChildren(...parts);
}

window.addEventListener('hashchange', route);
route();
