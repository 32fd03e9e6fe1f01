// The reference checker: real yjs behind JSON lines, for the Go codec's tests
// (internal/testkit/yjstest.Checker). Reads one request per line on stdin and writes one response per
// line on stdout, in order; a bad request gets {"error": "..."} and the checker goes on. It
// exits when stdin ends. All bytes are standard base64; roots are [{"name", "kind"}] as in the
// fixtures; VIEW is view.mjs's view.
//
//   {"op":"load","update":B,"roots":R}
//       → {"view":VIEW,"full":B,"pending":bool}   a fresh doc after Y.applyUpdate(update);
//         full = Y.encodeStateAsUpdate(doc); pending: yjs holds structs or deletes it could not
//         apply yet (missing dependencies)
//   {"op":"apply","base":B,"updates":[B...],"roots":R}
//       → {"view":VIEW,"pending":bool}             a fresh doc, base then each update applied
//         (base may be null or "": none)
//   {"op":"edit","base":B,"roots":R,"seed":S,"count":K,"clientID":C?}
//       → {"updates":[B...],"view":VIEW,"clientID":C}   a fresh doc loads base, then makes K
//         random edits (gen.mjs, seeded with S), each in its own transaction; updates holds the
//         update of each (K of them: an edit that changed nothing is replaced by another); the
//         client ID is C, or drawn from the seed; base may be null or "" (none)
//   {"op":"diff","update":B,"stateVector":B}      → {"diff": Y.diffUpdate(update, sv)}
//   {"op":"merge","updates":[B...]}               → {"merged": Y.mergeUpdates(updates)}
//   {"op":"encodeSV","update":B,"from":"update"|"doc"}
//       → {"stateVector": B}   "update" (the default): Y.encodeStateVectorFromUpdate(update);
//         "doc": Y.encodeStateVector of a fresh doc that applied the update
//
// A request may carry "id"; the response then repeats it.

import * as readline from 'node:readline'
import * as Y from 'yjs'
import { Rng, randomEdit } from './gen.mjs'
import { view } from './view.mjs'

const REMOTE = Symbol('remote')

const b64 = u => Buffer.from(u).toString('base64')

function bytes (req, field) {
  const v = req[field]
  if (typeof v !== 'string') throw new Error(`${field}: want a base64 string`)
  return new Uint8Array(Buffer.from(v, 'base64'))
}

function bytesList (req, field) {
  const v = req[field]
  if (!Array.isArray(v)) throw new Error(`${field}: want an array of base64 strings`)
  return v.map((s, i) => {
    if (typeof s !== 'string') throw new Error(`${field}[${i}]: want a base64 string`)
    return new Uint8Array(Buffer.from(s, 'base64'))
  })
}

const kinds = new Set(['text', 'map', 'array', 'xml'])

function roots (req) {
  const r = req.roots
  if (!Array.isArray(r)) throw new Error('roots: want [{"name","kind"}]')
  for (const root of r) {
    if (root === null || typeof root !== 'object' || typeof root.name !== 'string' || !kinds.has(root.kind)) {
      throw new Error(`roots: bad root ${JSON.stringify(root)} (kind is one of text, map, array, xml)`)
    }
  }
  return r
}

function integer (req, field, min, max, dflt) {
  const v = req[field]
  if (v === undefined || v === null) {
    if (dflt !== undefined) return dflt
    throw new Error(`${field}: missing`)
  }
  if (!Number.isInteger(v) || v < min || v > max) throw new Error(`${field}: want an integer in [${min}, ${max}]`)
  return v
}

/** The optional base of apply and edit: null, absent or "" mean none. */
function base (req) {
  return req.base == null || req.base === '' ? null : bytes(req, 'base')
}

const pending = doc => doc.store.pendingStructs !== null || doc.store.pendingDs !== null

const ops = {
  load (req) {
    const doc = new Y.Doc()
    Y.applyUpdate(doc, bytes(req, 'update'))
    return { view: view(doc, roots(req)), full: b64(Y.encodeStateAsUpdate(doc)), pending: pending(doc) }
  },

  apply (req) {
    const doc = new Y.Doc()
    const r = roots(req)
    const b = base(req)
    if (b !== null) Y.applyUpdate(doc, b)
    for (const u of bytesList(req, 'updates')) Y.applyUpdate(doc, u)
    return { view: view(doc, r), pending: pending(doc) }
  },

  edit (req) {
    const r = roots(req)
    const seed = integer(req, 'seed', -(2 ** 53), 2 ** 53)
    const count = integer(req, 'count', 0, 1000000)
    const rng = new Rng(seed)
    const doc = new Y.Doc()
    const drawn = rng.uint32()
    doc.clientID = integer(req, 'clientID', 0, 4294967295, drawn)
    const b = base(req)
    if (b !== null) Y.applyUpdate(doc, b, REMOTE)
    const updates = []
    doc.on('update', (u, origin) => { if (origin !== REMOTE) updates.push(b64(u)) })
    const opts = { hooks: true, subdocs: true, exotic: true }
    let tries = 0
    while (updates.length < count) {
      if (++tries > 20 * count + 100) throw new Error(`edit: ${tries} edits made only ${updates.length} updates`)
      randomEdit(rng, doc, r, opts)
    }
    return { updates, view: view(doc, r), clientID: doc.clientID }
  },

  diff (req) {
    return { diff: b64(Y.diffUpdate(bytes(req, 'update'), bytes(req, 'stateVector'))) }
  },

  merge (req) {
    return { merged: b64(Y.mergeUpdates(bytesList(req, 'updates'))) }
  },

  encodeSV (req) {
    const u = bytes(req, 'update')
    switch (req.from ?? 'update') {
      case 'update':
        return { stateVector: b64(Y.encodeStateVectorFromUpdate(u)) }
      case 'doc': {
        const doc = new Y.Doc()
        Y.applyUpdate(doc, u)
        return { stateVector: b64(Y.encodeStateVector(doc)) }
      }
      default:
        throw new Error('from: want "update" or "doc"')
    }
  }
}

function handle (line) {
  let req
  try {
    req = JSON.parse(line)
  } catch (e) {
    return { error: `bad JSON: ${e.message}` }
  }
  if (req === null || typeof req !== 'object' || Array.isArray(req)) return { error: 'a request is a JSON object' }
  const op = Object.hasOwn(ops, req.op) ? ops[req.op] : null
  let res
  if (op === null) {
    res = { error: `unknown op ${JSON.stringify(req.op)} (load, apply, edit, diff, merge, encodeSV)` }
  } else {
    try {
      res = op(req)
    } catch (e) {
      res = { error: `${req.op}: ${e && e.message ? e.message : String(e)}` }
    }
  }
  if (req.id !== undefined) res.id = req.id
  return res
}

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity })
for await (const line of rl) {
  if (line.trim() === '') continue
  let out
  try {
    out = JSON.stringify(handle(line))
  } catch (e) {
    out = JSON.stringify({ error: `cannot encode the response: ${e.message}` })
  }
  // Wait for the pipe when it is full, so that large responses keep their order and memory stays
  // bounded.
  if (!process.stdout.write(out + '\n')) await new Promise(resolve => process.stdout.once('drain', resolve))
}
