package yjs

import "unsafe"

// Merge returns one update equal to applying all of them, in any order: the document they
// make, encoded whole. Malformed input wraps ErrMalformed.
func Merge(updates ...[]byte) ([]byte, error) {
	d := NewDocWithClient(0)
	for _, u := range updates {
		if err := d.Apply(u); err != nil {
			return nil, err
		}
	}
	return d.encode(nil), nil
}

// Pending reports whether structs or deletions wait for structs the document has not seen.
func (d *Doc) Pending() bool { return len(d.pending) > 0 || len(d.pendingDS) > 0 }

// bytes is the heap a content holds beyond its struct.
func (c *content) bytes() int {
	n := len(c.str)
	for _, e := range c.elems {
		n += len(e) + int(unsafe.Sizeof(e))
	}
	if x := c.x; x != nil {
		n += int(unsafe.Sizeof(*x)) + len(x.raw) + len(x.key)
		if t := x.typ; t != nil {
			n += int(unsafe.Sizeof(*t)) + len(t.name)
		}
	}
	return n
}
