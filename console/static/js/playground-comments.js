// The playground's comments sidebar: the threads of the document, a new thread, replies, kept
// current by the comments live stream (Server-Sent Events), all as the end user of the token
// (docs/comments.md, "End users" and "Live stream"). Comments are shown as text only.
import { APIError, call } from './api.js';
import { el, errorBox } from './ui.js';

// The stream's event types (docs/comments.md, "Events").
const changeTypes = [
  'comment_annotation.add', 'comment_annotation.update', 'comment_annotation.delete',
  'comment_annotation.status_change', 'comment_annotation.priority_change', 'comment_annotation.assign',
  'comment.add', 'comment.update', 'comment.delete', 'comment.reaction_add', 'comment.reaction_delete',
];

const pageSize = 50;
let nextId = 0;

// commentText is what a comment shows: its text, or, without one, the text of its sanitised
// HTML (parsed as an inert document, never inserted as HTML).
function commentText(c) {
  if (c.commentText) return c.commentText;
  if (!c.commentHtml) return '';
  return new DOMParser().parseFromString(c.commentHtml, 'text/html').body.textContent || '';
}

function who(u) {
  return (u && (u.name || u.userId)) || 'someone';
}

// comments makes the sidebar for org/doc with the user's token; {node, destroy}. A user
// Get Permissions denies (denied: its reason) gets the reason, and no request the server would
// refuse.
export function comments({ org, doc, token, denied }) {
  if (denied) {
    return {
      node: el('aside', { class: 'pg-side', 'aria-labelledby': 'pg-comments-title' },
        el('h2', { id: 'pg-comments-title' }, 'Comments'), el('p', { class: 'error' }, 'No comments to show: ' + denied + '.')),
      destroy: () => {},
    };
  }
  const ops = (path, data) => call('/v2/commentannotations' + path, { organizationId: org, documentId: doc, ...data }, { bearer: token });
  const threads = new Map(); // annotationId → {ann, version, comments: Map, node, list, head}
  const list = el('div', { class: 'pg-threads', id: 'pg-threads', 'aria-live': 'polite' });
  const status = el('div', { class: 'pg-stream', role: 'status' });
  const more = el('button', { type: 'button', class: 'more', hidden: true }, 'More threads');
  let pageToken = '';

  const render = (t) => {
    const a = t.ann;
    const state = a.status && a.status.name ? ' · ' + a.status.name : '';
    t.head.textContent = 'Thread by ' + who(a.from) + state;
    const ids = [...t.comments.keys()].sort((x, y) => x - y);
    t.list.replaceChildren(...ids.map((id) => {
      const c = t.comments.get(id);
      return el('li', { 'data-comment': id }, el('strong', {}, who(c.from) + ': '), commentText(c));
    }));
  };
  const thread = (id, ann, prepend) => {
    let t = threads.get(id);
    if (!t) {
      const head = el('h3', { id: 'pg-th-' + ++nextId });
      const cl = el('ol', { class: 'pg-comments' });
      const out = el('div', { role: 'status' });
      const input = el('input', { type: 'text', name: 'reply', required: true, 'aria-label': 'Reply to this thread', autocomplete: 'off' });
      const f = el('form', { class: 'pg-reply', 'aria-label': 'Reply' }, input, el('button', { type: 'submit' }, 'Reply'), out);
      f.addEventListener('submit', (ev) => {
        ev.preventDefault();
        send(out, input, () => ops('/comments/add', { annotationId: id, commentData: [{ commentText: input.value }] }));
      });
      const node = el('article', { class: 'pg-thread', 'data-annotation': id, 'aria-labelledby': head.id }, head, cl, f);
      t = { ann, version: -1, comments: new Map(), node, list: cl, head };
      threads.set(id, t);
      if (prepend) list.prepend(node);
      else list.append(node);
    }
    return t;
  };
  // take keeps a thread as Get answers it, whole.
  const take = (a, prepend) => {
    const t = thread(a.annotationId, a, prepend);
    t.ann = a;
    for (const c of a.comments || []) t.comments.set(c.commentId, c);
    render(t);
  };
  // apply follows one change of the stream: the annotation of the highest version wins, a
  // comment is kept by its id whatever the order, a deleted thread goes.
  const apply = (type, d) => {
    const id = d.annotationId;
    if (type === 'comment_annotation.delete') {
      const t = threads.get(id);
      if (t) t.node.remove();
      threads.delete(id);
      return;
    }
    const t = thread(id, d.annotation || { annotationId: id }, true);
    const v = typeof d.version === 'number' ? d.version : 0;
    if (d.annotation && v >= t.version) {
      t.ann = d.annotation;
      t.version = v;
    }
    if (type === 'comment_annotation.add') for (const c of d.annotation.comments || []) t.comments.set(c.commentId, c);
    if (type === 'comment.delete') t.comments.delete(d.commentId);
    else if (d.comment) t.comments.set(d.commentId, d.comment);
    render(t);
  };
  // Changes the stream brings while a read is on its way wait for its answer and are then
  // applied on top of it, in order: the answer may be older than they are (a thread deleted
  // meanwhile would come back with it), and each change holds its thread as it left it.
  let reading = 0;
  let waiting = [];
  const follow = (type, d) => {
    if (reading) waiting.push([type, d]);
    else apply(type, d);
  };
  const caughtUp = () => {
    const changes = waiting;
    waiting = [];
    for (const [type, d] of changes) {
      try {
        apply(type, d);
      } catch (e) {
        status.replaceChildren(errorBox(e));
      }
    }
  };
  const load = async (reset) => {
    more.disabled = true;
    reading++;
    try {
      if (reset) {
        threads.clear();
        list.replaceChildren();
        pageToken = '';
      }
      const r = await ops('/get', { pageSize, ...(pageToken ? { pageToken } : {}) });
      for (const a of r.data || []) take(a, false);
      pageToken = r.pageToken || '';
      more.hidden = !pageToken;
    } catch (e) {
      status.replaceChildren(errorBox(e));
    } finally {
      more.disabled = false;
      if (--reading === 0) caughtUp();
    }
  };
  more.addEventListener('click', () => load(false));

  const text = el('textarea', { id: 'pg-new', name: 'comment', rows: 3, required: true });
  const out = el('div', { role: 'status' });
  const add = el('form', { class: 'pg-new', 'aria-label': 'New thread' },
    el('label', { for: 'pg-new' }, 'New comment'), text, el('button', { type: 'submit' }, 'Add thread'), out);
  add.addEventListener('submit', (ev) => {
    ev.preventDefault();
    send(out, text, () => ops('/add', { commentAnnotations: [{ commentData: [{ commentText: text.value }] }] }));
  });

  // The threads are read once the stream is open: a new stream starts after the newest change,
  // so a read made before it could miss a change made in between, for good. A stream refused
  // (its reason is shown) still lets the page read what it can.
  let started = false;
  const start = () => {
    if (!started) {
      started = true;
      load(true);
    }
  };
  const es = stream(org, doc, token, follow, () => load(true), status, start);
  return {
    node: el('aside', { class: 'pg-side', 'aria-labelledby': 'pg-comments-title' },
      el('h2', { id: 'pg-comments-title' }, 'Comments'), add, status, list, more),
    destroy: () => es.close(),
  };
}

