package comments

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/collab/collab/internal/racetest"
)

// wantCounts holds Count to the threads themselves: for each document, the threads List
// returns, counted by status and by their ReadBy, for each combination of statuses and users
// (a status asked twice, one no thread has, nobody).
func wantCounts(t *testing.T, st Store, docs []Ref, step string) {
	t.Helper()
	ctx := context.Background()
	threads := make([][]*Annotation, len(docs))
	for i, d := range docs {
		as, err := st.List(ctx, Filter{Documents: []Ref{d}}, nil, false, 0)
		if err != nil {
			t.Fatalf("%s: list %s: %v", step, d.DocumentID, err)
		}
		threads[i] = as
	}
	for _, statuses := range [][]string{nil, {"OPEN"}, {"DONE", "OPEN"}, {"OPEN", "OPEN"}, {"NONE"}} {
		for _, user := range []string{"", "u1", "u2", "u3"} {
			total, unread, err := st.Count(ctx, docs, statuses, user)
			if err != nil {
				t.Fatalf("%s: count: %v", step, err)
			}
			for i, d := range docs {
				wantTotal, wantUnread := 0, 0
				for _, a := range threads[i] {
					if len(statuses) > 0 && !slices.Contains(statuses, a.Status.ID) {
						continue
					}
					wantTotal++
					if user != "" && !slices.Contains(a.ReadBy, user) {
						wantUnread++
					}
				}
				if total[i] != wantTotal || unread[i] != wantUnread {
					t.Fatalf("%s: %s in %v for %q: total %d unread %d, want %d %d", step, d.DocumentID, statuses, user, total[i], unread[i], wantTotal, wantUnread)
				}
			}
		}
	}
}

func countThread(r Ref, id, status, loc string, readBy ...string) *Annotation {
	return &Annotation{Ref: r, ID: id, From: User{UserID: "author"}, Status: Status{ID: status, Name: status, Type: "ongoing"},
		Location: &Location{ID: loc}, Comments: []Comment{{ID: 1, Text: "x"}}, ReadBy: readBy, Version: 1, LastUpdated: 1}
}

// Count answers what the threads hold after every kind of change: inserts (one read by its
// author already), Mark Read (twice, of a thread of another document), changes that empty or
// keep ReadBy and change the status, a change that lost its race, a change and a deletion of
// a thread read by someone after it was read for the change, Delete Data by Location, and the
// document's migration and deletion and the organization's deletion.
func TestCountsFollowEveryChange(t *testing.T) {
	stores(t, func(t *testing.T, newStore func(t *testing.T) Store) {
		ctx := context.Background()
		st := newStore(t)
		d1 := Ref{APIKey: "k1", OrganizationID: "o", OrgGen: "g1", DocumentID: "d1", DocGen: "dg1"}
		d2 := Ref{APIKey: "k1", OrganizationID: "o", OrgGen: "g1", DocumentID: "d2", DocGen: "dg2"}
		docs := []Ref{d1, d2}
		for _, a := range []*Annotation{
			countThread(d1, "a1", "OPEN", "L1"), countThread(d1, "a2", "OPEN", "L1", "u1", "u1"), countThread(d1, "a3", "DONE", "L1"),
			countThread(d1, "a4", "OPEN", "L1"), countThread(d1, "a5", "DONE", "L1"), countThread(d1, "a6", "OPEN", "L2"),
			countThread(d2, "b1", "OPEN", "L1"), countThread(d2, "b2", "DONE", "L2"),
		} {
			if err := st.Insert(ctx, a, 100); err != nil {
				t.Fatal(err)
			}
		}
		wantCounts(t, st, docs, "inserted")

		markRead := func(r Ref, user string, ids ...string) {
			t.Helper()
			if _, err := st.MarkRead(ctx, r, user, ids); err != nil {
				t.Fatal(err)
			}
		}
		markRead(d1, "u1", "a1", "a3", "a6", "nope", "b1")
		markRead(d1, "u2", "a1", "a2")
		markRead(d1, "u1", "a1", "a2")
		wantCounts(t, st, docs, "marked read")

		get := func(r Ref, id string) *Annotation {
			t.Helper()
			got, err := st.Get(ctx, r, []string{id})
			if err != nil || got[id] == nil {
				t.Fatalf("get %s: %v (%v)", id, got, err)
			}
			return got[id]
		}
		swap := func(old *Annotation, status string, readBy ...string) error {
			next := old.clone()
			next.Status.ID, next.ReadBy, next.Version, next.LastUpdated = status, readBy, old.Version+1, old.LastUpdated+1
			return st.Swap(ctx, old, next)
		}
		if err := swap(get(d1, "a1"), "DONE", "u3"); err != nil {
			t.Fatal(err)
		}
		if err := swap(get(d1, "a6"), "DONE", "u1"); err != nil {
			t.Fatal(err)
		}
		wantCounts(t, st, docs, "changed")

		old := get(d1, "a3")
		if err := swap(old, "OPEN"); err != nil {
			t.Fatal(err)
		}
		if err := swap(old, "DONE", "u1"); !errors.Is(err, ErrConflict) {
			t.Fatalf("a change on an old version: %v, want ErrConflict", err)
		}
		wantCounts(t, st, docs, "a change that lost its race")

		old = get(d1, "a4")
		markRead(d1, "u2", "a4")
		if err := swap(old, "DONE"); err != nil {
			t.Fatal(err)
		}
		wantCounts(t, st, docs, "changed after a read since it was read")

		old = get(d1, "a5")
		markRead(d1, "u3", "a5")
		if err := st.Delete(ctx, old); err != nil {
			t.Fatal(err)
		}
		wantCounts(t, st, docs, "deleted after a read since it was read")

		if _, err := st.DeleteAtLocation(ctx, "k1", "o", "", Location{ID: "L2"}); err != nil {
			t.Fatal(err)
		}
		wantCounts(t, st, docs, "deleted at a location")

		if err := st.MoveDocument(ctx, "k1", "o", "d1", "d9", "dg1"); err != nil {
			t.Fatal(err)
		}
		d9 := Ref{APIKey: "k1", OrganizationID: "o", OrgGen: "g1", DocumentID: "d9", DocGen: "dg1"}
		docs = []Ref{d9, d2}
		wantCounts(t, st, docs, "migrated")
		if total, _, _ := st.Count(ctx, []Ref{d9}, nil, ""); total[0] == 0 {
			t.Fatal("the migrated document counts nothing")
		}

		if err := st.DeleteDocument(ctx, "k1", "o", "d2", "dg2"); err != nil {
			t.Fatal(err)
		}
		wantCounts(t, st, docs, "document deleted")
		if err := st.DeleteOrganization(ctx, "k1", "o", "g1"); err != nil {
			t.Fatal(err)
		}
		wantCounts(t, st, docs, "organization deleted")
		if total, _, _ := st.Count(ctx, []Ref{d9}, nil, ""); total[0] != 0 {
			t.Fatalf("a deleted organization counts %d", total[0])
		}
	})
}

