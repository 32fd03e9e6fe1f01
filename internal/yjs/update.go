package yjs

import (
	"cmp"
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
	// ds: each client's deleted ranges of clocks, as read.
	ds map[uint64][][2]uint64
}

// size counts what an update brings to d: the structs d does not hold yet, and the deleted
// ranges.
func (u decodedUpdate) size(d *Doc) (structs, ranges int) {
	for c, list := range u.structs {
		st := d.state(c)
		for _, p := range list {
			if !p.skip && p.b.end() > st {
				structs++
			}
		}
	}
	for _, rs := range u.ds {
		ranges += len(rs)
	}
	return structs, ranges
}

// decodeUpdate reads a whole v1 update, so that malformed bytes are refused before the
// document changes. What it reads may take at most maxAlloc bytes of memory (negative: any):
// an update from an untrusted client must not make the server allocate more than its limits
// allow before they are checked (a struct can take two bytes of the update, and a hundred
// times that here).
func decodeUpdate(b []byte, maxAlloc int) (decodedUpdate, error) {
	d := decoder{buf: b, alloc: maxAlloc, limited: maxAlloc >= 0}
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
		if err := d.charge(nStructs * perPending); err != nil {
			return u, err
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

func (d *decoder) readDeleteSet() (map[uint64][][2]uint64, error) {
	n, err := d.count(2)
	if err != nil {
		return nil, err
	}
	out := make(map[uint64][][2]uint64, min(n, 64))
	for i := 0; i < n; i++ {
		client, err := d.uint()
		if err != nil {
			return nil, err
		}
		m, err := d.count(2)
		if err != nil {
			return nil, err
		}
		if err := d.charge(16 * m); err != nil {
			return nil, err
		}
		if out[client] == nil {
			out[client] = make([][2]uint64, 0, m)
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
				out[client] = append(out[client], [2]uint64{clock, length})
			}
		}
	}
	return out, nil
}

// Apply merges a Yjs v1 update into the document. Structs whose dependencies have not arrived
// wait in the document until they do. Malformed bytes leave the document unchanged and return
// an error wrapping ErrMalformed. For trusted updates (the document's own log): an untrusted
// client's goes through ApplyUntrusted.
func (d *Doc) Apply(update []byte) error {
	_, err := d.ApplyChanged(update)
	return err
}

// ApplyChanged is Apply that also reports whether the update changed the document: added
// structs (integrated or waiting) or deleted something. A client's echo of what it already
// has changes nothing.
func (d *Doc) ApplyChanged(update []byte) (bool, error) {
	u, err := decodeUpdate(update, -1)
	if err != nil {
		return false, err
	}
	w, np := d.work, d.npending
	changed := d.apply(u)
	d.growBound(len(update), d.work-w, np)
	return changed, nil
}

// apply puts a decoded update into the document and reports whether it changed anything. Under
// limits (d.lim) it stops at the first struct or deletion past them, with d.stop set.
func (d *Doc) apply(u decodedUpdate) bool {
	d.begin()
	tr := d.tr
	changed := false
	if d.pending == nil {
		d.pending = map[uint64][]*pendingStruct{}
	}
	start := make([]uint64, 0, len(u.structs))
	for c, list := range u.structs {
		if d.queue(c, list) {
			changed = true
		}
		if len(d.pending[c]) > 0 {
			start = append(start, c)
		}
	}
	d.drain(start)
	if d.stop != nil {
		return changed
	}
	if d.applyDeletes(u.ds) {
		changed = true
	}
	if d.stop != nil {
		return changed
	}
	d.commit()
	if len(tr.deleted) > 0 {
		return true
	}
	for c, from := range tr.before {
		if d.state(c) != from {
			return true
		}
	}
	return changed
}

// queue adds an update's structs of one client to those waiting, in clock order, and reports
// whether any was new. Skip structs only mark a gap, which the clocks show anyway: queued, one
// could take the place of the real struct of the same range (a merged update's skip arriving
// before the struct it skipped). The queue is replaced, never written to, so a journal keeps
// the old one.
func (d *Doc) queue(c uint64, list []*pendingStruct) bool {
	st := d.state(c)
	list = slices.DeleteFunc(list, func(p *pendingStruct) bool { return p.skip || p.b.end() <= st })
	if len(list) == 0 {
		return false
	}
	old := d.pending[c]
	q := list
	if len(old) > 0 {
		q = slices.Concat(old, list)
		slices.SortStableFunc(q, func(a, b *pendingStruct) int { return cmp.Compare(a.b.id.Clock, b.b.id.Clock) })
		// A struct sent twice waits once.
		q = slices.CompactFunc(q, func(a, b *pendingStruct) bool {
			return a.b.id.Clock == b.b.id.Clock && a.b.length == b.b.length
		})
	}
	// Merging with what waits costs what waits (a few bytes may touch a long queue).
	d.work += len(old)
	if len(q) == len(old) {
		return false
	}
	d.savePending(c)
	d.pending[c] = q
	d.npending += len(q) - len(old)
	d.held += pendingBytes(q) - pendingBytes(old)
	if d.j != nil {
		for _, p := range list {
			p.b.fresh = true
			d.j.created = append(d.j.created, p.b)
		}
	}
	return true
}

// pendingBytes is what the contents of waiting structs hold.
func pendingBytes(q []*pendingStruct) int {
	n := 0
	for _, p := range q {
		n += p.b.content.bytes()
	}
	return n
}

// popPending removes the head of a client's waiting structs.
func (d *Doc) popPending(c uint64) {
	d.savePending(c)
	q := d.pending[c]
	if len(q) == 1 {
		delete(d.pending, c)
	} else {
		d.pending[c] = q[1:]
	}
	d.npending--
}

// ErrTooComplex is the refusal of an untrusted update past its work budget (ApplyUntrusted).
var ErrTooComplex = fmt.Errorf("%w: the update is too costly to integrate", ErrMalformed)

// drain integrates every pending struct whose dependencies are present, starting from the
// clients that received structs. A client's head struct that lacks a dependency registers as a
// waiter on the client it needs (d.waiters, kept between updates) and that client is worked on
// next (yjs follows missing dependencies the same way); integrating wakes the waiters whose
// clock has arrived. Each head waits at most once per dependency it lacks, so the work is
// O(n log n) for any input, structs whose dependencies never arrive (or depend on each other,
// which only hostile input does) simply stay pending, and an update costs what it brings, not
// the number of clients that wait.
func (d *Doc) drain(work []uint64) {
	// Highest client first, as yjs reads them: work is a stack.
	slices.Sort(work)
	queued := make(map[uint64]bool, len(work))
	for _, c := range work {
		queued[c] = true
	}
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
				d.popPending(cur)
				d.held -= s.b.content.bytes()
				continue
			}
			if m, _, missing := d.missing(s); missing {
				if d.register(cur, s) && !queued[m] && len(d.pending[m]) > 0 && m != cur {
					work = append(work, m)
					queued[m] = true
				}
				break
			}
			if d.over() {
				return
			}
			d.popPending(cur)
			d.track(cur)
			d.integrate(s, st-s.b.id.Clock)
			for _, w := range d.wake(cur) {
				if !queued[w] {
					work = append(work, w)
					queued[w] = true
				}
			}
		}
	}
	if len(d.pending) == 0 && len(queued) > 8 {
		// A map that once held many clients (a document's load) keeps its size.
		d.pending = nil
	}
	if len(d.waiters) == 0 && len(d.waitingOn) == 0 {
		d.waiters, d.waitingOn = nil, nil // likewise: nothing waits
	}
}

