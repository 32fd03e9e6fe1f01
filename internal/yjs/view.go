package yjs

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ErrValue is wrapped by every error about a value that does not fit the kind it is given as
// (Replace), with a message fit for the caller.
var ErrValue = errors.New("value does not fit the type")

// Kind is what a root type is read and written as.
type Kind int

// The kinds of the CRDT operations.
const (
	Text Kind = iota
	Map
	Array
	XML
)

var kindNames = [...]string{"text", "map", "array", "xml"}

// ParseKind reads a kind's name: text, map, array or xml.
func ParseKind(s string) (Kind, bool) {
	i := slices.Index(kindNames[:], s)
	return Kind(i), i >= 0
}

func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return "unknown"
	}
	return kindNames[k]
}

// maxViewDepth bounds how deep a view descends into nested types; deeper ones read as null.
// Real documents nest a few levels; the bound keeps recursion on hostile ones finite.
const maxViewDepth = 256

// JSON reads a root as yjs's toJSON does for that kind: text and xml as a string, map as an
// object, array as an array. Values are nil, bool, float64, string, []byte (binary),
// Undefined, BigInt, []any and map[string]any. An absent root reads as the kind's empty value.
func (d *Doc) JSON(root string, k Kind) any {
	t := d.roots[root]
	if t == nil {
		t = &ytype{}
	}
	switch k {
	case Map:
		return mapJSON(t, 0)
	case Array:
		return arrayJSON(t, 0)
	case XML:
		return xmlString(t, typeXMLFragment, 0)
	}
	return textString(t)
}

// Shape reports what a root has ever held, deleted or not: items of a sequence (text, array or
// XML), entries of a map. A root emptied by its clients keeps its items, so this tells a
// cleared text from a map where KindOf, which reads what is visible, cannot.
func (d *Doc) Shape(root string) (sequence, entries bool) {
	t := d.roots[root]
	if t == nil {
		return false, false
	}
	return t.start != nil, len(t.m) > 0
}

// KindOf guesses a root's kind from its content: XML nodes make xml, strings and formats
// text, keyed entries map, other sequence content array. False when the root has nothing.
func (d *Doc) KindOf(root string) (Kind, bool) {
	t := d.roots[root]
	if t == nil {
		return Text, false
	}
	if len(t.m) > 0 && t.start == nil {
		return Map, true
	}
	for b := t.start; b != nil; b = b.right {
		if b.deleted {
			continue
		}
		switch b.content.ref {
		case refString, refFormat, refEmbed:
			return Text, true
		case refType:
			switch b.content.typ().ref {
			case typeXMLElement, typeXMLText, typeXMLHook:
				return XML, true
			}
			return Array, true
		case refAny, refJSON, refBinary, refDoc:
			return Array, true
		}
	}
	if len(t.m) > 0 {
		return Map, true
	}
	return Text, false
}

func textString(t *ytype) string {
	// The units are joined first: a surrogate pair may straddle two items.
	n, only := 0, units{}
	for b := t.start; b != nil; b = b.right {
		if !b.deleted && b.content.ref == refString {
			n += b.content.text().len()
			only = b.content.text()
		}
	}
	if only.len() == n {
		return only.string() // one item, or none
	}
	var j unitJoiner
	for b := t.start; b != nil; b = b.right {
		if !b.deleted && b.content.ref == refString {
			j.add(b.content.text())
		}
	}
	return j.string()
}

func mapJSON(t *ytype, depth int) map[string]any {
	out := map[string]any{}
	for k, b := range t.m {
		if b.deleted {
			continue
		}
		out[k] = lastValue(b, depth)
	}
	return out
}

func arrayJSON(t *ytype, depth int) []any {
	out := []any{}
	for b := t.start; b != nil; b = b.right {
		if b.visible() {
			out = appendValues(out, b, depth)
		}
	}
	return out
}

// lastValue is the value a map entry's item holds: its last element.
func lastValue(b *block, depth int) any {
	vals := appendValues(nil, b, depth)
	if len(vals) == 0 {
		return nil
	}
	return vals[len(vals)-1]
}

// appendValues appends an item's elements as yjs's getContent gives them (a string content
// gives one string per UTF-16 unit), nested types rendered with toJSON.
func appendValues(out []any, b *block, depth int) []any {
	c := &b.content
	switch c.ref {
	case refAny:
		for _, e := range c.elems {
			out = append(out, readAny(e))
		}
	case refJSON:
		for _, e := range c.elems {
			out = append(out, parseJSON(e))
		}
	case refBinary:
		out = append(out, slices.Clone(c.raw()))
	case refString:
		for i := range c.text().len() {
			out = append(out, utf8Of([]uint16{c.text().at(i)}))
		}
	case refEmbed:
		out = append(out, parseJSON(c.raw()))
	case refType:
		out = append(out, typeJSON(c.typ(), depth+1))
	case refDoc:
		out = append(out, SubDoc{GUID: c.key(), Options: readAny(c.raw())})
	}
	return out
}

