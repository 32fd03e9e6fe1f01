package yjs

import (
	"container/heap"
	"fmt"
	"slices"
)

// pendingStruct is a struct read from an update and not integrated yet: its parent is still a
// root name or an ID, and it may wait for structs it depends on.
type pendingStruct struct {
	b         *block
	skip      bool
	rootName  string
	hasRoot   bool
	parentID  ID
	hasParent bool
}

// dsRange is a deleted range of one client's clocks.
type dsRange struct{ client, clock, length uint64 }

// transaction collects what one change did, for the clean-up yjs does after each: garbage
// collection of deleted content and merging of neighbouring structs.
type transaction struct {
	// before holds the state, at the start, of every client that may gain structs.
	before  map[uint64]uint64
	deleted []dsRange
	merge   []ID
}

// decodedUpdate is an update read completely, before any of it touches the document.
type decodedUpdate struct {
	structs map[uint64][]*pendingStruct
	ds      []dsRange
}

// decodeUpdate reads a whole v1 update, so that malformed bytes are refused before the
// document changes.
func decodeUpdate(b []byte) (decodedUpdate, error) {
	d := decoder{buf: b}
	u := decodedUpdate{structs: map[uint64][]*pendingStruct{}}
	nClients, err := d.count(3)
	if err != nil {
		return u, err
	}
	for i := 0; i < nClients; i++ {
		nStructs, err := d.count(1)
		if err != nil {
			return u, err
		}
		client, err := d.uint()
		if err != nil {
			return u, err
		}
		clock, err := d.uint()
		if err != nil {
			return u, err
		}
		if _, dup := u.structs[client]; dup {
			return u, malformed("client %d appears twice", client)
		}
		list := make([]*pendingStruct, 0, nStructs)
		for j := 0; j < nStructs; j++ {
			s, err := d.readStruct(client, clock)
			if err != nil {
				return u, err
			}
			clock += s.b.length
			if clock > maxSafe {
				return u, malformed("clock beyond 2^53")
			}
			list = append(list, s)
		}
		u.structs[client] = list
	}
	if u.ds, err = d.readDeleteSet(); err != nil {
		return u, err
	}
	if d.left() != 0 {
		return u, malformed("%d bytes after the update", d.left())
	}
	return u, nil
}

func (d *decoder) readStruct(client, clock uint64) (*pendingStruct, error) {
	info, err := d.byte()
	if err != nil {
		return nil, err
	}
	id := ID{client, clock}
	switch info & 0x1f {
	case refGC, refSkip:
		n, err := d.uint()
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, malformed("empty struct")
		}
		if info&0x1f == refSkip {
			return &pendingStruct{b: &block{id: id, length: n}, skip: true}, nil
		}
		return &pendingStruct{b: &block{id: id, length: n, gc: true, deleted: true}}, nil
	}
	s := &pendingStruct{b: &block{id: id}}
	b := s.b
	if info&0x80 != 0 {
		if b.origin, err = d.id(); err != nil {
			return nil, err
		}
		b.hasOrigin = true
	}
	if info&0x40 != 0 {
		if b.rightOrigin, err = d.id(); err != nil {
			return nil, err
		}
		b.hasRightOrigin = true
	}
	if info&0xc0 == 0 {
		isRoot, err := d.uint()
		if err != nil {
			return nil, err
		}
		if isRoot == 1 {
			if s.rootName, err = d.string(); err != nil {
				return nil, err
			}
			s.hasRoot = true
		} else {
			if s.parentID, err = d.id(); err != nil {
				return nil, err
			}
			s.hasParent = true
		}
		if info&0x20 != 0 {
			if b.sub, err = d.string(); err != nil {
				return nil, err
			}
			b.hasSub = true
		}
	}
	if b.content, err = d.readContent(info & 0x1f); err != nil {
		return nil, err
	}
	b.length = b.content.length()
	return s, nil
}

func (d *decoder) id() (ID, error) {
	c, err := d.uint()
	if err != nil {
		return ID{}, err
	}
	k, err := d.uint()
	return ID{c, k}, err
}

