// Deterministic random editing of Y.Docs, shared by fixtures.mjs, check.mjs and bench.mjs.
// Everything random comes from an Rng seeded by the caller (never Math.random), and everything
// yjs would otherwise pick at random is set from it too (client IDs, subdocument guids), so a
// seed gives the same updates byte for byte.

import * as Y from 'yjs'

/** Rng is mulberry32: a small 32-bit PRNG, good enough for test data. */
export class Rng {
  constructor (seed) {
    this.state = seed >>> 0
  }

  /** @return {number} uniform in [0, 1) */
  next () {
    this.state = (this.state + 0x6d2b79f5) >>> 0
    let z = this.state
    z = Math.imul(z ^ (z >>> 15), z | 1)
    z ^= z + Math.imul(z ^ (z >>> 7), z | 61)
    return ((z ^ (z >>> 14)) >>> 0) / 4294967296
  }

  /** @return {number} an integer in [0, n) */
  int (n) {
    return Math.floor(this.next() * n)
  }

  /** @return {number} an integer in [lo, hi] */
  range (lo, hi) {
    return lo + this.int(hi - lo + 1)
  }

  bool (p = 0.5) {
    return this.next() < p
  }

  pick (a) {
    return a[this.int(a.length)]
  }

  uint32 () {
    return this.int(4294967296)
  }

  /** Picks an index by weights. */
  weighted (weights) {
    let total = 0
    for (const w of weights) total += w
    let x = this.next() * total
    for (let i = 0; i < weights.length; i++) {
      x -= weights[i]
      if (x < 0) return i
    }
    return weights.length - 1
  }
}

/** Mixes a base seed and an index into a new 32-bit seed (a splitmix-style hash). */
export function seedFor (base, i) {
  let z = (Math.imul(base >>> 0, 0x9e3779b1) + Math.imul(i + 1, 0x85ebca6b)) >>> 0
  z = Math.imul(z ^ (z >>> 16), 0x7feb352d) >>> 0
  z = Math.imul(z ^ (z >>> 15), 0x846ca68b) >>> 0
  return (z ^ (z >>> 16)) >>> 0
}

/** The roots of every generated trace. */
export const standardRoots = [
  { name: 'text', kind: 'text' },
  { name: 'map', kind: 'map' },
  { name: 'array', kind: 'array' },
  { name: 'xml', kind: 'xml' }
]

/** Returns the shared type of a root. */
export function rootType (doc, { name, kind }) {
  switch (kind) {
    case 'text': return doc.getText(name)
    case 'map': return doc.getMap(name)
    case 'array': return doc.getArray(name)
    case 'xml': return doc.getXmlFragment(name)
  }
  throw new Error(`unknown root kind ${JSON.stringify(kind)}`)
}

/**
 * Client IDs: distinct, a mix of small ones, ones around 2^31 and near 2^32-1, and random
 * uint32s (what yjs itself picks).
 */
export function clientIDs (rng, n) {
  const out = new Set()
  while (out.size < n) {
    switch (rng.weighted([4, 2, 1, 2])) {
      case 0: out.add(rng.uint32()); break
      case 1: out.add(4294967295 - rng.int(300)); break
      case 2: out.add(2147483646 + rng.int(4)); break
      case 3: out.add(rng.int(300)); break
    }
  }
  return [...out]
}

/** A guid for a subdocument (yjs would use a random uuid). */
export function guid (rng) {
  const hex = n => Array.from({ length: n }, () => rng.int(16).toString(16)).join('')
  return `${hex(8)}-${hex(4)}-4${hex(3)}-${hex(4)}-${hex(12)}`
}

const asciiWords = ['lorem', 'ipsum', 'dolor', 'sit', 'amet', 'the', 'quick', 'brown', 'fox',
  'jumps', 'over', 'lazy', 'dog', 'a', 'I', 'yjs', 'crdt', 'go', 'server', 'x', 'hello', 'world']
