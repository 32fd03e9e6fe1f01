// CRDT: the editors of a document (Get CRDT Data without an editor id answers every editor's
// data) and one editor's content as JSON (Get CRDT Data with its id), shown as text
// (docs/console.md, "CRDT").
import { call } from '../api.js';
import { compact, el, form, json, latest, section, table, time } from '../ui.js';

const enc = (...parts) => parts.map((p) => encodeURIComponent(p || '')).join('/');

export default {
  id: 'crdt',
  title: 'CRDT',
  render(body, [org = '', doc = '', editor = '']) {
    const editors = el('div', { id: 'crdt-editors' });
    const content = el('div', { id: 'crdt-content' });
    // Each area shows its last read's answer only; reading another document's editors also
    // drops an editor's content still on its way (it would show under the new document).
    const editorsTurn = latest(), contentTurn = latest();
    const docForm = form([
      { name: 'organizationId', label: 'Organization id', value: org },
      { name: 'documentId', label: 'Document id', value: doc },
    ], 'Show editors', async (v) => {
      const o = v.organizationId.trim(), d = v.documentId.trim();
      history.replaceState(null, '', '#/crdt/' + enc(o, d));
      const current = editorsTurn();
      contentTurn();
      content.replaceChildren();
      const r = await call('/v2/crdt/get', { organizationId: o, documentId: d });
      if (!current()) return;
      const rows = r.data.map((x) => ({ ...x, size: JSON.stringify(x.data).length }));
      editors.replaceChildren(section('Editors', rows.length ? table([
        { label: 'Editor', render: (x) => el('a', { href: '#/crdt/' + enc(o, d, x.id) }, x.id) },
        { label: 'Last change', render: (x) => time(x.lastUpdate) },
        { label: 'Kind', render: (x) => kind(x.data) },
        { label: 'Size (JSON characters)', render: (x) => String(x.size) },
      ], rows, { caption: `Editors of ${d}` }) : el('p', {}, 'This document has no CRDT data.')));
    }, { label: 'Editors of a document' });
    docForm.id = 'crdt-document';
    const editorForm = form([
      { name: 'editorId', label: 'Editor id', value: editor },
      { name: 'type', label: 'Read as', type: 'select', options: [['', 'as stored'], ['text', 'text'], ['map', 'map'], ['array', 'array'], ['xml', 'xml']] },
      { name: 'contentKey', label: 'Content key', help: 'The root shared type; empty: as stored (else content).' },
    ], 'Show content', async (v) => {
      const q = compact({
        organizationId: docForm.fields.organizationId.value.trim(), documentId: docForm.fields.documentId.value.trim(),
        editorId: v.editorId.trim(), type: v.type, contentKey: v.contentKey.trim(),
      });
      if (!q.editorId) throw new Error('Give the editor id (see the editors above).');
      const current = contentTurn();
      let r;
      try {
        r = await call('/v2/crdt/get', q);
      } catch (e) {
        if (current()) throw e;
        return; // another document's, and read no more
      }
      if (!current()) return;
      const x = r.data[0];
      content.replaceChildren(section('Content of ' + x.id,
        el('p', { class: 'muted' }, `${kind(x.data)}, last change ${time(x.lastUpdate)}`), json(x.data)));
    }, { label: 'Content of an editor' });
    editorForm.id = 'crdt-editor';
    body.append(section('Document', docForm), editors, section('Editor', editorForm), content);
    if (org && doc) {
      docForm.requestSubmit();
      if (editor) editorForm.requestSubmit();
    }
  },
};

function kind(v) {
  if (typeof v === 'string') return 'text or xml';
  if (Array.isArray(v)) return 'array';
  if (v && typeof v === 'object') return 'map';
  return typeof v;
}
