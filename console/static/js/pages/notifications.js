// Notifications (#/notifications/<organization id>/<user id>): a user's inbox (Get
// Notifications with userId, paged; Update Notifications marks an entry read or unread) and
// Add Notifications as a form. docs/console.md.
import { call } from '../api.js';
import { el, errorBox, form, ids, pager, section } from '../ui.js';
import { needs, userName, when, wide } from '../views.js';

export default {
  id: 'notifications',
  title: 'Notifications',
  async render(body, [orgId = '', userId = '']) {
    const n = needs('K');
    if (n) return body.append(n);
    const results = el('div');
    const pick = form([
      { name: 'organizationId', label: 'Organization id', required: true, value: orgId },
      { name: 'userId', label: 'User id', required: true, value: userId },
      { name: 'order', label: 'Order', type: 'select', options: [['desc', 'newest first'], ['asc', 'oldest first']] },
    ], 'Show inbox', (v) => {
      const q = { organizationId: v.organizationId.trim(), userId: v.userId.trim(), order: v.order };
      results.replaceChildren(section('Inbox of ' + q.userId, inbox(q)));
    }, { label: 'Inbox' });
    body.append(wide(pick), results, addForm(orgId));
    if (orgId && userId) pick.requestSubmit();
  },
};

function inbox(q) {
  return pager([
    { key: 'timestamp', label: 'When', render: (x) => when(x.timestamp) },
    { key: 'displayHeadlineMessage', label: 'Headline' },
    { key: 'displayBodyMessage', label: 'Body' },
    { key: 'actionUser', label: 'From', render: (x) => userName(x.actionUser) },
    { key: 'documentId', label: 'Document' },
    { key: 'notificationSource', label: 'Source' },
    { key: 'read', label: 'Read', render: (x) => readToggle(q, x) },
  ], async (token) => {
    const r = await call('/v2/notifications/get', { ...q, pageSize: 50, pageToken: token });
    return { rows: r.data || [], next: r.pageToken };
  }, { caption: 'Get Notifications' });
}

// readToggle shows whether the reader has read the entry, with a button that changes it
// (Update Notifications).
function readToggle(q, x) {
  const state = el('span');
  const button = el('button', { type: 'button' });
  const problem = el('div');
  const show = () => {
    state.textContent = x.read ? 'read ' : 'unread ';
    button.textContent = x.read ? 'Mark unread' : 'Mark read';
    button.setAttribute('aria-label', (x.read ? 'Mark unread: ' : 'Mark read: ') + (x.displayHeadlineMessage || x.id));
  };
  button.addEventListener('click', async () => {
    const change = x.read ? { unreadByUserIds: [q.userId] } : { readByUserIds: [q.userId] };
    problem.replaceChildren();
    try {
      const r = await call('/v2/notifications/update', { organizationId: q.organizationId, notifications: [{ id: x.id, ...change }] });
      const item = (r.data || {})[x.id];
      if (!item || !item.success) throw new Error((item && item.message) || r.message);
      x.read = !x.read;
      show();
    } catch (e) {
      problem.replaceChildren(errorBox(e));
    }
  });
  show();
  return el('div', {}, state, button, problem);
}

function addForm(orgId) {
  const f = form([
    { name: 'organizationId', label: 'Organization id', required: true, value: orgId },
    { name: 'createOrganization', label: 'Create the organization if missing', type: 'checkbox' },
    { name: 'documentId', label: 'Document id', required: true },
    { name: 'createDocument', label: 'Create the document if missing', type: 'checkbox' },
    { name: 'actionUserId', label: 'Acting user id', required: true },
    { name: 'actionUserName', label: 'Acting user name' },
    { name: 'headline', label: 'Headline template', required: true, help: 'Variables in double braces: {{actionUser}}, {{recipientUser}}, or a field of the template data.' },
    { name: 'templateData', label: 'Template data (JSON object, optional)', type: 'textarea', rows: 2 },
    { name: 'body', label: 'Body', type: 'textarea', rows: 3, required: true },
    { name: 'notifyUsers', label: 'Notify users', help: 'User ids, separated by commas or spaces.' },
    { name: 'notifyAll', label: 'Notify everyone in the organization', type: 'checkbox' },
    { name: 'verifyUserPermissions', label: 'Only users who can read the document', type: 'checkbox' },
    { name: 'notificationSource', label: 'Source', type: 'select', options: [['', '(none)'], ['custom', 'custom'], ['comment', 'comment'], ['huddle', 'huddle'], ['crdt', 'crdt']] },
    { name: 'notificationId', label: 'Notification id (optional)', help: 'Letters, digits, _ and -; a repeated id adds nothing.' },
  ], 'Add notification', async (v) => {
    const data = {
      organizationId: v.organizationId.trim(), createOrganization: v.createOrganization,
      documentId: v.documentId.trim(), createDocument: v.createDocument,
      actionUser: { userId: v.actionUserId.trim(), name: v.actionUserName },
      displayHeadlineMessageTemplate: v.headline, displayBodyMessage: v.body,
      notifyUsers: ids(v.notifyUsers).map((userId) => ({ userId })),
      notifyAll: v.notifyAll, verifyUserPermissions: v.verifyUserPermissions,
    };
    if (v.templateData.trim()) {
      try {
        data.displayHeadlineMessageTemplateData = JSON.parse(v.templateData);
      } catch (e) {
        throw new Error('Template data is not JSON: ' + e.message);
      }
    }
    if (v.notificationSource) data.notificationSource = v.notificationSource;
    if (v.notificationId.trim()) data.notificationId = v.notificationId.trim();
    const r = await call('/v2/notifications/add', data);
    const d = r.data || {};
    return el('p', { class: d.success ? '' : 'error' }, d.message + (d.notificationId ? ' Id: ' + d.notificationId + '.' : ''));
  }, { label: 'Add notification' });
  return section('Add a notification', wide(f));
}
