// One organization (#/organizations/<id>): its folders (Get, Add, Delete Folders), documents
// (Get Documents v2, or v1 while advanced queries are off; Add, Delete Documents), access types
// (Update Access for Documents / Folders), and its users and permissions (access.js).
// docs/console.md.
import { call, APIError } from '../api.js';
import { el, errorBox, form, ids, pager, section } from '../ui.js';
import { batch, hashLink, itemResults, localPager, rowButton, wide } from '../views.js';
import { renderAccess } from './access.js';

const accessTypes = [['organizationPrivate', 'organizationPrivate'], ['restricted', 'restricted'], ['public', 'public']];

export async function renderOrganization(body, orgId) {
  body.append(el('p', {}, hashLink('All organizations', 'organizations'), ' · ',
    hashLink('Activity', 'activity', orgId), ' · ', hashLink('Notifications', 'notifications', orgId)));
  body.append(el('h2', { class: 'org' }, 'Organization ' + orgId));
  body.append(folders(orgId), documents(orgId), accessForm(orgId));
  renderAccess(body, orgId);
}

function folders(orgId) {
  const out = el('div', { role: 'status', 'aria-live': 'polite' });
  const list = pager([
    { key: 'folderId', label: 'Folder' },
    { key: 'folderName', label: 'Name' },
    { key: 'ancestors', label: 'Path', render: (f) => (f.ancestors || []).concat(f.folderId).join(' / ') },
    { key: 'accessType', label: 'Access type (effective)' },
    { key: 'actions', label: 'Actions', render: (f) => rowButton('Delete', 'Delete folder ' + f.folderId,
      () => batch('Delete folder ' + f.folderId + '?', '/v2/organizations/folders/delete', { organizationId: orgId, folderIds: [f.folderId] }, out, list)) },
  ], async (token) => {
    const r = await call('/v2/organizations/folders/get', { organizationId: orgId, pageSize: 100, pageToken: token });
    return { rows: r.data || [], next: r.pageToken };
  }, { caption: 'Get Folders' });
  const add = form([
    { name: 'folderId', label: 'Folder id', required: true },
    { name: 'folderName', label: 'Name' },
    { name: 'parentFolderId', label: 'Parent folder id', help: 'Empty: at the root.' },
    { name: 'accessType', label: 'Access type', type: 'select', options: [['', 'inherited']].concat(accessTypes) },
  ], 'Add folder', async (v) => {
    const folder = { folderId: v.folderId.trim(), folderName: v.folderName, parentFolderId: v.parentFolderId.trim() };
    if (v.accessType) folder.accessType = v.accessType;
    const r = await call('/v2/organizations/folders/add', { organizationId: orgId, folders: [folder] });
    list.reload();
    return itemResults(r);
  }, { label: 'Add folder' });
  return section('Folders', list, out, wide(add));
}

function documents(orgId) {
  const out = el('div', { role: 'status', 'aria-live': 'polite' });
  const columns = [
    { key: 'id', label: 'Document' },
    { key: 'documentName', label: 'Name' },
    { key: 'accessType', label: 'Access type' },
    { key: 'disabled', label: 'Disabled', render: (d) => (d.disabled ? 'yes' : 'no') },
    { key: 'actions', label: 'Actions', render: (d) => rowButton('Delete', 'Delete document ' + d.id,
      () => batch('Delete document ' + d.id + ' and its data?', '/v2/organizations/documents/delete', { organizationId: orgId, documentIds: [d.id] }, out, holder.list)) },
  ];
  const holder = el('div');
  const show = (folderId) => {
    holder.list = documentList(orgId, folderId, columns);
    holder.replaceChildren(holder.list);
  };
  const filter = form([
    { name: 'folderId', label: 'In folder', help: 'Empty: every document of the organization.' },
  ], 'Show documents', (v) => show(v.folderId.trim()), { label: 'Filter documents' });
  show('');
  const add = form([
    { name: 'documentId', label: 'Document id', required: true },
    { name: 'documentName', label: 'Name' },
    { name: 'folderId', label: 'Folder id', help: 'Empty: at the root.' },
    { name: 'createFolder', label: 'Create the folder if missing', type: 'checkbox' },
  ], 'Add document', async (v) => {
    const doc = { documentId: v.documentId.trim(), documentName: v.documentName, folderId: v.folderId.trim() };
    const r = await call('/v2/organizations/documents/add', { organizationId: orgId, documents: [doc], createFolder: v.createFolder });
    holder.list.reload();
    return itemResults(r);
  }, { label: 'Add document' });
  const del = form([
    { name: 'documentIds', label: 'Document ids', type: 'textarea', rows: 2, help: 'Up to 30, separated by commas, spaces or lines.' },
  ], 'Delete documents', async (v) => {
    if (!confirm('Delete these documents and their data?')) return null;
    const r = await call('/v2/organizations/documents/delete', { organizationId: orgId, documentIds: ids(v.documentIds) });
    holder.list.reload();
    return itemResults(r);
  }, { label: 'Delete documents' });
  return section('Documents', filter, holder, out, wide(add), del);
}

// documentList pages Get Documents v2; while the workspace's advanced queries are off (v2
// answers FAILED_PRECONDITION) it says so and shows Get Documents v1, which does not page, a
// page at a time.
function documentList(orgId, folderId, columns) {
  const box = el('div');
  const v2 = pager(columns, async (token) => {
    try {
      const r = await call('/v2/organizations/documents/get', { organizationId: orgId, folderId, pageSize: 100, pageToken: token });
      return { rows: r.data || [], next: r.pageToken };
    } catch (e) {
      if (!(e instanceof APIError && e.status === 'FAILED_PRECONDITION') || folderId) throw e;
      const r = await call('/v1/organizations/documents/get', { organizationId: orgId });
      box.replaceChildren(errorBox(e), el('p', {}, 'Get Documents v1 instead:'), localPager(columns, r.data || []));
      return { rows: [], next: '' };
    }
  }, { caption: 'Get Documents' });
  box.append(v2);
  box.reload = () => {
    box.replaceChildren(v2);
    return v2.reload();
  };
  return box;
}

function accessForm(orgId) {
  return section('Access type', wide(form([
    { name: 'kind', label: 'Of', type: 'select', options: [['documents', 'documents'], ['folders', 'folders']] },
    { name: 'ids', label: 'Ids', type: 'textarea', rows: 2, help: 'Up to 30, separated by commas, spaces or lines.' },
    { name: 'accessType', label: 'Access type', type: 'select', options: accessTypes },
  ], 'Update access type', async (v) => {
    const key = v.kind === 'folders' ? 'folderIds' : 'documentIds';
    const r = await call(`/v1/organizations/${v.kind}/access/update`, { organizationId: orgId, [key]: ids(v.ids), accessType: v.accessType });
    return itemResults(r);
  }, { label: 'Update access type' })));
}
