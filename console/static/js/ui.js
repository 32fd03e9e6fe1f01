// Building blocks of the console's pages: elements made with text only (the console never
// renders stored content as HTML: everything a server or user wrote goes in as text), labelled
// form controls, tables, errors, and paging (docs/console.md).
import { APIError } from './api.js';

// el makes an element: attrs are attributes or properties (on* handlers as functions, class,
// for, aria-*, ...), children are nodes or strings (always text).
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
    else if (k === 'value' || k === 'checked' || k === 'disabled') e[k] = v;
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

let nextId = 0;

// field is a labelled control: {name, label, type ('text', 'textarea', 'select', 'checkbox',
// 'number', 'password'), value, options ([value, label] for selects), required, placeholder,
// help}. It returns the wrapper; the control is wrapper.control.
export function field(f) {
  const id = 'f' + ++nextId;
  let control;
  if (f.type === 'textarea') {
    control = el('textarea', { id, name: f.name, rows: f.rows || 4, required: f.required, placeholder: f.placeholder });
    control.value = f.value ?? '';
  } else if (f.type === 'select') {
    control = el('select', { id, name: f.name }, (f.options || []).map(([v, l]) => el('option', { value: v }, l ?? v)));
    if (f.value !== undefined) control.value = f.value;
  } else {
    control = el('input', { id, name: f.name, type: f.type || 'text', required: f.required, placeholder: f.placeholder, autocomplete: f.autocomplete || 'off' });
    if (f.type === 'checkbox') control.checked = !!f.value;
    else if (f.value !== undefined) control.value = f.value;
  }
  const help = f.help ? el('small', { id: id + 'h', class: 'help' }, f.help) : null;
  if (help) control.setAttribute('aria-describedby', help.id);
  const wrap = el('div', { class: 'field' + (f.type === 'checkbox' ? ' check' : '') },
    f.type === 'checkbox' ? [control, el('label', { for: id }, f.label)] : [el('label', { for: id }, f.label), control], help);
  wrap.control = control;
  return wrap;
}

// form makes a form of fields with a submit button; onSubmit gets the values by name (checkbox
// values as booleans) and may return a promise; its error is shown under the form.
export function form(fields, submitLabel, onSubmit, opts = {}) {
  const wraps = fields.map(field);
  const out = el('div', { class: 'form-result', role: 'status', 'aria-live': 'polite' });
  const button = el('button', { type: 'submit' }, submitLabel);
  const f = el('form', { class: 'form', 'aria-label': opts.label || submitLabel }, wraps, el('div', { class: 'actions' }, button), out);
  f.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const values = {};
    for (const w of wraps) {
      const c = w.control;
      values[c.name] = c.type === 'checkbox' ? c.checked : c.value;
    }
    button.disabled = true;
    out.replaceChildren();
    try {
      const r = await onSubmit(values, out);
      if (r instanceof Node) out.replaceChildren(r);
    } catch (e) {
      out.replaceChildren(errorBox(e));
    } finally {
      button.disabled = false;
    }
  });
  f.fields = Object.fromEntries(wraps.map((w) => [w.control.name, w.control]));
  return f;
}

// latest numbers the reads of one place on a page, so that only the last one's answer is
// shown: turn() starts a read and returns its check, true while no later read has started.
// An answer that arrives after a newer read's (the network does not keep their order) is
// dropped instead of shown over it.
export function latest() {
  let n = 0;
  return () => {
    const mine = ++n;
    return () => mine === n;
  };
}

// errorBox shows an error as the API answered it: HTTP status, status and message.
export function errorBox(e) {
  const text = e instanceof APIError ? e.toString() : 'Error: ' + (e && e.message ? e.message : String(e));
  return el('p', { class: 'error', role: 'alert' }, text);
}

// cell renders a value of an API answer as text: strings as they are, others as JSON.
export function cell(v) {
  if (v === undefined || v === null) return '';
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  return JSON.stringify(v);
}

// table renders rows (objects) in columns: [{key, label, render(row) → node or text}].
// table.add appends rows in chunks of 100 with a turn of the event loop between chunks (the
// first chunk at once), so ten thousand rows never block the page; it returns a promise that
// resolves once every row given so far is in. Rows keep the order they were given in.
export function table(columns, rows, opts = {}) {
  const tbody = el('tbody');
  const t = el('table', { class: 'grid' },
    opts.caption ? el('caption', {}, opts.caption) : null,
    el('thead', {}, el('tr', {}, columns.map((c) => el('th', { scope: 'col' }, c.label || c.key)))),
    tbody);
  const rowOf = (r) => el('tr', {}, columns.map((c) => el('td', {}, c.render ? c.render(r) : cell(r[c.key]))));
  const queue = [];
  let running = false;
  let done = Promise.resolve();
  const drain = async () => {
    running = true;
    try {
      while (queue.length) {
        const frag = document.createDocumentFragment();
        for (const r of queue.splice(0, 100)) frag.append(rowOf(r));
        tbody.append(frag);
        if (queue.length) await new Promise((resolve) => setTimeout(resolve, 0));
      }
    } finally {
      running = false;
    }
  };
  t.add = (more) => {
    for (const r of more) queue.push(r);
    if (!running) done = drain();
    return done;
  };
  t.clear = () => {
    queue.length = 0;
    tbody.replaceChildren();
  };
  t.add(rows || []);
  return t;
}

