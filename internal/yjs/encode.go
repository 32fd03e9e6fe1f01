package yjs

import (
	"slices"
)

// Encode returns a v1 update holding everything the document has that the encoded state
// vector sv lacks, with the document's whole delete set; a nil sv gives the whole document
// (yjs: encodeStateAsUpdate). Structs still waiting for their dependencies are included, so
// the result loses nothing the document was given.
func (d *Doc) Encode(sv []byte) ([]byte, error) {
	var have map[uint64]uint64
	if sv != nil {
		var err error
		have, err = readStateVector(sv, func(c uint64) bool { return len(d.clients[c]) > 0 || len(d.pending[c]) > 0 })
		if err != nil {
			return nil, err
		}
	}
	return d.encode(have), nil
}

func (d *Doc) encode(have map[uint64]uint64) []byte {
	var e encoder
	d.encodeTo(&e, have)
	return e.buf
}

func (d *Doc) encodeTo(e *encoder, have map[uint64]uint64) {
	type from struct{ client, clock uint64 }
	var list []from
	seen := map[uint64]bool{}
	for c, s := range d.clients {
		if len(s) > 0 && d.state(c) > have[c] {
			list = append(list, from{c, have[c]})
			seen[c] = true
		}
	}
	for c, q := range d.pending {
		if len(q) > 0 && !seen[c] {
			list = append(list, from{c, have[c]})
		}
	}
	slices.SortFunc(list, func(a, b from) int {
		switch {
		case a.client > b.client:
			return -1
		case a.client < b.client:
			return 1
		}
		return 0
	})
	e.uint(uint64(len(list)))
	for _, f := range list {
		d.writeClient(e, f.client, f.clock)
	}
	d.writeDeleteSet(e)
}

// writeClient writes a client's structs from clock on, then its pending structs after skips
// over the gaps.
func (d *Doc) writeClient(e *encoder, client, clock uint64) {
	structs := d.clients[client]
	var start int
	if len(structs) > 0 {
		clock = max(clock, structs[0].id.Clock)
		start = find(structs, clock)
	}
	if start >= len(structs) {
		structs, start = nil, 0
	}
	// Pending structs of this client beyond what the store holds, in clock order.
	var pend []*pendingStruct
	next := d.state(client)
	if next < clock {
		next = clock
	}
	for _, p := range d.pending[client] {
		if p.skip || p.b.end() <= next {
			continue
		}
		pend = append(pend, p)
	}
	count := len(structs) - start
	first := clock
	if count == 0 && len(pend) > 0 {
		first = max(pend[0].b.id.Clock, clock)
	}
	// Count the structs to write: skips fill gaps between pending structs.
	cursor := first
	if count > 0 {
		cursor = structs[len(structs)-1].end()
	}
	n := count
	for _, p := range pend {
		if p.b.end() <= cursor {
			continue
		}
		if p.b.id.Clock > cursor {
			n++
		}
		n++
		cursor = p.b.end()
	}
	e.uint(uint64(n))
	e.uint(client)
	e.uint(first)
	for i := start; i < len(structs); i++ {
		off := uint64(0)
		if i == start {
			off = clock - structs[i].id.Clock
		}
		writeBlock(e, structs[i], off)
	}
	cursor = first
	if count > 0 {
		cursor = structs[len(structs)-1].end()
	}
	for _, p := range pend {
		if p.b.end() <= cursor {
			continue
		}
		off := uint64(0)
		if p.b.id.Clock > cursor {
			e.byte(refSkip)
			e.uint(p.b.id.Clock - cursor)
		} else {
			off = cursor - p.b.id.Clock
		}
		writePending(e, p, off)
		cursor = p.b.end()
	}
}

// writeBlock writes an integrated struct from offset on.
func writeBlock(e *encoder, b *block, offset uint64) {
	var parent parentRef
	if p := b.parent; p != nil && p.item == nil {
		parent = parentRef{root: true, name: p.name}
	} else if p != nil {
		parent = parentRef{id: p.item.id}
	}
	writeStruct(e, b, offset, parent)
}

// writePending writes a struct not integrated yet, as it was read, from offset on.
func writePending(e *encoder, p *pendingStruct, offset uint64) {
	writeStruct(e, p.b, offset, parentRef{root: p.hasRoot, name: p.rootName, id: p.parentID})
}

// parentRef is how an item names its parent when it has no origins: a root type by name, or
// the item holding the parent type.
type parentRef struct {
	root bool
	name string
	id   ID
}

