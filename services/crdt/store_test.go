package crdt

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/collab/collab/internal/testkit/mongotest"
)

func TestMain(m *testing.M) { os.Exit(mongotest.Run(m)) }

// The conformance suite: every Store implementation must pass it unchanged. The store keeps
// updates as opaque bytes; the tests give it "updates" that are length-prefixed chunks and a
// merge that concatenates them, so the chunks a state holds can be read back and compared.
func TestMemoryStore(t *testing.T) {
	runStoreSuite(t, func(t *testing.T) Store { return NewMemoryStore() })
}

func TestMongoStore(t *testing.T) {
	runStoreSuite(t, func(t *testing.T) Store { return newMongoStore(t) })
}

func newMongoStore(t *testing.T) *MongoStore {
	t.Helper()
	s, err := NewMongoStore(context.Background(), mongotest.Connect(t).Database("crdt"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Creating the store again on the same database finds its indexes there and succeeds.
func TestMongoStoreStartsTwice(t *testing.T) {
	db := mongotest.Connect(t).Database("crdt")
	for range 2 {
		if _, err := NewMongoStore(context.Background(), db); err != nil {
			t.Fatal(err)
		}
	}
}

// What MongoStore writes: the record under its compound _id keyed by the document's
// generation, the first update inside it until a snapshot holds it, log entries and snapshots
// under (stream, 20-digit number).
func TestMongoStoreDocuments(t *testing.T) {
	s := newMongoStore(t)
	ctx := context.Background()
	m := meta("e1")
	if err := s.Create(ctx, m, chunk("a")); err != nil {
		t.Fatal(err)
	}
	var raw bson.M
	if err := s.editors.FindOne(ctx, bson.M{"_id": "k1\x1fo1\x1fog1\x1fdg1\x1fe1"}).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	if raw["documentId"] != "d1" || raw["stream"] != m.Stream || raw["type"] != "text" || raw["base"] == nil {
		t.Fatalf("stored record: %v", raw)
	}
	appendN(t, s, m.Stream, "b", "c")
	if n, err := s.updates.CountDocuments(ctx, bson.M{"_id": m.Stream + "\x1f00000000000000000002"}); err != nil || n != 1 {
		t.Fatalf("entry 2: %d %v", n, err)
	}
	if done, err := s.Compact(ctx, m.Editor, Compaction{MaxUpdates: 1}, fakeMerge); err != nil || !done {
		t.Fatalf("compact: %v %v", done, err)
	}
	raw = nil
	if err := s.editors.FindOne(ctx, bson.M{"_id": "k1\x1fo1\x1fog1\x1fdg1\x1fe1"}).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw["base"]; ok {
		t.Fatalf("base kept after a snapshot holds it: %v", raw)
	}
	if n, err := s.snapshots.CountDocuments(ctx, bson.M{"_id": m.Stream + "\x1f00000000000000000002"}); err != nil || n != 1 {
		t.Fatalf("snapshot: %d %v", n, err)
	}
	if n, err := s.updates.CountDocuments(ctx, bson.M{}); err != nil || n != 0 {
		t.Fatalf("compacted entries kept: %d %v", n, err)
	}
}

// chunk is a test update: its text, length-prefixed.
func chunk(text string) []byte {
	return append(binary.AppendUvarint(nil, uint64(len(text))), text...)
}

// fakeMerge merges test updates: a merge of chunk sequences is their concatenation.
func fakeMerge(parts ...[]byte) ([]byte, error) {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out, nil
}

// unchunk reads the texts of a chunk sequence.
func unchunk(t *testing.T, b []byte) []string {
	t.Helper()
	var out []string
	for len(b) > 0 {
		n, w := binary.Uvarint(b)
		if w <= 0 || uint64(len(b)-w) < n {
			t.Fatalf("not a chunk sequence: %q", b)
		}
		out = append(out, string(b[w:w+int(n)]))
		b = b[w+int(n):]
	}
	return out
}

// texts are the chunks of a state, in order.
func texts(t *testing.T, st *State) []string {
	t.Helper()
	var out []string
	for _, p := range st.Parts() {
		out = append(out, unchunk(t, p)...)
	}
	return out
}

func editor(id string) Editor {
	return Editor{APIKey: "k1", OrganizationID: "o1", OrgGen: "og1", DocumentID: "d1", DocGen: "dg1", EditorID: id}
}

func meta(id string) *Meta {
	return &Meta{Editor: editor(id), Type: "text", ContentKey: "content", CreatedAt: 1000}
}

func appendN(t *testing.T, s Store, stream string, labels ...string) []int64 {
	t.Helper()
	var seqs []int64
	for i, l := range labels {
		n, err := s.Append(context.Background(), stream, Update{Data: chunk(l), At: 2000 + int64(i), Origin: "p1"})
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, n)
	}
	return seqs
}

func load(t *testing.T, s Store, e Editor) *State {
	t.Helper()
	st, err := s.Load(context.Background(), e)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func create(t *testing.T, s Store, m *Meta, first string) {
	t.Helper()
	if err := s.Create(context.Background(), m, chunk(first)); err != nil {
		t.Fatal(err)
	}
}

func runStoreSuite(t *testing.T, newStore func(t *testing.T) Store) {
	ctx := context.Background()

	t.Run("CreateLoadAndExists", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		m := meta("e1")
		create(t, s, m, "a")
		if m.Stream == "" {
			t.Fatal("Create named no stream")
		}
		st := load(t, s, editor("e1"))
		if st.Meta != *m || !slices.Equal(texts(t, st), []string{"a"}) || st.BaseSeq != 0 || st.LastUpdate() != 1000 || st.LastSeq() != 0 {
			t.Fatalf("loaded %+v", st)
		}
		if got, err := s.Meta(ctx, editor("e1")); err != nil || *got != *m {
			t.Fatalf("meta %+v %v", got, err)
		}
		again := meta("e1")
		again.Type = "map"
		if err := s.Create(ctx, again, chunk("b")); !errors.Is(err, ErrExists) {
			t.Fatalf("second create: %v", err)
		}
		if st := load(t, s, editor("e1")); st.Meta.Type != "text" || !slices.Equal(texts(t, st), []string{"a"}) {
			t.Fatalf("second create changed the data: %+v", st)
		}
		// Every part of the key scopes the data.
		for _, other := range []func(e *Editor){
			func(e *Editor) { e.APIKey = "k2" }, func(e *Editor) { e.OrganizationID = "o2" }, func(e *Editor) { e.OrgGen = "og2" },
			func(e *Editor) { e.DocGen = "dg2" }, func(e *Editor) { e.EditorID = "e2" },
		} {
			e := editor("e1")
			other(&e)
			if _, err := s.Load(ctx, e); !errors.Is(err, ErrNotFound) {
				t.Errorf("%+v: %v", e, err)
			}
			if _, err := s.Meta(ctx, e); !errors.Is(err, ErrNotFound) {
				t.Errorf("%+v: %v", e, err)
			}
		}
		// The document id does not: data is keyed by the document's generation.
		e := editor("e1")
		e.DocumentID = "renamed"
		if _, err := s.Load(ctx, e); err != nil {
			t.Fatalf("by generation: %v", err)
		}
	})

	t.Run("EmptyFirstUpdate", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		m := meta("e1")
		if err := s.Create(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
		if st := load(t, s, editor("e1")); len(st.Parts()) != 0 {
			t.Fatalf("parts of empty data: %q", st.Parts())
		}
		appendN(t, s, m.Stream, "a")
		if st := load(t, s, editor("e1")); !slices.Equal(texts(t, st), []string{"a"}) {
			t.Fatalf("after append: %v", texts(t, st))
		}
	})

	t.Run("AppendAndTail", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		m := meta("e1")
		create(t, s, m, "a")
		if seqs := appendN(t, s, m.Stream, "b", "c", "d"); !slices.Equal(seqs, []int64{1, 2, 3}) {
			t.Fatalf("seqs %v", seqs)
		}
		st := load(t, s, editor("e1"))
		if !slices.Equal(texts(t, st), []string{"a", "b", "c", "d"}) || st.LastUpdate() != 2002 || st.LastSeq() != 3 {
			t.Fatalf("loaded %v, last %d", texts(t, st), st.LastUpdate())
		}
		if u := st.Updates[1]; u.Seq != 2 || u.At != 2001 || u.Origin != "p1" {
			t.Fatalf("entry %+v", u)
		}
		us, reload, err := s.Tail(ctx, m.Stream, 1, 0)
		if err != nil || reload || len(us) != 2 || us[0].Seq != 2 || us[1].Seq != 3 || string(us[1].Data) != string(chunk("d")) {
			t.Fatalf("tail: %+v %v %v", us, reload, err)
		}
		if us, _, _ := s.Tail(ctx, m.Stream, 0, 2); len(us) != 2 || us[1].Seq != 2 {
			t.Fatalf("tail with a limit: %+v", us)
		}
		if us, reload, err := s.Tail(ctx, m.Stream, 3, 0); err != nil || reload || len(us) != 0 {
			t.Fatalf("tail at the end: %+v %v %v", us, reload, err)
		}
		if us, reload, err := s.Tail(ctx, "no-such-stream", 0, 0); err != nil || reload || len(us) != 0 {
			t.Fatalf("tail of nothing: %+v %v %v", us, reload, err)
		}
	})

	t.Run("Compact", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		m := meta("e1")
		create(t, s, m, "a")
		policy := Compaction{MaxUpdates: 2, MaxBytes: 1 << 20}
		compact := func(want bool) {
			t.Helper()
			if done, err := s.Compact(ctx, editor("e1"), policy, fakeMerge); err != nil || done != want {
				t.Fatalf("compact: %v %v, want %v", done, err, want)
			}
		}
		compact(false) // nothing in the log
		appendN(t, s, m.Stream, "b", "c")
		compact(false) // two entries: not more than MaxUpdates
		appendN(t, s, m.Stream, "d")
		compact(true)
		st := load(t, s, editor("e1"))
		if !slices.Equal(texts(t, st), []string{"a", "b", "c", "d"}) || st.BaseSeq != 3 || len(st.Updates) != 0 || st.LastUpdate() != 2001 {
			t.Fatalf("after compaction: %v base %d log %d last %d", texts(t, st), st.BaseSeq, len(st.Updates), st.LastUpdate())
		}
		if us, reload, err := s.Tail(ctx, m.Stream, 1, 0); err != nil || !reload || len(us) != 0 {
			t.Fatalf("tail behind the snapshot: %+v %v %v", us, reload, err)
		}
		if seqs := appendN(t, s, m.Stream, "e"); seqs[0] != 4 {
			t.Fatalf("after compaction the log goes on at %d", seqs[0])
		}
		if us, reload, err := s.Tail(ctx, m.Stream, 3, 0); err != nil || reload || len(us) != 1 || us[0].Seq != 4 {
			t.Fatalf("tail after the snapshot: %+v %v %v", us, reload, err)
		}
		compact(false)
		appendN(t, s, m.Stream, "f", "g")
		compact(true)
		st = load(t, s, editor("e1"))
		if !slices.Equal(texts(t, st), []string{"a", "b", "c", "d", "e", "f", "g"}) || st.BaseSeq != 6 {
			t.Fatalf("second compaction: %v base %d", texts(t, st), st.BaseSeq)
		}
		// A log of few but large entries is due too.
		big := Compaction{MaxUpdates: 100, MaxBytes: 10}
		appendN(t, s, m.Stream, "0123456789x")
		if done, err := s.Compact(ctx, editor("e1"), big, fakeMerge); err != nil || !done {
			t.Fatalf("by bytes: %v %v", done, err)
		}
		// A failing merge writes nothing.
		appendN(t, s, m.Stream, "h", "i", "j")
		boom := errors.New("boom")
		if _, err := s.Compact(ctx, editor("e1"), policy, func(...[]byte) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
			t.Fatalf("merge error: %v", err)
		}
		if st := load(t, s, editor("e1")); len(st.Updates) != 3 {
			t.Fatalf("failed compaction changed the log: %d entries", len(st.Updates))
		}
		if _, err := s.Compact(ctx, editor("nobody"), policy, fakeMerge); !errors.Is(err, ErrNotFound) {
			t.Fatalf("compact of nothing: %v", err)
		}
	})

	t.Run("List", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		for _, id := range []string{"c", "a", "b"} {
			create(t, s, meta(id), id)
		}
		other := []func(m *Meta){
			func(m *Meta) { m.APIKey = "k2" }, func(m *Meta) { m.OrganizationID = "o2" },
			func(m *Meta) { m.OrgGen = "og2" }, func(m *Meta) { m.DocGen = "dg2" },
		}
		for _, f := range other {
			m := meta("x")
			f(m)
			create(t, s, m, "x")
		}
		ids := func(ms []*Meta) []string {
			var out []string
			for _, m := range ms {
				out = append(out, m.EditorID)
			}
			return out
		}
		got, err := s.List(ctx, editor(""), 0)
		if err != nil || !slices.Equal(ids(got), []string{"a", "b", "c"}) {
			t.Fatalf("list: %v %v", ids(got), err)
		}
		if got[0].Type != "text" || got[0].ContentKey != "content" || got[0].Stream == "" || got[0].DocumentID != "d1" {
			t.Fatalf("listed record %+v", got[0])
		}
		if got, _ := s.List(ctx, editor(""), 2); !slices.Equal(ids(got), []string{"a", "b"}) {
			t.Fatalf("limited: %v", ids(got))
		}
		e := editor("")
		e.DocGen = "dg3"
		if got, err := s.List(ctx, e, 0); err != nil || len(got) != 0 {
			t.Fatalf("another document: %v %v", ids(got), err)
		}
	})

	t.Run("DeleteEditor", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		m := meta("e1")
		create(t, s, m, "a")
		appendN(t, s, m.Stream, "b")
		create(t, s, meta("e2"), "z")
		if ok, err := s.DeleteEditor(ctx, editor("e1")); err != nil || !ok {
			t.Fatalf("delete: %v %v", ok, err)
		}
		if ok, err := s.DeleteEditor(ctx, editor("e1")); err != nil || ok {
			t.Fatalf("delete again: %v %v", ok, err)
		}
		if _, err := s.Load(ctx, editor("e1")); !errors.Is(err, ErrNotFound) {
			t.Fatalf("load after delete: %v", err)
		}
		if us, _, _ := s.Tail(ctx, m.Stream, 0, 0); len(us) != 0 {
			t.Fatalf("log kept: %+v", us)
		}
		// A writer that appends to the deleted stream leaves an orphan, which it removes.
		appendN(t, s, m.Stream, "late")
		again := meta("e1")
		create(t, s, again, "new")
		if again.Stream == m.Stream {
			t.Fatal("a new editor reuses the deleted one's stream")
		}
		if got := texts(t, load(t, s, editor("e1"))); !slices.Equal(got, []string{"new"}) {
			t.Fatalf("recreated editor holds %v", got)
		}
		if err := s.DeleteStream(ctx, m.Stream); err != nil {
			t.Fatal(err)
		}
		if us, _, _ := s.Tail(ctx, m.Stream, 0, 0); len(us) != 0 {
			t.Fatalf("orphan kept: %+v", us)
		}
		if got := texts(t, load(t, s, editor("e2"))); !slices.Equal(got, []string{"z"}) {
			t.Fatalf("other editor: %v", got)
		}
	})

	t.Run("DeleteDocumentAndOrganization", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		a, b := meta("a"), meta("b")
		create(t, s, a, "a")
		create(t, s, b, "b")
		appendN(t, s, a.Stream, "a2")
		if _, err := s.Compact(ctx, a.Editor, Compaction{MaxUpdates: 0}, fakeMerge); err != nil {
			t.Fatal(err)
		}
		appendN(t, s, a.Stream, "a3")
		otherDoc := meta("a")
		otherDoc.DocumentID, otherDoc.DocGen = "d2", "dg2"
		create(t, s, otherDoc, "d2")
		sameIDNewGen := meta("a")
		sameIDNewGen.DocGen = "dg1b"
		create(t, s, sameIDNewGen, "d1b")
		if err := s.DeleteDocument(ctx, editor("")); err != nil {
			t.Fatal(err)
		}
		for _, e := range []Editor{a.Editor, b.Editor} {
			if _, err := s.Load(ctx, e); !errors.Is(err, ErrNotFound) {
				t.Fatalf("%s kept: %v", e.EditorID, err)
			}
		}
		if us, reload, _ := s.Tail(ctx, a.Stream, 0, 0); len(us) != 0 || reload {
			t.Fatalf("stream kept: %+v %v", us, reload)
		}
		for _, m := range []*Meta{otherDoc, sameIDNewGen} {
			if _, err := s.Load(ctx, m.Editor); err != nil {
				t.Fatalf("%+v: %v", m.Editor, err)
			}
		}
		if err := s.DeleteDocument(ctx, editor("")); err != nil { // again: nothing left, no error
			t.Fatal(err)
		}

		otherOrgGen := meta("x")
		otherOrgGen.OrgGen = "og2"
		create(t, s, otherOrgGen, "x")
		otherTenant := meta("x")
		otherTenant.APIKey = "k2"
		create(t, s, otherTenant, "x")
		if err := s.DeleteOrganization(ctx, "k1", "o1", "og1"); err != nil {
			t.Fatal(err)
		}
		for _, m := range []*Meta{otherDoc, sameIDNewGen} {
			if _, err := s.Load(ctx, m.Editor); !errors.Is(err, ErrNotFound) {
				t.Fatalf("%+v kept: %v", m.Editor, err)
			}
		}
		for _, m := range []*Meta{otherOrgGen, otherTenant} {
			if _, err := s.Load(ctx, m.Editor); err != nil {
				t.Fatalf("%+v: %v", m.Editor, err)
			}
		}
	})

	t.Run("MoveDocument", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		m := meta("e1")
		create(t, s, m, "a")
		other := meta("e1")
		other.DocumentID, other.DocGen = "d1", "dg-older" // a deleted incarnation's leftovers
		create(t, s, other, "old")
		if err := s.MoveDocument(ctx, "k1", "o1", "d1", "d9", "dg1"); err != nil {
			t.Fatal(err)
		}
		moved := editor("e1")
		moved.DocumentID = "d9"
		st := load(t, s, moved)
		if st.Meta.DocumentID != "d9" || !slices.Equal(texts(t, st), []string{"a"}) {
			t.Fatalf("moved: %+v", st.Meta)
		}
		if got, _ := s.List(ctx, moved, 0); len(got) != 1 || got[0].DocumentID != "d9" {
			t.Fatalf("listed after the move: %+v", got)
		}
		if got, _ := s.Meta(ctx, other.Editor); got.DocumentID != "d1" {
			t.Fatalf("another generation moved: %+v", got)
		}
		if err := s.MoveDocument(ctx, "k1", "o1", "d1", "d9", "dg1"); err != nil { // again
			t.Fatal(err)
		}
	})

	t.Run("DocumentWithoutGeneration", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		a := meta("e1")
		a.DocGen = ""
		create(t, s, a, "a")
		b := meta("e1")
		b.DocumentID, b.DocGen = "d2", ""
		create(t, s, b, "b")
		if got := texts(t, load(t, s, b.Editor)); !slices.Equal(got, []string{"b"}) {
			t.Fatalf("keyed by id: %v", got)
		}
		if err := s.DeleteDocument(ctx, a.Editor); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Load(ctx, a.Editor); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deleted: %v", err)
		}
		if _, err := s.Load(ctx, b.Editor); err != nil {
			t.Fatalf("other document: %v", err)
		}
	})

	// The generation markers are lifecycle's (its suite holds their contract): the store keeps
	// them by generation (lifecycle.ByGeneration), so a writer holding the id a document had
	// before a migration sees its burial.
	t.Run("Tombstones", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		if err := s.Bury(ctx, "k1", "o1", KindDocument, "d9", "dg1"); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			id, gen string
			want    bool
		}{{"d9", "dg1", true}, {"d1", "dg1", true}, {"d9", "dg2", false}} {
			if got, err := s.Buried(ctx, "k1", "o1", KindDocument, c.id, c.gen); err != nil || got != c.want {
				t.Errorf("%+v: %v %v", c, got, err)
			}
		}
	})

	// Concurrent Adds of one editor: exactly one creates it.
	t.Run("ConcurrentCreates", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		const n = 16
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { errs[i] = s.Create(ctx, meta("e1"), chunk(fmt.Sprint(i))) })
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, ErrExists):
				t.Fatal(err)
			}
		}
		if won != 1 {
			t.Fatalf("%d creations won", won)
		}
		if got := texts(t, load(t, s, editor("e1"))); len(got) != 1 {
			t.Fatalf("data %v", got)
		}
	})

	// Appenders and compactors (as on several replicas) on one editor at once: every appended
	// update is in the final state, and nothing else is. An update may be there twice (an
	// appender that cannot tell whether a snapshot took its entry appends it again; a Yjs
	// update applied twice changes nothing).
	t.Run("ConcurrentAppendsAndCompactions", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		m := meta("e1")
		create(t, s, m, "first")
		const writers, each, compactors = 4, 15, 3
		policy := Compaction{MaxUpdates: 3, MaxBytes: 1 << 20}
		var (
			wg        sync.WaitGroup
			mu        sync.Mutex
			seqs      []int64
			failure   error
			compacted atomic.Int64
			failed    atomic.Bool
		)
		fail := func(err error) {
			failed.Store(true)
			mu.Lock()
			defer mu.Unlock()
			if failure == nil {
				failure = err
			}
		}
		done := make(chan struct{})
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					if i == each/2 {
						// Half way, wait for a compaction, so that the rest overlaps them.
						for compacted.Load() == 0 && !failed.Load() {
							runtime.Gosched()
						}
					}
					n, err := s.Append(ctx, m.Stream, Update{Data: chunk(fmt.Sprintf("w%d-%d", w, i)), At: 3000, Origin: fmt.Sprint(w)})
					if err != nil {
						fail(err)
						return
					}
					mu.Lock()
					seqs = append(seqs, n)
					mu.Unlock()
				}
			})
		}
		var cg sync.WaitGroup
		for range compactors {
			cg.Go(func() {
				for {
					select {
					case <-done:
						return
					default:
					}
					if did, err := s.Compact(ctx, m.Editor, policy, fakeMerge); err != nil {
						fail(err)
						return
					} else if did {
						compacted.Add(1)
					}
					time.Sleep(time.Millisecond)
					// A reader beside them always sees a consistent state.
					if st, err := s.Load(ctx, m.Editor); err != nil {
						fail(err)
						return
					} else if got := texts(t, st); len(got) == 0 || got[0] != "first" {
						fail(fmt.Errorf("state without its base: %v", got))
						return
					}
				}
			})
		}
		wg.Wait()
		close(done)
		cg.Wait()
		if failure != nil {
			t.Fatal(failure)
		}
		if compacted.Load() == 0 {
			t.Fatal("no compaction ran beside the appends")
		}
		if _, err := s.Compact(ctx, m.Editor, policy, fakeMerge); err != nil {
			t.Fatal(err)
		}
		got := texts(t, load(t, s, m.Editor))
		want := []string{"first"}
		for w := range writers {
			for i := range each {
				want = append(want, fmt.Sprintf("w%d-%d", w, i))
			}
		}
		sort.Strings(got)
		if n := len(got) - len(slices.Compact(slices.Clone(got))); n > 0 {
			t.Logf("%d updates stored twice", n)
		}
		sort.Strings(want)
		if got = slices.Compact(got); !slices.Equal(got, want) {
			t.Fatalf("state holds %v,\nwant %v", got, want)
		}
		slices.Sort(seqs)
		if len(slices.Compact(slices.Clone(seqs))) != len(seqs) {
			t.Fatalf("a number given twice: %v", seqs)
		}
	})

	runConcurrencySuite(t, newStore)
}
