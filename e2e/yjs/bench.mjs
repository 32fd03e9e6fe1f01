// yjs timings on this machine, for comparison with the Go codec's benchmarks:
//
//   node --expose-gc bench.mjs [--runs N] [--write <dir>] [--inputs-only]
//
// prints one JSON object (see report below). Every input comes from fixed seeds; --write <dir>
// also writes them so the Go benchmarks use exactly the same bytes (internal/testkit/yjstest.BenchInputs):
//   manifest.json       what the files are (and their sizes, counts and seeds)
//   original.txt        replace1MiB: the ~1 MiB text (UTF-8)
//   edited.txt          replace1MiB: the text after a few hundred scattered edits
//   original.update     replace1MiB: Y.encodeStateAsUpdate of the doc holding original.txt in
//                       the Y.Text "text" (client 1), the doc the diff is applied to
//   apply10k.json       apply10k: a JSON array of 10,000 base64 updates, in order, each one
//                       typed character (client 2)
//   doc60k.update       loadEncode60k: the full update of a 60,000-transaction document
//   doc1k.update        memPerDoc: the full update of a 1,000-transaction document
// --inputs-only writes them and measures nothing. Without --expose-gc the script runs itself
// again with it.
//
// Benchmarks (each the median of --runs runs, default 7, at least 5):
//   replace1MiB       a server replacing the text: ytext.toString(), lib0 simpleDiffString on
//                     each changed line (the edits keep the line structure), the deletes and
//                     inserts in one transaction, and the v1 update it emits (encoding included)
//   replace1MiBWhole  the same with one simpleDiffString on the whole string (one big replace:
//                     from the first to the last changed character)
//   apply10k          Y.applyUpdate of the 10,000 updates, one by one, into a fresh doc
//   loadEncode60k     Y.applyUpdate of doc60k.update into a fresh doc + Y.encodeStateAsUpdate
//   memPerDoc         heap bytes per doc: 200 fresh docs each loading doc1k.update, measured with
//                     global.gc() before and after (docs kept alive), divided by 200

import * as fs from 'node:fs'
import * as path from 'node:path'
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import * as Y from 'yjs'
import { simpleDiffString } from 'lib0/diff'
import { Rng } from './gen.mjs'

const here = path.dirname(fileURLToPath(import.meta.url))

if (typeof global.gc !== 'function') {
  const r = spawnSync(process.execPath, ['--expose-gc', fileURLToPath(import.meta.url), ...process.argv.slice(2)], { stdio: 'inherit' })
  process.exit(r.status ?? 1)
}

const args = process.argv.slice(2)
let runs = 7
let writeDir = null
let inputsOnly = false
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--runs') runs = Math.max(5, Number(args[++i]) | 0)
  else if (args[i] === '--write') writeDir = args[++i]
  else if (args[i] === '--inputs-only') inputsOnly = true
  else {
    console.error('usage: node --expose-gc bench.mjs [--runs N] [--write <dir>] [--inputs-only]')
    process.exit(2)
  }
}
if (inputsOnly && writeDir === null) {
  console.error('bench: --inputs-only needs --write <dir>')
  process.exit(2)
}

const b64 = u => Buffer.from(u).toString('base64')

// ---- inputs ------------------------------------------------------------------------------

const words = ['lorem', 'ipsum', 'dolor', 'sit', 'amet', 'consectetur', 'adipiscing', 'elit', 'sed',
  'do', 'eiusmod', 'tempor', 'incididunt', 'ut', 'labore', 'et', 'dolore', 'magna', 'aliqua',
  'the', 'quick', 'brown', 'fox', 'jumps', 'over', 'lazy', 'dog', 'café', 'naïve', 'Straße']

function sentence (rng) {
  const n = rng.range(6, 18)
  const w = []
  for (let i = 0; i < n; i++) w.push(rng.pick(words))
  w[0] = w[0][0].toUpperCase() + w[0].slice(1)
  return w.join(' ') + '.'
}

/** ~1 MiB of paragraphs (UTF-16 length 1,048,576 or a little more). */
function originalText () {
  const rng = new Rng(1001)
  const paras = []
  let len = 0
  while (len < 1048576) {
    const n = rng.range(2, 8)
    const s = []
    for (let i = 0; i < n; i++) s.push(sentence(rng))
    const p = s.join(' ')
    paras.push(p)
    len += p.length + 1
  }
  return paras.join('\n')
}

