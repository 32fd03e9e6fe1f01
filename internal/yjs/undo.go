package yjs

import (
	"container/heap"
	"sync"
)

// journal records what one untrusted update changes in the state that existed before it, so
// that a refusal midway (too much work, too large, a cancelled caller) leaves the document
// exactly as it was: an update is applied whole or not at all, on every path. What the update
// itself created needs no record: it goes with the state that referred to it.
//
// Blocks and types are restored to their first saved value (the one from before the update),
// so the order of those saves does not matter; the structs lists of the clients shift as
// structs are split and merged, so their changes are undone in reverse order.
type journal struct {
	blocks    map[*block]int // index in saved
	saved     []blockSave
	types     map[*ytype]ytype
	undeleted []*block // pre-existing items this update deleted (nothing else changed)
	mapKeys   []mapKeySave
	lists     []listOp
	lens      map[uint64]int // each touched client's number of structs before the update
	pending   map[uint64][]*pendingStruct
	pendingDS map[uint64][][2]uint64
	units     []unitSave
	roots     []string
	// The registrations of waiting structs the update changed: d.waitingOn's entries before
	// their first change, and the entries it pushed to and popped from d.waiters.
	waitingOn map[uint64]waitingOnSave
	waits     []waitOp
	// created: what the update made, marked fresh until the journal ends.
	created []*block
	// pendingNil: the pending map was nil before the update.
	pendingNil bool
	// The document's counts before the update.
	structs, npending, npendingDS, held int
}

type blockSave struct {
	b *block
	v block
}

type mapKeySave struct {
	// m is the map the entry was in when it changed, not its type: a type's fields, its map
	// among them, are put back on their own (saveType), and the type may have had no map
	// before the update, or another one, by the time the entries are undone.
	m   map[string]*block
	key string
	old *block
	had bool
}

// listOp is one change of a client's structs list: an insertion at i (undone by removing it),
// a replacement at i (old), or a rewrite of the list from i on (tail, the old elements).
type listOp struct {
	client uint64
	i      int
	old    *block
	tail   []*block
	kind   uint8
}

const (
	listInsert = iota
	listSet
	listRewrite
)

type waitingOnSave struct {
	w   waiter
	had bool
}

// waitOp is an entry pushed to (or popped from, popped) the waiters of client m.
type waitOp struct {
	m      uint64
	w      waiter
	popped bool
}

type unitSave struct {
	p *uint16
	v uint16
}

// journals keeps journals between updates, shared by every document: an update allocates
// none, and a loaded document holds none while it waits for the next.
var journals = sync.Pool{New: func() any {
	return &journal{blocks: map[*block]int{}, types: map[*ytype]ytype{}, lens: map[uint64]int{},
		pending: map[uint64][]*pendingStruct{}, pendingDS: map[uint64][][2]uint64{}, waitingOn: map[uint64]waitingOnSave{}}
}}

// beginJournal starts recording; the document's changes are undone by undo until endJournal.
func (d *Doc) beginJournal() {
	j := journals.Get().(*journal)
	j.pendingNil = d.pending == nil
	j.structs, j.npending, j.npendingDS, j.held = d.structs, d.npending, d.npendingDS, d.held
	d.j = j
}

// endJournal forgets the record: the update stays. The journal goes back to the pool, unless
// it grew large.
func (d *Doc) endJournal() {
	j := d.j
	d.j = nil
	if j == nil {
		return
	}
	for _, b := range j.created {
		b.fresh = false
	}
	if len(j.saved) > 4096 || len(j.undeleted) > 4096 || len(j.lists) > 4096 || len(j.created) > 4096 || len(j.waits) > 4096 {
		return
	}
	clear(j.created)
	j.created = j.created[:0]
	clear(j.blocks)
	clear(j.types)
	clear(j.lens)
	clear(j.pending)
	clear(j.pendingDS)
	clear(j.waitingOn)
	j.waits = j.waits[:0]
	clear(j.saved) // drop references to blocks
	j.saved = j.saved[:0]
	clear(j.undeleted)
	j.undeleted = j.undeleted[:0]
	clear(j.mapKeys)
	j.mapKeys = j.mapKeys[:0]
	clear(j.lists)
	j.lists = j.lists[:0]
	j.units = j.units[:0]
	j.roots = j.roots[:0]
	journals.Put(j)
}