const unicodeWords = ['héllo', 'naïve', 'straße', '日本語', 'テキスト', '😀', '👍🏽', '👨‍👩‍👧',
  'e\u0301', 'n\u0303o', 'עברית', 'مرحبا', '𝔘𝔫𝔦𝔠𝔬𝔡𝔢', '🇫🇷', 'Ω≈ç√', '\u200b', '𠜎𠜱']

/** Random text: words (some non-ASCII, emoji with surrogate pairs), spaces, newlines. */
export function randomText (rng, maxWords = 3) {
  const n = rng.range(1, maxWords)
  let s = ''
  for (let i = 0; i < n; i++) {
    if (i > 0) s += rng.bool(0.1) ? '\n' : ' '
    s += rng.bool(0.2) ? rng.pick(unicodeWords) : rng.pick(asciiWords)
  }
  return s
}

const formats = [
  { bold: true }, { italic: true }, { color: '#f00' }, { bold: null }, { italic: null },
  { color: null }, { underline: true }, { size: 12 }, { link: { href: 'https://example.test/a' } },
  { code: true }, { script: 'sub' }
]

export function randomAttributes (rng) {
  const attrs = {}
  const n = rng.range(1, 2)
  for (let i = 0; i < n; i++) Object.assign(attrs, rng.pick(formats))
  return attrs
}

/** Attributes without null values (what insert and format should add). */
function positiveAttributes (rng) {
  const a = randomAttributes(rng)
  for (const k of Object.keys(a)) if (a[k] === null) a[k] = true
  return a
}

function randomBytes (rng, max = 16) {
  const b = new Uint8Array(rng.int(max + 1))
  for (let i = 0; i < b.length; i++) b[i] = rng.int(256)
  return b
}

const specialNumbers = [0, -0, 1, -1, 0.5, 0.1, -2.75, 1e21, 1.5e-7, 123456.789, 2 ** 31 - 1, 2 ** 31,
  -(2 ** 31), -(2 ** 31) - 1, 2 ** 32, 2 ** 32 - 1, 2 ** 40 + 3, 2 ** 53 - 1, 2 ** 53, -(2 ** 53 - 1),
  2 ** 60, 1e15 + 1, 3.4028234663852886e38, 5e-324, Number.MAX_VALUE, 0.30000000000000004]

/** A random JSON-ish number: small ints, negatives, floats, big ints, edge values. */
export function randomNumber (rng) {
  switch (rng.weighted([4, 2, 3, 3])) {
    case 0: return rng.range(-1000, 1000)
    case 1: return rng.range(-2147483648, 2147483647)
    case 2: return (rng.next() - 0.5) * 10 ** rng.range(-3, 12)
    default: return rng.pick(specialNumbers)
  }
}

const mapKeys = ['k0', 'k1', 'k2', 'k3', 'k4', 'k5', 'k6', 'k7', 'title', 'count', '',
  'ключ', '😀', 'a.b', 'with space', '1', '10', '2']

/** A random plain (non-shared) value: what Y.Map.set and Y.Array.insert store as ContentAny. */
export function randomPlain (rng, depth = 0, opts = {}) {
  const w = [5, 5, 2, 2, 2, depth < 2 ? 2 : 0, depth < 2 ? 2 : 0, 2, opts.exotic ? 1 : 0]
  switch (rng.weighted(w)) {
    case 0: return rng.bool(0.1) ? '' : randomText(rng)
    case 1: return randomNumber(rng)
    case 2: return rng.bool()
    case 3: return null
    case 4: return rng.bool(0.5) ? rng.range(-5, 5) : randomText(rng, 1)
    case 5: {
      const o = {}
      const n = rng.int(4)
      for (let i = 0; i < n; i++) o[rng.pick(mapKeys)] = randomPlain(rng, depth + 1, opts)
      return o
    }
    case 6: {
      const n = rng.int(4)
      return Array.from({ length: n }, () => randomPlain(rng, depth + 1, opts))
    }
    case 7: return randomBytes(rng)
    default:
      switch (rng.int(5)) {
        case 0: return undefined
        case 1: return BigInt(rng.range(-1000000, 1000000)) * 10000000000n
        case 2: return rng.pick([NaN, Infinity, -Infinity])
        case 3: return rng.pick([-(2n ** 63n), 2n ** 63n - 1n, 0n])
        default: return rng.pick(specialNumbers)
      }
  }
}

