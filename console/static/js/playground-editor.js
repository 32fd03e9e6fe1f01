// The playground's editor: a plain <textarea> bound to a Y.Text, the others' carets drawn over
// it, and the list of who is here (docs/console.md, "Playground"). No editor library: the
// binding is the diff of the textarea's old and new value written as one Y.Text delete and
// insert, and a remote change rewrites the value keeping the local caret where it was in the
// text (through Y.RelativePosition, which follows concurrent edits).
import { Y } from '../vendor/yjs.js';
import { el } from './ui.js';

// palette is the users' colours; a user's is chosen by their id, and its index names the CSS
// class (u0 ... u7) that draws it, so no style is ever written by script.
export const palette = ['#0550ae', '#a40e26', '#116329', '#8250df', '#9a6700', '#bf3989', '#0a7480', '#6e7781'];

// colourIndex picks a palette index for a string (a user id), the same in every window.
export function colourIndex(s) {
  let h = 0;
  for (const c of String(s)) h = (h * 31 + c.codePointAt(0)) >>> 0;
  return h % palette.length;
}

// edit returns the change from old to now as {index, remove, insert}. caret is the caret after
// the change: text after it did not change, so the common end is taken first, up to the caret,
// and typing "a" before "a" inserts at the caret, not after it.
export function edit(old, now, caret) {
  let end = 0;
  const endMax = Math.min(old.length, now.length - Math.min(caret, now.length));
  while (end < endMax && old[old.length - 1 - end] === now[now.length - 1 - end]) end++;
  let start = 0;
  const startMax = Math.min(old.length, now.length) - end;
  while (start < startMax && old[start] === now[start]) start++;
  return { index: start, remove: old.length - end - start, insert: now.slice(start, now.length - end) };
}

// bindTextarea keeps textarea and ytext the same: local input is written to ytext, remote
// changes to the textarea. It returns {destroy, selection()} where selection gives the local
// caret as relative positions (for awareness).
export function bindTextarea(ytext, textarea) {
  const doc = ytext.doc;
  const origin = { binding: 'textarea' }; // marks our own transactions
  textarea.value = ytext.toString();
  let saved = null;
  const rel = (i) => Y.createRelativePositionFromTypeIndex(ytext, i);
  const abs = (r) => {
    const p = r && Y.createAbsolutePositionFromRelativePosition(r, doc);
    return p && p.type === ytext ? p.index : null;
  };
  // Before a remote change is applied, the caret is pinned to the text around it.
  const before = (tr) => {
    if (tr.origin !== origin) saved = [rel(textarea.selectionStart), rel(textarea.selectionEnd), textarea.selectionDirection];
  };
  const observe = (_ev, tr) => {
    if (tr.origin === origin) return;
    const v = ytext.toString();
    if (textarea.value === v) return;
    const focused = document.activeElement === textarea;
    textarea.value = v;
    if (focused && saved) {
      const [a, b, dir] = saved;
      const s = abs(a) ?? 0;
      textarea.setSelectionRange(s, Math.max(s, abs(b) ?? s), dir);
    }
    saved = null;
  };
  const input = () => {
    const old = ytext.toString();
    const now = textarea.value;
    if (old === now) return;
    const e = edit(old, now, textarea.selectionEnd);
    doc.transact(() => {
      if (e.remove > 0) ytext.delete(e.index, e.remove);
      if (e.insert) ytext.insert(e.index, e.insert);
    }, origin);
  };
  doc.on('beforeTransaction', before);
  ytext.observe(observe);
  textarea.addEventListener('input', input);
  return {
    selection: () => ({ anchor: Y.relativePositionToJSON(rel(textarea.selectionStart)), head: Y.relativePositionToJSON(rel(textarea.selectionEnd)) }),
    destroy: () => {
      doc.off('beforeTransaction', before);
      ytext.unobserve(observe);
      textarea.removeEventListener('input', input);
    },
  };
}