// register makes client c's head struct s wait for the clock it lacks, and reports whether it
// was not waiting for it already: two heads that need each other (only hostile input does
// that) would otherwise queue each other forever.
func (d *Doc) register(c uint64, s *pendingStruct) bool {
	m, need, _ := d.missing(s)
	w := waiter{need: need, client: m}
	if cur, ok := d.waitingOn[c]; ok && cur == w {
		return false
	}
	if d.waitingOn == nil {
		d.waitingOn = map[uint64]waiter{}
	}
	if d.waiters == nil { // an undo may bring back one without the other
		d.waiters = map[uint64]*waitHeap{}
	}
	d.saveWaitingOn(c)
	d.waitingOn[c] = w
	h := d.waiters[m]
	if h == nil {
		h = &waitHeap{}
		d.waiters[m] = h
	}
	heap.Push(h, waiter{need: need, client: c})
	d.saveWait(m, waiter{need: need, client: c}, false)
	return true
}

// registerHead registers a client's head struct when it waits for another client (after an
// undo, whose update may have consumed the registration).
func (d *Doc) registerHead(c uint64) {
	q := d.pending[c]
	if len(q) == 0 || q[0].b.id.Clock > d.state(c) {
		return
	}
	if _, _, missing := d.missing(q[0]); missing {
		d.register(c, q[0])
	}
}