const nodeNames = ['p', 'div', 'h1', 'span', 'UL', 'li', 'blockquote', 'my-node', 'Para']
const attrNames = ['class', 'id', 'href', 'data-x', 'style', 'a', 'B']

function randomAttrValue (rng) {
  switch (rng.weighted([6, 1, 1])) {
    case 0: return rng.pick(['x', 'main', '', 'a b', '1', 'ünï', '"q"', '<&>'])
    case 1: return rng.range(-5, 100)
    default: return rng.bool()
  }
}

/** A new (preliminary) XmlElement, maybe with attributes and children. */
function newXmlElement (rng, depth) {
  const el = new Y.XmlElement(rng.pick(nodeNames))
  const nAttrs = rng.int(3)
  for (let i = 0; i < nAttrs; i++) el.setAttribute(rng.pick(attrNames), randomAttrValue(rng))
  if (depth < 3) {
    const n = rng.int(3)
    const kids = []
    for (let i = 0; i < n; i++) kids.push(rng.bool(0.5) ? newXmlText(rng) : newXmlElement(rng, depth + 1))
    if (kids.length > 0) el.insert(0, kids)
  }
  return el
}

function newXmlText (rng) {
  const t = new Y.XmlText()
  t.insert(0, randomText(rng), rng.bool(0.4) ? positiveAttributes(rng) : undefined)
  if (rng.bool(0.2)) t.insert(0, randomText(rng), positiveAttributes(rng))
  return t
}

function newXmlHook (rng) {
  const h = new Y.XmlHook(rng.pick(['mention', 'widget', 'image']))
  h.set('id', rng.range(1, 999))
  if (rng.bool()) h.set('label', randomText(rng, 1))
  return h
}

/** A new (preliminary) shared type with some content. */
function newSharedType (rng, depth, opts) {
  switch (rng.weighted([4, 4, 4, 1, 1])) {
    case 0: {
      const m = new Y.Map()
      const n = rng.int(3)
      for (let i = 0; i < n; i++) m.set(rng.pick(mapKeys), randomValue(rng, depth + 1, opts))
      return m
    }
    case 1: {
      const a = new Y.Array()
      const n = rng.int(4)
      if (n > 0) a.insert(0, Array.from({ length: n }, () => arrayElement(randomValue(rng, depth + 1, opts))))
      return a
    }
    case 2: {
      const t = new Y.Text()
      if (rng.bool(0.8)) t.insert(0, randomText(rng), rng.bool(0.3) ? positiveAttributes(rng) : undefined)
      return t
    }
    case 3: {
      const f = new Y.XmlFragment()
      f.insert(0, [newXmlElement(rng, 2)])
      return f
    }
    default:
      return rng.bool() ? newXmlElement(rng, 2) : newXmlHook(rng)
  }
}

/** A new subdocument with a guid from rng. */
function newSubdoc (rng) {
  const o = { guid: guid(rng) }
  if (rng.bool(0.3)) o.autoLoad = true
  if (rng.bool(0.2)) o.gc = false
  if (rng.bool(0.3)) o.meta = { title: randomText(rng, 2), n: rng.int(10) }
  return new Y.Doc(o)
}

/**
 * A random value for a map or an array: mostly plain values, sometimes a nested shared type
 * (depth < 2), sometimes a subdocument (opts.subdocs).
 */
export function randomValue (rng, depth = 0, opts = {}) {
  if (opts.subdocs && depth === 0 && rng.bool(0.04)) return newSubdoc(rng)
  if (depth < 2 && rng.bool(depth === 0 ? 0.22 : 0.1)) return newSharedType(rng, depth, opts)
  return randomPlain(rng, depth, opts)
}

