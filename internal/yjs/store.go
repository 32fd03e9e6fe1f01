package yjs

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"slices"
	"sort"
)

// ID names one clock of one client; an item of length n holds n consecutive IDs.
type ID struct{ Client, Clock uint64 }

// block is one struct of the store: an item, or a GC struct (a range of garbage-collected
// clocks of which only the length is left).
type block struct {
	id     ID
	length uint64

	// The rest belong to items.
	origin, rightOrigin ID
	left, right         *block
	parent              *ytype
	sub                 string // parentSub: the map key, when hasSub
	content             content

	// Last, so that they share a word.
	gc                        bool
	hasOrigin, hasRightOrigin bool
	hasSub                    bool
	deleted                   bool
	// fresh: made by the update being applied under a journal (undo.go), which records
	// nothing of it.
	fresh bool
}

func (b *block) end() uint64 { return b.id.Clock + b.length }

func (b *block) lastID() ID { return ID{b.id.Client, b.id.Clock + b.length - 1} }

func (b *block) countable() bool { return !b.gc && b.content.countable() }

// visible is the item's share of its parent's length.
func (b *block) visible() bool { return !b.deleted && b.countable() }

// ytype is a shared type: a root (named in the document) or the content of an item.
type ytype struct {
	// ref is the type ref; a root's is rootRef until a reader says what it is.
	ref  uint8
	name string // XmlElement's node name, XmlHook's hook name, a root's name
	root bool
	item *block // the item holding the type; nil for roots

	start  *block            // the first item of the sequence
	m      map[string]*block // each key's current (rightmost) item
	length uint64            // visible countable length of the sequence
	depth  int               // nesting below the root
}

// Doc is a Yjs document: the struct store of every client, the root types, and what arrived
// before its dependencies. It is not safe for concurrent use.
type Doc struct {
	client  uint64
	clients map[uint64][]*block
	roots   map[string]*ytype

	pending map[uint64][]*pendingStruct
	// pendingDS holds, per client, the sorted deleted ranges of clocks not seen yet.
	pendingDS map[uint64][][2]uint64
	// waiters: for each client, the clients whose head struct waits for one of its clocks;
	// waitingOn: what each such client waits for (hints: the head is checked when woken).
	waiters   map[uint64]*waitHeap
	waitingOn map[uint64]waiter

	tr *transaction

	// structs, npending and held count the structs in the store, the structs waiting, and
	// the bytes their contents hold, so that Size costs nothing.
	structs, npending, npendingDS, held int
	// encBound is at least the length of the document's encoding (Limits.MaxEncoded).
	encBound int

	// An untrusted update's limits (limits.go): the work it did so far, its allowance, and
	// why it stopped (nil while it may go on).
	lim     *Limits
	ctx     context.Context //nolint:containedctx // only for the duration of one ApplyUntrusted
	work    int
	budget  int
	nextCtx int
	stop    error
	// j records what the update being applied changes, to undo it (undo.go).
	j *journal
	// replaceMax bounds what ReplaceWithin may make the document hold; replaceErr says why it
	// stopped.
	replaceMax int
	replaceErr error
}

// NewDoc returns an empty document whose local edits use a random client id, as yjs picks
// one (a uint32).
func NewDoc() *Doc {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return NewDocWithClient(uint64(binary.LittleEndian.Uint32(b[:])))
}

// NewDocWithClient returns an empty document whose local edits use the given client id.
func NewDocWithClient(client uint64) *Doc {
	return &Doc{client: client, clients: map[uint64][]*block{}, roots: map[string]*ytype{}, encBound: 2}
}

// Client is the client id of the document's local edits.
func (d *Doc) Client() uint64 { return d.client }

// Holds reports whether the document holds structs of a client, integrated or waiting.
func (d *Doc) Holds(client uint64) bool {
	return len(d.clients[client]) > 0 || len(d.pending[client]) > 0
}

// state is the next clock expected from a client.
func (d *Doc) state(client uint64) uint64 {
	s := d.clients[client]
	if len(s) == 0 {
		return 0
	}
	return s[len(s)-1].end()
}

// root returns the root type of that name, creating it.
func (d *Doc) root(name string) *ytype {
	t := d.roots[name]
	if t == nil {
		t = &ytype{ref: rootRef, name: name, root: true}
		d.roots[name] = t
		if d.j != nil {
			d.j.roots = append(d.j.roots, name)
		}
	}
	return t
}

// rootRef marks a root whose kind no reader has named.
const rootRef = 255

// find returns the index of the struct holding clock; the caller knows it is below the state.
func find(structs []*block, clock uint64) int {
	return sort.Search(len(structs), func(i int) bool { return structs[i].end() > clock })
}

