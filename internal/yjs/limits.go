package yjs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"unsafe"
)

// Limits bound what one untrusted update may do to a document (ApplyUntrusted). A real
// client's edit is far within them; what they stop is an update built to cost the server
// (memory, or CPU that grows faster than the document).
type Limits struct {
	// MaxWork is the update's work budget in steps; zero: 100,000, and 8 per struct and
	// deleted range it brings (those the document holds already not counted), and 3 per
	// struct the document holds.
	MaxWork int
	// MaxEncoded bounds the length of the document's encoding (Encode(nil)) after the update,
	// the size it is stored and answered at; zero: no bound.
	MaxEncoded int
	// MaxSize bounds the memory the document holds (Size) during and after the update; zero:
	// no bound.
	MaxSize int
	// MaxPending bounds the structs and deleted ranges that wait for updates not received
	// yet; zero: DefaultMaxPending.
	MaxPending int
	// MayWrite, when set, is asked for each client whose structs the update adds (structs
	// the document does not hold yet) or whose clocks not held yet it deletes (deletions not
	// waiting in the document already): an update that does either for a client it refuses
	// is refused whole with ErrForeignClient. A client's clocks are its own: structs written
	// under another's client id take the clocks that client writes next, and its own edits
	// are then dropped as already held, by this document and by every peer; a deletion of
	// them waits and deletes its edits as they arrive.
	MayWrite func(client uint64) bool
}

// DefaultMaxPending is Limits.MaxPending's default: real clients send updates in order, so
// structs wait only briefly (an update of another replica's client not polled yet).
const DefaultMaxPending = 10_000

// The work budget of one untrusted update: steps of conflict resolution, structs integrated,
// split, deleted, collected and merged, and structs moved in the clients' lists (64 to a
// step). Real updates take a step or two per struct they bring, and deleting or collecting
// what the document holds is once per struct, so the document's own structs are in the budget
// too (deleting everything is allowed). What it stops is work that grows faster than that:
// YATA made quadratic by insertions crafted to conflict (in yjs too), and structs split one at
// a time from long lists. It counts the structs and deleted ranges an update brings, not its
// bytes: structs the document holds already, a long string, cost nothing to pad a frame with.
// A step is 25 to 110 ns, so the largest legitimate update (a whole document of the memory
// limit's 350,000 structs) takes under half a second, and so does a hostile one.
const (
	workBase      = 100_000
	workPerStruct = 8
	workPerHeld   = 3
	// ctxEvery is how many steps go between looks at the caller's context.
	ctxEvery = 4096
)

// defaultMaxWork is the work budget of an untrusted update that brings structs new structs and
// ranges deleted ranges to the document.
func (d *Doc) defaultMaxWork(structs, ranges int) int {
	return workBase + workPerStruct*(structs+ranges) + workPerHeld*d.structs
}

// ErrTooLarge is the refusal of an untrusted update that would make the document larger than
// its limits (Limits); each limit has its own error wrapping it.
var (
	ErrTooLarge = errors.New("yjs: the document would exceed its size limit")
	// ErrEncodedTooLarge: past Limits.MaxEncoded.
	ErrEncodedTooLarge = fmt.Errorf("%w: encoded", ErrTooLarge)
	// ErrMemoryTooLarge: past Limits.MaxSize (too many structs, mostly).
	ErrMemoryTooLarge = fmt.Errorf("%w: in memory", ErrTooLarge)
	// ErrTooManyPending: past Limits.MaxPending.
	ErrTooManyPending = fmt.Errorf("%w: waiting for updates not received", ErrTooLarge)
)

// ErrForeignClient is the refusal of an untrusted update that adds structs, or deletes clocks
// not held yet, of a client id Limits.MayWrite refuses.
var ErrForeignClient = errors.New("yjs: the update writes structs of another writer's client")

// Applied is what ApplyUntrusted did.
type Applied struct {
	// Changed: the update added structs (integrated or waiting) or deleted something.
	Changed bool
	// Work is the steps it took (counted as its budget counts them), refused or not: for
	// callers that budget a client's work over time.
	Work int
}

