package yjs

import (
	"bytes"
	"encoding/json"
)

// Content refs of the update format (the low 5 bits of an item's info byte).
const (
	refGC      = 0
	refDeleted = 1
	refJSON    = 2
	refBinary  = 3
	refString  = 4
	refEmbed   = 5
	refFormat  = 6
	refType    = 7
	refAny     = 8
	refDoc     = 9
	refSkip    = 10
)

// Type refs of ContentType.
const (
	typeArray       = 0
	typeMap         = 1
	typeText        = 2
	typeXMLElement  = 3
	typeXMLFragment = 4
	typeXMLHook     = 5
	typeXMLText     = 6
)

// content is what an item holds. One struct for every kind keeps items small and splitting
// simple; which fields are set depends on ref. The kinds that are rare and never split or
// merge keep their fields behind x, so that every item is smaller.
type content struct {
	// string: UTF-16 code units, as JavaScript counts them, one byte each unless wide
	// (units; the flag sits beside ref, so items stay the size they were).
	str []byte
	// JSON: each element's JSON text; any: each element's encoded bytes. Kept as read so a
	// re-encoding writes them exactly.
	elems [][]byte
	// binary, embed, format, type and doc.
	x *contentX
	// deleted: the length of a ContentDeleted.
	n    uint64
	ref  uint8
	wide bool
}

// text is a string content's units.
func (c *content) text() units { return units{b: c.str, wide: c.wide} }

// setText makes a string content hold u.
func (c *content) setText(u units) { c.str, c.wide = u.b, u.wide }

// textContent is a string content of u.
func textContent(u units) content { return content{ref: refString, str: u.b, wide: u.wide} }

// contentX holds what the rarer kinds of content hold. It does not change once made.
type contentX struct {
	// binary bytes; embed JSON text; format value JSON text; doc options (an encoded any).
	raw []byte
	// format key; doc guid.
	key string
	// type: the shared type this item holds.
	typ *ytype
}

func (c *content) raw() []byte {
	if c.x == nil {
		return nil
	}
	return c.x.raw
}

func (c *content) key() string {
	if c.x == nil {
		return ""
	}
	return c.x.key
}

func (c *content) typ() *ytype {
	if c.x == nil {
		return nil
	}
	return c.x.typ
}

// length is the number of clocks the content takes.
func (c *content) length() uint64 {
	switch c.ref {
	case refDeleted:
		return c.n
	case refString:
		return uint64(c.text().len()) //nolint:gosec // G115: a length: non-negative
	case refJSON, refAny:
		return uint64(len(c.elems))
	}
	return 1
}

// countable reports whether the content counts in its parent's length (formats and deleted
// content do not).
func (c *content) countable() bool { return c.ref != refDeleted && c.ref != refFormat }

// splice cuts the content at offset, keeping the left part and returning the right one, as
// yjs does (a surrogate pair cut in two becomes two U+FFFD).
func (c *content) splice(offset uint64) content {
	switch c.ref {
	case refDeleted:
		r := content{ref: refDeleted, n: c.n - offset}
		c.n = offset
		return r
	case refString:
		// Both parts keep the array: the left part's capacity ends where the right part
		// starts, so appending to either (mergeWith) never writes into the other. Copying
		// the right part instead made each split of a long text cost its length.
		off := int(offset) //nolint:gosec // G115: offset is within the content, an int's worth
		right := c.text().from(off)
		left := c.text().upTo(off)
		if last := left.at(off - 1); left.wide && last >= 0xd800 && last <= 0xdbff {
			left = left.upTo(off - 1).concat(wideUnits([]uint16{0xfffd}))
			right.u16()[0] = 0xfffd
		}
		c.setText(left)
		return textContent(right)
	case refJSON, refAny:
		r := content{ref: c.ref, elems: append([][]byte(nil), c.elems[offset:]...)}
		c.elems = c.elems[:offset:offset]
		return r
	}
	panic("yjs: splice of unsplittable content")
}

// mergeWith appends right's content when both are of a kind that merges.
func (c *content) mergeWith(r *content) bool {
	if c.ref != r.ref {
		return false
	}
	switch c.ref {
	case refDeleted:
		c.n += r.n
	case refString:
		c.setText(c.text().concat(r.text()))
	case refJSON, refAny:
		c.elems = append(c.elems, r.elems...)
	default:
		return false
	}
	return true
}

