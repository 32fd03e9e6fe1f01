package yjs

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

// liveLimits are the limits live sync and the REST operations give untrusted updates.
var liveLimits = Limits{MaxEncoded: 5 << 20, MaxSize: 64 << 20}

// insertThenSplit returns an update inserting n characters into "content" (client 5), and one
// deleting every second of them: n/2 ranges that split the insert into n pieces.
func insertThenSplit(t testing.TB, n int) (insert, split []byte) {
	a := NewDocWithClient(5)
	insert, err := a.Replace("content", Text, strings.Repeat("a", n))
	if err != nil {
		t.Fatal(err)
	}
	var e encoder
	e.uint(0) // no structs
	e.uint(1) // one client's deletions
	e.uint(5)
	e.uint(uint64(n / 2))
	for i := 1; i < n; i += 2 {
		e.uint(uint64(i))
		e.uint(1)
	}
	return insert, e.buf
}

// One update that inserts a long text and deletes every second character of it splits the
// text into millions of structs (hundreds of bytes each in memory, a dozen encoded): refused
// before it takes more than the document may hold, and nothing of it stays.
func TestSplittingUpdateIsRefused(t *testing.T) {
	insert, split := insertThenSplit(t, 1_600_000)
	// The structs of the insert, then the deletions: one frame of about 5 MiB.
	frame := append(bytes.Clone(insert[:len(insert)-1]), split[1:]...)
	if len(frame) > 5<<20+64<<10 {
		t.Fatalf("the frame is %d bytes", len(frame))
	}
	d := NewDocWithClient(1)
	if _, err := d.Replace("content", Text, "before"); err != nil {
		t.Fatal(err)
	}
	before := dump(d)
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	var err error
	took := cpuOf(func() { _, err = d.ApplyUntrusted(context.Background(), frame, liveLimits) })
	runtime.ReadMemStats(&m1)
	if !errors.Is(err, ErrMemoryTooLarge) {
		t.Fatalf("apply = %v, want ErrMemoryTooLarge", err)
	}
	if dump(d) != before {
		t.Fatal("the refused update changed the document")
	}
	// Everything it allocated, garbage included: the limit is 64 MiB of document.
	if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 200<<20 {
		t.Fatalf("refusing it allocated %d MiB", alloc>>20)
	}
	if took > 5*time.Second {
		t.Fatalf("refusing it took %v of CPU", took)
	}
	t.Logf("refused in %v, %d MiB allocated: %v", took, (m1.TotalAlloc-m0.TotalAlloc)>>20, err)
}