// ApplyUntrusted applies an update from a client that may be hostile: whole or not at all.
// Malformed bytes wrap ErrMalformed; an update past its work budget stops at once with
// ErrTooComplex (which wraps ErrMalformed); one that would pass lim gets ErrTooLarge; when ctx
// ends first, its error. Every refusal leaves the document exactly as it was (a journal of
// what the update changed is undone), so a caller in step with a log keeps its document.
func (d *Doc) ApplyUntrusted(ctx context.Context, update []byte, lim Limits) (Applied, error) {
	maxAlloc := -1
	if lim.MaxSize > 0 {
		maxAlloc = max(0, lim.MaxSize-d.Size())
	}
	u, err := decodeUpdate(update, maxAlloc)
	if err != nil {
		return Applied{}, err
	}
	if err := ctx.Err(); err != nil {
		return Applied{}, fmt.Errorf("yjs: update abandoned: %w", err)
	}
	if c, ok := d.foreignClient(u, lim.MayWrite); ok {
		return Applied{}, fmt.Errorf("%w: client %d", ErrForeignClient, c)
	}
	if lim.MaxPending <= 0 {
		lim.MaxPending = DefaultMaxPending
	}
	d.lim, d.ctx, d.stop = &lim, ctx, nil
	d.work, d.nextCtx = 0, ctxEvery
	d.budget = lim.MaxWork
	if d.budget <= 0 {
		structs, ranges := u.size(d)
		d.budget = d.defaultMaxWork(structs, ranges)
	}
	defer func() { d.lim, d.ctx = nil, nil }()
	d.beginJournal()
	np, enc := d.npending, d.encBound
	changed := d.apply(u)
	d.growBound(len(update), d.work, np)
	if d.stop == nil {
		d.checkAfter()
	}
	out := Applied{Changed: changed, Work: d.work}
	if err := d.stop; err != nil {
		d.stop = nil
		d.undo()
		d.encBound = enc
		return Applied{Work: d.work}, err
	}
	d.endJournal()
	return out, nil
}

// foreignClient returns a client whose structs u adds, or whose clocks not held yet u
// deletes, and mayWrite refuses. A deletion of clocks the document does not hold waits for
// them and deletes the client's next edits as they arrive, here and in every peer: writing
// under the client's id as much as a struct is. Structs and deletions the document has
// waiting already may come along (a peer's sync step 2 carries those it was relayed).
func (d *Doc) foreignClient(u decodedUpdate, mayWrite func(uint64) bool) (uint64, bool) {
	if mayWrite == nil {
		return 0, false
	}
	for c, list := range u.structs {
		st, waiting := d.state(c), d.pending[c]
		adds := slices.ContainsFunc(list, func(p *pendingStruct) bool {
			return !p.skip && p.b.end() > st && !waitsAlready(waiting, p.b)
		})
		if adds && !mayWrite(c) {
			return c, true
		}
	}
	for c, rs := range u.ds {
		st, waiting := d.state(c), d.pendingDS[c]
		ahead := slices.ContainsFunc(rs, func(r [2]uint64) bool {
			return r[0]+r[1] > st && !covers(waiting, max(r[0], st), r[0]+r[1])
		})
		if ahead && !mayWrite(c) {
			return c, true
		}
	}
	return 0, false
}

// waitsAlready reports whether one of the waiting structs q (in clock order) spans b's clocks:
// b is then dropped as held when it is queued, or the one waiting goes first.
func waitsAlready(q []*pendingStruct, b *block) bool {
	i, _ := slices.BinarySearchFunc(q, b.id.Clock+1, func(p *pendingStruct, k uint64) int { return cmp.Compare(p.b.id.Clock, k) })
	return i > 0 && q[i-1].b.end() >= b.end()
}