// wake returns the clients waiting for clocks of c that have arrived. Registrations are hints:
// the woken client's head is checked again.
func (d *Doc) wake(c uint64) []uint64 {
	h := d.waiters[c]
	if h == nil {
		return nil
	}
	now := d.state(c)
	var out []uint64
	for h.Len() > 0 && (*h)[0].need < now {
		w := heap.Pop(h).(waiter)
		d.saveWait(c, w, true)
		if d.waitingOn[w.client] == (waiter{need: w.need, client: c}) {
			d.saveWaitingOn(w.client)
			delete(d.waitingOn, w.client)
		}
		out = append(out, w.client)
	}
	if h.Len() == 0 {
		delete(d.waiters, c)
	}
	return out
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
	d.work++
	if !b.fresh {
		// It waited since an earlier update: its fields change below.
		d.saveBlock(b)
		if t := b.content.typ(); t != nil {
			d.saveType(t)
		}
	}
	if b.gc {
		if offset > 0 {
			b.id.Clock += offset
			b.length -= offset
		}
		d.appendStruct(b)
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
		held := b.content.bytes()
		d.saveSplice(&b.content, offset) // a struct that waited keeps its own text on an undo
		b.content = b.content.splice(offset)
		d.held += b.content.bytes() - held
		b.length -= offset
	}
	if b.parent == nil {
		d.held -= b.content.bytes()
		d.appendStruct(d.newBlock(block{id: b.id, length: b.length, gc: true, deleted: true}))
		return
	}
	d.integrateItem(b)
}

// newBlock allocates a struct made during an update (a split, a GC struct): under a journal it
// is marked fresh, so that nothing records its changes.
func (d *Doc) newBlock(v block) *block {
	b := &v
	if d.j != nil {
		b.fresh = true
		d.j.created = append(d.j.created, b)
	}
	return b
}

