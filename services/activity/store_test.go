package activity

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/collab/collab/internal/testkit/mongotest"
)

func TestMain(m *testing.M) { os.Exit(mongotest.Run(m)) }

// The conformance suite: every Store implementation must pass it unchanged.
func TestMemoryStore(t *testing.T) {
	runStoreSuite(t, func(t *testing.T) Store {
		s := NewMemoryStore()
		t.Cleanup(func() { checkMemoryStore(t, s) })
		return s
	})
	runReplicaSuite(t, func(t *testing.T) [2]Store {
		s := NewMemoryStore()
		t.Cleanup(func() { checkMemoryStore(t, s) })
		return [2]Store{s, s}
	})
}

// checkMemoryStore asserts the memory store's invariants: each organization's lists are sorted
// and hold exactly its records, each list of a value exactly the records with that value.
func checkMemoryStore(t *testing.T, s *MemoryStore) {
	t.Helper()
	s.mu.RLock()
	defer s.mu.RUnlock()
	sorted := func(what string, l sortedRecords) {
		t.Helper()
		for i := 1; i < len(l); i++ {
			if compareKey(l[i-1], l[i].Timestamp, l[i].ID) >= 0 {
				t.Errorf("%s: %s before %s", what, l[i-1].ID, l[i].ID)
			}
		}
	}
	for k, o := range s.orgs {
		if len(o.byID) == 0 {
			t.Errorf("%v: kept without records", k)
		}
		sorted(fmt.Sprint(k), o.all)
		if len(o.all) != len(o.byID) {
			t.Errorf("%v: %d listed, %d records", k, len(o.all), len(o.byID))
		}
		for _, r := range o.all {
			if o.byID[r.ID] != r {
				t.Errorf("%v: %s listed, not a record", k, r.ID)
			}
		}
		for _, by := range []struct {
			name  string
			m     map[string]sortedRecords
			value func(*Record) string
		}{
			{"document", o.byDoc, func(r *Record) string { return r.DocumentID }},
			{"target", o.byTarget, func(r *Record) string { return r.TargetEntityID }},
			{"user", o.byUser, func(r *Record) string { return r.ActionUser.UserID }},
		} {
			n := 0
			for v, l := range by.m {
				what := fmt.Sprintf("%v %s %q", k, by.name, v)
				if len(l) == 0 || v == "" {
					t.Errorf("%s: kept", what)
				}
				sorted(what, l)
				for _, r := range l {
					if o.byID[r.ID] != r || by.value(r) != v {
						t.Errorf("%s: holds %s", what, r.ID)
					}
				}
				n += len(l)
			}
			want := 0
			for _, r := range o.byID {
				if by.value(r) != "" {
					want++
				}
			}
			if n != want {
				t.Errorf("%v: %d records in %s lists, want %d", k, n, by.name, want)
			}
		}
	}
}

func TestMongoStore(t *testing.T) {
	runStoreSuite(t, func(t *testing.T) Store { return newMongoStore(t) })
	runReplicaSuite(t, func(t *testing.T) [2]Store {
		db := mongotest.Connect(t).Database("activity")
		var r [2]Store
		for i := range r {
			s, err := NewMongoStore(context.Background(), db)
			if err != nil {
				t.Fatal(err)
			}
			r[i] = s
		}
		return r
	})
}

