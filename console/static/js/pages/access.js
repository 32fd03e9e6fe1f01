// An organization's users (Get Users v1, Add Users, Delete Users) and permissions (Get
// Permissions as a table of user × resource → access, Add and Remove Permissions), part of the
// organization's page (organization.js). docs/console.md.
import { call, APIError } from '../api.js';
import { el, errorBox, form, ids, section, table } from '../ui.js';
import { batch, hashLink, localPager, rowButton, wide } from '../views.js';

const roles = [['editor', 'editor'], ['viewer', 'viewer']];
const resourceTypes = [['document', 'document'], ['folder', 'folder'], ['organization', 'organization']];

export function renderAccess(body, orgId) {
  body.append(users(orgId), permissions(orgId));
}

function users(orgId) {
  const out = el('div', { role: 'status', 'aria-live': 'polite' });
  const holder = el('div');
  const columns = [
    { key: 'userId', label: 'User' },
    { key: 'name', label: 'Name' },
    { key: 'email', label: 'Email' },
    { key: 'actions', label: 'Actions', render: (u) => [
      hashLink('Inbox', 'notifications', orgId, u.userId), ' ',
      rowButton('Remove', 'Remove user ' + u.userId, () => batch('Remove ' + u.userId + ' from the organization, its documents and its grants?',
        '/v2/users/delete', { organizationId: orgId, userIds: [u.userId] }, out, holder)),
    ] },
  ];
  // Get Users v1 does not page (at most 50,000 users): the list is shown a page at a time. Only
  // the latest read is shown: an earlier one that answers last is older.
  let reads = 0;
  holder.reload = async () => {
    const n = ++reads;
    holder.replaceChildren(el('p', { class: 'muted' }, 'Loading…'));
    try {
      const r = await call('/v1/users/get', { organizationId: orgId });
      if (n === reads) holder.replaceChildren(localPager(columns, r.data || [], { caption: 'Get Users' }));
    } catch (e) {
      if (n === reads) holder.replaceChildren(errorBox(e));
    }
  };
  holder.reload();
  const add = form([
    { name: 'userId', label: 'User id', required: true },
    { name: 'name', label: 'Name' },
    { name: 'email', label: 'Email' },
    { name: 'accessRole', label: 'Role', type: 'select', options: [['', 'editor, or the role they have']].concat(roles) },
    { name: 'documentId', label: 'Document id', help: 'Optional: also add them to this document (and give them the role there).' },
  ], 'Add user', async (v) => {
    const user = { userId: v.userId.trim(), name: v.name, email: v.email.trim() };
    if (v.accessRole) user.accessRole = v.accessRole;
    const data = { organizationId: orgId, users: [user] };
    if (v.documentId.trim()) data.documentId = v.documentId.trim();
    const o = el('div');
    await batch(null, '/v2/users/add', data, o, holder);
    return o;
  }, { label: 'Add user' });
  return section('Users', holder, out, wide(add));
}

function permissions(orgId) {
  const result = el('div', { role: 'status', 'aria-live': 'polite' });
  const get = form([
    { name: 'userIds', label: 'User ids', required: true, help: '1 to 100, separated by commas or spaces.' },
    { name: 'folderIds', label: 'Folder ids', help: 'Up to 30.' },
    { name: 'documentIds', label: 'Document ids', help: 'Up to 30.' },
  ], 'Get permissions', async (v) => {
    result.replaceChildren();
    try {
      const r = await call('/v2/auth/permissions/get', {
        organizationId: orgId, userIds: ids(v.userIds), folderIds: ids(v.folderIds), documentIds: ids(v.documentIds),
      });
      result.replaceChildren(permissionTable(r.data));
    } catch (e) {
      // A missing folder or document: NOT_FOUND, with the per-user answer in details.
      if (e instanceof APIError && e.details && typeof e.details === 'object') result.replaceChildren(permissionTable(e.details));
      throw e;
    }
    return null;
  }, { label: 'Get permissions' });
  const resource = (v) => ({ type: v.type, id: v.type === 'organization' ? orgId : v.id.trim(), organizationId: orgId });
  const add = form([
    { name: 'userId', label: 'User id', required: true },
    { name: 'type', label: 'Resource type', type: 'select', options: resourceTypes },
    { name: 'id', label: 'Resource id', help: 'The document or folder id (not needed for the organization).' },
    { name: 'accessRole', label: 'Role', type: 'select', options: roles },
    { name: 'expiresAt', label: 'Expires at (optional)', type: 'datetime-local' },
  ], 'Add permission', async (v) => {
    const res = { ...resource(v), accessRole: v.accessRole };
    if (v.expiresAt) res.expiresAt = Math.floor(new Date(v.expiresAt).getTime() / 1000);
    const r = await call('/v2/auth/permissions/add', { user: { userId: v.userId.trim() }, permissions: { resources: [res] } });
    return el('p', {}, r.message);
  }, { label: 'Add permission' });
  const remove = form([
    { name: 'userId', label: 'User id', required: true },
    { name: 'type', label: 'Resource type', type: 'select', options: resourceTypes },
    { name: 'id', label: 'Resource id' },
  ], 'Remove permission', async (v) => {
    const r = await call('/v2/auth/permissions/remove', { userId: v.userId.trim(), permissions: { resources: [resource(v)] } });
    return el('p', {}, r.message);
  }, { label: 'Remove permission' });
  return section('Permissions', wide(get), result,
    el('h3', {}, 'Grant'), wide(add), el('h3', {}, 'Revoke'), wide(remove));
}

// permissionTable shows Get Permissions' answer as one row per user and resource: the
// organization, each folder and document asked for, and the user's access context.
export function permissionTable(data) {
  const rows = [];
  for (const [userId, p] of Object.entries(data || {})) {
    const org = Object.entries(p.organization || {});
    if (!org.length) rows.push({ userId, kind: 'organization', id: '', access: 'not a member' });
    for (const [id, e] of org) rows.push({ userId, kind: 'organization', id, access: e.accessRole });
    for (const [kind, key] of [['folder', 'folders'], ['document', 'documents']]) {
      for (const [id, e] of Object.entries(p[key] || {})) {
        rows.push({
          userId, kind, id, access: e.error ? 'none' : e.accessRole, accessType: e.accessType,
          expiresAt: e.expiresAt ? new Date(e.expiresAt * 1000).toLocaleString() : '',
          error: e.error ? `${e.error} (${e.errorCode})` : '',
        });
      }
    }
    if (p.context) rows.push({ userId, kind: 'context', id: '', access: (p.context.accessFields || []).join(', ') });
  }
  return table([
    { key: 'userId', label: 'User' },
    { key: 'kind', label: 'Resource' },
    { key: 'id', label: 'Id' },
    { key: 'access', label: 'Access' },
    { key: 'accessType', label: 'Access type' },
    { key: 'expiresAt', label: 'Expires' },
    { key: 'error', label: 'Error' },
  ], rows, { caption: 'Get Permissions' });
}
