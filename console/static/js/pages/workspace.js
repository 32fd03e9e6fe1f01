// Workspace: its details (placeholder until the workspace page is built).
import { call } from '../api.js';
import { el, cell } from '../ui.js';

export default {
  id: 'workspace',
  title: 'Workspace',
  async render(body) {
    const w = await call('/v2/workspace/get', {}, 'W');
    body.append(el('pre', { tabindex: 0 }, cell(w)));
  },
};