// send runs a write and shows its refusal: an error of the API, or an item's success false.
async function send(out, input, op) {
  out.replaceChildren();
  try {
    const r = await op();
    for (const item of Object.values((r && r.data && !Array.isArray(r.data) && r.data) || {})) {
      if (item && item.success === false) throw new Error(item.message);
    }
    input.value = '';
  } catch (e) {
    out.replaceChildren(errorBox(e));
  }
}

// stream opens the document's live stream; each change goes to apply, a reset to reload, and
// a refusal or an ending is shown in status with the API's status and message. opened is
// called when the stream opens, and when it is refused.
function stream(org, doc, token, apply, reload, status, opened) {
  const url = '/v2/commentannotations/stream/' + encodeURIComponent(org) + '/' + encodeURIComponent(doc) + '?token=' + encodeURIComponent(token);
  const es = new EventSource(url);
  for (const type of changeTypes) {
    es.addEventListener(type, (ev) => {
      try {
        apply(type, JSON.parse(ev.data));
      } catch (e) {
        status.replaceChildren(errorBox(e));
      }
    });
  }
  es.addEventListener('reset', reload);
  es.addEventListener('open', () => {
    status.replaceChildren(el('p', { class: 'muted' }, 'Live: new comments appear as they are made.'));
    opened();
  });
  es.addEventListener('closed', (ev) => {
    es.close();
    let d = {};
    try { d = JSON.parse(ev.data); } catch { /* shown as unknown */ }
    status.replaceChildren(el('p', { class: 'error', role: 'alert' },
      'The comments stream ended: ' + (d.status || 'UNKNOWN') + ': ' + (d.message || 'no reason given')));
  });
  es.addEventListener('error', () => {
    if (es.readyState !== EventSource.CLOSED) return; // EventSource reconnects by itself
    opened();
    // Refused: ask again with fetch to show the API's answer (EventSource does not give it).
    const ctl = new AbortController();
    fetch(url, { signal: ctl.signal }).then(async (res) => {
      if (res.ok) {
        ctl.abort();
        status.replaceChildren(errorBox(new Error('The comments stream ended; reload the page to follow it again.')));
        return;
      }
      const body = await res.json().catch(() => ({}));
      const e = body.error || {};
      status.replaceChildren(errorBox(new APIError(res.status, e.status || 'UNKNOWN', e.message || res.statusText)));
    }).catch(() => {});
  });
  return es;
}
