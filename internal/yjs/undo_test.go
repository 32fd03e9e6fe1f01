package yjs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// dump writes out everything a document holds that Apply can change, so that two documents
// dump the same only when they are the same: every struct of every client with its fields and
// links (by ID), every type's list, length and map, the waiting structs and deletions, and the
// counts Size is made of.
func dump(d *Doc) string {
	var b strings.Builder
	ref := func(x *block) string {
		if x == nil {
			return "-"
		}
		return x.id.String()
	}
	typeOf := func(t *ytype) string {
		if t == nil {
			return "nil"
		}
		if t.item == nil {
			return "root:" + t.name
		}
		return "in:" + t.item.id.String()
	}
	writeType := func(t *ytype) {
		fmt.Fprintf(&b, "{ref %d name %q depth %d start %s len %d m[", t.ref, t.name, t.depth, ref(t.start), t.length)
		keys := make([]string, 0, len(t.m))
		for k := range t.m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "%q:%s ", k, ref(t.m[k]))
		}
		fmt.Fprintf(&b, "] mnil %v}", t.m == nil)
	}
	writeBlock := func(x *block) {
		fmt.Fprintf(&b, " %s+%d gc%v del%v o%v%s ro%v%s l%s r%s p%s sub%v%q c{%d %v %q n%d",
			x.id, x.length, x.gc, x.deleted, x.hasOrigin, x.origin, x.hasRightOrigin, x.rightOrigin,
			ref(x.left), ref(x.right), typeOf(x.parent), x.hasSub, x.sub, x.content.ref, x.content.str, x.content.elems, x.content.n)
		fmt.Fprintf(&b, " wide%v", x.content.wide)
		if x.content.x != nil {
			fmt.Fprintf(&b, " raw%q key%q", x.content.x.raw, x.content.x.key)
			if t := x.content.x.typ; t != nil {
				writeType(t)
			}
		}
		fmt.Fprintf(&b, "} fresh%v\n", x.fresh)
	}
	clients := make([]uint64, 0, len(d.clients))
	for c := range d.clients {
		clients = append(clients, c)
	}
	slices.Sort(clients)
	for _, c := range clients {
		fmt.Fprintf(&b, "client %d (%d)\n", c, len(d.clients[c]))
		for _, x := range d.clients[c] {
			writeBlock(x)
		}
	}
	roots := make([]string, 0, len(d.roots))
	for n := range d.roots {
		roots = append(roots, n)
	}
	slices.Sort(roots)
	for _, n := range roots {
		fmt.Fprintf(&b, "root %q ", n)
		writeType(d.roots[n])
		b.WriteByte('\n')
	}
	for _, c := range sortedKeysU64(d.pending) {
		fmt.Fprintf(&b, "pending %d\n", c)
		for _, p := range d.pending[c] {
			fmt.Fprintf(&b, "  skip%v root%v%q parent%v%s", p.skip, p.hasRoot, p.rootName, p.hasParent, p.parentID)
			writeBlock(p.b)
		}
	}
	for _, c := range sortedKeysU64(d.pendingDS) {
		fmt.Fprintf(&b, "pendingDS %d %v\n", c, d.pendingDS[c])
	}
	// The registrations of waiting structs (hints, but a lost one is a struct that waits
	// forever, and one left behind is memory nothing frees): each heap as a sorted set.
	for _, c := range sortedKeysU64(d.waitingOn) {
		fmt.Fprintf(&b, "waitingOn %d %v\n", c, d.waitingOn[c])
	}
	for _, m := range sortedKeysU64(d.waiters) {
		ws := slices.Clone(*d.waiters[m])
		slices.SortFunc(ws, func(a, b waiter) int {
			if a.need != b.need {
				return cmp.Compare(a.need, b.need)
			}
			return cmp.Compare(a.client, b.client)
		})
		fmt.Fprintf(&b, "waiters %d %v\n", m, ws)
	}
	fmt.Fprintf(&b, "counts %d %d %d %d pendingNil %v\n", d.structs, d.npending, d.npendingDS, d.held, d.pending == nil)
	return b.String()
}