// pager shows pages of a list: load(pageToken) returns {rows, next} (next: the next page's
// token, empty at the end). It renders tables and a "Next page" button; every error is shown.
// Each page loaded gets tables of its own, of at most perTable rows each (a page may hold ten
// thousand: the activity log's), each in a block the browser skips while it is off screen
// (content-visibility in console.css): one table of ten thousand rows costs a third of a
// second of style, layout and paint at every change, ten of a thousand only the one in view
// (docs/console.md, "Long lists").
const perTable = 1000;

export function pager(columns, load, opts = {}) {
  const tableOf = (page, part) => table(columns, [], page === 1 && part === 1 ? opts
    : { ...opts, caption: opts.caption ? `${opts.caption} (page ${page}${part > 1 ? ', part ' + part : ''})` : null });
  let t = tableOf(1, 1);
  const tables = el('div', {}, el('div', { class: 'rows' }, t));
  const status = el('p', { class: 'muted', role: 'status', 'aria-live': 'polite' });
  const label = opts.moreLabel || 'Next page';
  const more = el('button', { type: 'button', class: 'more' }, label);
  const box = el('div', { class: 'pager' }, tables, status, more);
  let token = '';
  let count = 0;
  let pages = 0;
  let generation = 0; // a reload drops the pages that earlier loads are still reading
  const next = async () => {
    const g = generation;
    more.disabled = true;
    try {
      const { rows, next: nt } = await load(token);
      if (g !== generation) return;
      pages++;
      for (let from = 0, part = 1; from < rows.length || from === 0; from += perTable, part++) {
        if (pages > 1 || part > 1) {
          t = tableOf(pages, part);
          tables.append(el('div', { class: 'rows' }, t));
          box.table = t;
        }
        await t.add(rows.slice(from, from + perTable));
        if (g !== generation) return;
      }
      count += rows.length;
      token = nt || '';
      status.textContent = count + (count === 1 ? ' row' : ' rows') + (token ? '' : ', the end');
      more.textContent = label;
      more.hidden = !token;
    } catch (e) {
      if (g === generation) {
        // The button reads the page that failed again: it says so.
        status.replaceChildren(errorBox(e));
        more.textContent = 'Try again';
        more.hidden = false;
      }
    } finally {
      // A dropped read leaves the button to the read that replaced it: enabled while that one
      // reads, it would read the first page again below the first.
      if (g === generation) more.disabled = false;
    }
  };
  more.addEventListener('click', next);
  box.reload = () => {
    generation++;
    t = tableOf(1, 1);
    tables.replaceChildren(el('div', { class: 'rows' }, t));
    box.table = t;
    token = '';
    count = 0;
    pages = 0;
    return next();
  };
  box.table = t;
  next();
  return box;
}

// section is a titled part of a page.
export function section(title, ...children) {
  return el('section', { 'aria-label': title }, el('h2', {}, title), ...children);
}

// ids splits a comma- or space-separated list of ids.
export function ids(s) {
  return String(s || '').split(/[\s,]+/).filter(Boolean);
}

// actionButton is a button that runs onClick (which may return a promise) and shows in out
// what it returns (a node or text) or the error it throws; it is disabled while it runs.
export function actionButton(label, onClick, out, attrs = {}) {
  const b = el('button', { type: 'button', ...attrs }, label);
  b.addEventListener('click', async () => {
    b.disabled = true;
    out.replaceChildren();
    try {
      const r = await onClick();
      if (r !== undefined && r !== null) out.replaceChildren(r);
    } catch (e) {
      out.replaceChildren(errorBox(e));
    } finally {
      b.disabled = false;
    }
  });
  return b;
}

// output is a live region for what an action answers.
export function output() {
  return el('div', { class: 'form-result', role: 'status', 'aria-live': 'polite' });
}

// compact returns obj without its empty values ('', null, undefined, []): a form's blank
// field is a field not sent.
export function compact(obj) {
  return Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== '' && v !== null && v !== undefined && !(Array.isArray(v) && v.length === 0)));
}

// json shows a value as indented JSON text in a focusable block (it may scroll).
export function json(v) {
  return el('pre', { tabindex: 0, class: 'json' }, JSON.stringify(v, null, 2));
}

// time renders Unix milliseconds as an ISO-8601 time ('' for none).
export function time(ms) {
  return typeof ms === 'number' && ms > 0 ? new Date(ms).toISOString() : '';
}