// readContent reads the content of an item of the given ref.
//
//nolint:gocyclo,funlen // a kernel: one case per content kind of the Yjs format, read from untrusted bytes
func (d *decoder) readContent(ref uint8) (content, error) {
	switch ref {
	case refDeleted:
		n, err := d.uint()
		if err != nil {
			return content{}, err
		}
		if n == 0 {
			return content{}, malformed("empty deleted content")
		}
		return content{ref: refDeleted, n: n}, nil
	case refJSON:
		n, err := d.count(1)
		if err != nil {
			return content{}, err
		}
		if n == 0 {
			return content{}, malformed("empty JSON content")
		}
		if err := d.charge(n * 32); err != nil { // a slice and a small copy each
			return content{}, err
		}
		elems := make([][]byte, n)
		for i := range elems {
			b, err := d.utf8()
			if err != nil {
				return content{}, err
			}
			if string(b) != "undefined" && !json.Valid(b) {
				return content{}, malformed("JSON content is not JSON")
			}
			elems[i] = bytes.Clone(b)
		}
		return content{ref: refJSON, elems: elems}, nil
	case refBinary:
		b, err := d.bytes()
		return content{ref: refBinary, x: &contentX{raw: bytes.Clone(b)}}, err
	case refString:
		s, err := d.string()
		if err != nil {
			return content{}, err
		}
		if len(s) == 0 {
			return content{}, malformed("empty string content")
		}
		if err := d.charge(2 * len(s)); err != nil {
			return content{}, err
		}
		return textContent(unitsOf(s)), nil
	case refEmbed:
		b, err := d.utf8()
		if err != nil {
			return content{}, err
		}
		if !json.Valid(b) {
			return content{}, malformed("embed is not JSON")
		}
		return content{ref: refEmbed, x: &contentX{raw: bytes.Clone(b)}}, nil
	case refFormat:
		k, err := d.string()
		if err != nil {
			return content{}, err
		}
		b, err := d.utf8()
		if err != nil {
			return content{}, err
		}
		if !json.Valid(b) {
			return content{}, malformed("format value is not JSON")
		}
		return content{ref: refFormat, x: &contentX{key: k, raw: bytes.Clone(b)}}, nil
	case refType:
		tr, err := d.uint()
		if err != nil {
			return content{}, err
		}
		t := &ytype{ref: uint8(tr)} //nolint:gosec // G115: the switch below refuses every ref other than 0..6
		switch tr {
		case typeXMLElement, typeXMLHook:
			if t.name, err = d.string(); err != nil {
				return content{}, err
			}
		case typeArray, typeMap, typeText, typeXMLFragment, typeXMLText:
		default:
			return content{}, malformed("unknown type ref %d", tr)
		}
		return content{ref: refType, x: &contentX{typ: t}}, nil
	case refAny:
		n, err := d.count(1)
		if err != nil {
			return content{}, err
		}
		if n == 0 {
			return content{}, malformed("empty any content")
		}
		if err := d.charge(n * 32); err != nil {
			return content{}, err
		}
		elems := make([][]byte, n)
		for i := range elems {
			b, err := d.skipAny(0)
			if err != nil {
				return content{}, err
			}
			elems[i] = bytes.Clone(b)
		}
		return content{ref: refAny, elems: elems}, nil
	case refDoc:
		guid, err := d.string()
		if err != nil {
			return content{}, err
		}
		opts, err := d.skipAny(0)
		if err != nil {
			return content{}, err
		}
		return content{ref: refDoc, x: &contentX{key: guid, raw: bytes.Clone(opts)}}, nil
	}
	return content{}, malformed("unknown content ref %d", ref)
}

// write encodes the content from offset on.
func (c *content) write(e *encoder, offset uint64) {
	switch c.ref {
	case refDeleted:
		e.uint(c.n - offset)
	case refString:
		e.units(c.text().from(int(offset))) //nolint:gosec // G115: offset is within the content
	case refJSON:
		e.uint(uint64(len(c.elems)) - offset)
		for _, b := range c.elems[offset:] {
			e.bytes(b)
		}
	case refAny:
		e.uint(uint64(len(c.elems)) - offset)
		for _, b := range c.elems[offset:] {
			e.buf = append(e.buf, b...)
		}
	case refBinary, refEmbed:
		e.bytes(c.raw())
	case refFormat:
		e.string(c.key())
		e.bytes(c.raw())
	case refType:
		e.uint(uint64(c.typ().ref))
		if c.typ().ref == typeXMLElement || c.typ().ref == typeXMLHook {
			e.string(c.typ().name)
		}
	case refDoc:
		e.string(c.key())
		e.buf = append(e.buf, c.raw()...)
	}
}