// writeStruct writes a GC struct or an item from offset on (the origin of an item written from
// an offset is the clock before it, and then its parent is not written).
func writeStruct(e *encoder, b *block, offset uint64, parent parentRef) {
	if b.gc {
		e.byte(refGC)
		e.uint(b.length - offset)
		return
	}
	origin, hasOrigin := b.origin, b.hasOrigin
	if offset > 0 {
		origin, hasOrigin = ID{b.id.Client, b.id.Clock + offset - 1}, true
	}
	info := b.content.ref
	if hasOrigin {
		info |= 0x80
	}
	if b.hasRightOrigin {
		info |= 0x40
	}
	if b.hasSub {
		info |= 0x20
	}
	e.byte(info)
	if hasOrigin {
		e.uint(origin.Client)
		e.uint(origin.Clock)
	}
	if b.hasRightOrigin {
		e.uint(b.rightOrigin.Client)
		e.uint(b.rightOrigin.Clock)
	}
	if !hasOrigin && !b.hasRightOrigin {
		if parent.root {
			e.uint(1)
			e.string(parent.name)
		} else {
			e.uint(0)
			e.uint(parent.id.Client)
			e.uint(parent.id.Clock)
		}
		if b.hasSub {
			e.string(b.sub)
		}
	}
	b.content.write(e, offset)
}

// writeDeleteSet writes the delete set of the whole store (adjacent deleted structs as one
// range), with the deletions still waiting for their structs.
func (d *Doc) writeDeleteSet(e *encoder) {
	ranges := map[uint64][][2]uint64{}
	for c, s := range d.clients {
		for i := 0; i < len(s); i++ {
			if !s[i].deleted {
				continue
			}
			clock, n := s[i].id.Clock, s[i].length
			for i+1 < len(s) && s[i+1].deleted {
				i++
				n += s[i].length
			}
			ranges[c] = append(ranges[c], [2]uint64{clock, n})
		}
	}
	for c, rs := range d.pendingDS {
		ranges[c] = append(ranges[c], rs...)
	}
	clients := make([]uint64, 0, len(ranges))
	for c := range ranges {
		clients = append(clients, c)
	}
	slices.Sort(clients)
	slices.Reverse(clients)
	e.uint(uint64(len(clients)))
	for _, c := range clients {
		rs := sortMerge(ranges[c])
		e.uint(c)
		e.uint(uint64(len(rs)))
		for _, r := range rs {
			e.uint(r[0])
			e.uint(r[1])
		}
	}
}

// sortMerge sorts ranges by clock and merges overlapping and adjacent ones.
func sortMerge(rs [][2]uint64) [][2]uint64 {
	slices.SortFunc(rs, func(a, b [2]uint64) int {
		switch {
		case a[0] < b[0]:
			return -1
		case a[0] > b[0]:
			return 1
		}
		return 0
	})
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && out[n-1][0]+out[n-1][1] >= r[0] {
			if end := r[0] + r[1]; end > out[n-1][0]+out[n-1][1] {
				out[n-1][1] = end - out[n-1][0]
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

// encodeTransaction writes what the current transaction added (structs of every client from
// its state before) and deleted: the update yjs emits for a local change.
func (d *Doc) encodeTransaction(tr *transaction) []byte {
	type from struct{ client, clock uint64 }
	var list []from
	for c, clock := range tr.before {
		if d.state(c) > clock {
			list = append(list, from{c, clock})
		}
	}
	slices.SortFunc(list, func(a, b from) int {
		switch {
		case a.client > b.client:
			return -1
		case a.client < b.client:
			return 1
		}
		return 0
	})
	var e encoder
	e.uint(uint64(len(list)))
	for _, f := range list {
		structs := d.clients[f.client]
		start := find(structs, f.clock)
		e.uint(uint64(len(structs) - start)) //nolint:gosec // G115: find returns an index within structs: non-negative
		e.uint(f.client)
		e.uint(f.clock)
		for i := start; i < len(structs); i++ {
			off := uint64(0)
			if i == start {
				off = f.clock - structs[i].id.Clock
			}
			writeBlock(&e, structs[i], off)
		}
	}
	ranges := map[uint64][][2]uint64{}
	for _, r := range tr.deleted {
		ranges[r.client] = append(ranges[r.client], [2]uint64{r.clock, r.length})
	}
	clients := make([]uint64, 0, len(ranges))
	for c := range ranges {
		clients = append(clients, c)
	}
	slices.Sort(clients)
	slices.Reverse(clients)
	e.uint(uint64(len(clients)))
	for _, c := range clients {
		rs := sortMerge(ranges[c])
		e.uint(c)
		e.uint(uint64(len(rs)))
		for _, r := range rs {
			e.uint(r[0])
			e.uint(r[1])
		}
	}
	return e.buf
}