func newMongoStore(t *testing.T) *MongoStore {
	t.Helper()
	s, err := NewMongoStore(context.Background(), mongotest.Connect(t).Database("activity"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Creating the store again on the same database finds its indexes there and succeeds.
func TestMongoStoreStartsTwice(t *testing.T) {
	db := mongotest.Connect(t).Database("activity")
	for range 2 {
		if _, err := NewMongoStore(context.Background(), db); err != nil {
			t.Fatal(err)
		}
	}
}

// What MongoStore writes: records under their compound _id; a config created by a patch that
// does not set isEnabled stores it false, and leaves immutability and triggers out.
func TestMongoStoreDocuments(t *testing.T) {
	s := newMongoStore(t)
	ctx := context.Background()
	insert(t, s, rec("a1", 1))
	var raw bson.M
	if err := s.activities.FindOne(ctx, bson.M{"_id": "k1\x1fo1\x1fa1"}).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	if raw["id"] != "a1" || raw["apiKey"] != "k1" || raw["organizationId"] != "o1" || raw["ts"] != int64(1) {
		t.Fatalf("stored record: %v", raw)
	}
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := s.UpdateConfig(ctx, "k1", ConfigPatch{Triggers: map[string]map[string]bool{"comments": {"add": true}}}, t0); err != nil {
		t.Fatal(err)
	}
	raw = nil
	if err := s.configs.FindOne(ctx, bson.M{"_id": "k1"}).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	keys := slices.Sorted(maps.Keys(raw))
	if enabled, ok := raw["isEnabled"]; !ok || enabled != false || !slices.Equal(keys, []string{"_id", "isEnabled", "triggers", "updatedAt"}) {
		t.Fatalf("stored config: %v", raw)
	}
}

func ptr[T any](v T) *T { return &v }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// rec is a record of tenant k1, organization o1, with every field set, changed by opts.
func rec(id string, ts int64, opts ...func(*Record)) *Record {
	r := &Record{
		APIKey: "k1", OrganizationID: "o1", ID: id, Timestamp: ts,
		FeatureType: "comments", ActionType: "add",
		ActionUser:             User{UserID: "u1", Name: "Ann", Email: "ann@example.com"},
		TargetEntityID:         "t0",
		DisplayMessageTemplate: "{{user}} added a comment", DisplayMessageTemplateData: `{"user":"Ann"}`,
		Changes: `{"text":{"from":"","to":"hi"}}`, EntityData: `{"id":"c1"}`, EntityTargetData: `[1,2]`,
		ActionIcon: "comment",
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

func scope(apiKey, orgID string) func(*Record) {
	return func(r *Record) { r.APIKey, r.OrganizationID = apiKey, orgID }
}
func doc(id, gen string) func(*Record) {
	return func(r *Record) { r.DocumentID, r.DocumentGeneration = id, gen }
}
func orgGen(gen string) func(*Record) { return func(r *Record) { r.OrganizationGeneration = gen } }
func target(id string) func(*Record)  { return func(r *Record) { r.TargetEntityID = id } }
func user(id string) func(*Record)    { return func(r *Record) { r.ActionUser.UserID = id } }
func kind(feature, action string) func(*Record) {
	return func(r *Record) { r.FeatureType, r.ActionType = feature, action }
}
func immutable(r *Record)         { r.Immutable = true }
func icon(s string) func(*Record) { return func(r *Record) { r.ActionIcon = s } }

func insert(t *testing.T, s Store, recs ...*Record) {
	t.Helper()
	existing, err := s.Insert(context.Background(), recs)
	if err != nil {
		t.Fatal(err)
	}
	if len(existing) != 0 {
		t.Fatalf("insert: existing %v, want none", existing)
	}
}

func idsOf(recs []*Record) []string {
	out := []string{}
	for _, r := range recs {
		out = append(out, r.ID)
	}
	return out
}

// list asserts a listing's ids, in order.
func list(t *testing.T, s Store, what, apiKey, orgID string, f Filter, after *Position, desc bool, limit int, want ...string) []*Record {
	t.Helper()
	got, err := s.List(context.Background(), apiKey, orgID, f, after, desc, limit)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got == nil {
		t.Fatalf("%s: nil result", what)
	}
	if want == nil {
		want = []string{}
	}
	if ids := idsOf(got); !slices.Equal(ids, want) {
		t.Fatalf("%s: %v, want %v", what, ids, want)
	}
	return got
}

// o1 is the default scope's listing, the one most assertions read.
func o1(t *testing.T, s Store, what string, f Filter, after *Position, desc bool, limit int, want ...string) []*Record {
	t.Helper()
	return list(t, s, what, "k1", "o1", f, after, desc, limit, want...)
}

// getOne returns the record id of k1/o1, nil when there is none.
func getOne(t *testing.T, s Store, id string) *Record {
	t.Helper()
	got, err := s.Get(context.Background(), "k1", "o1", []string{id})
	if err != nil {
		t.Fatal(err)
	}
	return got[id]
}

// pageAll lists every page of size records and returns the ids in the order seen.
func pageAll(t *testing.T, s Store, f Filter, desc bool, size int, between func()) []string {
	t.Helper()
	var (
		after *Position
		out   []string
	)
	for range 1000 {
		page, err := s.List(context.Background(), "k1", "o1", f, after, desc, size)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > size {
			t.Fatalf("page of %d records, limit %d", len(page), size)
		}
		out = append(out, idsOf(page)...)
		if len(page) < size {
			return out
		}
		last := page[len(page)-1]
		after = &Position{Timestamp: last.Timestamp, ID: last.ID}
		if between != nil {
			between()
		}
	}
	t.Fatal("paging does not end")
	return nil
}

// sortedIDs returns the ids of recs in (Timestamp, ID) order, descending when desc.
func sortedIDs(recs []*Record, desc bool) []string {
	recs = slices.Clone(recs)
	slices.SortFunc(recs, func(a, b *Record) int {
		c := cmp.Or(cmp.Compare(a.Timestamp, b.Timestamp), cmp.Compare(a.ID, b.ID))
		if desc {
			return -c
		}
		return c
	})
	return idsOf(recs)
}

func runStoreSuite(t *testing.T, newStore func(t *testing.T) Store) {
	ctx := context.Background()

	t.Run("insert skips existing ids within tenant and organization", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		first := rec("a1", 100)
		existing, err := s.Insert(ctx, []*Record{first, rec("a2", 200)})
		must(t, err)
		if existing == nil || len(existing) != 0 {
			t.Fatalf("first insert: existing %#v, want empty", existing)
		}
		// The record is copied in: changing what was inserted changes nothing stored.
		first.ActionIcon = "changed by the caller"

		existing, err = s.Insert(ctx, []*Record{
			rec("a2", 999, icon("second a2")), rec("a3", 300), rec("a1", 999, icon("second a1")), rec("a3", 999),
		})
		must(t, err)
		if !slices.Equal(existing, []string{"a2", "a1", "a3"}) {
			t.Fatalf("second insert: existing %v, want [a2 a1 a3]", existing)
		}
		// The same id in another organization or tenant is another record.
		existing, err = s.Insert(ctx, []*Record{
			rec("a1", 50, scope("k1", "o2"), icon("k1/o2")), rec("a1", 60, scope("k2", "o1"), icon("k2/o1")),
		})
		must(t, err)
		if len(existing) != 0 {
			t.Fatalf("other scopes: existing %v, want none", existing)
		}
		existing, err = s.Insert(ctx, nil)
		if err != nil || len(existing) != 0 {
			t.Fatalf("empty insert: %v %v", existing, err)
		}

		// The first write of an id stands, whole.
		if got, want := getOne(t, s, "a1"), rec("a1", 100); got == nil || *got != *want {
			t.Fatalf("a1: %+v, want %+v", got, want)
		}
		if got, want := getOne(t, s, "a2"), rec("a2", 200); got == nil || *got != *want {
			t.Fatalf("a2: %+v, want %+v", got, want)
		}
		o1(t, s, "k1/o1", Filter{}, nil, false, 0, "a1", "a2", "a3")
		got := list(t, s, "k1/o2", "k1", "o2", Filter{}, nil, false, 0, "a1")
		if *got[0] != *rec("a1", 50, scope("k1", "o2"), icon("k1/o2")) {
			t.Fatalf("k1/o2 a1: %+v", got[0])
		}
		got = list(t, s, "k2/o1", "k2", "o1", Filter{}, nil, false, 0, "a1")
		if got[0].ActionIcon != "k2/o1" || got[0].Timestamp != 60 {
			t.Fatalf("k2/o1 a1: %+v", got[0])
		}
		list(t, s, "unknown organization", "k1", "nope", Filter{}, nil, false, 0)
		list(t, s, "unknown tenant", "k3", "o1", Filter{}, nil, false, 0)

		// Records are copied out: changing what was read changes nothing stored.
		got = o1(t, s, "k1/o1", Filter{}, nil, false, 1, "a1")
		got[0].ActionIcon, got[0].ActionUser.Name = "mine", "mine"
		if r := getOne(t, s, "a1"); *r != *rec("a1", 100) {
			t.Fatalf("a1 changed through a listing's result: %+v", r)
		}
		r := getOne(t, s, "a1")
		r.Changes = "mine"
		if r := getOne(t, s, "a1"); *r != *rec("a1", 100) {
			t.Fatalf("a1 changed through Get's result: %+v", r)
		}
	})

	t.Run("list orders and filters", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		// Inserted out of order; r02 and r03 share a timestamp, which their ids order.
		insert(t, s,
			rec("r04", 300, doc("d2", "g"), target("t2"), user("u2"), kind("comments", "delete")),
			rec("r03", 200, doc("d2", "g"), target("t1"), user("u1"), kind("reactions", "add")),
			rec("r06", 400, doc("d1", "g"), target("t1"), user("u2"), kind("reactions", "delete")),
			rec("r01", 100, doc("d1", "g"), target("t1"), user("u1"), kind("comments", "add")),
			rec("r05", 150, doc("", ""), target(""), user("u3"), kind("presence", "join")),
			rec("r02", 200, doc("d1", "g"), target("t2"), user("u2"), kind("comments", "update")),
			// The same values elsewhere, never listed with o1.
			rec("r01", 250, scope("k1", "o2"), doc("d1", "g"), target("t1"), user("u1")),
			rec("x01", 250, scope("k1", "o2"), doc("d1", "g"), target("t1"), user("u1")),
			rec("x02", 250, scope("k2", "o1"), doc("d1", "g"), target("t1"), user("u1")),
		)
		none := Filter{}
		o1(t, s, "asc", none, nil, false, 0, "r01", "r05", "r02", "r03", "r04", "r06")
		o1(t, s, "desc", none, nil, true, 0, "r06", "r04", "r03", "r02", "r05", "r01")
		o1(t, s, "limit", none, nil, false, 2, "r01", "r05")
		o1(t, s, "limit desc", none, nil, true, 3, "r06", "r04", "r03")
		o1(t, s, "limit beyond", none, nil, true, 50, "r06", "r04", "r03", "r02", "r05", "r01")

		// One filter at a time.
		o1(t, s, "document", Filter{DocumentID: "d1"}, nil, false, 0, "r01", "r02", "r06")
		o1(t, s, "document desc", Filter{DocumentID: "d2"}, nil, true, 0, "r04", "r03")
		o1(t, s, "unknown document", Filter{DocumentID: "d9"}, nil, false, 0)
		o1(t, s, "target", Filter{TargetEntityID: "t1"}, nil, false, 0, "r01", "r03", "r06")
		o1(t, s, "target desc", Filter{TargetEntityID: "t2"}, nil, true, 0, "r04", "r02")
		o1(t, s, "user", Filter{UserID: "u2"}, nil, false, 0, "r02", "r04", "r06")
		o1(t, s, "user desc", Filter{UserID: "u1"}, nil, true, 0, "r03", "r01")
		o1(t, s, "unknown user", Filter{UserID: "u9"}, nil, true, 0)
		o1(t, s, "features", Filter{FeatureTypes: []string{"reactions", "presence"}}, nil, false, 0, "r05", "r03", "r06")
		o1(t, s, "actions", Filter{ActionTypes: []string{"add"}}, nil, true, 0, "r03", "r01")
		o1(t, s, "actions, one unknown", Filter{ActionTypes: []string{"nope", "delete"}}, nil, false, 0, "r04", "r06")
		o1(t, s, "ids", Filter{IDs: []string{"r06", "r01", "nope", "r01", "x01", "x02"}}, nil, false, 0, "r01", "r06")
		o1(t, s, "ids desc", Filter{IDs: []string{"r02", "r06", "r03"}}, nil, true, 0, "r06", "r03", "r02")
		o1(t, s, "ids limit", Filter{IDs: []string{"r02", "r06", "r03"}}, nil, true, 2, "r06", "r03")
		// An empty list of values matches nothing; a nil one everything.
		o1(t, s, "no features", Filter{FeatureTypes: []string{}}, nil, false, 0)
		o1(t, s, "no actions", Filter{ActionTypes: []string{}}, nil, false, 0)
		o1(t, s, "no ids", Filter{IDs: []string{}}, nil, false, 0)

		// Combined.
		o1(t, s, "document and user", Filter{DocumentID: "d1", UserID: "u2"}, nil, false, 0, "r02", "r06")
		o1(t, s, "document and feature", Filter{DocumentID: "d2", FeatureTypes: []string{"comments"}}, nil, false, 0, "r04")
		o1(t, s, "target and action", Filter{TargetEntityID: "t1", ActionTypes: []string{"add"}}, nil, true, 0, "r03", "r01")
		o1(t, s, "user and target", Filter{UserID: "u1", TargetEntityID: "t2"}, nil, true, 0)
		o1(t, s, "everything", Filter{
			DocumentID: "d1", TargetEntityID: "t1", UserID: "u2", FeatureTypes: []string{"reactions"},
			ActionTypes: []string{"delete", "add"}, IDs: []string{"r06", "r01"},
		}, nil, false, 0, "r06")
		o1(t, s, "ids and document", Filter{IDs: []string{"r01", "r03", "r04"}, DocumentID: "d2"}, nil, false, 0, "r03", "r04")
		o1(t, s, "features and actions", Filter{FeatureTypes: []string{"comments"}, ActionTypes: []string{"add", "update"}}, nil, true, 0, "r02", "r01")

		// Starting after a position: strictly after, the id breaking a timestamp's tie.
		o1(t, s, "after asc", none, &Position{200, "r02"}, false, 0, "r03", "r04", "r06")
		o1(t, s, "after desc", none, &Position{200, "r03"}, true, 0, "r02", "r05", "r01")
		o1(t, s, "after asc, limit", none, &Position{150, "r05"}, false, 2, "r02", "r03")
		o1(t, s, "after the last", none, &Position{400, "r06"}, false, 0)
		o1(t, s, "after the first, desc", none, &Position{100, "r01"}, true, 0)
		// A position need not be a record's (it may have been deleted).
		o1(t, s, "after a gap", none, &Position{250, ""}, false, 0, "r04", "r06")
		o1(t, s, "after a gap desc", none, &Position{200, "r025"}, true, 0, "r02", "r05", "r01")
		o1(t, s, "after, before everything", none, &Position{0, ""}, false, 1, "r01")
		o1(t, s, "after, beyond everything desc", none, &Position{1000, ""}, true, 1, "r06")
		o1(t, s, "after with a document", Filter{DocumentID: "d1"}, &Position{200, "r02"}, true, 0, "r01")
		o1(t, s, "after with a user", Filter{UserID: "u2"}, &Position{200, "r02"}, false, 1, "r04")
		o1(t, s, "after with a target", Filter{TargetEntityID: "t1"}, &Position{200, "r03"}, true, 0, "r01")
		o1(t, s, "after with features", Filter{FeatureTypes: []string{"reactions"}}, &Position{200, "r03"}, false, 0, "r06")
		o1(t, s, "after with ids", Filter{IDs: []string{"r01", "r03", "r04", "r06"}}, &Position{200, "r03"}, false, 1, "r04")
		o1(t, s, "after with ids desc", Filter{IDs: []string{"r01", "r03", "r04", "r06"}}, &Position{200, "r03"}, true, 0, "r01")

		// Every field comes back as written.
		got := o1(t, s, "document d2", Filter{DocumentID: "d2"}, nil, false, 1, "r03")
		if want := rec("r03", 200, doc("d2", "g"), target("t1"), user("u1"), kind("reactions", "add")); *got[0] != *want {
			t.Fatalf("r03: %+v, want %+v", got[0], want)
		}
		list(t, s, "other organization's document", "k1", "o2", Filter{DocumentID: "d1"}, nil, false, 0, "r01", "x01")
		list(t, s, "other tenant's user", "k2", "o1", Filter{UserID: "u1"}, nil, false, 0, "x02")
	})

	t.Run("paging returns every record once", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		// 36 records, four to a timestamp, their ids out of insertion order, in two documents.
		var recs []*Record
		for i := range 36 {
			d := []string{"d1", "d2"}[i%2]
			recs = append(recs, rec(fmt.Sprintf("p%02d", (i*7)%36), int64(1000+i/4), doc(d, "g")))
		}
		insert(t, s, recs...)
		ofD2 := slices.DeleteFunc(slices.Clone(recs), func(r *Record) bool { return r.DocumentID != "d2" })
		for _, c := range []struct {
			name string
			f    Filter
			want []*Record
		}{{"all", Filter{}, recs}, {"document", Filter{DocumentID: "d2"}, ofD2}} {
			for _, desc := range []bool{false, true} {
				for _, size := range []int{1, 5, 9} {
					want := sortedIDs(c.want, desc)
					if got := pageAll(t, s, c.f, desc, size, nil); !slices.Equal(got, want) {
						t.Fatalf("%s desc=%v by %d: %v, want %v", c.name, desc, size, got, want)
					}
				}
			}
		}
	})

	t.Run("paging is stable while records are added", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		var start []*Record
		for i := range 12 {
			start = append(start, rec(fmt.Sprintf("s%02d", (i*5)%12), int64(1000+i/3)))
		}
		insert(t, s, start...)
		for _, desc := range []bool{true, false} {
			n := 0
			got := pageAll(t, s, Filter{}, desc, 4, func() {
				// New records: one now, one backdated into the range already listed or still
				// to come, one on a timestamp the start records have.
				n++
				insert(t, s,
					rec(fmt.Sprintf("n%v%d", desc, n), int64(5000+n)),
					rec(fmt.Sprintf("b%v%d", desc, n), int64(1000+n)),
					rec(fmt.Sprintf("e%v%d", desc, n), 1002))
			})
			seen := map[string]bool{}
			var old []string
			for _, id := range got {
				if seen[id] {
					t.Fatalf("desc=%v: %s listed twice: %v", desc, id, got)
				}
				seen[id] = true
				if id[0] == 's' {
					old = append(old, id)
				}
			}
			if want := sortedIDs(start, desc); !slices.Equal(old, want) {
				t.Fatalf("desc=%v: start records listed %v, want %v (all: %v)", desc, old, want, got)
			}
		}
	})

	t.Run("get", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		insert(t, s, rec("g1", 1), rec("g2", 2, immutable), rec("g3", 3, scope("k1", "o2")), rec("g1", 4, scope("k2", "o1")))
		got, err := s.Get(ctx, "k1", "o1", []string{"g2", "nope", "g1", "g3", "g2"})
		must(t, err)
		if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, []string{"g1", "g2"}) {
			t.Fatalf("Get: %v", keys)
		}
		if *got["g1"] != *rec("g1", 1) || *got["g2"] != *rec("g2", 2, immutable) {
			t.Fatalf("Get: %+v %+v", got["g1"], got["g2"])
		}
		got, err = s.Get(ctx, "k2", "o1", []string{"g1", "g2"})
		must(t, err)
		if len(got) != 1 || got["g1"] == nil || got["g1"].Timestamp != 4 {
			t.Fatalf("Get k2: %+v", got)
		}
		for _, ids := range [][]string{nil, {}, {"nope"}} {
			got, err = s.Get(ctx, "k1", "o1", ids)
			if err != nil || got == nil || len(got) != 0 {
				t.Fatalf("Get %v: %v %v", ids, got, err)
			}
		}
		got, err = s.Get(ctx, "k9", "o9", []string{"g1"})
		if err != nil || got == nil || len(got) != 0 {
			t.Fatalf("Get unknown organization: %v %v", got, err)
		}
	})

	t.Run("update", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		insert(t, s, rec("m1", 10), rec("m2", 20, immutable), rec("m3", 5), rec("m1", 10, scope("k1", "o2")))

		// Only the fields set change; an empty value is a value.
		must(t, s.Update(ctx, "k1", "o1", "m1", Patch{Changes: ptr(`{"n":1}`), ActionIcon: ptr("")}))
		want := rec("m1", 10)
		want.Changes, want.ActionIcon = `{"n":1}`, ""
		if got := getOne(t, s, "m1"); *got != *want {
			t.Fatalf("m1: %+v, want %+v", got, want)
		}
		must(t, s.Update(ctx, "k1", "o1", "m1", Patch{
			EntityData: ptr(`{"e":2}`), EntityTargetData: ptr(`"t"`), DisplayMessageTemplate: ptr("{{x}}"),
			DisplayMessageTemplateData: ptr(`{"x":"y"}`),
		}))
		want.EntityData, want.EntityTargetData, want.DisplayMessageTemplate, want.DisplayMessageTemplateData = `{"e":2}`, `"t"`, "{{x}}", `{"x":"y"}`
		if got := getOne(t, s, "m1"); *got != *want {
			t.Fatalf("m1: %+v, want %+v", got, want)
		}
		must(t, s.Update(ctx, "k1", "o1", "m1", Patch{}))
		if got := getOne(t, s, "m1"); *got != *want {
			t.Fatalf("m1 after an empty patch: %+v, want %+v", got, want)
		}
		// The same id elsewhere is untouched.
		if got := list(t, s, "k1/o2", "k1", "o2", Filter{}, nil, false, 0, "m1"); *got[0] != *rec("m1", 10, scope("k1", "o2")) {
			t.Fatalf("k1/o2 m1: %+v", got[0])
		}

		for _, c := range []struct{ apiKey, orgID, id string }{{"k1", "o1", "nope"}, {"k1", "o2", "m2"}, {"k2", "o1", "m1"}} {
			for _, p := range []Patch{{ActionIcon: ptr("x")}, {}} {
				if err := s.Update(ctx, c.apiKey, c.orgID, c.id, p); !errors.Is(err, ErrNotFound) {
					t.Fatalf("update %v with %+v: %v, want ErrNotFound", c, p, err)
				}
			}
		}
		for _, p := range []Patch{{Changes: ptr("{}"), ActionIcon: ptr("x")}, {}} {
			if err := s.Update(ctx, "k1", "o1", "m2", p); !errors.Is(err, ErrImmutable) {
				t.Fatalf("update immutable with %+v: %v, want ErrImmutable", p, err)
			}
		}
		if got := getOne(t, s, "m2"); *got != *rec("m2", 20, immutable) {
			t.Fatalf("immutable m2 changed: %+v", got)
		}
		o1(t, s, "order after updates", Filter{}, nil, false, 0, "m3", "m1", "m2")
	})

	t.Run("delete organization by generation", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		insert(t, s,
			rec("a", 1, orgGen("g1"), doc("d1", "x"), user("u1"), target("t1")),
			rec("b", 2, orgGen(""), doc("d2", "x")),
			rec("c", 3, orgGen("g2"), doc("d1", "x"), user("u1"), target("t1")),
			rec("d", 4, orgGen("g1")),
			rec("e", 5, orgGen("g1"), scope("k1", "o2")),
			rec("f", 6, orgGen("g1"), scope("k2", "o1")),
		)
		must(t, s.DeleteOrganization(ctx, "k1", "o1", "g1"))
		o1(t, s, "left", Filter{}, nil, false, 0, "c")
		o1(t, s, "left in d1", Filter{DocumentID: "d1"}, nil, false, 0, "c")
		o1(t, s, "left in d2", Filter{DocumentID: "d2"}, nil, false, 0)
		o1(t, s, "left of u1", Filter{UserID: "u1"}, nil, true, 0, "c")
		o1(t, s, "left on t1", Filter{TargetEntityID: "t1"}, nil, true, 0, "c")
		list(t, s, "other organization", "k1", "o2", Filter{}, nil, false, 0, "e")
		list(t, s, "other tenant", "k2", "o1", Filter{}, nil, false, 0, "f")
		got, err := s.Get(ctx, "k1", "o1", []string{"a", "b", "c", "d"})
		must(t, err)
		if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, []string{"c"}) {
			t.Fatalf("Get after delete: %v", keys)
		}

		// A new generation's records stay when the older one is deleted again.
		insert(t, s, rec("a", 7, orgGen("g3")), rec("g", 8, orgGen("")), rec("h", 9, orgGen("g9"), user("u2")))
		must(t, s.DeleteOrganization(ctx, "k1", "o1", "g2"))
		o1(t, s, "after deleting g2", Filter{}, nil, false, 0, "a", "h")
		must(t, s.DeleteOrganization(ctx, "k1", "o1", "g3"))
		o1(t, s, "after deleting g3", Filter{}, nil, false, 0, "h")
		o1(t, s, "after deleting g3, of u1", Filter{UserID: "u1"}, nil, false, 0)
		must(t, s.DeleteOrganization(ctx, "k1", "nope", "g1"))
	})

	t.Run("delete document by generation", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		insert(t, s,
			rec("a", 1, doc("d1", "g1"), user("u1")),
			rec("b", 2, doc("d1", ""), user("u1")),
			rec("c", 3, doc("d1", "g2"), user("u1")),
			rec("d", 4, doc("d2", "g1"), user("u1")),
			rec("n", 5, doc("", ""), user("u2")),
			rec("e", 6, doc("d1", "g1"), scope("k1", "o2")),
			rec("f", 7, doc("d1", "g1"), scope("k2", "o1")),
		)
		must(t, s.DeleteDocument(ctx, "k1", "o1", "d1", "g1"))
		o1(t, s, "left", Filter{}, nil, false, 0, "c", "d", "n")
		o1(t, s, "left in d1", Filter{DocumentID: "d1"}, nil, false, 0, "c")
		o1(t, s, "left in d2", Filter{DocumentID: "d2"}, nil, false, 0, "d")
		o1(t, s, "left of u1", Filter{UserID: "u1"}, nil, true, 0, "d", "c")
		list(t, s, "other organization", "k1", "o2", Filter{}, nil, false, 0, "e")
		list(t, s, "other tenant", "k2", "o1", Filter{}, nil, false, 0, "f")
		// Records of no document belong to none.
		must(t, s.DeleteDocument(ctx, "k1", "o1", "", "g1"))
		must(t, s.DeleteDocument(ctx, "k1", "o1", "", ""))
		o1(t, s, "no document is not a document", Filter{}, nil, false, 0, "c", "d", "n")
		must(t, s.DeleteDocument(ctx, "k1", "o1", "d1", "g2"))
		must(t, s.DeleteDocument(ctx, "k1", "nope", "d1", "g2"))
		o1(t, s, "after deleting g2", Filter{}, nil, false, 0, "d", "n")
	})

	t.Run("move document", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		insert(t, s,
			rec("a", 10, doc("d1", "g1"), user("u1")),
			rec("b", 30, doc("d1", ""), user("u2")),
			rec("c", 20, doc("d1", "g2"), user("u1")),
			rec("x", 25, doc("d3", "g7"), user("u1")),
			rec("e", 1, doc("d1", "g1"), scope("k1", "o2")),
		)
		for range 2 { // a second run changes nothing
			must(t, s.MoveDocument(ctx, "k1", "o1", "d1", "d3", "g1"))
			o1(t, s, "moved into d3", Filter{DocumentID: "d3"}, nil, false, 0, "a", "x", "b")
			o1(t, s, "moved into d3, desc", Filter{DocumentID: "d3"}, nil, true, 0, "b", "x", "a")
			o1(t, s, "left in d1", Filter{DocumentID: "d1"}, nil, false, 0, "c")
			o1(t, s, "d3 of u1", Filter{DocumentID: "d3", UserID: "u1"}, nil, false, 0, "a", "x")
			o1(t, s, "all", Filter{}, nil, false, 0, "a", "c", "x", "b")
		}
		if r := getOne(t, s, "a"); r.DocumentID != "d3" || r.DocumentGeneration != "g1" {
			t.Fatalf("moved a: %+v", r)
		}
		list(t, s, "other organization", "k1", "o2", Filter{DocumentID: "d1"}, nil, false, 0, "e")
		// A record written under the old id after a partial move is moved by the next run.
		insert(t, s, rec("y", 40, doc("d1", "g1")))
		must(t, s.MoveDocument(ctx, "k1", "o1", "d1", "d3", "g1"))
		o1(t, s, "finished", Filter{DocumentID: "d3"}, nil, false, 0, "a", "x", "b", "y")
		o1(t, s, "finished, d1", Filter{DocumentID: "d1"}, nil, false, 0, "c")
		must(t, s.MoveDocument(ctx, "k1", "o1", "d3", "d3", "g1"))
		o1(t, s, "onto itself", Filter{DocumentID: "d3"}, nil, false, 0, "a", "x", "b", "y")
		must(t, s.MoveDocument(ctx, "k1", "nope", "d3", "d4", "g1"))
		// Moving every record of a document leaves it empty.
		insert(t, s, rec("z1", 50, doc("d6", "")), rec("z2", 60, doc("d6", "g6")))
		must(t, s.MoveDocument(ctx, "k1", "o1", "d6", "d7", "g6"))
		o1(t, s, "all of d6 moved", Filter{DocumentID: "d7"}, nil, true, 0, "z2", "z1")
		o1(t, s, "d6 is empty", Filter{DocumentID: "d6"}, nil, false, 0)
		o1(t, s, "all, after the moves", Filter{}, nil, false, 0, "a", "c", "x", "b", "y", "z1", "z2")
	})

	// The generation markers are lifecycle's (its suite holds their contract): the store keeps
	// them by id (lifecycle.ByID).
	t.Run("markers", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		must(t, s.Bury(ctx, "k1", "o1", KindDocument, "d1", "g1"))
		must(t, s.MarkMoved(ctx, "k1", "o1", "d3", "g3", "d4"))
		for _, c := range []struct {
			id   string
			want bool
		}{{"d1", true}, {"d2", false}} {
			if got, err := s.Buried(ctx, "k1", "o1", KindDocument, c.id, "g1"); err != nil || got != c.want {
				t.Fatalf("Buried(%s): %v %v, want %v", c.id, got, err, c.want)
			}
		}
		if to, err := s.MovedTo(ctx, "k1", "o1", "d3", "g3"); to != "d4" || err != nil {
			t.Fatalf("MovedTo: %q %v", to, err)
		}
	})

	t.Run("config", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		if _, err := s.Config(ctx, "k1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Config of a new tenant: %v, want ErrNotFound", err)
		}
		t0 := time.Date(2025, 3, 4, 5, 6, 7, 8_000_000, time.UTC)
		check := func(what string, c *Config, enabled bool, imm *bool, triggers map[string]map[string]bool, at time.Time) {
			t.Helper()
			if c.Enabled != enabled || (c.Immutable == nil) != (imm == nil) || (imm != nil && *c.Immutable != *imm) ||
				!maps.EqualFunc(c.Triggers, triggers, maps.Equal) || (c.Triggers == nil) != (triggers == nil) || !c.UpdatedAt.Equal(at) {
				t.Fatalf("%s: %+v (immutable %v), want enabled %v immutable %v triggers %v at %v", what, c, c.Immutable, enabled, imm, triggers, at)
			}
			read, err := s.Config(ctx, "k1")
			must(t, err)
			if read.Enabled != c.Enabled || !maps.EqualFunc(read.Triggers, c.Triggers, maps.Equal) ||
				(read.Immutable == nil) != (c.Immutable == nil) || (read.Immutable != nil && *read.Immutable != *c.Immutable) ||
				!read.UpdatedAt.Equal(c.UpdatedAt) {
				t.Fatalf("%s: read %+v, returned %+v", what, read, c)
			}
		}

		// Created by a patch with triggers only: disabled, immutability unset.
		trig := map[string]map[string]bool{"comments": {"add": true, "delete": false}, "reactions": {"add": false}}
		c, err := s.UpdateConfig(ctx, "k1", ConfigPatch{Triggers: trig}, t0)
		must(t, err)
		check("created", c, false, nil, map[string]map[string]bool{"comments": {"add": true, "delete": false}, "reactions": {"add": false}}, t0)
		// Neither the patch's map nor the returned one is the stored one.
		trig["comments"]["add"] = false
		c.Triggers["reactions"]["add"] = true
		c, err = s.UpdateConfig(ctx, "k1", ConfigPatch{Enabled: ptr(true)}, t0.Add(time.Second))
		must(t, err)
		check("enabled", c, true, nil, map[string]map[string]bool{"comments": {"add": true, "delete": false}, "reactions": {"add": false}}, t0.Add(time.Second))
		c, err = s.UpdateConfig(ctx, "k1", ConfigPatch{Immutable: ptr(false)}, t0.Add(2*time.Second))
		must(t, err)
		check("immutable set false", c, true, ptr(false), map[string]map[string]bool{"comments": {"add": true, "delete": false}, "reactions": {"add": false}}, t0.Add(2*time.Second))
		// Triggers replace the old ones whole.
		c, err = s.UpdateConfig(ctx, "k1", ConfigPatch{Triggers: map[string]map[string]bool{"presence": {"join": false}}}, t0.Add(3*time.Second))
		must(t, err)
		check("triggers replaced", c, true, ptr(false), map[string]map[string]bool{"presence": {"join": false}}, t0.Add(3*time.Second))
		c, err = s.UpdateConfig(ctx, "k1", ConfigPatch{Enabled: ptr(false), Immutable: ptr(true)}, t0.Add(4*time.Second))
		must(t, err)
		check("disabled, immutable", c, false, ptr(true), map[string]map[string]bool{"presence": {"join": false}}, t0.Add(4*time.Second))
		// An empty patch only touches the time; sub-millisecond precision is not kept.
		c, err = s.UpdateConfig(ctx, "k1", ConfigPatch{}, t0.Add(5*time.Second+123*time.Microsecond))
		must(t, err)
		check("touched", c, false, ptr(true), map[string]map[string]bool{"presence": {"join": false}}, t0.Add(5*time.Second))

		// Other tenants have their own; a first patch may enable.
		if _, err := s.Config(ctx, "k2"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Config of k2: %v, want ErrNotFound", err)
		}
		c, err = s.UpdateConfig(ctx, "k2", ConfigPatch{Enabled: ptr(true)}, t0)
		must(t, err)
		if !c.Enabled || c.Immutable != nil || c.Triggers != nil || !c.UpdatedAt.Equal(t0) {
			t.Fatalf("k2 created enabled: %+v", c)
		}
		c, err = s.UpdateConfig(ctx, "k3", ConfigPatch{}, t0)
		must(t, err)
		if c.Enabled || c.Immutable != nil || c.Triggers != nil || !c.UpdatedAt.Equal(t0) {
			t.Fatalf("k3 created empty: %+v", c)
		}
		c, err = s.UpdateConfig(ctx, "k4", ConfigPatch{Immutable: ptr(true)}, t0)
		must(t, err)
		if c.Enabled || c.Immutable == nil || !*c.Immutable || c.Triggers != nil {
			t.Fatalf("k4 created immutable: %+v", c)
		}
		if c, err := s.Config(ctx, "k1"); err != nil || c.Enabled || !*c.Immutable {
			t.Fatalf("k1 after the others: %+v %v", c, err)
		}
	})

	t.Run("concurrent config updates all land", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		_, err := s.UpdateConfig(ctx, "old", ConfigPatch{Triggers: map[string]map[string]bool{"comments": {"add": false}}}, t0)
		must(t, err)
		for _, apiKey := range []string{"new", "old"} {
			var wg sync.WaitGroup
			errs := make(chan error, 10)
			for i := range 10 {
				p := ConfigPatch{Enabled: ptr(true)}
				if i%2 == 1 {
					p = ConfigPatch{Immutable: ptr(true)}
				}
				wg.Go(func() {
					_, err := s.UpdateConfig(ctx, apiKey, p, t0.Add(time.Duration(i)*time.Second))
					errs <- err
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				must(t, err)
			}
			c, err := s.Config(ctx, apiKey)
			must(t, err)
			if !c.Enabled || c.Immutable == nil || !*c.Immutable {
				t.Fatalf("%s: %+v (immutable %v), want enabled and immutable", apiKey, c, c.Immutable)
			}
			if apiKey == "old" && !maps.EqualFunc(c.Triggers, map[string]map[string]bool{"comments": {"add": false}}, maps.Equal) {
				t.Fatalf("old: triggers %v", c.Triggers)
			}
		}
	})

	t.Run("concurrent inserts of one id store one record", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		const n = 20
		var wg sync.WaitGroup
		results := make([][]string, n)
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				results[i], errs[i] = s.Insert(ctx, []*Record{rec("same", int64(100+i), icon(fmt.Sprint(i)))})
			})
		}
		wg.Wait()
		winner := -1
		for i := range n {
			must(t, errs[i])
			switch {
			case len(results[i]) == 0 && winner < 0:
				winner = i
			case len(results[i]) == 0:
				t.Fatalf("inserts %d and %d both reported new", winner, i)
			case !slices.Equal(results[i], []string{"same"}):
				t.Fatalf("insert %d: existing %v", i, results[i])
			}
		}
		if winner < 0 {
			t.Fatal("no insert reported new")
		}
		got := o1(t, s, "stored", Filter{}, nil, false, 0, "same")
		if got[0].ActionIcon != fmt.Sprint(winner) || got[0].Timestamp != int64(100+winner) {
			t.Fatalf("stored %+v, insert %d won", got[0], winner)
		}
	})

	t.Run("ping", func(t *testing.T) {
		t.Parallel()
		must(t, newStore(t).Ping(ctx))
	})

	runConcurrencySuite(t, newStore)
}