// saveBlock records b before a change of any of its fields.
func (d *Doc) saveBlock(b *block) {
	j := d.j
	if j == nil || b == nil || b.fresh {
		return
	}
	if _, ok := j.blocks[b]; ok {
		return
	}
	j.blocks[b] = len(j.saved)
	j.saved = append(j.saved, blockSave{b, *b})
}

// saveDeleted records that b, not deleted before, is about to be marked deleted.
func (d *Doc) saveDeleted(b *block) {
	if d.j != nil && !b.fresh {
		d.j.undeleted = append(d.j.undeleted, b)
	}
}

// saveType records t before a change of any of its fields (not its map's entries: saveKey).
func (d *Doc) saveType(t *ytype) {
	j := d.j
	if j == nil || t == nil || (t.item != nil && t.item.fresh) {
		return
	}
	if _, ok := j.types[t]; !ok {
		j.types[t] = *t
	}
}

// saveKey records t's entry for key before it changes.
func (d *Doc) saveKey(t *ytype, key string) {
	j := d.j
	if j == nil || (t.item != nil && t.item.fresh) {
		return
	}
	old, had := t.m[key]
	j.mapKeys = append(j.mapKeys, mapKeySave{t.m, key, old, had})
}

// saveUnit records a UTF-16 unit of a string array before it is overwritten.
func (d *Doc) saveUnit(p *uint16) {
	if d.j != nil {
		d.j.units = append(d.j.units, unitSave{p, *p})
	}
}

// saveSplice records the UTF-16 unit a splice of c at diff overwrites: cutting a wide text
// between the halves of a surrogate pair writes U+FFFD over the second half, in the array the
// text shares with the content as it was.
func (d *Doc) saveSplice(c *content, diff uint64) {
	if s := c.text(); c.ref == refString && s.wide {
		if u := s.at(int(diff) - 1); u >= 0xd800 && u <= 0xdbff { //nolint:gosec // G115: diff is within the content
			d.saveUnit(&s.u16()[diff])
		}
	}
}

// touchList records a client's number of structs before the update first changes its list.
func (d *Doc) touchList(client uint64) {
	if j := d.j; j != nil {
		if _, ok := j.lens[client]; !ok {
			j.lens[client] = len(d.clients[client])
		}
	}
}

// appendStruct puts a struct at the end of its client's list.
func (d *Doc) appendStruct(b *block) {
	d.touchList(b.id.Client)
	d.clients[b.id.Client] = append(d.clients[b.id.Client], b)
	d.structs++
}

// setStruct replaces the struct at i of a client's list.
func (d *Doc) setStruct(client uint64, i int, b *block) {
	s := d.clients[client]
	if d.j != nil {
		d.j.lists = append(d.j.lists, listOp{client: client, i: i, old: s[i], kind: listSet})
	}
	s[i] = b
}

// savePending records a client's waiting structs before they change; the queue itself is
// never written to, only replaced.
func (d *Doc) savePending(c uint64) {
	if j := d.j; j != nil {
		if _, ok := j.pending[c]; !ok {
			j.pending[c] = d.pending[c]
		}
	}
}

// savePendingDS records a client's waiting deletions before they change.
func (d *Doc) savePendingDS(c uint64) {
	if j := d.j; j != nil {
		if _, ok := j.pendingDS[c]; !ok {
			j.pendingDS[c] = d.pendingDS[c]
		}
	}
}

// saveWaitingOn records client c's registration before it changes.
func (d *Doc) saveWaitingOn(c uint64) {
	if j := d.j; j != nil {
		if _, ok := j.waitingOn[c]; !ok {
			w, had := d.waitingOn[c]
			j.waitingOn[c] = waitingOnSave{w, had}
		}
	}
}