// Embedded is a shared type inserted into a text, as a delta shows it: its kind (map, array,
// text, xmlFragment, xmlElement, xmlText, xmlHook) and its toJSON.
type Embedded struct {
	Kind string
	JSON any
	typ  *ytype // for rendering inside XML, where yjs prints the type's toString
}

var typeNames = map[uint8]string{
	typeArray: "array", typeMap: "map", typeText: "text", typeXMLElement: "xmlElement",
	typeXMLFragment: "xmlFragment", typeXMLHook: "xmlHook", typeXMLText: "xmlText",
}

// SubDoc is a subdocument as a view shows it: its guid and options; its content lives in its
// own document.
type SubDoc struct {
	GUID    string
	Options any
}

func parseJSON(b []byte) any {
	if string(b) == "undefined" {
		return Undefined{}
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil
	}
	return v
}

// typeJSON renders a nested type as yjs's toJSON does.
func typeJSON(t *ytype, depth int) any {
	if depth > maxViewDepth {
		return nil
	}
	switch t.ref {
	case typeArray:
		return arrayJSON(t, depth)
	case typeMap, typeXMLHook:
		return mapJSON(t, depth)
	case typeText:
		return textString(t)
	case typeXMLElement, typeXMLFragment, typeXMLText:
		return xmlString(t, t.ref, depth)
	}
	return nil
}

// DeltaOp is one operation of a text's delta (yjs: toDelta): an insert of a string, an embed
// or a nested type, with the formatting attributes in force.
type DeltaOp struct {
	Insert     any
	Attributes map[string]any
}

// Delta reads a root as a Y.Text's delta.
func (d *Doc) Delta(root string) []DeltaOp {
	t := d.roots[root]
	if t == nil {
		return nil
	}
	return delta(t, 0)
}

// attrs is an ordered attribute map: JavaScript's Map keeps insertion order, and a key set
// again keeps its place while a deleted one re-added goes last.
type attrs struct {
	keys []string
	vals map[string]any
}

func (a *attrs) set(k string, v any) {
	if a.vals == nil {
		a.vals = map[string]any{}
	}
	if _, ok := a.vals[k]; !ok {
		a.keys = append(a.keys, k)
	}
	a.vals[k] = v
}

func (a *attrs) del(k string) {
	if _, ok := a.vals[k]; !ok {
		return
	}
	delete(a.vals, k)
	a.keys = slices.DeleteFunc(a.keys, func(s string) bool { return s == k })
}

func (a *attrs) copy() map[string]any {
	if len(a.keys) == 0 {
		return nil
	}
	m := make(map[string]any, len(a.keys))
	for _, k := range a.keys {
		m[k] = a.vals[k]
	}
	return m
}

func delta(t *ytype, depth int) []DeltaOp {
	var ops []DeltaOp
	var cur attrs
	var str unitJoiner
	pack := func() {
		if !str.empty() {
			ops = append(ops, DeltaOp{Insert: str.string(), Attributes: cur.copy()})
			str = unitJoiner{}
		}
	}
	for b := t.start; b != nil; b = b.right {
		if b.deleted {
			continue
		}
		switch b.content.ref {
		case refString:
			str.add(b.content.text())
		case refEmbed:
			pack()
			ops = append(ops, DeltaOp{Insert: lastValue(b, depth), Attributes: cur.copy()})
		case refType:
			pack()
			t := b.content.typ()
			ops = append(ops, DeltaOp{Insert: Embedded{Kind: typeNames[t.ref], JSON: typeJSON(t, depth+1), typ: t}, Attributes: cur.copy()})
		case refFormat:
			pack()
			v := parseJSON(b.content.raw())
			if v == nil {
				cur.del(b.content.key())
			} else {
				cur.set(b.content.key(), v)
			}
		}
	}
	pack()
	return ops
}