func (d *decoder) readDeleteSet() ([]dsRange, error) {
	n, err := d.count(2)
	if err != nil {
		return nil, err
	}
	var out []dsRange
	for i := 0; i < n; i++ {
		client, err := d.uint()
		if err != nil {
			return nil, err
		}
		m, err := d.count(2)
		if err != nil {
			return nil, err
		}
		for j := 0; j < m; j++ {
			clock, err := d.uint()
			if err != nil {
				return nil, err
			}
			length, err := d.uint()
			if err != nil {
				return nil, err
			}
			if clock+length > maxSafe {
				return nil, malformed("deleted range beyond 2^53")
			}
			if length > 0 {
				out = append(out, dsRange{client, clock, length})
			}
		}
	}
	return out, nil
}

// Apply merges a Yjs v1 update into the document. Structs whose dependencies have not arrived
// wait in the document until they do. Malformed bytes leave the document unchanged and return
// an error wrapping ErrMalformed.
func (d *Doc) Apply(update []byte) error {
	_, err := d.ApplyChanged(update)
	return err
}

// ApplyChanged is Apply that also reports whether the update changed the document: added
// structs (integrated or waiting) or deleted something. A client's echo of what it already
// has changes nothing.
func (d *Doc) ApplyChanged(update []byte) (bool, error) {
	u, err := decodeUpdate(update)
	if err != nil {
		return false, err
	}
	pendingBefore, dsBefore := d.pendingCount(), d.pendingDSLength()
	d.budget = 0
	if d.limited {
		d.work = 0
		d.budget = 100_000 + 64*len(update)
	}
	if d.pending == nil {
		d.pending = map[uint64][]*pendingStruct{}
	}
	for c, list := range u.structs {
		// Skip structs only mark a gap, which the clocks show anyway: queued, one could take
		// the place of the real struct of the same range (a merged update's skip arriving
		// before the struct it skipped).
		list = slices.DeleteFunc(list, func(p *pendingStruct) bool { return p.skip })
		if len(list) == 0 {
			continue
		}
		q := d.pending[c]
		if len(q) == 0 {
			d.pending[c] = list
			continue
		}
		q = append(q, list...)
		slices.SortStableFunc(q, func(a, b *pendingStruct) int {
			switch {
			case a.b.id.Clock < b.b.id.Clock:
				return -1
			case a.b.id.Clock > b.b.id.Clock:
				return 1
			}
			return 0
		})
		// A struct sent twice waits once.
		q = slices.CompactFunc(q, func(a, b *pendingStruct) bool {
			return a.b.id.Clock == b.b.id.Clock && a.b.length == b.b.length
		})
		d.pending[c] = q
	}
	// Only the clients with pending structs can gain any (drain integrates those alone).
	d.begin()
	for c := range d.pending {
		d.track(c)
	}
	tr := d.tr
	defer d.commit()
	d.drain()
	if d.budget > 0 && d.work > d.budget {
		// Stopped at a struct boundary: what waits from this update goes, its deletions too.
		d.dropPendingFrom(u)
		return true, ErrTooComplex
	}
	d.pendingDS = append(d.pendingDS, u.ds...)
	d.applyDeletes()
	if len(tr.deleted) > 0 || d.pendingCount() != pendingBefore || d.pendingDSLength() != dsBefore {
		return true, nil
	}
	for c, from := range tr.before {
		if d.state(c) != from {
			return true, nil
		}
	}
	return false, nil
}

// ErrTooComplex is Apply's refusal of an update past the work limit (LimitWork).
var ErrTooComplex = fmt.Errorf("%w: the update is too costly to integrate", ErrMalformed)

// dropPendingFrom removes the structs of u that wait, after an update was cut short.
func (d *Doc) dropPendingFrom(u decodedUpdate) {
	from := map[*pendingStruct]bool{}
	for _, list := range u.structs {
		for _, p := range list {
			from[p] = true
		}
	}
	for c, q := range d.pending {
		q = slices.DeleteFunc(q, func(p *pendingStruct) bool { return from[p] })
		if len(q) == 0 {
			delete(d.pending, c)
		} else {
			d.pending[c] = q
		}
	}
}

