// Writes deterministic Yjs fixtures for the Go codec's tests (internal/testkit/yjstest.Fixtures):
//
//   node fixtures.mjs <outdir> [--count N] [--seed S] [--large-ops N]
//
// Files (JSON, format below): trace-0000.json … trace-<N-1>.json (random multi-client editing
// sessions), edge-*.json (hand-written edge cases) and large.json (one big document).
//
//   {"name": "trace-0007", "seed": 123, "gc": "on", "clients": [<clientID>, ...],
//    "roots": [{"name": "text", "kind": "text"}, ...],
//    "updates": ["<base64 update v1>", ...],  every update each client emitted for its own
//                                             local transactions, in emission order across all
//                                             clients (a causal order: applied in turn to a fresh
//                                             doc they never leave anything pending)
//    "full": "<base64 Y.encodeStateAsUpdate(final doc)>",
//    "stateVector": "<base64 Y.encodeStateVector(final doc)>",
//    "expected": <view.mjs's view of the final doc>}
//
// gc is the clients' Y.Doc gc option: "on" (yjs's default), "off", or "mixed" (they differ). The final doc is client 0's after
// all clients exchanged everything; every client's view is checked to be the same, and so are the
// views of fresh docs loading "full", loading the updates one by one, and loading their merge.

import * as fs from 'node:fs'
import * as path from 'node:path'
import { fileURLToPath } from 'node:url'
import * as Y from 'yjs'
import { Rng, seedFor, standardRoots, clientIDs, randomEdit, randomText } from './gen.mjs'
import { view, canonical } from './view.mjs'

const REMOTE = Symbol('remote')

const b64 = u => Buffer.from(u).toString('base64')

/**
 * A multi-client session: docs with given IDs and gc options; every local update is recorded
 * and queued for every other client; deliver() hands a client some of its queue.
 */
class Session {
  constructor (ids, gcs) {
    this.updates = []
    this.docs = ids.map((id, i) => {
      const doc = new Y.Doc({ gc: gcs[i] })
      doc.clientID = id
      return doc
    })
    this.mailboxes = this.docs.map(() => [])
    this.docs.forEach((doc, i) => {
      doc.on('update', (u, origin) => {
        if (origin === REMOTE) return
        this.updates.push(u)
        this.mailboxes.forEach((box, j) => { if (j !== i) box.push(u) })
      })
    })
  }

  /** Applies to client i a random subset of its queue, in random order (maybe out of causal order). */
  deliverSome (rng, i) {
    const box = this.mailboxes[i]
    if (box.length === 0) return
    const n = rng.range(1, box.length)
    for (let k = 0; k < n && box.length > 0; k++) {
      const j = rng.bool(0.6) ? 0 : rng.int(box.length)
      const [u] = box.splice(j, 1)
      Y.applyUpdate(this.docs[i], u, REMOTE)
    }
  }

  /** Applies to every client all of its queue at once, merged into one update. */
  deliverMerged () {
    this.mailboxes.forEach((box, i) => {
      if (box.length > 0) Y.applyUpdate(this.docs[i], Y.mergeUpdates(box), REMOTE)
      box.length = 0
    })
  }

  /** Applies to every client all of its queue (in a random order when rng is given). */
  deliverAll (rng) {
    this.mailboxes.forEach((box, i) => {
      while (box.length > 0) {
        const j = rng ? rng.int(box.length) : 0
        const [u] = box.splice(j, 1)
        Y.applyUpdate(this.docs[i], u, REMOTE)
      }
    })
  }
}