/** 300 scattered edits that keep the lines: replace, insert or delete a word. */
function editedText (text) {
  const rng = new Rng(1002)
  const lines = text.split('\n')
  for (let e = 0; e < 300; e++) {
    const li = rng.int(lines.length)
    const w = lines[li].split(' ')
    const wi = rng.int(w.length)
    switch (rng.int(3)) {
      case 0: w[wi] = rng.pick(words).toUpperCase(); break
      case 1: w.splice(wi, 0, rng.pick(words), rng.pick(words)); break
      default: if (w.length > 1) w.splice(wi, 1)
    }
    lines[li] = w.join(' ')
  }
  return lines.join('\n')
}

/** The doc holding text, written paragraph by paragraph (client 1). */
function textDoc (text) {
  const doc = new Y.Doc()
  doc.clientID = 1
  const t = doc.getText('text')
  let at = 0
  for (const p of text.split('\n')) {
    const s = at === 0 ? p : '\n' + p
    t.insert(at, s)
    at += s.length
  }
  return Y.encodeStateAsUpdate(doc)
}

/** 10,000 updates of someone typing (client 2): mostly at a cursor, sometimes elsewhere. */
function typing () {
  const rng = new Rng(1003)
  const doc = new Y.Doc()
  doc.clientID = 2
  const t = doc.getText('text')
  const updates = []
  doc.on('update', u => updates.push(u))
  let cur = 0
  const chars = 'abcdefghijklmnopqrstuvwxyz      .,\n'
  while (updates.length < 10000) {
    if (rng.bool(0.02)) cur = rng.int(t.length + 1)
    t.insert(cur, chars[rng.int(chars.length)])
    cur++
  }
  return updates
}

/**
 * A document made of n transactions (client 3): typing with some deletes and formatting, map
 * sets and array inserts and deletes. Returns its full update.
 */
function editedDoc (n, seed) {
  const rng = new Rng(seed)
  const doc = new Y.Doc()
  doc.clientID = 3
  const t = doc.getText('text')
  const m = doc.getMap('map')
  const a = doc.getArray('array')
  let count = 0
  doc.on('update', () => count++)
  let cur = 0
  while (count < n) {
    const r = rng.next()
    if (r < 0.8) {
      if (rng.bool(0.02)) cur = rng.int(t.length + 1)
      cur = Math.min(cur, t.length)
      const k = rng.next()
      if (k < 0.85) {
        const s = rng.bool(0.9) ? 'abcdefghijklmnopqrstuvwxyz   .'[rng.int(30)] : rng.pick(words) + ' '
        t.insert(cur, s)
        cur += s.length
      } else if (k < 0.97 && cur > 0) {
        const d = Math.min(cur, rng.range(1, 4))
        t.delete(cur - d, d)
        cur -= d
      } else if (t.length > 0) {
        const i = rng.int(t.length)
        t.format(i, Math.min(t.length - i, rng.range(1, 20)), rng.pick([{ bold: true }, { italic: true }, { bold: null }]))
      }
    } else if (r < 0.9) {
      m.set('k' + rng.int(50), rng.bool() ? rng.pick(words) : { n: rng.int(1000), tags: [rng.pick(words)] })
    } else if (a.length > 0 && rng.bool(0.3)) {
      a.delete(rng.int(a.length), 1)
    } else {
      a.insert(rng.int(a.length + 1), [rng.int(1e6)])
    }
  }
  return Y.encodeStateAsUpdate(doc)
}

const started = Date.now()
const original = originalText()
const edited = editedText(original)
const originalUpdate = textDoc(original)
const typed = typing()
const doc60k = editedDoc(60000, 1004)
const doc1k = editedDoc(1000, 1005)
const inputsMs = Date.now() - started

if (writeDir !== null) {
  fs.mkdirSync(writeDir, { recursive: true })
  const w = (f, data) => fs.writeFileSync(path.join(writeDir, f), data)
  w('original.txt', original)
  w('edited.txt', edited)
  w('original.update', originalUpdate)
  w('apply10k.json', JSON.stringify(typed.map(b64)))
  w('doc60k.update', doc60k)
  w('doc1k.update', doc1k)
  w('manifest.json', JSON.stringify({
    'original.txt': { utf16Length: original.length, seed: 1001 },
    'edited.txt': { utf16Length: edited.length, edits: 300, seed: 1002 },
    'original.update': { bytes: originalUpdate.length, root: 'text', kind: 'text', clientID: 1 },
    'apply10k.json': { updates: typed.length, root: 'text', kind: 'text', clientID: 2, seed: 1003 },
    'doc60k.update': { bytes: doc60k.length, transactions: 60000, clientID: 3, seed: 1004, roots: rootsOfEditedDoc() },
    'doc1k.update': { bytes: doc1k.length, transactions: 1000, clientID: 3, seed: 1005, roots: rootsOfEditedDoc() }
  }, null, 2) + '\n')
  console.error(`bench: wrote the inputs to ${writeDir} (${inputsMs} ms)`)
}
if (inputsOnly) process.exit(0)