// pendingDSLength is how many clocks waiting deletions cover: a range extended by an update
// is a change even when the number of ranges stays.
func (d *Doc) pendingDSLength() uint64 {
	var n uint64
	for _, r := range d.pendingDS {
		n += r.length
	}
	return n
}

// pendingCount is how many structs and deletions wait.
func (d *Doc) pendingCount() int {
	n := len(d.pendingDS)
	for _, q := range d.pending {
		n += len(q)
	}
	return n
}

// drain integrates every pending struct whose dependencies are present. A client's head
// struct that lacks a dependency registers as a waiter on the client it needs and that client
// is worked on next (yjs follows missing dependencies the same way); integrating wakes the
// waiters whose clock has arrived. Each head waits at most once per dependency it lacks, so
// the work is O(n log n) for any input, and structs whose dependencies never arrive (or
// depend on each other, which only hostile input does) simply stay pending.
func (d *Doc) drain() {
	work := make([]uint64, 0, len(d.pending))
	for c := range d.pending {
		work = append(work, c)
	}
	// Highest client first, as yjs reads them: work is a stack.
	slices.Sort(work)
	queued := make(map[uint64]bool, len(work))
	for _, c := range work {
		queued[c] = true
	}
	waiters := map[uint64]*waitHeap{}
	// waitingOn is the dependency each registered head waits for. Two heads that need each
	// other (only hostile input does that) would otherwise queue each other forever.
	waitingOn := map[uint64]waiter{}
	for len(work) > 0 {
		cur := work[len(work)-1]
		work = work[:len(work)-1]
		queued[cur] = false
		for {
			q := d.pending[cur]
			if len(q) == 0 {
				break
			}
			s := q[0]
			st := d.state(cur)
			if s.b.id.Clock > st {
				break // a gap: earlier clocks of this client have not arrived
			}
			if s.skip || s.b.end() <= st {
				d.pending[cur] = q[1:]
				continue
			}
			if m, need, missing := d.missing(s); missing {
				// An entry is always for this dependency: it goes when its waiter is woken,
				// and until then the head's first missing dependency stays the same (m's
				// clock only moves when m integrates, which wakes the waiter at once).
				if w, ok := waitingOn[cur]; ok && w.client == m && w.need == need {
					break // registered already; m was queued then, and wakes cur
				}
				waitingOn[cur] = waiter{need: need, client: m}
				h := waiters[m]
				if h == nil {
					h = &waitHeap{}
					waiters[m] = h
				}
				heap.Push(h, waiter{need: need, client: cur})
				if !queued[m] && len(d.pending[m]) > 0 && m != cur {
					work = append(work, m)
					queued[m] = true
				}
				break
			}
			if d.budget > 0 && d.work > d.budget {
				return
			}
			d.pending[cur] = q[1:]
			d.integrate(s, st-s.b.id.Clock)
			if h := waiters[cur]; h != nil {
				now := d.state(cur)
				for h.Len() > 0 && (*h)[0].need < now {
					w := heap.Pop(h).(waiter)
					delete(waitingOn, w.client)
					if !queued[w.client] {
						work = append(work, w.client)
						queued[w.client] = true
					}
				}
			}
		}
	}
	for c, q := range d.pending {
		if len(q) == 0 {
			delete(d.pending, c)
		}
	}
	if len(d.pending) == 0 && len(queued) > 8 {
		// A map that once held many clients (a document's load) keeps its size, and every
		// update would iterate it.
		d.pending = nil
	}
}

// waiter is a client whose head struct needs clock need of another client.
type waiter struct {
	need   uint64
	client uint64
}

// waitHeap orders waiters by the clock they need.
type waitHeap []waiter

func (h waitHeap) Len() int           { return len(h) }
func (h waitHeap) Less(i, j int) bool { return h[i].need < h[j].need }
func (h waitHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *waitHeap) Push(x any)        { *h = append(*h, x.(waiter)) }
func (h *waitHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	*h = old[:len(old)-1]
	return w
}