/** Checks that the session converged and builds the fixture from client 0. */
function finish (name, seed, gcName, session, roots, thorough = true) {
  const docs = session.docs
  const want = view(docs[0], roots)
  const wantText = canonical(want)
  docs.forEach((doc, i) => {
    if (doc.store.pendingStructs !== null || doc.store.pendingDs !== null) {
      throw new Error(`${name}: client ${i} still has pending updates after the full sync`)
    }
    const got = canonical(view(doc, roots))
    if (got !== wantText) throw new Error(`${name}: client ${i} diverged:\n${got}\n${wantText}`)
  })
  const full = Y.encodeStateAsUpdate(docs[0])
  const check = (how, load) => {
    const d = new Y.Doc()
    load(d)
    const got = canonical(view(d, roots))
    if (got !== wantText) throw new Error(`${name}: a fresh doc loading ${how} differs:\n${got}\n${wantText}`)
    if (d.store.pendingStructs !== null || d.store.pendingDs !== null) {
      throw new Error(`${name}: a fresh doc loading ${how} has pending structs`)
    }
  }
  check('full', d => Y.applyUpdate(d, full))
  // (Too slow for the large document: applying 40,000 updates with formatting one by one makes
  // yjs re-scan the whole text after each, and mergeUpdates of 40,000 updates is quadratic.)
  if (thorough) check('the updates in order', d => session.updates.forEach(u => Y.applyUpdate(d, u)))
  if (thorough && session.updates.length > 0) check('the merged updates', d => Y.applyUpdate(d, Y.mergeUpdates(session.updates)))
  return {
    name,
    seed,
    gc: gcName,
    clients: docs.map(d => d.clientID),
    roots,
    updates: session.updates.map(b64),
    full: b64(full),
    stateVector: b64(Y.encodeStateVector(docs[0])),
    expected: want
  }
}

/** A random multi-client editing session. */
export function trace (name, seed) {
  const rng = new Rng(seed)
  const n = rng.range(2, 5)
  const ids = clientIDs(rng, n)
  const gcMode = rng.weighted([7, 2, 1])
  const gcs = ids.map(() => gcMode === 0 ? true : gcMode === 1 ? false : rng.bool())
  const gcName = ['on', 'off', 'mixed'][gcMode]
  const opts = {
    subdocs: rng.bool(0.1),
    hooks: rng.bool(0.15),
    exotic: rng.bool(0.25),
    typeEmbeds: rng.bool(0.1)
  }
  // Some traces lean on one root, most spread their edits.
  const weights = rng.bool(0.3) ? standardRoots.map(() => rng.range(1, 6)) : undefined
  const session = new Session(ids, gcs)
  const steps = rng.bool(0.1) ? rng.range(150, 400) : rng.range(5, 90)
  for (let s = 0; s < steps; s++) {
    const c = rng.int(n)
    randomEdit(rng, session.docs[c], standardRoots, { ...opts, weights })
    if (rng.bool(0.3)) session.deliverSome(rng, rng.int(n))
  }
  session.deliverAll(rng)
  return finish(name, seed, gcName, session, standardRoots)
}

// The large document's text holds no surrogate pairs (so its formats need no care, see
// gen.mjs formatWhole); the traces and edge cases cover them.
const typed = 'abcdefghijklmnopqrstuvwxyz     .,éß日'.split('')
const largeWords = ['lorem', 'ipsum', 'dolor', 'the', 'quick', 'brown', 'naïve', 'straße', '日本語', 'עברית', 'e\u0301']

/**
 * The large document: three clients typing (mostly at a cursor, like people do), formatting and
 * deleting text, and editing the map, the array and the XML, exchanging what they did every ~100 edits; at least
 * ops local transactions that changed something.
 */
export function large (seed, ops) {
  const rng = new Rng(seed)
  const ids = [4294967295 - rng.int(100), rng.int(1000), rng.uint32()]
  const session = new Session(ids, ids.map(() => true))
  const cursors = ids.map(() => 0)
  const opts = { hooks: true, exotic: true }
  const nonText = standardRoots.slice(1)
  let c = 0
  let burst = 0
  while (session.updates.length < ops) {
    // people type in bursts
    if (burst-- <= 0) {
      c = rng.int(ids.length)
      burst = rng.range(5, 80)
    }
    const doc = session.docs[c]
    const t = doc.getText('text')
    const r = rng.next()
    if (r < 0.88) {
      let cur = Math.min(cursors[c], t.length)
      if (rng.bool(0.02)) cur = rng.int(t.length + 1)
      const k = rng.next()
      if (k < 0.8) {
        const s = rng.bool(0.85) ? rng.pick(typed) : rng.pick(largeWords) + ' '
        t.insert(cur, s, rng.bool(0.01) ? { bold: true } : undefined)
        cur += s.length
      } else if (k < 0.98 && cur > 0) {
        const n = Math.min(cur, rng.range(1, 3))
        t.delete(cur - n, n)
        cur -= n
      } else if (t.length > 0) {
        const i = rng.int(t.length)
        t.format(i, Math.min(t.length - i, rng.range(1, 30)), rng.pick([{ bold: true }, { italic: true }, { bold: null }, { color: '#f00' }, { link: { href: 'https://example.test' } }]))
      } else {
        t.insert(0, 'start ')
      }
      cursors[c] = cur
    } else {
      randomEdit(rng, doc, nonText, opts)
    }
    if (rng.bool(0.01)) session.deliverMerged()
  }
  session.deliverMerged()
  return finish('large', seed, 'on', session, standardRoots, false)
}

