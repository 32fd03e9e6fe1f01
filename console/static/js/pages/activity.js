// Activity log (#/activity/<organization id>): Get Activity Logs with its filters, each record
// shown with its display message rendered from its template, paged with the API's page
// tokens. docs/console.md.
import { call } from '../api.js';
import { el, cell, form, ids, pager, section } from '../ui.js';
import { needs, userName, when, wide } from '../views.js';

const featureTypes = ['comment', 'reaction', 'recorder', 'crdt', 'custom'];

export default {
  id: 'activity',
  title: 'Activity log',
  async render(body, [orgId = '']) {
    const n = needs('K');
    if (n) return body.append(n);
    const results = el('div');
    const f = form([
      { name: 'organizationId', label: 'Organization id', required: true, value: orgId },
      { name: 'documentId', label: 'Document id' },
      { name: 'userId', label: 'Action user id' },
      { name: 'targetEntityId', label: 'Target entity id' },
      ...featureTypes.map((t) => ({ name: 'feature:' + t, label: t, type: 'checkbox' })),
      { name: 'actionTypes', label: 'Action types', help: 'Such as comment.add; separated by commas or spaces; none: every action.' },
      { name: 'order', label: 'Order', type: 'select', options: [['desc', 'newest first'], ['asc', 'oldest first']] },
      { name: 'pageSize', label: 'Page size', type: 'number', value: 50, help: '1 to 10000.' },
    ], 'Show activity', (v) => {
      const filter = {
        organizationId: v.organizationId.trim(), documentId: v.documentId.trim(), userId: v.userId.trim(),
        targetEntityId: v.targetEntityId.trim(), actionTypes: ids(v.actionTypes), order: v.order,
        featureTypes: featureTypes.filter((t) => v['feature:' + t]),
      };
      const size = Number(v.pageSize);
      results.replaceChildren(section('Records', activityList(filter, size)));
    }, { label: 'Activity filters' });
    wide(f);
    // The feature boxes as one group.
    const boxes = featureTypes.map((t) => f.fields['feature:' + t].parentElement);
    const group = el('fieldset', { class: 'group' }, el('legend', {}, 'Features'));
    boxes[0].before(group);
    group.append(...boxes);
    body.append(el('p', { class: 'muted' }, 'No feature box checked: every feature. The API filters by organization, document, user, target, feature and action; it has no time filter, so a time range is found by paging in either order.'), f, results);
    if (orgId) f.requestSubmit();
  },
};

function activityList(filter, pageSize) {
  return pager([
    { key: 'timestamp', label: 'When', render: (a) => when(a.timestamp) },
    { key: 'message', label: 'Message', render: (a) => renderTemplate(a.displayMessageTemplate, a.displayMessageTemplateData, a) },
    { key: 'actionType', label: 'Action', render: (a) => a.featureType + ' / ' + a.actionType },
    { key: 'actionUser', label: 'User', render: (a) => userName(a.actionUser) },
    { key: 'document', label: 'Document', render: (a) => (a.metadata || {}).documentId || '' },
    { key: 'targetEntityId', label: 'Target' },
    { key: 'changes', label: 'Changes', render: (a) => (a.changes ? cell(a.changes) : '') },
  ], async (token) => {
    const r = await call('/v2/activities/get', { ...filter, pageSize, pageToken: token });
    return { rows: r.data || [], next: r.pageToken };
  }, { caption: 'Get Activity Logs' });
}

// variable matches {{name}} and {{name.field...}}, spaces inside the braces allowed, as the
// notifications' headlines read them (docs/api.md, "Headline").
const variable = /\{\{\s*([A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*)\s*\}\}/g;

// renderTemplate fills an activity's displayMessageTemplate: a variable reads the template
// data, else the record's own field of that name (actionUser, actionType, targetEntityId...);
// a user object renders as its name, else email, else id (another object as JSON); an unknown variable renders as
// nothing. The result is text: the page never renders it as HTML.
export function renderTemplate(tpl, data, record) {
  return String(tpl || '').replace(variable, (_, name) => {
    let v = lookup(data, name);
    if (v === undefined) v = lookup(record, name);
    if (v === undefined || v === null) return '';
    if (typeof v === 'object') return Array.isArray(v) ? v.map(cell).join(', ') : userName(v) || cell(v);
    return String(v);
  });
}

function lookup(obj, path) {
  let v = obj;
  for (const k of path.split('.')) {
    if (v === null || typeof v !== 'object' || !Object.hasOwn(v, k)) return undefined;
    v = v[k];
  }
  return v;
}