// missing reports a client and clock that s depends on and the store lacks.
func (d *Doc) missing(s *pendingStruct) (uint64, uint64, bool) {
	b := s.b
	if b.gc {
		return 0, 0, false
	}
	if b.hasOrigin && b.origin.Clock >= d.state(b.origin.Client) {
		return b.origin.Client, b.origin.Clock, true
	}
	if b.hasRightOrigin && b.rightOrigin.Clock >= d.state(b.rightOrigin.Client) {
		return b.rightOrigin.Client, b.rightOrigin.Clock, true
	}
	if s.hasParent && s.parentID.Clock >= d.state(s.parentID.Client) {
		return s.parentID.Client, s.parentID.Clock, true
	}
	return 0, 0, false
}

// integrate puts a struct whose dependencies are present into the document, skipping its
// first offset clocks (already known).
func (d *Doc) integrate(s *pendingStruct, offset uint64) {
	b := s.b
	if b.gc {
		if offset > 0 {
			b.id.Clock += offset
			b.length -= offset
		}
		d.clients[b.id.Client] = append(d.clients[b.id.Client], b)
		return
	}
	// Resolve the neighbours and the parent (yjs: getMissing).
	if b.hasOrigin {
		b.left = d.cleanEnd(b.origin)
		b.origin = b.left.lastID()
	}
	if b.hasRightOrigin {
		b.right = d.cleanStart(b.rightOrigin)
		b.rightOrigin = b.right.id
	}
	switch {
	case (b.left != nil && b.left.gc) || (b.right != nil && b.right.gc):
		b.parent = nil
	case s.hasRoot:
		b.parent = d.root(s.rootName)
	case s.hasParent:
		if p := d.get(s.parentID); p != nil && !p.gc && p.content.ref == refType {
			b.parent = p.content.typ()
		}
	default:
		// The left neighbour's parent and key, else the right's (yjs: getMissing).
		if b.left != nil {
			b.parent, b.sub, b.hasSub = b.left.parent, b.left.sub, b.left.hasSub
		} else if b.right != nil {
			b.parent, b.sub, b.hasSub = b.right.parent, b.right.sub, b.right.hasSub
		}
	}
	if offset > 0 {
		b.id.Clock += offset
		b.left = d.cleanEnd(ID{b.id.Client, b.id.Clock - 1})
		b.origin = b.left.lastID()
		b.hasOrigin = true
		b.content = b.content.splice(offset)
		b.length -= offset
	}
	if b.parent == nil {
		d.clients[b.id.Client] = append(d.clients[b.id.Client], &block{id: b.id, length: b.length, gc: true, deleted: true})
		return
	}
	d.integrateItem(b)
}

// integrateItem places an item among its siblings (YATA) and links it in.
func (d *Doc) integrateItem(b *block) {
	p := b.parent
	if (b.left == nil && (b.right == nil || b.right.left != nil)) || (b.left != nil && b.left.right != b.right) {
		left := b.left
		var o *block
		switch {
		case left != nil:
			o = left.right
		case b.hasSub:
			o = p.m[b.sub]
			for o != nil && o.left != nil {
				o = o.left
			}
		default:
			o = p.start
		}
		conflicting := map[*block]bool{}
		before := map[*block]bool{}
		for o != nil && o != b.right {
			d.work++
			before[o] = true
			conflicting[o] = true
			if sameOrigin(b.hasOrigin, b.origin, o.hasOrigin, o.origin) {
				if o.id.Client < b.id.Client {
					left = o
					clear(conflicting)
				} else if sameOrigin(b.hasRightOrigin, b.rightOrigin, o.hasRightOrigin, o.rightOrigin) {
					break
				}
			} else if oo := d.originItem(o); oo != nil && before[oo] {
				if !conflicting[oo] {
					left = o
					clear(conflicting)
				}
			} else {
				break
			}
			o = o.right
		}
		b.left = left
	}
	if b.left != nil {
		b.right = b.left.right
		b.left.right = b
	} else {
		var r *block
		if b.hasSub {
			r = p.m[b.sub]
			for r != nil && r.left != nil {
				r = r.left
			}
		} else {
			r = p.start
			p.start = b
		}
		b.right = r
	}
	if b.right != nil {
		b.right.left = b
	} else if b.hasSub {
		if p.m == nil {
			p.m = map[string]*block{}
		}
		p.m[b.sub] = b
		if b.left != nil {
			d.deleteItem(b.left)
		}
	}
	if !b.hasSub && b.visible() {
		p.length += b.length
	}
	d.clients[b.id.Client] = append(d.clients[b.id.Client], b)
	switch b.content.ref {
	case refType:
		t := b.content.typ()
		t.item = b
		t.depth = p.depth + 1
	case refDeleted:
		d.tr.deleted = append(d.tr.deleted, dsRange{b.id.Client, b.id.Clock, b.length})
		b.deleted = true
	}
	if (p.item != nil && p.item.deleted) || (b.hasSub && b.right != nil) {
		d.deleteItem(b)
	}
}