/** Hand-written edge cases. */
export function edges () {
  const out = []
  const make = (name, ids, roots, script, gc = true) => {
    const session = new Session(ids, ids.map(() => gc))
    script(session.docs, () => session.deliverAll(null))
    session.deliverAll(null)
    out.push(finish(name, 0, gc ? 'on' : 'off', session, roots))
  }
  // Nothing at all: "full" is the empty update.
  make('edge-empty', [1], standardRoots, () => {})
  // A text written and then deleted entirely by the other client (an update of deletes only),
  // and a map key set and deleted.
  make('edge-only-deletes', [7, 4294967295], standardRoots, ([a, b], sync) => {
    a.getText('text').insert(0, 'all of this goes away')
    a.getMap('map').set('k', 'v')
    a.getArray('array').insert(0, [1, 2, 3])
    sync()
    b.transact(() => {
      b.getText('text').delete(0, b.getText('text').length)
      b.getMap('map').delete('k')
      b.getArray('array').delete(0, 3)
    })
  })
  // The same without gc: deleted content stays in the document.
  make('edge-only-deletes-nogc', [7, 4294967295], standardRoots, ([a, b], sync) => {
    a.getText('text').insert(0, 'all of this stays, deleted')
    a.getArray('array').insert(0, [{ x: 1 }, 'two', new Uint8Array([3])])
    sync()
    b.getText('text').delete(0, 5)
    b.getArray('array').delete(1, 2)
  }, false)
  // A doc with only a map.
  make('edge-map-only', [0, 1], [{ name: 'map', kind: 'map' }], ([a, b], sync) => {
    const m = a.getMap('map')
    m.set('s', 'string')
    m.set('n', 42)
    m.set('f', -0.125)
    m.set('big', 2 ** 53)
    m.set('neg', -(2 ** 31) - 1)
    m.set('bytes', new Uint8Array([0, 1, 2, 254, 255]))
    m.set('empty bytes', new Uint8Array(0))
    m.set('obj', { a: [1, 'two', null, true], b: { c: new Uint8Array([9]) } })
    m.set('null', null)
    m.set('undef', undefined)
    m.set('bigint', -1234567890123456789n)
    sync()
    const n = b.getMap('map')
    n.set('s', 'overwritten')
    n.delete('n')
    const nested = new Y.Map()
    nested.set('inner', new Y.Array())
    n.set('nested', nested)
    sync()
    a.getMap('map').get('nested').get('inner').push(['x', 1])
  })
  // Unicode: surrogate pairs, emoji sequences, combining characters, CJK, RTL; an insert inside
  // a surrogate pair and a delete of half of one (yjs puts U+FFFD in place of the split halves).
  make('edge-unicode', [12345, 54321], standardRoots, ([a, b], sync) => {
    const t = a.getText('text')
    t.insert(0, 'a😀b👨‍👩‍👧c e\u0301 n\u0303 日本語 עברית 𠜎 🇫🇷')
    sync()
    const u = b.getText('text')
    u.insert(2, 'X') // inside 😀
    u.insert(u.length, ' end 👍🏽')
    sync()
    t.delete(t.toString().indexOf('𠜎'), 1) // half of 𠜎
    t.format(0, 6, { bold: true })
    a.getMap('map').set('😀 key', '値 ✓')
    const el = new Y.XmlElement('p')
    el.setAttribute('title', 'ünïcödé 😀')
    const xt = new Y.XmlText()
    xt.insert(0, 'ß😀', { em: true })
    el.insert(0, [xt])
    a.getXmlFragment('xml').insert(0, [el])
  })
  // Formatting that spans several inserts, overlapping formats, removal with null, an embed
  // inside a formatted range, and formatting that is a no-op.
  make('edge-format-span', [3, 2147483648], standardRoots, ([a, b], sync) => {
    const t = a.getText('text')
    t.insert(0, 'one ')
    t.insert(4, 'two ', { italic: true })
    t.insert(8, 'three four five')
    t.insertEmbed(8, { image: 'x.png' }, { bold: true })
    sync()
    const u = b.getText('text')
    u.format(2, 12, { bold: true })
    t.format(6, 8, { color: '#f00', italic: null })
    sync()
    u.format(0, u.length, { bold: null })
    u.format(0, 3, { link: { href: 'https://example.test' } })
    t.insert(t.length, ' tail', { bold: true, italic: true })
    sync()
    u.format(0, u.length, { underline: true })
    u.format(5, 5, { underline: null })
  })
  // A very long string in one insert, and a long map value.
  make('edge-long-string', [99], standardRoots, ([a]) => {
    const rng = new Rng(99)
    let s = ''
    while (s.length < 200000) s += randomText(rng, 8) + ' '
    a.getText('text').insert(0, s)
    a.getMap('map').set('long', s.slice(0, 70000))
    a.getText('text').delete(100000, 10)
  })
  // Deep nesting of shared types and plain values.
  make('edge-deep', [4294967294, 5], standardRoots, ([a, b], sync) => {
    let m = a.getMap('map')
    for (let i = 0; i < 12; i++) {
      const next = i % 2 === 0 ? new Y.Map() : new Y.Array()
      if (m instanceof Y.Map) m.set('d' + i, next)
      else m.push([next])
      m = next
    }
    let o = 'leaf'
    for (let i = 0; i < 30; i++) o = i % 2 ? { o } : [o]
    a.getArray('array').push([o])
    sync()
    b.getMap('map').get('d0').delete('d1')
  })
  // A subdocument and an XmlHook.
  make('edge-subdoc-hook', [10, 20], standardRoots, ([a, b], sync) => {
    a.getMap('map').set('sub', new Y.Doc({ guid: 'c0ffee00-0000-4000-8000-000000000001', meta: { title: 'child' } }))
    a.getArray('array').push([new Y.Doc({ guid: 'c0ffee00-0000-4000-8000-000000000002', autoLoad: true, gc: false })])
    const h = new Y.XmlHook('mention')
    h.set('user', 'u1')
    a.getXmlFragment('xml').insert(0, [h, new Y.XmlText('after hook')])
    sync()
    b.getMap('map').set('sub', 'replaced')
  })
  return out
}

