// Comments: the comment annotations (threads) of a document, page by page (Get Comment
// Annotations), and a thread's comments (Get Comments). Everything is shown as text, the
// comments' HTML included (as its markup): the console renders no stored content as HTML
// (docs/console.md, "Comments").
import { call } from '../api.js';
import { compact, el, errorBox, form, ids, pager, section, time } from '../ui.js';

const api = '/v2/commentannotations';
const who = (u) => (u ? u.name || u.email || u.userId || '' : '');
const clip = (s, n) => (s && s.length > n ? s.slice(0, n) + '…' : s || '');

export default {
  id: 'comments',
  title: 'Comments',
  render(body, [org = '', doc = '']) {
    const threads = el('div', { id: 'threads' });
    const comments = el('div', { id: 'thread-comments' });
    const f = form([
      { name: 'organizationId', label: 'Organization id', value: org },
      { name: 'documentId', label: 'Document id', value: doc },
      { name: 'statusIds', label: 'Status ids', help: 'Comma-separated, e.g. OPEN; empty: every status.' },
      { name: 'order', label: 'Order by last update', type: 'select', options: [['desc', 'newest first'], ['asc', 'oldest first']] },
      { name: 'pageSize', label: 'Threads per page', type: 'number', value: 100, help: '1 to 1000.' },
    ], 'Show threads', async (v) => {
      const q = compact({
        organizationId: v.organizationId.trim(), documentId: v.documentId.trim(), statusIds: ids(v.statusIds),
        order: v.order, pageSize: v.pageSize === '' ? '' : Number(v.pageSize),
      });
      history.replaceState(null, '', '#/comments/' + [q.organizationId, q.documentId].map((s) => encodeURIComponent(s || '')).join('/'));
      comments.replaceChildren();
      threads.replaceChildren(list(q, comments));
    }, { label: 'Threads of a document' });
    f.id = 'comments-query';
    body.append(section('Document', f), threads, comments);
    if (org && doc) f.requestSubmit();
  },
};

// list pages through the threads the query q selects.
function list(q, comments) {
  return section('Threads', pager([
    { key: 'annotationId', label: 'Thread' },
    { label: 'Status', render: (a) => (a.status ? a.status.name || a.status.id : '') },
    { label: 'Priority', render: (a) => (a.priority ? a.priority.name || a.priority.id : '') },
    { label: 'Author', render: (a) => who(a.from) },
    { label: 'Assigned to', render: (a) => who(a.assignedTo) },
    { label: 'Location', render: (a) => (a.location ? a.location.locationName || a.location.id : '') },
    { label: 'Comments', render: (a) => String((a.comments || []).length) },
    { label: 'First comment', render: (a) => clip(a.comments && a.comments[0] ? a.comments[0].commentText : '', 160) },
    { label: 'Last updated', render: (a) => time(a.lastUpdated) },
    { label: 'Open', render: (a) => el('button', { type: 'button', 'aria-label': 'Comments of ' + a.annotationId, onclick: () => show(q, a, comments) }, 'Comments') },
  ], async (pageToken) => {
    const r = await call(api + '/get', { ...q, pageToken: pageToken || undefined });
    return { rows: r.data, next: r.pageToken || '' };
  }, { caption: 'Threads of ' + (q.documentId || 'no document'), moreLabel: 'Next page of threads' }));
}

// show reads a thread's comments (Get Comments) and lists them, moving the focus there.
async function show(q, a, box) {
  const heading = el('h2', { tabindex: -1 }, 'Comments of ' + a.annotationId);
  const sec = el('section', { 'aria-label': 'Comments of ' + a.annotationId }, heading, el('p', { class: 'muted' }, 'Loading…'));
  box.replaceChildren(sec);
  heading.focus();
  try {
    const r = await call(api + '/comments/get', { organizationId: q.organizationId, documentId: q.documentId, annotationId: a.annotationId });
    sec.replaceChildren(heading,
      el('p', { class: 'muted' }, 'HTML is shown as its markup, as stored (sanitised by the service): the console renders no stored content as HTML.'),
      el('ol', { class: 'comments' }, r.data.map(comment)));
  } catch (e) {
    sec.append(errorBox(e));
  }
}

function comment(c) {
  const reactions = (c.reactions || []).map((x) => `${x.emoji} ${x.userIds.length}`).join('  ');
  const mentions = (c.taggedUserContacts || []).map((m) => m.text || m.userId).join(', ');
  return el('li', { class: 'comment' },
    el('p', { class: 'meta' }, `#${c.commentId} · ${who(c.from)} · ${time(c.createdAt)}`, c.lastUpdated > c.createdAt ? ` · edited ${time(c.lastUpdated)}` : ''),
    c.commentText ? el('p', { class: 'text' }, c.commentText) : null,
    c.commentHtml ? el('p', {}, 'HTML: ', el('code', { class: 'html' }, c.commentHtml)) : null,
    mentions ? el('p', { class: 'muted' }, 'Mentions: ' + mentions) : null,
    reactions ? el('p', { class: 'muted' }, 'Reactions: ' + reactions) : null);
}