// originItem is the item holding o's origin, when o has one the store holds.
func (d *Doc) originItem(o *block) *block {
	if !o.hasOrigin {
		return nil
	}
	return d.get(o.origin)
}

func sameOrigin(ha bool, a ID, hb bool, b ID) bool {
	return ha == hb && (!ha || a == b)
}

// deleteItem marks an item deleted, with everything in it.
func (d *Doc) deleteItem(b *block) {
	if b.deleted || b.gc {
		return
	}
	if b.parent != nil && !b.hasSub && b.countable() {
		b.parent.length -= b.length
	}
	b.deleted = true
	if d.tr != nil {
		d.tr.deleted = append(d.tr.deleted, dsRange{b.id.Client, b.id.Clock, b.length})
	}
	if b.content.ref == refType {
		t := b.content.typ()
		for c := t.start; c != nil; c = c.right {
			if !c.deleted {
				d.deleteItem(c)
			}
		}
		for _, c := range t.m {
			if !c.deleted {
				d.deleteItem(c)
			}
		}
	}
}

// applyDeletes applies the pending delete set to what the store holds and keeps the rest.
func (d *Doc) applyDeletes() {
	if len(d.pendingDS) == 0 {
		return
	}
	var rest []dsRange
	for _, r := range d.pendingDS {
		st := d.state(r.client)
		end := r.clock + r.length
		if r.clock >= st {
			rest = append(rest, r)
			continue
		}
		if st < end {
			rest = append(rest, dsRange{r.client, st, end - st})
			end = st
		}
		structs := d.clients[r.client]
		i := find(structs, r.clock)
		if b := structs[i]; !b.deleted && b.id.Clock < r.clock {
			d.insertAt(r.client, i+1, d.split(b, r.clock-b.id.Clock))
			i++
		}
		for ; i < len(d.clients[r.client]); i++ {
			structs = d.clients[r.client]
			b := structs[i]
			if b.id.Clock >= end {
				break
			}
			if !b.deleted {
				if end < b.end() {
					d.insertAt(r.client, i+1, d.split(b, end-b.id.Clock))
				}
				d.deleteItem(b)
			}
		}
	}
	// Keep each waiting range once, however often it is sent.
	byClient := map[uint64][][2]uint64{}
	for _, r := range rest {
		byClient[r.client] = append(byClient[r.client], [2]uint64{r.clock, r.length})
	}
	d.pendingDS = d.pendingDS[:0]
	for c, rs := range byClient {
		for _, r := range sortMerge(rs) {
			d.pendingDS = append(d.pendingDS, dsRange{c, r[0], r[1]})
		}
	}
}

// begin starts a transaction, in which only the clients it tracks may gain structs: what a
// transaction does costs what it touches, not the number of clients the document has seen
// (every session of a browser is a new one).
func (d *Doc) begin() { d.tr = &transaction{before: map[uint64]uint64{}} }

// track records a client's state at the start of the transaction; the caller knows which
// clients may gain structs.
func (d *Doc) track(c uint64) {
	if _, ok := d.tr.before[c]; !ok {
		d.tr.before[c] = d.state(c)
	}
}