// xmlString renders an XML type as yjs's toString does (no escaping, attributes sorted).
func xmlString(t *ytype, ref uint8, depth int) string {
	if depth > maxViewDepth {
		return ""
	}
	switch ref {
	case typeXMLText:
		return xmlTextString(t, depth)
	case typeText:
		return textString(t)
	case typeXMLElement:
		var sb strings.Builder
		name := strings.ToLower(t.name)
		sb.WriteString("<" + name)
		keys := make([]string, 0, len(t.m))
		for k, b := range t.m {
			if !b.deleted {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			sb.WriteString(" " + k + `="` + itemString(t.m[k], depth) + `"`)
		}
		sb.WriteString(">")
		sb.WriteString(xmlChildren(t, depth))
		sb.WriteString("</" + name + ">")
		return sb.String()
	case typeXMLHook, typeMap, typeArray:
		return "[object Object]" // no toString of their own
	}
	return xmlChildren(t, depth)
}

// itemString is String() of the value an item holds: a nested type prints its toString.
func itemString(b *block, depth int) string {
	if b.content.ref == refType {
		return xmlString(b.content.typ(), b.content.typ().ref, depth+1)
	}
	return jsString(lastValue(b, depth))
}

// xmlChildren renders a fragment's or element's children one after the other.
func xmlChildren(t *ytype, depth int) string {
	var sb strings.Builder
	for b := t.start; b != nil; b = b.right {
		if !b.visible() {
			continue
		}
		if b.content.ref == refType {
			sb.WriteString(xmlString(b.content.typ(), b.content.typ().ref, depth+1))
			continue
		}
		for _, v := range appendValues(nil, b, depth) {
			sb.WriteString(jsString(v))
		}
	}
	return sb.String()
}

// xmlTextString renders an XmlText: each delta op wrapped in a tag per formatting attribute
// (sorted by name), the attribute value's own properties becoming the tag's attributes.
func xmlTextString(t *ytype, depth int) string {
	var sb strings.Builder
	for _, op := range delta(t, depth) {
		type node struct {
			name  string
			attrs [][2]string
		}
		var nodes []node
		for name, v := range op.Attributes {
			n := node{name: name}
			n.attrs = append(n.attrs, jsProps(v)...)
			slices.SortFunc(n.attrs, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
			nodes = append(nodes, n)
		}
		slices.SortFunc(nodes, func(a, b node) int { return strings.Compare(a.name, b.name) })
		for _, n := range nodes {
			sb.WriteString("<" + n.name)
			for _, kv := range n.attrs {
				sb.WriteString(" " + kv[0] + `="` + kv[1] + `"`)
			}
			sb.WriteString(">")
		}
		sb.WriteString(jsString(op.Insert))
		for i := len(nodes) - 1; i >= 0; i-- {
			sb.WriteString("</" + nodes[i].name + ">")
		}
	}
	return sb.String()
}

// jsProps lists what `for (key in value)` visits, with each property as a string: an
// object's keys, a string's or array's indices; nothing for other values.
func jsProps(v any) [][2]string {
	var out [][2]string
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			out = append(out, [2]string{k, jsString(e)})
		}
	case []any:
		for i, e := range x {
			out = append(out, [2]string{strconv.Itoa(i), jsString(e)})
		}
	case string:
		for i, u := range u16(x) {
			out = append(out, [2]string{strconv.Itoa(i), utf8Of([]uint16{u})})
		}
	}
	return out
}

// jsString is JavaScript's String(value) for the values a view holds.
func jsString(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case Undefined:
		return "undefined"
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return jsNumber(x)
	case BigInt:
		return strconv.FormatInt(int64(x), 10)
	case []byte:
		parts := make([]string, len(x))
		for i, b := range x {
			parts[i] = strconv.Itoa(int(b))
		}
		return strings.Join(parts, ",")
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			if e != nil && e != (Undefined{}) {
				parts[i] = jsString(e)
			}
		}
		return strings.Join(parts, ",")
	case Embedded:
		if x.typ != nil {
			return xmlString(x.typ, x.typ.ref, 0)
		}
	}
	return "[object Object]"
}

// jsNumber formats a number as JavaScript does: the shortest round-trip digits, in exponent
// form from 1e21 and below 1e-6.
func jsNumber(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		return "0"
	}
	abs := math.Abs(f)
	if abs >= 1e21 || abs < 1e-6 {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		mant, exp, _ := strings.Cut(s, "e")
		if exp[0] == '+' {
			exp = exp[1:]
		} else {
			exp = "-" + strings.TrimLeft(exp[1:], "0")
		}
		exp = strings.TrimLeft(exp, "0")
		if !strings.HasPrefix(exp, "-") {
			exp = "+" + exp
		}
		return mant + "e" + exp
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Plain turns a view value into plain JSON values (nil, bool, float64, string, []any,
// map[string]any), as JSON.stringify would write it where it can: undefined leaves an object
// and is null in an array, NaN and infinities are null. Where JSON.stringify cannot (it throws
// on a BigInt) or writes something useless (an object of indices for bytes), we choose: a
// BigInt is a number when exact in a float64 and a decimal string otherwise, bytes are a
// standard base64 string, a subdocument is {"guid": ...}.
func Plain(v any) any {
	switch x := v.(type) {
	case Undefined:
		return nil
	case BigInt:
		if x >= -maxSafe && x <= maxSafe {
			return float64(x)
		}
		return strconv.FormatInt(int64(x), 10)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
		return x
	case []byte:
		return base64.StdEncoding.EncodeToString(x)
	case SubDoc:
		return map[string]any{"guid": x.GUID}
	case Embedded:
		return Plain(x.JSON)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if _, undef := e.(Undefined); undef {
				continue
			}
			out[k] = Plain(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = Plain(e)
		}
		return out
	}
	return v
}
