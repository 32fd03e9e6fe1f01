package yjs

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/bits"
	"reflect"
	"slices"
	"unicode/utf8"
	"unsafe"
)

// Replace makes a root hold value, as an ordinary Yjs update on the current state: what is
// unchanged stays (the same items, so collaborators' positions and concurrent edits survive),
// what is gone is deleted, what is new is inserted. Text is diffed by character (within
// changed lines for long texts), maps key by key (into nested shared types), arrays by
// element, XML by node. value is what encoding/json decodes: a string for text and xml, a
// map[string]any for map, a []any for array. It returns the update (empty when nothing
// changed), already applied to d; errors wrap ErrValue and leave d unchanged.
func (d *Doc) Replace(root string, k Kind, value any) ([]byte, error) {
	return d.ReplaceWithin(root, k, value, 0)
}

// ReplaceWithin is Replace for content from outside, which may make the document hold at most
// maxSize bytes of memory (Size; zero: no bound), and XML at most a node per 512 of them: a few
// MiB of XML can be a million elements, hundreds of bytes of memory each. Past either, it stops
// with an error wrapping ErrMemoryTooLarge, and the document, written in part, must be
// discarded.
func (d *Doc) ReplaceWithin(root string, k Kind, value any, maxSize int) ([]byte, error) {
	d.replaceMax, d.replaceErr = maxSize, nil
	defer func() { d.replaceMax, d.replaceErr = 0, nil }()
	var xmlNodes []xmlNode
	switch k {
	case Text:
		if _, ok := value.(string); !ok {
			return nil, fmt.Errorf("%w: Data must be a string for type text.", ErrValue)
		}
	case XML:
		s, ok := value.(string)
		if !ok {
			return nil, fmt.Errorf("%w: Data must be a string for type xml.", ErrValue)
		}
		if !utf8.ValidString(s) {
			return nil, errNotUTF8
		}
		var err error
		if xmlNodes, err = parseXML(s, maxSize/512); err != nil {
			return nil, err
		}
	case Map:
		if _, ok := value.(map[string]any); !ok {
			return nil, fmt.Errorf("%w: Data must be an object for type map.", ErrValue)
		}
	case Array:
		if _, ok := value.([]any); !ok {
			return nil, fmt.Errorf("%w: Data must be an array for type array.", ErrValue)
		}
	default:
		return nil, fmt.Errorf("%w: unknown type", ErrValue)
	}
	// Check that every value encodes before anything changes.
	if err := checkValue(value, 0); err != nil {
		return nil, err
	}
	if !utf8.ValidString(root) {
		return nil, errNotUTF8 // the root's name is written into the update too
	}
	t := d.root(root)
	w, np := d.work, d.npending
	d.begin()
	d.track(d.client) // local edits add structs of d.client alone
	tr := d.tr
	switch k {
	case Text:
		d.replaceText(t, value.(string))
	case XML:
		d.replaceXML(t, xmlNodes, 0)
	case Map:
		d.replaceMap(t, value.(map[string]any), 0)
	case Array:
		d.replaceArray(t, value.([]any))
	}
	d.commit()
	if d.replaceErr != nil {
		return nil, d.replaceErr
	}
	if d.state(d.client) == tr.before[d.client] && len(tr.deleted) == 0 {
		return nil, nil
	}
	update := d.encodeTransaction(tr)
	d.growBound(len(update), d.work-w, np)
	return update, nil
}

// replaceFull reports whether what Replace writes has taken the document past its bound
// (ReplaceWithin), recording the error; the writing stops there.
func (d *Doc) replaceFull() bool {
	if d.replaceErr == nil && d.replaceMax > 0 && d.Size() > d.replaceMax {
		d.replaceErr = fmt.Errorf("%w: %d bytes (at most %d)", ErrMemoryTooLarge, d.Size(), d.replaceMax)
	}
	return d.replaceErr != nil
}

// errNotUTF8 refuses strings that are not UTF-8: written, they would make the document
// unreadable to yjs (and to Apply), as a client's update with them is refused.
var errNotUTF8 = fmt.Errorf("%w: Data must be valid UTF-8.", ErrValue)