function rootsOfEditedDoc () {
  return [{ name: 'text', kind: 'text' }, { name: 'map', kind: 'map' }, { name: 'array', kind: 'array' }]
}

// ---- measurements ------------------------------------------------------------------------------

const median = xs => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

/**
 * Runs measure (which sets up untimed and returns the ns of its timed part) runs times after
 * one warm-up run.
 */
function bench (ops, measure, extra = {}) {
  measure()
  const samples = []
  for (let i = 0; i < runs; i++) {
    global.gc()
    samples.push(measure())
  }
  const med = median(samples)
  return { runs, ops, medianNs: Math.round(med), nsPerOp: Math.round(med / ops), samplesNs: samples.map(Math.round), ...extra }
}

const now = () => process.hrtime.bigint()
const freshDoc = update => {
  const doc = new Y.Doc()
  Y.applyUpdate(doc, update)
  return doc
}

/** Replaces the text of doc's "text" with next; returns the emitted update. */
function replacePerLine (doc, next) {
  const t = doc.getText('text')
  let update = null
  const onUpdate = u => { update = u }
  doc.on('update', onUpdate)
  const cur = t.toString()
  const a = cur.split('\n')
  const b = next.split('\n')
  doc.transact(() => {
    if (a.length !== b.length) {
      const d = simpleDiffString(cur, next)
      t.delete(d.index, d.remove)
      t.insert(d.index, d.insert)
      return
    }
    let at = 0 // where line i starts in the text as changed so far
    for (let i = 0; i < a.length; i++) {
      if (a[i] !== b[i]) {
        const d = simpleDiffString(a[i], b[i])
        if (d.remove > 0) t.delete(at + d.index, d.remove)
        if (d.insert.length > 0) t.insert(at + d.index, d.insert)
      }
      at += b[i].length + 1
    }
  })
  doc.off('update', onUpdate)
  return update
}

function replaceWhole (doc, next) {
  const t = doc.getText('text')
  let update = null
  const onUpdate = u => { update = u }
  doc.on('update', onUpdate)
  const d = simpleDiffString(t.toString(), next)
  doc.transact(() => {
    if (d.remove > 0) t.delete(d.index, d.remove)
    if (d.insert.length > 0) t.insert(d.index, d.insert)
  })
  doc.off('update', onUpdate)
  return update
}

function replaceBench (replace) {
  let updateBytes = 0
  const r = bench(1, () => {
    const doc = freshDoc(originalUpdate)
    const t0 = now()
    const u = replace(doc, edited)
    const ns = Number(now() - t0)
    if (doc.getText('text').toString() !== edited) throw new Error('bench: the replaced text differs from edited.txt')
    updateBytes = u.length
    return ns
  }, {})
  return { ...r, textUtf16Length: original.length, updateBytes }
}

const results = {}
results.replace1MiB = { method: 'lib0/diff simpleDiffString per changed line, one transaction', ...replaceBench(replacePerLine) }
results.replace1MiBWhole = { method: 'lib0/diff simpleDiffString on the whole string, one transaction', ...replaceBench(replaceWhole) }
results.apply10k = bench(typed.length, () => {
  const doc = new Y.Doc()
  const t0 = now()
  for (const u of typed) Y.applyUpdate(doc, u)
  return Number(now() - t0)
}, { note: 'ops = updates applied' })
results.loadEncode60k = bench(1, () => {
  const t0 = now()
  const doc = freshDoc(doc60k)
  Y.encodeStateAsUpdate(doc)
  return Number(now() - t0)
}, { updateBytes: doc60k.length })

const memSamples = []
for (let i = 0; i < Math.max(5, Math.min(runs, 7)); i++) {
  global.gc()
  const before = process.memoryUsage().heapUsed
  const docs = []
  for (let k = 0; k < 200; k++) {
    const d = freshDoc(doc1k)
    d.getText('text')
    d.getMap('map')
    d.getArray('array')
    docs.push(d)
  }
  global.gc()
  const after = process.memoryUsage().heapUsed
  memSamples.push((after - before) / docs.length)
  docs.length = 0
}
results.memPerDoc = {
  runs: memSamples.length,
  docs: 200,
  bytesPerDoc: Math.round(median(memSamples)),
  samplesBytesPerDoc: memSamples.map(Math.round),
  updateBytes: doc1k.length
}

const version = pkg => JSON.parse(fs.readFileSync(path.join(here, 'node_modules', pkg, 'package.json'), 'utf8')).version
console.log(JSON.stringify({
  node: process.version,
  yjs: version('yjs'),
  lib0: version('lib0'),
  inputsMs,
  results
}, null, 2))