// saveWait records an entry pushed to or popped from the waiters of client m.
func (d *Doc) saveWait(m uint64, w waiter, popped bool) {
	if d.j != nil {
		d.j.waits = append(d.j.waits, waitOp{m, w, popped})
	}
}

// undoWaits restores the registrations of waiting structs: an update refused after it woke a
// struct must leave it registered (else it waits forever once its clock comes), and one that
// registered its own must not leave them behind (memory nothing counts or frees). It costs
// the waiters of the clients the update touched.
func (d *Doc) undoWaits(j *journal) {
	net := map[waitOp]int{} // entries to put back (popped) or take out (pushed)
	for _, op := range j.waits {
		k := waitOp{m: op.m, w: op.w}
		if op.popped {
			net[k]++
		} else {
			net[k]--
		}
	}
	if len(net) > 0 && d.waiters == nil {
		d.waiters = map[uint64]*waitHeap{}
	}
	touched := map[uint64]bool{}
	for k, n := range net {
		if n == 0 {
			continue
		}
		touched[k.m] = true
		h := d.waiters[k.m]
		if h == nil {
			h = &waitHeap{}
			d.waiters[k.m] = h
		}
		for ; n > 0; n-- {
			*h = append(*h, k.w)
		}
	}
	for m := range touched {
		h := d.waiters[m]
		kept := (*h)[:0]
		for _, w := range *h {
			if k := (waitOp{m: m, w: w}); net[k] < 0 {
				net[k]++
				continue
			}
			kept = append(kept, w)
		}
		clear((*h)[len(kept):])
		*h = kept
		if len(kept) == 0 {
			delete(d.waiters, m)
		} else {
			heap.Init(h)
		}
	}
	for c, s := range j.waitingOn {
		switch {
		case s.had && d.waitingOn == nil:
			d.waitingOn = map[uint64]waiter{c: s.w}
		case s.had:
			d.waitingOn[c] = s.w
		default:
			delete(d.waitingOn, c)
		}
	}
}

// undo restores the document as it was when the journal began, and ends the journal.
func (d *Doc) undo() {
	j := d.j
	d.j = nil
	d.tr = nil
	for k := len(j.lists) - 1; k >= 0; k-- {
		op := j.lists[k]
		s := d.clients[op.client]
		switch op.kind {
		case listInsert:
			d.clients[op.client] = append(s[:op.i], s[op.i+1:]...)
		case listSet:
			s[op.i] = op.old
		case listRewrite:
			d.clients[op.client] = append(s[:op.i], op.tail...)
		}
	}
	for c, n := range j.lens {
		if n == 0 {
			delete(d.clients, c)
			continue
		}
		s := d.clients[c]
		clear(s[n:])
		d.clients[c] = s[:n]
	}
	for k := len(j.units) - 1; k >= 0; k-- {
		*j.units[k].p = j.units[k].v
	}
	for _, s := range j.saved {
		*s.b = s.v
	}
	for _, b := range j.undeleted {
		b.deleted = false
	}
	for t, v := range j.types {
		*t = v
	}
	for k := len(j.mapKeys) - 1; k >= 0; k-- {
		m := j.mapKeys[k]
		if m.had {
			m.m[m.key] = m.old
		} else {
			delete(m.m, m.key)
		}
	}
	for _, name := range j.roots {
		delete(d.roots, name)
	}
	if j.pendingNil {
		d.pending = nil
	} else {
		if d.pending == nil {
			d.pending = map[uint64][]*pendingStruct{}
		}
		for c, q := range j.pending {
			if len(q) == 0 {
				delete(d.pending, c)
			} else {
				d.pending[c] = q
			}
		}
	}
	for c, r := range j.pendingDS {
		if len(r) == 0 {
			delete(d.pendingDS, c)
		} else {
			d.pendingDS[c] = r
		}
	}
	d.structs, d.npending, d.npendingDS, d.held = j.structs, j.npending, j.npendingDS, j.held
	d.undoWaits(j)
	// Wake-ups registered meanwhile are hints; those the update consumed are made again.
	for c := range j.pending {
		d.registerHead(c)
	}
	j.saved = nil // the journal is dropped: it may be large
}