// checkValue refuses values writeAny cannot encode, strings that are not UTF-8 and nesting
// beyond what a reader accepts.
func checkValue(v any, depth int) error {
	if depth > maxAnyDepth {
		return fmt.Errorf("%w: value nested deeper than %d levels", ErrValue, maxAnyDepth)
	}
	switch x := v.(type) {
	case string:
		if !utf8.ValidString(x) {
			return errNotUTF8
		}
	case nil, bool, float64, json.Number, int, int64:
		if n, ok := x.(json.Number); ok {
			if _, err := n.Float64(); err != nil {
				return fmt.Errorf("%w: number %s is out of range", ErrValue, n)
			}
		}
	case map[string]any:
		for key, e := range x {
			if !utf8.ValidString(key) {
				return errNotUTF8
			}
			if err := checkValue(e, depth+1); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := checkValue(e, depth+1); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("%w: unsupported value of type %T", ErrValue, v)
	}
	return nil
}

// newItem creates a local item between left and right in t and integrates it.
func (d *Doc) newItem(t *ytype, left, right *block, sub string, hasSub bool, c content) *block {
	b := &block{
		id:      ID{d.client, d.state(d.client)},
		length:  c.length(),
		content: c,
		parent:  t,
		sub:     sub,
		hasSub:  hasSub,
		left:    left,
		right:   right,
	}
	if left != nil {
		b.origin, b.hasOrigin = left.lastID(), true
	}
	if right != nil {
		b.rightOrigin, b.hasRightOrigin = right.id, true
	}
	d.held += c.bytes()
	d.integrateItem(b)
	return b
}

// splitLocal splits an item of the store at diff and returns the right part.
func (d *Doc) splitLocal(b *block, diff uint64) *block {
	s := d.clients[b.id.Client]
	i := find(s, b.id.Clock)
	r := d.split(b, diff)
	d.insertAt(b.id.Client, i+1, r)
	return r
}

// seqCursor walks a sequence type by visible index, for local edits.
type seqCursor struct {
	d           *Doc
	t           *ytype
	left, right *block
}

func (d *Doc) cursor(t *ytype) *seqCursor { return &seqCursor{d: d, t: t, right: t.start} }

// skip moves past n visible units.
func (c *seqCursor) skip(n uint64) {
	for n > 0 && c.right != nil {
		r := c.right
		if r.visible() {
			if n < r.length {
				c.d.splitLocal(r, n)
			}
			n -= r.length
		}
		c.left, c.right = r, r.right
	}
}

// del deletes the next n visible units.
func (c *seqCursor) del(n uint64) {
	for n > 0 && c.right != nil {
		r := c.right
		if r.visible() {
			if n < r.length {
				c.d.splitLocal(r, n)
			}
			n -= r.length
			c.d.deleteItem(r)
		}
		c.left, c.right = r, r.right
	}
}

// insert puts content at the cursor and moves past it.
func (c *seqCursor) insert(ct content) *block {
	b := c.d.newItem(c.t, c.left, c.right, "", false, ct)
	c.left = b
	return b
}

// replaceText makes a text hold s: a character diff of the visible strings, applied in one
// pass. Formats and embeds stay where they are.
func (d *Doc) replaceText(t *ytype, s string) {
	// old is valid UTF-8; s need not be: the diff cuts it only at newlines and where it
	// equals old, never inside a character or an invalid sequence, and decodes each invalid
	// byte as U+FFFD, as u16 does what is inserted.
	old := textString(t)
	ops := diffText(old, s)
	if len(ops) == 0 {
		return
	}
	// Positions are bytes of old; the sequence counts UTF-16 units, and embeds count one.
	c := d.cursor(t)
	pos := 0 // bytes of old passed
	for _, op := range ops {
		c.skipText(utf16Len(old[pos:op.at]))
		c.delText(utf16Len(old[op.at : op.at+op.del]))
		pos = op.at + op.del
		if len(op.ins) > 0 {
			c.insert(textContent(unitsOf(op.ins)))
		}
	}
}

// skipText moves past n UTF-16 units of text, and past any embed between them.
func (c *seqCursor) skipText(n uint64) {
	for n > 0 && c.right != nil {
		r := c.right
		if r.visible() && r.content.ref == refString {
			if n < r.length {
				c.d.splitLocal(r, n)
			}
			n -= r.length
		}
		c.left, c.right = r, r.right
	}
}

// delText deletes n UTF-16 units of text, leaving embeds and formats between them.
func (c *seqCursor) delText(n uint64) {
	for n > 0 && c.right != nil {
		r := c.right
		if r.visible() && r.content.ref == refString {
			if n < r.length {
				c.d.splitLocal(r, n)
			}
			n -= r.length
			c.d.deleteItem(r)
		}
		c.left, c.right = r, r.right
	}
}

// utf16Len is the length in UTF-16 units of valid UTF-8: one per character, two for those
// beyond the BMP. That is a unit per byte, less one per continuation byte (10xxxxxx), plus one
// per four-byte lead (11110xxx), counted eight bytes at a time.
//
//nolint:gosec // G115: counts of bytes in a string: non-negative and at most len(s)
func utf16Len(s string) uint64 {
	const high = 0x8080808080808080
	b := unsafe.Slice(unsafe.StringData(s), len(s)) //nolint:gosec // G103: reviewed; read only
	n := uint64(len(b))
	i := 0
	for ; i+8 <= len(b); i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		cont := w &^ (w << 1) & high // bit 7 set, bit 6 clear
		four := w & (w << 1) & (w << 2) & (w << 3) & high
		n += uint64(bits.OnesCount64(four)) - uint64(bits.OnesCount64(cont))
	}
	return n - uint64(len(b)-i) + utf16LenSlow(s[i:])
}