// ---- edits of existing shared types ----------------------------------------------------

/** An index inside a Y.Text; with surrogate pairs it may fall inside a pair (yjs copes). */
function textIndex (rng, t) {
  return rng.int(t.length + 1)
}

/** The text of t with every embed as U+E000: one UTF-16 unit per index of t. */
export function flatText (t) {
  let s = ''
  for (const op of t.toDelta()) s += typeof op.insert === 'string' ? op.insert : '\ue000'
  return s
}

const isHigh = c => c >= 0xd800 && c <= 0xdbff
const isLow = c => c >= 0xdc00 && c <= 0xdfff

/**
 * Formats [start, end) of t, widened so that neither end falls inside a surrogate pair of s
 * (flatText(t), or t.toString() when t holds no embeds). This avoids a yjs 13.6 divergence: a
 * format splits the items at both ends, and splitting inside a surrogate pair replaces both
 * halves with U+FFFD; when the format then changes nothing (bold on bold text, bold: null on
 * plain text) the transaction emits no update, so only the local replica was changed, for good.
 * Inserts and deletes inside pairs are fine: their updates make every replica split the same way.
 */
export function formatWhole (t, s, start, end, attrs) {
  const inside = k => k > 0 && k < s.length && isHigh(s.charCodeAt(k - 1)) && isLow(s.charCodeAt(k))
  if (inside(start)) start--
  if (inside(end)) end++
  if (end > start) t.format(start, end - start, attrs)
}

/** One random edit of a Y.Text (or Y.XmlText). */
export function editText (rng, t, opts = {}) {
  const len = t.length
  const op = len === 0 ? 0 : rng.weighted([8, 4, 4, 2, opts.typeEmbeds ? 0.3 : 0, 1, 1])
  switch (op) {
    case 0: {
      const attrs = rng.bool(0.35) ? randomAttributes(rng) : undefined
      t.insert(textIndex(rng, t), randomText(rng), attrs)
      return
    }
    case 1: {
      const i = rng.int(len)
      t.delete(i, Math.min(len - i, rng.range(1, 8)))
      return
    }
    case 2: {
      const i = rng.int(len)
      formatWhole(t, flatText(t), i, Math.min(len, i + rng.range(1, 20)), randomAttributes(rng))
      return
    }
    case 3: {
      const embed = rng.bool(0.7)
        ? { image: `img${rng.int(100)}.png`, width: rng.range(1, 800) }
        : { formula: randomText(rng, 1), inline: rng.bool() }
      t.insertEmbed(textIndex(rng, t), embed, rng.bool(0.3) ? positiveAttributes(rng) : undefined)
      return
    }
    case 4: {
      const m = new Y.Map()
      m.set('kind', 'widget')
      m.set('n', rng.int(10))
      t.insertEmbed(textIndex(rng, t), m)
      return
    }
    case 5: {
      // an emoji (a surrogate pair) right next to or inside another one
      t.insert(textIndex(rng, t), rng.pick(['😀', '👍🏽', '𠜎', '🇫🇷', '\ud83d\ude80x']))
      return
    }
    default: {
      // a deletion of one UTF-16 unit, maybe half of a surrogate pair
      t.delete(rng.int(len), 1)
    }
  }
}

/**
 * Y.Array.insert takes neither undefined nor a bigint as an element (yjs throws; inside a plain
 * object or in a Y.Map both are fine): they become null and a string there.
 */
function arrayElement (v) {
  if (v === undefined) return null
  if (typeof v === 'bigint') return v.toString()
  return v
}

/** Shared types directly inside a map or an array (to edit them in place). */
function nestedTypes (values) {
  return values.filter(v => v instanceof Y.AbstractType)
}

