// The console's shell: sign-in, the navigation and the page named by the URL's hash.
import { config, credentials, setCredentials } from './api.js';

const main = document.getElementById('main');

async function start() {
  const c = credentials();
  if (!c.apiKey && !c.workspaceId) {
    const cfg = await config();
    const p = document.createElement('p');
    p.textContent = cfg.devWorkspace ? 'Development workspace available.' : 'Sign in.';
    main.replaceChildren(p);
    if (cfg.devWorkspace) {
      setCredentials(cfg.devWorkspace);
    }
  }
}

start();