func utf16LenSlow(s string) uint64 {
	n := uint64(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c&0xc0 != 0x80 {
			n++
		}
		if c >= 0xf0 {
			n++
		}
	}
	return n
}

// replaceMap sets every key of m that differs and deletes every key m lacks. A key holding a
// nested shared type of the kind the new value is (a map for an object, an array for an
// array, a text for a string) is edited in place.
func (d *Doc) replaceMap(t *ytype, m map[string]any, depth int) {
	for _, k := range sortedKeysOf(t.m) {
		if b := t.m[k]; !b.deleted {
			if _, keep := m[k]; !keep {
				d.deleteItem(b)
			}
		}
	}
	for _, k := range sortedKeys(m) {
		if d.replaceFull() {
			return
		}
		v := m[k]
		cur := t.m[k]
		if cur != nil && !cur.deleted {
			if cur.content.ref == refType && depth < maxViewDepth {
				nt := cur.content.typ()
				switch x := v.(type) {
				case map[string]any:
					if nt.ref == typeMap {
						d.replaceMap(nt, x, depth+1)
						continue
					}
				case []any:
					if nt.ref == typeArray {
						d.replaceArray(nt, x)
						continue
					}
				case string:
					if nt.ref == typeText {
						d.replaceText(nt, x)
						continue
					}
				}
			}
			if sameJSON(lastValue(cur, 0), v) {
				continue
			}
		}
		d.newItem(t, cur, nil, k, true, anyContent([]any{v}))
	}
}

func sortedKeysOf(m map[string]*block) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// anyContent encodes values as a ContentAny.
func anyContent(vals []any) content {
	c := content{ref: refAny, elems: make([][]byte, len(vals))}
	for i, v := range vals {
		var e encoder
		_ = e.writeAny(v) // checked by checkValue
		c.elems[i] = e.buf
	}
	return c
}

// sameJSON compares a stored value with a new one as JSON values.
func sameJSON(a, b any) bool {
	return reflect.DeepEqual(normalize(a), normalize(b))
}

// normalize maps a value to plain JSON values (numbers as float64), for comparison.
func normalize(v any) any {
	return mapLeaves(v, func(v any) any {
		switch x := v.(type) {
		case json.Number:
			f, _ := x.Float64()
			return f
		case int:
			return float64(x)
		case int64:
			return float64(x)
		case BigInt:
			return float64(x)
		}
		return v
	})
}

// mapLeaves copies objects and arrays, replacing every other value by f's answer.
func mapLeaves(v any, f func(any) any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = mapLeaves(e, f)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = mapLeaves(e, f)
		}
		return out
	}
	return f(v)
}

// replaceArray makes an array hold vals: a diff by element, each element compared as JSON.
func (d *Doc) replaceArray(t *ytype, vals []any) {
	old := arrayJSON(t, 0)
	keyOf := func(v any) string {
		b, err := json.Marshal(normalize(jsonSafe(v)))
		if err != nil {
			return fmt.Sprintf("%#v", v)
		}
		return string(b)
	}
	a := make([]string, len(old))
	for i, v := range old {
		a[i] = keyOf(v)
	}
	b := make([]string, len(vals))
	for i, v := range vals {
		b[i] = keyOf(v)
	}
	ops := diffSeq(a, b)
	c := d.cursor(t)
	pos := 0
	for _, op := range ops {
		c.skip(uint64(op.at - pos)) //nolint:gosec // G115: diffSeq's ops are in order (op.at >= pos) with non-negative lengths
		c.del(uint64(op.del))       //nolint:gosec // G115: as above
		pos = op.at + op.del
		if op.ins > 0 {
			c.insert(anyContent(vals[op.insAt : op.insAt+op.ins]))
		}
	}
}

// jsonSafe turns view values that encoding/json cannot write into comparable stand-ins.
func jsonSafe(v any) any {
	return mapLeaves(v, func(v any) any {
		switch x := v.(type) {
		case Undefined:
			return map[string]any{"$undefined": true}
		case []byte:
			return map[string]any{"$bytes": x}
		case SubDoc:
			return map[string]any{"$doc": x.GUID}
		}
		return v
	})
}
