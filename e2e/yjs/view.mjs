// The VIEW of a Y.Doc: what a document looks like through the yjs API, as JSON, so that the Go
// codec (internal/yjs) can be compared with real yjs. fixtures.mjs, check.mjs and client.mjs all
// use this one function; internal/testkit/yjstest (View, ViewEqual) reads it and the Go side mirrors it.
//
//   view(doc, roots) = {
//     "json":  { <name>: ..., ... },   one entry per root, by its kind (below)
//     "delta": { <name>: [...], ... }, one entry per root of kind "text" only
//     "stateVector": { "<clientID>": <clock>, ... }  Y.encodeStateVector, decoded; keys are
//                                      decimal client IDs, values the next expected clock
//   }
//
// roots is [{ name, kind }] with kind one of
//   "text"  doc.getText(name):        json = ytext.toString()  (a string: only the text of
//                                     ContentString items; embeds and formats are left out),
//                                     delta = ytext.toDelta()  ([{insert, attributes?}]; insert
//                                     is a string, or an embed: the embedded object as given to
//                                     insertEmbed, or an embedded shared type as {"$type": ...})
//   "map"   doc.getMap(name):         json = ymap.toJSON()    (an object)
//   "array" doc.getArray(name):       json = yarray.toJSON()  (an array)
//   "xml"   doc.getXmlFragment(name): json = yxml.toString()  (a string, see below)
//
// Inside map/array toJSON (and inside delta inserts and attributes) every value is made
// JSON-safe by safe() below; a Go mirror must produce exactly these shapes:
//   string, boolean, null        as is
//   finite number                as is (JSON.stringify: -0 becomes 0, integers print without a
//                                fraction up to 1e21, then 1e+21; 1.5e-7 style for small ones)
//   NaN, Infinity, -Infinity     {"$number": "NaN" | "Infinity" | "-Infinity"}
//   undefined                    {"$undefined": true}   (yjs stores it: lib0 writeAny type 127)
//   bigint                       {"$bigint": "<decimal>"}  (writeAny type 122, int64)
//   Uint8Array                   {"$bytes": "<standard base64, padded>"}
//   plain object / array         recursively safe()
//   nested Y.Map                 its toJSON(): an object (recursively)
//   nested Y.Array               its toJSON(): an array (recursively)
//   nested Y.Text                its toString(): a string (embeds and formats dropped)
//   nested Y.XmlFragment,
//     Y.XmlElement, Y.XmlText    their toString(): a string (see below)
//   nested Y.XmlHook             it is a Y.Map: its toJSON(), an object of its entries
//   Y.Doc (a subdocument)        {"$doc": {"guid": "<guid>", "opts": {...}}} where opts holds
//                                what yjs encodes with the subdocument (ContentDoc): "gc": false
//                                when gc is off, "autoLoad": true when set, "meta": <safe(meta)>
//                                when not null; {} otherwise. (yjs's toJSON leaves the Y.Doc
//                                object itself in place, which JSON cannot hold.)
//   a shared type met outside
//     toJSON (a delta embed)     {"$type": "<kind>", "json": safe(type.toJSON())} with kind one
//                                of map, array, text, xmlFragment, xmlElement, xmlText, xmlHook
//
// XML toString, as yjs 13.6 renders it (quirks included, since that is the truth):
//   XmlFragment: the concatenation of its children's toString().
//   XmlElement:  `<${nodeName.toLocaleLowerCase()}${attrs}>${children}</${lowercased}>` where
//                attrs is ' ' + `key="${String(value)}"` joined by ' ', keys sorted with
//                Array.prototype.sort (UTF-16 code unit order); '' when there are none. Values
//                are not escaped; a number prints as JS String(n), an object as
//                "[object Object]".
//   XmlText:     for each delta op: the insert (a string; an embed prints as "[object Object]")
//                wrapped in one tag per format attribute, tags sorted by attribute name
//                (a < b on strings), outermost first: `<${name}${attrs}>` ... `</${name}>`, where
//                attrs comes from `for (key in value)`: for an object its own keys
//                (` ${key}="${String(v)}"`), for a string its character indexes ("#f00" gives
//                ` 0="#" 1="f" 2="0" 3="0"`), nothing for true/numbers/null; attrs sorted by key
//                with a < b (so "10" sorts before "2").
//   XmlHook:     "[object Object]" (YXmlHook has no toString).
//
// Map key order in json objects follows yjs's internal order and may differ between replicas;
// compare views as JSON values, not as text.

import * as Y from 'yjs'

/**
 * @param {Y.Doc} doc
 * @param {Array<{name: string, kind: string}>} roots
 */
export function view (doc, roots) {
  const json = {}
  const delta = {}
  for (const { name, kind } of roots) {
    switch (kind) {
      case 'text': {
        const t = doc.getText(name)
        json[name] = t.toString()
        delta[name] = safe(t.toDelta())
        break
      }
      case 'map':
        json[name] = safe(doc.getMap(name).toJSON())
        break
      case 'array':
        json[name] = safe(doc.getArray(name).toJSON())
        break
      case 'xml':
        json[name] = doc.getXmlFragment(name).toString()
        break
      default:
        throw new Error(`unknown root kind ${JSON.stringify(kind)} of root ${JSON.stringify(name)}`)
    }
  }
  return { json, delta, stateVector: stateVectorObject(Y.encodeStateVector(doc)) }
}

/** @param {Uint8Array} sv an encoded state vector */
export function stateVectorObject (sv) {
  const out = {}
  for (const [client, clock] of Y.decodeStateVector(sv)) {
    out[String(client)] = clock
  }
  return out
}

/** @param {any} t a shared type */
export function typeKind (t) {
  if (t instanceof Y.XmlHook) return 'xmlHook'
  if (t instanceof Y.XmlText) return 'xmlText'
  if (t instanceof Y.XmlElement) return 'xmlElement'
  if (t instanceof Y.XmlFragment) return 'xmlFragment'
  if (t instanceof Y.Text) return 'text'
  if (t instanceof Y.Map) return 'map'
  if (t instanceof Y.Array) return 'array'
  return 'unknown'
}

/** Makes v JSON-safe as described at the top of this file. */
export function safe (v) {
  if (v === undefined) return { $undefined: true }
  if (v === null) return null
  switch (typeof v) {
    case 'string':
    case 'boolean':
      return v
    case 'number':
      return Number.isFinite(v) ? v : { $number: String(v) }
    case 'bigint':
      return { $bigint: v.toString() }
  }
  if (v instanceof Uint8Array) return { $bytes: Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64') }
  if (Array.isArray(v)) return v.map(safe)
  if (v instanceof Y.Doc) {
    const opts = {}
    if (!v.gc) opts.gc = false
    if (v.autoLoad) opts.autoLoad = true
    if (v.meta !== null && v.meta !== undefined) opts.meta = safe(v.meta)
    return { $doc: { guid: v.guid, opts } }
  }
  if (v instanceof Y.AbstractType) return { $type: typeKind(v), json: safe(v.toJSON()) }
  if (typeof v === 'object') {
    const out = {}
    for (const k of Object.keys(v)) out[k] = safe(v[k])
    return out
  }
  throw new Error(`view: cannot represent a ${typeof v}`)
}

/** JSON with object keys sorted: equal values give equal strings (for comparing replicas). */
export function canonical (v) {
  if (v === null || typeof v !== 'object') return JSON.stringify(v)
  if (Array.isArray(v)) return '[' + v.map(canonical).join(',') + ']'
  return '{' + Object.keys(v).sort().map(k => JSON.stringify(k) + ':' + canonical(v[k])).join(',') + '}'
}