// remoteCarets returns the other users' carets as [{index, name, colour}], sorted by index.
function remoteCarets(awareness, ytext) {
  const out = [];
  for (const [client, state] of awareness.getStates()) {
    if (client === awareness.clientID || !state || !state.cursor || !state.cursor.head) continue;
    let p = null;
    try {
      p = Y.createAbsolutePositionFromRelativePosition(Y.createRelativePositionFromJSON(state.cursor.head), ytext.doc);
    } catch {
      continue; // a malformed cursor of another client: not drawn
    }
    if (!p || p.type !== ytext) continue;
    out.push({ index: p.index, name: userName(state, client), colour: userColour(state, client) });
  }
  return out.sort((a, b) => a.index - b.index);
}

function userName(state, client) {
  const n = state.user && typeof state.user.name === 'string' ? state.user.name : '';
  return n.slice(0, 64) || 'client ' + client;
}

// userColour is the palette index of a user's colour, or one chosen by their client id.
function userColour(state, client) {
  const i = state.user ? palette.indexOf(state.user.color) : -1;
  return i >= 0 ? i : colourIndex(String(client));
}

// editor makes the editor: a labelled textarea with an overlay that mirrors its text (the same
// font, padding and wrapping, the text itself invisible) and shows a marker at each remote
// caret, and the list of who is here. It returns {node, textarea, destroy}.
export function editor(ytext, awareness, { readOnly, label }) {
  const textarea = el('textarea', { id: 'pg-text', class: 'pg-text', spellcheck: 'false', 'aria-describedby': 'pg-role' });
  textarea.readOnly = readOnly;
  const mirror = el('div', { class: 'pg-mirror', 'aria-hidden': 'true' });
  const people = el('ul', { class: 'pg-people', id: 'pg-people', 'aria-label': 'Who is here' });
  const node = el('div', { class: 'pg-editor' },
    el('label', { for: 'pg-text' }, label),
    el('div', { class: 'pg-stack' }, mirror, textarea),
    el('h3', {}, 'Here now'), people);
  const binding = bindTextarea(ytext, textarea);

  const drawCarets = () => {
    const text = ytext.toString();
    const parts = [];
    let at = 0;
    for (const c of remoteCarets(awareness, ytext)) {
      parts.push(text.slice(at, c.index), el('span', { class: 'pg-caret u' + c.colour }, el('span', { class: 'pg-caret-name' }, c.name)));
      at = c.index;
    }
    parts.push(text.slice(at), '\u200b'); // a last empty line keeps its height
    mirror.replaceChildren(...parts);
    mirror.scrollTop = textarea.scrollTop;
  };
  const drawPeople = () => {
    const items = [];
    for (const [client, state] of awareness.getStates()) {
      if (!state || !state.user) continue;
      const me = client === awareness.clientID;
      items.push(el('li', { 'data-client': client },
        el('span', { class: 'pg-swatch u' + userColour(state, client), 'aria-hidden': 'true' }),
        userName(state, client) + (me ? ' (you)' : '') + (state.user.role ? ', ' + String(state.user.role).slice(0, 32) : '')));
    }
    people.replaceChildren(...items);
  };
  let last = '';
  const sendCaret = () => {
    const sel = binding.selection();
    const key = JSON.stringify(sel);
    if (key !== last) {
      last = key;
      awareness.setLocalStateField('cursor', sel);
    }
  };
  const onAwareness = () => {
    drawCarets();
    drawPeople();
  };
  const onText = () => drawCarets();
  const onScroll = () => { mirror.scrollTop = textarea.scrollTop; };
  const caretEvents = ['input', 'select', 'keyup', 'mouseup', 'focus'];
  awareness.on('change', onAwareness);
  ytext.observe(onText);
  for (const e of caretEvents) textarea.addEventListener(e, sendCaret);
  textarea.addEventListener('scroll', onScroll);
  onAwareness();
  return {
    node,
    textarea,
    destroy: () => {
      awareness.off('change', onAwareness);
      ytext.unobserve(onText);
      binding.destroy();
    },
  };
}