function main () {
  const args = process.argv.slice(2)
  let dir = null
  let count = 300
  let seed = 1
  let largeOps = 40000
  for (let i = 0; i < args.length; i++) {
    const a = args[i]
    const num = () => {
      const v = Number(args[++i])
      if (!Number.isInteger(v) || v < 0) throw new Error(`${a} wants a non-negative integer`)
      return v
    }
    if (a === '--count') count = num()
    else if (a === '--seed') seed = num()
    else if (a === '--large-ops') largeOps = num()
    else if (!a.startsWith('--') && dir === null) dir = a
    else throw new Error(`unknown argument ${a}`)
  }
  if (dir === null) {
    console.error('usage: node fixtures.mjs <outdir> [--count N] [--seed S] [--large-ops N]')
    process.exit(2)
  }
  fs.mkdirSync(dir, { recursive: true })
  const write = f => fs.writeFileSync(path.join(dir, f.name + '.json'), JSON.stringify(f))
  const started = Date.now()
  for (let i = 0; i < count; i++) {
    write(trace('trace-' + String(i).padStart(4, '0'), seedFor(seed, i)))
  }
  for (const f of edges()) write(f)
  if (largeOps > 0) write(large(seedFor(seed, -1), largeOps))
  console.error(`fixtures: wrote ${count} traces, the edge cases${largeOps > 0 ? ' and large.json' : ''} to ${dir} in ${Date.now() - started} ms`)
}

// Run as a script (not when imported); realpath, since the module's URL has symlinks resolved.
if (process.argv[1] && fs.realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) main()