// Within the limits a text can be split into hundreds of thousands of pieces, and replacing
// it then deletes and merges them in linear time (it took minutes when each merge moved the
// rest of the list).
func TestSplitTextIsReplacedInLinearTime(t *testing.T) {
	insert, split := insertThenSplit(t, 320_000)
	d := NewDocWithClient(1)
	mustApply(t, d, insert)
	start := time.Now()
	if _, err := d.ApplyUntrusted(context.Background(), split, liveLimits); err != nil {
		t.Fatal(err)
	}
	t.Logf("split into %d structs in %v", d.structs, time.Since(start))
	if d.structs != 320_000 {
		t.Fatalf("%d structs", d.structs)
	}
	var err error
	if took := cpuOf(func() { _, err = d.Replace("content", Text, "z") }); took > 3*time.Second {
		t.Fatalf("replacing took %v of CPU", took)
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := d.JSON("content", Text); got != "z" || d.structs > 4 {
		t.Fatalf("read %q from %d structs", got, d.structs)
	}
}

// An update that would take long stops soon after its caller is gone, and changes nothing.
func TestApplyStopsWhenTheCallerIsGone(t *testing.T) {
	base := NewDocWithClient(5)
	if _, err := base.Replace("t", Text, strings.Repeat("a", 30000)); err != nil {
		t.Fatal(err)
	}
	state, _ := base.Encode(nil)
	// Insertions of a higher client, right to left at one place: quadratic conflict
	// resolution, some 200 million steps.
	const n = 20000
	var e encoder
	e.uint(1)
	e.uint(n)
	e.uint(9)
	e.uint(0)
	for k := 0; k < n; k++ {
		e.byte(0x80 | refString)
		e.uint(5)
		e.uint(uint64(n - 1 - k))
		e.string("x")
	}
	e.uint(0)
	d := NewDocWithClient(1)
	mustApply(t, d, state)
	before := dump(d)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := d.ApplyUntrusted(ctx, e.buf, Limits{MaxWork: 1 << 40})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("apply = %v, want the deadline", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("stopped after %v", took)
	}
	if dump(d) != before {
		t.Fatal("the abandoned update changed the document")
	}
}

// clientOneWrites is client 1's first edit ("mine") and its next ("mine, more"), and a room
// that holds the first.
func clientOneWrites(t *testing.T) (first, next []byte, room *Doc) {
	t.Helper()
	a := NewDocWithClient(1)
	first, err := a.Replace("content", Text, "mine")
	if err != nil {
		t.Fatal(err)
	}
	if next, err = a.Replace("content", Text, "mine, more"); err != nil {
		t.Fatal(err)
	}
	room = NewDoc()
	mustApply(t, room, first)
	return first, next, room
}

// notOne are limits whose MayWrite refuses client 1.
var notOne = Limits{MayWrite: func(c uint64) bool { return c != 1 }}

// MayWrite refuses an update that adds structs of a client it refuses, whole (the other
// client's structs in it are not taken either), before anything changes; structs the
// document holds already may come along with anyone's update (a client's sync step 2 carries
// everything the server lacks, others' structs it holds included).
func TestMayWriteRefusesAnotherWritersClient(t *testing.T) {
	first, next, room := clientOneWrites(t)
	other := NewDocWithClient(9)
	mustApply(t, other, first)
	theirs, err := other.Replace("content", Text, "mine, theirs")
	if err != nil {
		t.Fatal(err)
	}
	before := dump(room)
	both, err := Merge(next, theirs)
	if err != nil {
		t.Fatal(err)
	}
	for name, u := range map[string][]byte{"client 1's next edit": next, "client 1's and 9's": both} {
		if _, err := room.ApplyUntrusted(context.Background(), u, notOne); !errors.Is(err, ErrForeignClient) {
			t.Fatalf("%s: %v, want ErrForeignClient", name, err)
		}
		if dump(room) != before {
			t.Fatalf("%s: a refused update changed the document", name)
		}
	}
	// Client 9's edit with client 1's structs the room holds: taken.
	carried, err := Merge(first, theirs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := room.ApplyUntrusted(context.Background(), carried, notOne); err != nil {
		t.Fatal(err)
	}
	if got := room.JSON("content", Text); got != "mine, theirs" {
		t.Fatalf("room reads %q", got)
	}
	// Without MayWrite, client 1's edit is taken as before.
	if _, err := room.ApplyUntrusted(context.Background(), next, Limits{}); err != nil {
		t.Fatal(err)
	}
}

// deleteOnly is an update of deleted ranges alone: client's clocks [clock, clock+length).
func deleteOnly(client uint64, ranges ...[2]uint64) []byte {
	var e encoder
	e.uint(0) // no structs
	e.uint(1) // one client's deletions
	e.uint(client)
	e.uint(uint64(len(ranges)))
	for _, r := range ranges {
		e.uint(r[0])
		e.uint(r[1])
	}
	return e.buf
}

// MayWrite refuses deleted ranges at clocks of a refused client the document does not hold:
// they would wait, and delete that client's next edits as they arrive (in the document and in
// every peer it relays them to), an edit made to vanish before it is written. Deleting what
// the document holds of any client stays allowed (deleting another's text is an edit), and
// so do deletions the document has waiting already (a peer's sync step 2 carries its own).
func TestMayWriteRefusesDeletingAnotherWritersNextClocks(t *testing.T) {
	_, next, room := clientOneWrites(t)
	before := dump(room)
	for name, u := range map[string][]byte{
		"client 1's next clocks":       deleteOnly(1, [2]uint64{4, 1 << 20}),
		"held and next clocks, in one": deleteOnly(1, [2]uint64{2, 10}),
		"far ahead":                    deleteOnly(1, [2]uint64{1 << 30, 1}),
		"a held range and a later one": deleteOnly(1, [2]uint64{0, 1}, [2]uint64{9, 1}),
	} {
		if _, err := room.ApplyUntrusted(context.Background(), u, notOne); !errors.Is(err, ErrForeignClient) {
			t.Fatalf("%s: %v, want ErrForeignClient", name, err)
		}
		if dump(room) != before {
			t.Fatalf("%s: a refused update changed the document", name)
		}
	}
	// Deleting client 1's text the room holds: an edit like any other.
	if _, err := room.ApplyUntrusted(context.Background(), deleteOnly(1, [2]uint64{0, 2}), notOne); err != nil {
		t.Fatal(err)
	}
	if got := room.JSON("content", Text); got != "ne" {
		t.Fatalf("room reads %q", got)
	}
	// Deletions the room has waiting already may come along again.
	if _, err := room.ApplyUntrusted(context.Background(), deleteOnly(1, [2]uint64{20, 5}), Limits{}); err != nil {
		t.Fatal(err)
	}
	if _, err := room.ApplyUntrusted(context.Background(), deleteOnly(1, [2]uint64{21, 2}), notOne); err != nil {
		t.Fatalf("deletions waiting already: %v", err)
	}
	// Client 1's own next edit arrives whole.
	if _, err := room.ApplyUntrusted(context.Background(), next, Limits{}); err != nil {
		t.Fatal(err)
	}
	if got := room.JSON("content", Text); got != "ne, more" {
		t.Fatalf("room reads %q", got)
	}
}

// Structs of a refused client that the document holds waiting (for another client's struct
// not received yet) may come along too: a peer that was relayed them holds them waiting as
// well, and its sync step 2 carries them.
func TestMayWriteTakesStructsWaitingAlready(t *testing.T) {
	two, one := NewDocWithClient(2), NewDocWithClient(1)
	base, err := two.Replace("content", Text, "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := one.Apply(base); err != nil {
		t.Fatal(err)
	}
	waiting, err := one.Replace("content", Text, "xy")
	if err != nil {
		t.Fatal(err)
	}
	room := NewDoc()
	if _, err := room.ApplyUntrusted(context.Background(), waiting, Limits{}); err != nil {
		t.Fatal(err)
	}
	if !room.Pending() {
		t.Fatal("client 1's struct does not wait")
	}
	if _, err := room.ApplyUntrusted(context.Background(), waiting, notOne); err != nil {
		t.Fatalf("structs waiting already: %v", err)
	}
	more, err := one.Replace("content", Text, "xyz")
	if err != nil {
		t.Fatal(err)
	}
	both, err := Merge(waiting, more)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := room.ApplyUntrusted(context.Background(), both, notOne); !errors.Is(err, ErrForeignClient) {
		t.Fatalf("a waiting struct and a new one: %v, want ErrForeignClient", err)
	}
	if _, err := room.ApplyUntrusted(context.Background(), base, notOne); err != nil {
		t.Fatal(err)
	}
	if got := room.JSON("content", Text); got != "xy" {
		t.Fatalf("room reads %q", got)
	}
}