// Count is exact once concurrent changes of one document are done: threads added, marked
// read by several users, changed (by compare-and-swap, read again when another came first)
// and deleted, all at once.
func TestCountsUnderConcurrentChanges(t *testing.T) {
	stores(t, func(t *testing.T, newStore func(t *testing.T) Store) {
		ctx := context.Background()
		st := newStore(t)
		r := Ref{APIKey: "k1", OrganizationID: "o", OrgGen: "g1", DocumentID: "d", DocGen: "dg"}
		const n = 6
		for i := range n {
			if err := st.Insert(ctx, countThread(r, fmt.Sprint("a", i), "OPEN", "L", "author"), 100); err != nil {
				t.Fatal(err)
			}
		}
		ids := func() []string {
			out := make([]string, n)
			for i := range out {
				out[i] = fmt.Sprint("a", i)
			}
			return out
		}()
		// change flips the thread's status and keeps only u1's read, retrying on conflicts.
		change := func(id string) error {
			for {
				got, err := st.Get(ctx, r, []string{id})
				if err != nil || got[id] == nil {
					return err
				}
				old := got[id]
				next := old.clone()
				next.Version, next.LastUpdated = old.Version+1, old.LastUpdated+1
				next.Status.ID = map[string]string{"OPEN": "DONE", "DONE": "OPEN"}[old.Status.ID]
				next.ReadBy = slices.DeleteFunc(next.ReadBy, func(u string) bool { return u != "u1" })
				if err := st.Swap(ctx, old, next); !errors.Is(err, ErrConflict) {
					if errors.Is(err, ErrNotFound) {
						return nil
					}
					return err
				}
			}
		}
		racetest.N(4*n, func(i int) {
			var err error
			switch i % 4 {
			case 0:
				_, err = st.MarkRead(ctx, r, fmt.Sprint("u", i%3+1), ids)
			case 1:
				err = change(ids[i%n])
			case 2:
				err = st.Insert(ctx, countThread(r, fmt.Sprint("new", i), "DONE", "L", "u2"), 100)
			case 3:
				if i%3 == 0 {
					got, gerr := st.Get(ctx, r, []string{ids[i%n]})
					if gerr == nil && got[ids[i%n]] != nil {
						if err = st.Delete(ctx, got[ids[i%n]]); errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
							err = nil
						}
					}
				} else {
					_, err = st.MarkRead(ctx, r, "u2", ids[:n/2])
				}
			}
			if err != nil {
				t.Error(err)
			}
		})
		wantCounts(t, st, []Ref{r}, "after concurrent changes")
	})
}