// checkCounts holds the counts Size is made of to what the document holds.
func checkCounts(t *testing.T, d *Doc) {
	t.Helper()
	structs, held := 0, 0
	for _, s := range d.clients {
		structs += len(s)
		for _, x := range s {
			held += x.content.bytes()
		}
	}
	npending := 0
	for _, q := range d.pending {
		npending += len(q)
		held += pendingBytes(q)
	}
	nds := 0
	for _, rs := range d.pendingDS {
		nds += len(rs)
	}
	if structs != d.structs || npending != d.npending || nds != d.npendingDS || held != d.held {
		t.Fatalf("counts: structs %d (kept %d), pending %d (%d), waiting deletions %d (%d), held %d (%d)",
			structs, d.structs, npending, d.npending, nds, d.npendingDS, held, d.held)
	}
	// EncodedSize makes the bound exact: read it first, and put it back, so that the check
	// neither always passes nor hides a bound that drifts below the size over several updates.
	bound := d.encBound
	if n := d.EncodedSize(); n > bound {
		t.Fatalf("encoded size %d above its bound %d", n, bound)
	}
	d.encBound = bound
}

// FuzzApplyUntrusted holds ApplyUntrusted to its promise on any sequence of updates under any
// limits: a refused update leaves the document exactly as it was (its dump, not only its
// encoding), and an accepted one leaves it as a trusted Apply of the same updates does; the
// counts behind Size and the bound behind MaxEncoded stay true throughout.
func FuzzApplyUntrusted(f *testing.F) {
	seeds := seedUpdates(f)
	var e encoder
	for _, u := range seeds {
		e.bytes(u)
	}
	f.Add(e.buf, uint16(0), uint16(0), uint8(0))
	f.Add(e.buf, uint16(3), uint16(0), uint8(0))
	f.Add(e.buf, uint16(40), uint16(30), uint8(2))
	f.Add(e.buf, uint16(0), uint16(9), uint8(1))
	f.Add(e.buf, uint16(0), uint16(0), uint8(3))
	f.Fuzz(func(t *testing.T, b []byte, work, encoded uint16, pending uint8) {
		tm := time.AfterFunc(30*time.Second, func() { panic(fmt.Sprintf("HANG %x", b)) })
		defer tm.Stop()
		d, ref := NewDocWithClient(1), NewDocWithClient(1)
		for _, x := range []*Doc{d, ref} {
			if _, err := x.Replace("content", Text, "base text"); err != nil {
				t.Fatal(err)
			}
		}
		lim := Limits{MaxWork: int(work), MaxEncoded: int(encoded) * 4, MaxPending: int(pending)}
		if encoded%7 == 1 {
			lim.MaxSize = int(encoded) * 64
		}
		if pending%4 == 3 { // a writer that may not write as a third of the client ids
			lim.MayWrite = func(c uint64) bool { return c%3 != 0 }
		}
		dec := decoder{buf: b}
		for dec.left() > 0 {
			u, err := dec.bytes()
			if err != nil {
				break
			}
			before := dump(d)
			_, err = d.ApplyUntrusted(context.Background(), u, lim)
			checkCounts(t, d)
			if err != nil {
				if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrForeignClient) {
					t.Fatalf("refusal %v wraps none of ErrMalformed, ErrTooLarge, ErrForeignClient", err)
				}
				if after := dump(d); after != before {
					t.Fatalf("a refused update (%v) changed the document:\nbefore\n%s\nafter\n%s", err, before, after)
				}
				continue
			}
			if err := ref.Apply(u); err != nil {
				t.Fatalf("accepted untrusted, refused trusted: %v", err)
			}
			if got, want := dump(d), dump(ref); got != want {
				t.Fatalf("untrusted apply differs from a trusted one:\ngot\n%s\nwant\n%s", got, want)
			}
		}
	})
}