export function editMap (rng, m, depth, opts) {
  const keys = [...m.keys()]
  const nested = depth < 3 ? nestedTypes([...m.values()]) : []
  const op = rng.weighted([6, keys.length > 0 ? 2 : 0, nested.length > 0 ? 3 : 0])
  switch (op) {
    case 0: m.set(rng.pick(mapKeys), randomValue(rng, depth, opts)); return
    case 1: m.delete(rng.pick(keys)); return
    default: editType(rng, rng.pick(nested), depth + 1, opts)
  }
}

export function editArray (rng, a, depth, opts) {
  const len = a.length
  const nested = depth < 3 ? nestedTypes(a.toArray()) : []
  const values = () => Array.from({ length: rng.range(1, 3) }, () => arrayElement(randomValue(rng, depth, opts)))
  const op = len === 0 ? rng.weighted([1, 1, 1]) : rng.weighted([4, 2, 2, 3, nested.length > 0 ? 3 : 0])
  switch (op) {
    case 0: a.insert(rng.int(len + 1), values()); return
    case 1: a.push(values()); return
    case 2: a.unshift(values()); return
    case 3: {
      const i = rng.int(len)
      a.delete(i, Math.min(len - i, rng.range(1, 3)))
      return
    }
    default: editType(rng, rng.pick(nested), depth + 1, opts)
  }
}

/** Every element, text and hook under an XML container, depth first. */
function xmlNodes (container, out = []) {
  for (const child of container.toArray()) {
    out.push(child)
    if (child instanceof Y.XmlElement) xmlNodes(child, out)
  }
  return out
}

export function editXml (rng, frag, opts) {
  const nodes = xmlNodes(frag)
  const elements = nodes.filter(n => n instanceof Y.XmlElement)
  const texts = nodes.filter(n => n instanceof Y.XmlText)
  const containers = [frag, ...elements]
  const withKids = containers.filter(c => c.length > 0)
  const op = rng.weighted([5, withKids.length > 0 ? 2 : 0, elements.length > 0 ? 3 : 0,
    texts.length > 0 ? 6 : 0, opts.hooks ? 0.5 : 0])
  switch (op) {
    case 0: {
      const parent = rng.pick(containers)
      const node = rng.bool(0.55) ? newXmlElement(rng, 1) : newXmlText(rng)
      parent.insert(rng.int(parent.length + 1), [node])
      return
    }
    case 1: {
      const parent = rng.pick(withKids)
      const i = rng.int(parent.length)
      parent.delete(i, Math.min(parent.length - i, rng.range(1, 2)))
      return
    }
    case 2: {
      const el = rng.pick(elements)
      const names = Object.keys(el.getAttributes())
      if (names.length > 0 && rng.bool(0.3)) el.removeAttribute(rng.pick(names))
      else el.setAttribute(rng.pick(attrNames), randomAttrValue(rng))
      return
    }
    case 3: editText(rng, rng.pick(texts), opts); return
    default: {
      const parent = rng.pick(containers)
      parent.insert(rng.int(parent.length + 1), [newXmlHook(rng)])
    }
  }
}

/** One random edit of any shared type. */
export function editType (rng, t, depth, opts) {
  if (t instanceof Y.XmlHook) return editMap(rng, t, depth, opts)
  if (t instanceof Y.Text) return editText(rng, t, opts) // Y.XmlText too
  if (t instanceof Y.XmlFragment) return editXml(rng, t, opts) // Y.XmlElement too
  if (t instanceof Y.Map) return editMap(rng, t, depth, opts)
  if (t instanceof Y.Array) return editArray(rng, t, depth, opts)
  throw new Error('editType: unknown shared type')
}

/**
 * One random edit of one of the roots, in its own transaction (so a local edit emits at most
 * one update). opts: subdocs, hooks, exotic (undefined, bigint, NaN values), typeEmbeds (shared
 * types embedded in text), weights (per root, default equal).
 */
export function randomEdit (rng, doc, roots, opts = {}) {
  const root = roots[opts.weights ? rng.weighted(opts.weights) : rng.int(roots.length)]
  doc.transact(() => editType(rng, rootType(doc, root), 0, opts))
}