// covers reports whether the sorted, merged ranges rs hold every clock of [from, to).
func covers(rs [][2]uint64, from, to uint64) bool {
	i, _ := slices.BinarySearchFunc(rs, from, func(r [2]uint64, k uint64) int { return cmp.Compare(r[0], k+1) })
	return i > 0 && rs[i-1][0]+rs[i-1][1] >= to
}

// checkAfter sets d.stop when the document, the update applied, passes its limits.
func (d *Doc) checkAfter() {
	lim := d.lim
	switch {
	case d.work > d.budget:
		d.stop = ErrTooComplex // in its last struct
	case d.npending+d.npendingDS > lim.MaxPending:
		d.stop = fmt.Errorf("%w: %d structs and deletions (at most %d)", ErrTooManyPending, d.npending+d.npendingDS, lim.MaxPending)
	case lim.MaxSize > 0 && d.Size() > lim.MaxSize:
		d.stop = fmt.Errorf("%w: %d bytes (at most %d)", ErrMemoryTooLarge, d.Size(), lim.MaxSize)
	case lim.MaxEncoded > 0 && d.encBound > lim.MaxEncoded:
		// The bound passed the limit: measure (the document's whole encoding; only near the
		// limit, as the bound is exact again after).
		n := d.EncodedSize()
		// The measure is the update's work too, a step per 16 bytes as an answer's encoding:
		// near the limit every update may need one, however small.
		d.work += n / 16
		if n > lim.MaxEncoded {
			d.stop = fmt.Errorf("%w: %d bytes (at most %d)", ErrEncodedTooLarge, n, lim.MaxEncoded)
		}
	}
}

// over reports whether the untrusted update being applied must stop: past its work budget,
// past its memory limit, or its caller gone (d.stop says which). Checked between structs.
func (d *Doc) over() bool {
	if d.lim == nil {
		return false
	}
	if d.stop != nil {
		return true
	}
	switch {
	case d.work > d.budget:
		d.stop = ErrTooComplex
	case d.lim.MaxSize > 0 && d.Size() > d.lim.MaxSize:
		d.stop = fmt.Errorf("%w: %d bytes (at most %d)", ErrMemoryTooLarge, d.Size(), d.lim.MaxSize)
	case d.work >= d.nextCtx:
		d.nextCtx = d.work + ctxEvery
		if err := d.ctx.Err(); err != nil {
			d.stop = fmt.Errorf("yjs: update abandoned: %w", err)
		}
	}
	return d.stop != nil
}

// growBound raises the bound on the document's encoded length by what a change of n update
// bytes and work steps can add: each step (a struct integrated, split or deleted) adds at most
// a struct's header and origins, or a deleted range, to the encoding; waiting structs add a
// skip each. Merges and garbage collection only shrink it.
func (d *Doc) growBound(n, work, npendingBefore int) {
	d.encBound += n + 64*work + 16*max(0, d.npending-npendingBefore)
}

// EncodedSize is the length of Encode(nil), without keeping the encoding. It also makes the
// bound Limits.MaxEncoded is checked against exact again.
func (d *Doc) EncodedSize() int {
	e := scratch.Get().(*encoder)
	e.buf = e.buf[:0]
	d.encodeTo(e, nil)
	n := len(e.buf)
	if cap(e.buf) <= 8<<20 {
		scratch.Put(e)
	}
	d.encBound = n
	return n
}

// What Size counts for a struct in the store (with its place in its client's list), one
// waiting, and a waiting deleted range.
const (
	perStruct  = int(unsafe.Sizeof(block{})) + 8
	perPending = int(unsafe.Sizeof(pendingStruct{}) + unsafe.Sizeof(block{}))
	perRange   = 16
)

// scratch holds encoders whose buffers EncodedSize reuses.
var scratch = sync.Pool{New: func() any { return new(encoder) }}

// Size estimates the bytes of memory the document holds, to bound what one document may cost:
// its structs, those waiting, and their contents. It costs nothing (the counts are kept as
// the document changes).
func (d *Doc) Size() int {
	return d.structs*perStruct + d.npending*perPending + d.npendingDS*perRange + d.held
}