// A refusal midway undoes what the update did so far, whichever limit stops it: the work
// budget (an update that deletes and inserts across many items), memory, the encoded size,
// the structs left waiting, a cancelled caller. The document then takes further updates as if
// the refused one had never come.
func TestRefusedUpdatesChangeNothing(t *testing.T) {
	// Client 5's text, then its own edits: its list holds many structs, so the update below
	// splits structs in the middle of it.
	a := NewDocWithClient(5)
	words := strings.Repeat("lorem\nipsum\ndolor\nsit\namet\n", 400) // by line: small diffs
	first, _ := a.Replace("t", Text, words)
	parts := [][]byte{first}
	fields := strings.Fields(words)
	for i := 1; i < len(fields); i += 50 {
		fields[i] = "Lorem"
		u, _ := a.Replace("t", Text, strings.Join(fields, "\n")+"\n")
		parts = append(parts, u)
	}
	base, err := Merge(parts...)
	if err != nil {
		t.Fatal(err)
	}
	words = a.JSON("t", Text).(string)
	m, _ := a.Replace("m", Map, map[string]any{"k": "v", "n": map[string]any{"x": 1.0}})
	x, _ := a.Replace("x", XML, "<p>hello<b>bold</b></p>")
	e, _ := a.Replace("e", Text, "a😀b😀c")
	base, err = Merge(base, m, x, e)
	if err != nil {
		t.Fatal(err)
	}
	// One update that does a lot: every third word changed (one edit at a time, merged), a
	// map key replaced, an XML element with children deleted (collected whole), and an
	// insertion between the halves of a surrogate pair (which become two U+FFFD).
	b := NewDocWithClient(9)
	mustApply(t, b, base)
	fields = strings.Fields(words)
	var edits [][]byte
	for i := 0; i < len(fields); i += 3 {
		fields[i] = strings.ToUpper(fields[i])
		u, err := b.Replace("t", Text, strings.Join(fields, "\n")+"\n")
		if err != nil {
			t.Fatal(err)
		}
		edits = append(edits, u)
	}
	u2, _ := b.Replace("m", Map, map[string]any{"k": "w"})
	u3, _ := b.Replace("x", XML, "<q/>")
	pair := a.root("e").start // "a😀b😀c", one item of client 5
	var c encoder
	c.uint(1)
	c.uint(1)
	c.uint(10)
	c.uint(0)
	c.byte(0x80 | refString)
	c.uint(5)
	c.uint(pair.id.Clock + 1) // after the first high surrogate
	c.string("x")
	c.uint(0)
	big, err := Merge(append(edits, u2, u3, c.buf)...)
	if err != nil {
		t.Fatal(err)
	}
	edited := b.JSON("t", Text).(string)
	// Two structs of client 77 from clock 5: they wait for its clocks 0-4.
	var g encoder
	g.uint(1)
	g.uint(2)
	g.uint(77)
	g.uint(5)
	for _, s := range []string{"z", "y"} {
		g.byte(refString)
		g.uint(1)
		g.string("t")
		g.string(s)
	}
	g.uint(0)
	gap := g.buf
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name   string
		ctx    context.Context
		update []byte
		lim    Limits
		want   error
	}{
		{"work", context.Background(), big, Limits{MaxWork: 500}, ErrTooComplex},
		{"memory", context.Background(), big, Limits{MaxSize: 1}, ErrMemoryTooLarge},
		{"encoded", context.Background(), big, Limits{MaxEncoded: 100}, ErrEncodedTooLarge},
		// Only the XML deletion: its element's children become GC structs in place.
		{"collected", context.Background(), u3, Limits{MaxEncoded: 100}, ErrEncodedTooLarge},
		{"waiting", context.Background(), gap, Limits{MaxPending: 1}, ErrTooManyPending},
		{"cancelled", cancelled, big, Limits{}, context.Canceled},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := NewDocWithClient(3)
			mustApply(t, d, base)
			before := dump(d)
			_, err := d.ApplyUntrusted(c.ctx, c.update, c.lim)
			if !errors.Is(err, c.want) {
				t.Fatalf("apply = %v, want %v", err, c.want)
			}
			if after := dump(d); after != before {
				t.Fatalf("the refused update changed the document:\n%s", firstLineDiff(before, after))
			}
			// Later updates apply as on a document that never saw it.
			ref := NewDocWithClient(3)
			mustApply(t, ref, base)
			for _, u := range [][]byte{c.update, big} {
				mustApply(t, d, u)
				mustApply(t, ref, u)
			}
			if dump(d) != dump(ref) {
				t.Fatal("after the refusal the document integrates differently")
			}
			if got := d.JSON("t", Text); got != edited {
				t.Fatalf("text %q", got)
			}
			if got := d.JSON("e", Text); got != "a\ufffd\ufffdb😀cx" {
				t.Fatalf("text %q", got)
			}
			if got := d.JSON("x", XML); got != "<q></q>" {
				t.Fatalf("xml %q", got)
			}
		})
	}
}

func firstLineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n- %s\n+ %s", i, al[i], bl[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(al), len(bl))
}