// commit ends the transaction: deleted content is garbage-collected (yjs's default gc) and
// structs that can be are merged with their left neighbours, so a long typing session does
// not stay one struct per keystroke.
func (d *Doc) commit() {
	tr := d.tr
	d.tr = nil
	for _, r := range tr.deleted {
		structs := d.clients[r.client]
		for i := find(structs, r.clock); i < len(structs) && structs[i].id.Clock < r.clock+r.length; i++ {
			b := structs[i]
			if b.deleted && !b.gc {
				d.gcItem(b, false)
			}
		}
	}
	for _, r := range tr.deleted {
		structs := d.clients[r.client]
		if len(structs) == 0 {
			continue
		}
		hi := find(structs, r.clock+r.length-1)
		if hi >= len(structs)-1 {
			hi = len(structs) - 1
		} else {
			hi++
		}
		for i := hi; i > 0 && structs[i].id.Clock >= r.clock; {
			i -= 1 + d.mergeLefts(r.client, i)
			structs = d.clients[r.client]
		}
	}
	for c, from := range tr.before {
		s := d.clients[c]
		if len(s) == 0 || d.state(c) == from {
			continue
		}
		first := max(find(s, from), 1)
		for i := len(s) - 1; i >= first; {
			i -= 1 + d.mergeLefts(c, i)
		}
	}
	for k := len(tr.merge) - 1; k >= 0; k-- {
		id := tr.merge[k]
		s := d.clients[id.Client]
		i := find(s, id.Clock)
		if i+1 < len(s) && d.mergeLefts(id.Client, i+1) > 1 {
			continue
		}
		if i > 0 && i < len(d.clients[id.Client]) {
			d.mergeLefts(id.Client, i)
		}
	}
}

// mergeLefts merges the struct at i into its left neighbours while they merge, and returns
// how many were merged away.
func (d *Doc) mergeLefts(client uint64, i int) int {
	s := d.clients[client]
	n := 0
	for i-n > 0 && i-n < len(s) {
		l, r := s[i-n-1], s[i-n]
		if !mergeable(l, r) {
			break
		}
		if l.gc {
			l.length += r.length
		} else {
			l.content.mergeWith(&r.content)
			l.length += r.length
			l.right = r.right
			if l.right != nil {
				l.right.left = l
			}
			if r.hasSub && r.parent != nil && r.parent.m[r.sub] == r {
				r.parent.m[r.sub] = l
			}
		}
		s = slices.Delete(s, i-n, i-n+1)
		n++
	}
	d.clients[client] = s
	return n
}

func mergeable(l, r *block) bool {
	if l.gc != r.gc || l.deleted != r.deleted || l.end() != r.id.Clock {
		return false
	}
	if l.gc {
		return true
	}
	if !r.hasOrigin || r.origin != l.lastID() || l.right != r || !sameOrigin(l.hasRightOrigin, l.rightOrigin, r.hasRightOrigin, r.rightOrigin) {
		return false
	}
	switch l.content.ref {
	case refDeleted, refString, refJSON, refAny:
		return l.content.ref == r.content.ref
	}
	return false
}

// gcItem drops a deleted item's content: it keeps its place as deleted content, or, when its
// parent was collected too, becomes a GC struct.
func (d *Doc) gcItem(b *block, parentGone bool) {
	if b.content.ref == refType {
		t := b.content.typ()
		for c := t.start; c != nil; c = c.right {
			if !c.gc {
				d.gcItem(c, true)
			}
		}
		t.start = nil
		for _, c := range t.m {
			for ; c != nil; c = c.left {
				if !c.gc {
					d.gcItem(c, true)
				}
			}
		}
		t.m = nil
	}
	if parentGone {
		s := d.clients[b.id.Client]
		i := find(s, b.id.Clock)
		if i < len(s) && s[i] == b {
			s[i] = &block{id: b.id, length: b.length, gc: true, deleted: true}
		}
		return
	}
	b.content = content{ref: refDeleted, n: b.length}
}

// String describes an ID for errors and logs.
func (id ID) String() string { return fmt.Sprintf("%d:%d", id.Client, id.Clock) }