// integrateItem places an item among its siblings (YATA) and links it in.
func (d *Doc) integrateItem(b *block) {
	p := b.parent
	if (b.left == nil && (b.right == nil || b.right.left != nil)) || (b.left != nil && b.left.right != b.right) {
		b.left = d.resolveConflicts(b)
	}
	d.saveType(p)
	if b.left != nil {
		b.right = b.left.right
		d.saveBlock(b.left)
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
		d.saveBlock(b.right)
		b.right.left = b
	} else if b.hasSub {
		if p.m == nil {
			p.m = map[string]*block{}
		}
		d.saveKey(p, b.sub)
		p.m[b.sub] = b
		if b.left != nil {
			d.deleteItem(b.left)
		}
	}
	if !b.hasSub && b.visible() {
		p.length += b.length
	}
	d.appendStruct(b)
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

// resolveConflicts finds the left neighbour of an item among the items concurrently inserted
// at its place (YATA's rules, as yjs orders them).
func (d *Doc) resolveConflicts(b *block) *block {
	p := b.parent
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
	return left
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
	d.work++
	if b.parent != nil && !b.hasSub && b.countable() {
		d.saveType(b.parent)
		b.parent.length -= b.length
	}
	d.saveDeleted(b)
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

// applyDeletes applies the update's deleted ranges, and those waiting for structs that have
// now arrived, to what the store holds; the rest wait. It reports whether the waiting
// deletions grew.
func (d *Doc) applyDeletes(byClient map[uint64][][2]uint64) bool {
	// Waiting deletions whose first clock the client has reached (by this update, or by local
	// edits since, as yjs retries them on every update) may apply now. Only the clients that
	// gained structs, and the local one, can have reached them: an update looks at those, not
	// at every client with deletions waiting.
	retry := func(c uint64) {
		if rs := d.pendingDS[c]; len(rs) > 0 && rs[0][0] < d.state(c) {
			if _, ok := byClient[c]; !ok {
				byClient[c] = nil
			}
		}
	}
	for c := range d.tr.before {
		retry(c)
	}
	retry(d.client)
	grew := false
	for _, c := range sortedKeysU64(byClient) {
		old := d.pendingDS[c]
		all := byClient[c] // the update's own: sorted in place
		if len(old) > 0 {
			all = slices.Concat(old, all)
			d.work += len(old) // merged and sorted again: what waits costs
		}
		all = sortMerge(all)
		// Sorted: those below the state apply now, the rest wait; one may straddle it.
		st := d.state(c)
		cut, _ := slices.BinarySearchFunc(all, st, func(r [2]uint64, st uint64) int { return cmp.Compare(r[0], st) })
		now, rest := all[:cut:cut], all[cut:]
		if n := len(now); n > 0 && now[n-1][0]+now[n-1][1] > st {
			last := now[n-1]
			now[n-1] = [2]uint64{last[0], st - last[0]} // all is this call's own
			rest = append([][2]uint64{{st, last[0] + last[1] - st}}, rest...)
		}
		if rangesLength(rest) > rangesLength(old) {
			grew = true
		}
		if len(rest) > 0 || len(old) > 0 {
			d.savePendingDS(c)
			d.npendingDS += len(rest) - len(old)
			if len(rest) == 0 {
				delete(d.pendingDS, c)
			} else {
				if d.pendingDS == nil {
					d.pendingDS = map[uint64][][2]uint64{}
				}
				d.pendingDS[c] = rest
			}
		}
		if len(now) > 0 {
			d.deleteRanges(c, now)
		}
		if d.stop != nil {
			return grew
		}
	}
	return grew
}

func rangesLength(rs [][2]uint64) uint64 {
	var n uint64
	for _, r := range rs {
		n += r[1]
	}
	return n
}

func sortedKeysU64[V any](m map[uint64]V) []uint64 {
	out := make([]uint64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// deleteRanges deletes sorted, disjoint ranges of a client's clocks below its state, splitting
// items at their edges, in one pass over the client's structs from the first range on: the
// work is the structs passed and the pieces made, however many ranges there are (one split
// at a time would move the rest of the list each time).
func (d *Doc) deleteRanges(c uint64, ranges [][2]uint64) {
	s := d.clients[c]
	i0 := find(s, ranges[0][0])
	tail := make([]*block, 0, len(s)-i0+2*len(ranges))
	k := 0
	split := false
	for i := i0; i < len(s); i++ {
		b := s[i]
		for k < len(ranges) && ranges[k][0]+ranges[k][1] <= b.id.Clock {
			k++
		}
		if k == len(ranges) {
			tail = append(tail, s[i:]...)
			break
		}
		if b.deleted || ranges[k][0] >= b.end() {
			tail = append(tail, b)
			continue
		}
		cur := b
		for k < len(ranges) && ranges[k][0] < cur.end() {
			// The list is not written yet: a stop leaves it as it was, and the journal holds
			// what the splits changed.
			if d.over() {
				return
			}
			r0, r1 := ranges[k][0], ranges[k][0]+ranges[k][1]
			if r0 > cur.id.Clock {
				right := d.splitHere(cur, r0-cur.id.Clock)
				d.structs++
				tail = append(tail, cur)
				cur, split = right, true
			}
			if r1 < cur.end() {
				right := d.splitHere(cur, r1-cur.id.Clock)
				d.structs++
				d.deleteItem(cur)
				tail = append(tail, cur)
				cur, split = right, true
				k++
				continue
			}
			d.deleteItem(cur)
			break
		}
		tail = append(tail, cur)
	}
	if split {
		d.rewrite(c, i0, tail)
	}
}

// rewrite replaces a client's structs from i on by tail (the caller counts the structs).
func (d *Doc) rewrite(c uint64, i int, tail []*block) {
	s := d.clients[c]
	d.touchList(c)
	if d.j != nil {
		d.j.lists = append(d.j.lists, listOp{client: c, i: i, tail: slices.Clone(s[i:]), kind: listRewrite})
	}
	d.work += (len(s)-i)/64 + len(tail)/64
	clear(s[i:])
	d.clients[c] = append(s[:i], tail...)
}

// begin starts a transaction, in which only the clients it tracks may gain structs: what a
// transaction does costs what it touches, not the number of clients the document has seen
// (every session of a browser is a new one).
func (d *Doc) begin() { d.tr = &transaction{before: map[uint64]uint64{}} }

// track records a client's state at the start of the transaction, before it gains structs.
func (d *Doc) track(c uint64) {
	if _, ok := d.tr.before[c]; !ok {
		d.tr.before[c] = d.state(c)
	}
}

// commit ends the transaction: deleted content is garbage-collected (yjs's default gc) and
// structs that can be are merged with their left neighbours, so a long typing session does
// not stay one struct per keystroke. Each client's list is compacted in one pass from its
// first merge, so merging costs what the list holds from there, however many structs merge.
func (d *Doc) commit() {
	tr := d.tr
	for _, r := range tr.deleted {
		structs := d.clients[r.client]
		for i := find(structs, r.clock); i < len(structs) && structs[i].id.Clock < r.clock+r.length; i++ {
			if b := structs[i]; b.deleted && !b.gc {
				d.gcItem(r.client, i, false)
			}
		}
	}
	spans := map[uint64][][2]int{} // per client, index ranges whose structs may merge left
	add := func(c uint64, lo, hi int) {
		spans[c] = append(spans[c], [2]int{max(lo, 1), hi})
	}
	for _, r := range tr.deleted {
		s := d.clients[r.client]
		add(r.client, find(s, r.clock), min(find(s, r.clock+r.length-1)+1, len(s)-1))
	}
	for c, from := range tr.before {
		if s := d.clients[c]; len(s) > 0 && d.state(c) != from {
			add(c, find(s, from), len(s)-1)
		}
	}
	for _, id := range tr.merge {
		s := d.clients[id.Client]
		i := find(s, id.Clock)
		add(id.Client, i, min(i+1, len(s)-1))
	}
	for c, sp := range spans {
		d.mergeSpans(c, sp)
	}
	d.tr = nil
}

// mergeSpans merges each struct in the index ranges into its left neighbour when they can be
// one, in one pass over the client's list from the first merge.
func (d *Doc) mergeSpans(c uint64, spans [][2]int) {
	slices.SortFunc(spans, func(a, b [2]int) int { return a[0] - b[0] })
	s := d.clients[c]
	first := -1
	for _, sp := range spans {
		for i := sp[0]; i <= sp[1] && i < len(s); i++ {
			if mergeable(s[i-1], s[i]) {
				first = i
				break
			}
		}
		if first >= 0 {
			break
		}
	}
	if first < 0 {
		return
	}
	tail := make([]*block, 0, len(s)-first)
	k := 0
	for i := first; i < len(s); i++ {
		for k < len(spans) && spans[k][1] < i {
			k++
		}
		r := s[i]
		var l *block
		if len(tail) > 0 {
			l = tail[len(tail)-1]
		} else {
			l = s[first-1]
		}
		if k < len(spans) && spans[k][0] <= i && mergeable(l, r) {
			d.merge(l, r)
			continue
		}
		tail = append(tail, r)
	}
	d.rewrite(c, first, tail)
}

// merge joins r into its left neighbour l.
func (d *Doc) merge(l, r *block) {
	d.work++
	d.structs--
	d.saveBlock(l)
	l.length += r.length
	if l.gc {
		return
	}
	// Text merged into text of the other width is widened: what it holds changes.
	held := l.content.bytes() + r.content.bytes()
	l.content.mergeWith(&r.content)
	d.held += l.content.bytes() - held
	l.right = r.right
	if l.right != nil {
		d.saveBlock(l.right)
		l.right.left = l
	}
	if r.hasSub && r.parent != nil && r.parent.m[r.sub] == r {
		d.saveKey(r.parent, r.sub)
		r.parent.m[r.sub] = l
	}
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

// gcItem drops the content of the deleted item at i of a client's list: it keeps its place as
// deleted content, or, when its parent was collected too, becomes a GC struct.
func (d *Doc) gcItem(client uint64, i int, parentGone bool) {
	b := d.clients[client][i]
	d.work++
	if b.content.ref == refType {
		t := b.content.typ()
		d.saveType(t)
		for c := t.start; c != nil; c = c.right {
			if !c.gc {
				d.gcChild(c)
			}
		}
		t.start = nil
		for _, c := range t.m {
			for ; c != nil; c = c.left {
				if !c.gc {
					d.gcChild(c)
				}
			}
		}
		t.m = nil
	}
	d.held -= b.content.bytes()
	if parentGone {
		d.setStruct(client, i, d.newBlock(block{id: b.id, length: b.length, gc: true, deleted: true}))
		return
	}
	d.saveBlock(b)
	b.content = content{ref: refDeleted, n: b.length}
}

// gcChild collects an item of a collected type: it becomes a GC struct.
func (d *Doc) gcChild(b *block) {
	s := d.clients[b.id.Client]
	if i := find(s, b.id.Clock); i < len(s) && s[i] == b {
		d.gcItem(b.id.Client, i, true)
	}
}

// String describes an ID for errors and logs.
func (id ID) String() string { return fmt.Sprintf("%d:%d", id.Client, id.Clock) }
