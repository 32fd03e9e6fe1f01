// Organizations: the list (Get Organizations, paged), Add, Update and Delete Organizations;
// #/organizations/<id> opens one organization (organization.js). docs/console.md.
import { call } from '../api.js';
import { el, errorBox, form, ids, pager, section } from '../ui.js';
import { hashLink, itemResults, needs, wide } from '../views.js';
import { renderOrganization } from './organization.js';

export default {
  id: 'organizations',
  title: 'Organizations',
  async render(body, [orgId]) {
    const n = needs('K');
    if (n) return body.append(n);
    if (orgId) return renderOrganization(body, orgId);
    const out = el('div', { role: 'status', 'aria-live': 'polite' });
    const list = pager([
      { key: 'organizationId', label: 'Organization', render: (o) => hashLink(o.organizationId, 'organizations', o.organizationId) },
      { key: 'organizationName', label: 'Name' },
      { key: 'actions', label: 'Actions', render: (o) => el('button', {
        type: 'button', 'aria-label': 'Delete organization ' + o.organizationId,
        onclick: () => remove([o.organizationId], out, list),
      }, 'Delete') },
    ], async (token) => {
      const r = await call('/v2/organizations/get', { pageSize: 100, pageToken: token });
      return { rows: r.data || [], next: r.pageToken };
    }, { caption: 'Get Organizations' });
    const edit = (path, label) => wide(form([
      { name: 'organizationId', label: 'Organization id', required: true },
      { name: 'organizationName', label: 'Name' },
    ], label, async (v) => {
      const r = await call(path, { organizations: [{ organizationId: v.organizationId.trim(), organizationName: v.organizationName }] });
      list.reload();
      return itemResults(r);
    }, { label }));
    const del = form([
      { name: 'organizationIds', label: 'Organization ids', type: 'textarea', rows: 2, help: 'Up to 30, separated by commas, spaces or lines. Their folders, documents, users and data go with them.' },
    ], 'Delete organizations', (v) => remove(ids(v.organizationIds), null, list), { label: 'Delete organizations' });
    body.append(
      section('All organizations', list, out),
      section('Add an organization', edit('/v2/organizations/add', 'Add organization')),
      section('Rename an organization', edit('/v2/organizations/update', 'Update organization')),
      section('Delete organizations', del));
  },
};

// remove deletes organizations after the user confirms; with out, it shows the result there
// (a row's button), else returns it (a form shows it, and its error).
async function remove(organizationIds, out, list) {
  if (!confirm('Delete ' + organizationIds.join(', ') + ' with every folder, document, user and record in it?')) return null;
  try {
    const r = await call('/v2/organizations/delete', { organizationIds });
    list.reload();
    if (!out) return itemResults(r);
    out.replaceChildren(itemResults(r));
  } catch (e) {
    if (!out) throw e;
    out.replaceChildren(errorBox(e));
  }
  return null;
}