// get returns the struct holding id; nil when the store does not have it.
func (d *Doc) get(id ID) *block {
	s := d.clients[id.Client]
	i := find(s, id.Clock)
	if i == len(s) {
		return nil
	}
	return s[i]
}

// cleanStart returns the item starting at id, splitting the one holding it.
func (d *Doc) cleanStart(id ID) *block {
	s := d.clients[id.Client]
	i := find(s, id.Clock)
	b := s[i]
	if b.id.Clock < id.Clock && !b.gc {
		r := d.split(b, id.Clock-b.id.Clock)
		d.insertAt(id.Client, i+1, r)
		return r
	}
	return b
}

// cleanEnd returns the item ending at id, splitting the one holding it.
func (d *Doc) cleanEnd(id ID) *block {
	s := d.clients[id.Client]
	i := find(s, id.Clock)
	b := s[i]
	if id.Clock != b.end()-1 && !b.gc {
		d.insertAt(id.Client, i+1, d.split(b, id.Clock-b.id.Clock+1))
	}
	return b
}

func (d *Doc) insertAt(client uint64, i int, b *block) {
	// Moving the client's structs costs in proportion to how many follow.
	d.work += 1 + (len(d.clients[client])-i)/64
	d.touchList(client)
	if d.j != nil {
		d.j.lists = append(d.j.lists, listOp{client: client, i: i, kind: listInsert})
	}
	d.clients[client] = slices.Insert(d.clients[client], i, b)
	d.structs++
}

// split cuts item b at diff and returns the right part, linked after b; the caller puts it in
// the store. The parts are merged again at the end of the transaction if nothing came between
// them.
func (d *Doc) split(b *block, diff uint64) *block {
	r := d.splitHere(b, diff)
	if d.tr != nil {
		d.tr.merge = append(d.tr.merge, r.id)
	}
	return r
}

// splitHere is split for a caller whose parts are looked at for merging anyway (deletions).
func (d *Doc) splitHere(b *block, diff uint64) *block {
	d.work++
	d.saveBlock(b)
	d.saveBlock(b.right)
	d.saveSplice(&b.content, diff)
	r := d.newBlock(block{
		id:             ID{b.id.Client, b.id.Clock + diff},
		length:         b.length - diff,
		origin:         ID{b.id.Client, b.id.Clock + diff - 1},
		hasOrigin:      true,
		left:           b,
		right:          b.right,
		rightOrigin:    b.rightOrigin,
		hasRightOrigin: b.hasRightOrigin,
		parent:         b.parent,
		sub:            b.sub,
		hasSub:         b.hasSub,
		deleted:        b.deleted,
		content:        b.content.splice(diff),
	})
	b.length = diff
	b.right = r
	if r.right != nil {
		r.right.left = r
	}
	if r.hasSub && r.right == nil && r.parent != nil && r.parent.m != nil {
		d.saveKey(r.parent, r.sub)
		r.parent.m[r.sub] = r
	}
	return r
}

// StateVector returns the encoded state vector: for each client, the next clock expected.
func (d *Doc) StateVector() []byte {
	var e encoder
	clients := d.sortedClients()
	e.uint(uint64(len(clients)))
	for _, c := range clients {
		e.uint(c)
		e.uint(d.state(c))
	}
	return e.buf
}

// sortedClients are the clients of the store, highest first (the order of the format).
func (d *Doc) sortedClients() []uint64 {
	out := make([]uint64, 0, len(d.clients))
	for c, s := range d.clients {
		if len(s) > 0 {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	slices.Reverse(out)
	return out
}

// ValidStateVector reports whether b is a well-formed encoded state vector, without building
// it: a client's step 1 is checked when it comes and answered later.
func ValidStateVector(b []byte) bool {
	_, err := readStateVector(b, func(uint64) bool { return false })
	return err == nil
}

// readStateVector reads an encoded state vector, keeping the entries of the clients keep
// wants: a state vector can name a client in two bytes, and a map entry takes twenty times
// that, so a document keeps only those of its own clients (the others change no answer).
func readStateVector(b []byte, keep func(uint64) bool) (map[uint64]uint64, error) {
	dec := decoder{buf: b}
	n, err := dec.count(2)
	if err != nil {
		return nil, err
	}
	sv := map[uint64]uint64{}
	for i := 0; i < n; i++ {
		c, err := dec.uint()
		if err != nil {
			return nil, err
		}
		clock, err := dec.uint()
		if err != nil {
			return nil, err
		}
		if keep(c) {
			sv[c] = clock
		}
	}
	if dec.left() != 0 {
		return nil, malformed("%d bytes after the state vector", dec.left())
	}
	return sv, nil
}

// DecodeStateVector reads an encoded state vector.
func DecodeStateVector(b []byte) (map[uint64]uint64, error) {
	return readStateVector(b, func(uint64) bool { return true })
}
