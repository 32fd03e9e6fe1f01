package lifecycle

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/collab/collab/internal/mongodb"
	"github.com/collab/collab/internal/racetest"
	"github.com/collab/collab/internal/testkit/mongotest"
)

func TestMain(m *testing.M) { os.Exit(mongotest.Run(m)) }

func TestMemoryMarkers(t *testing.T) {
	t.Parallel()
	runMarkersSuite(t, func(_ *testing.T, layout Layout) Markers { return NewMemoryMarkers(layout) })
}

func TestMongoMarkers(t *testing.T) {
	t.Parallel()
	db := mongotest.Connect(t).Database("lifecycle")
	var n atomic.Int64 // each subtest gets its own collection; they run in parallel
	runMarkersSuite(t, func(_ *testing.T, layout Layout) Markers {
		return NewMongoMarkers(db.Collection(fmt.Sprintf("tombstones%d", n.Add(1))), layout)
	})
}

// runMarkersSuite is the contract of Markers, for both layouts; each subtest gets new markers.
func runMarkersSuite(t *testing.T, newMarkers func(t *testing.T, layout Layout) Markers) {
	ctx := context.Background()
	for _, layout := range []Layout{ByID, ByGeneration} {
		name := map[Layout]string{ByID: "by id", ByGeneration: "by generation"}[layout]
		t.Run(name+"/bury", func(t *testing.T) {
			t.Parallel()
			m := newMarkers(t, layout)
			buried := func(apiKey, orgID, kind, id, gen string, want bool) {
				t.Helper()
				if got, err := m.Buried(ctx, apiKey, orgID, kind, id, gen); err != nil || got != want {
					t.Fatalf("Buried(%s %s %s %s %s): %v %v, want %v", apiKey, orgID, kind, id, gen, got, err, want)
				}
			}
			buried("k1", "o1", KindDocument, "d1", "g1", false)
			for range 2 { // idempotent
				must(t, m.Bury(ctx, "k1", "o1", KindDocument, "d1", "g1"))
			}
			must(t, m.Bury(ctx, "k1", "o1", KindOrganization, "o1", "g5"))
			buried("k1", "o1", KindDocument, "d1", "g1", true)
			buried("k1", "o1", KindOrganization, "o1", "g5", true)
			buried("k1", "o1", KindDocument, "d1", "g2", false)
			buried("k1", "o1", KindOrganization, "d1", "g1", false)
			buried("k1", "o1", KindDocument, "o1", "g5", false)
			buried("k1", "o2", KindDocument, "d1", "g1", false)
			buried("k2", "o1", KindDocument, "d1", "g1", false)
			// The id names the generation in one layout only.
			buried("k1", "o1", KindDocument, "d2", "g1", layout == ByGeneration)
			for _, kind := range []string{kindMoved, "", "folder"} {
				if err := m.Bury(ctx, "k1", "o1", kind, "d1", "g1"); err == nil {
					t.Fatalf("Bury of kind %q accepted", kind)
				}
			}
		})
		t.Run(name+"/moves", func(t *testing.T) {
			t.Parallel()
			m := newMarkers(t, layout)
			movedTo := func(apiKey, orgID, doc, gen, want string) {
				t.Helper()
				if got, err := m.MovedTo(ctx, apiKey, orgID, doc, gen); err != nil || got != want {
					t.Fatalf("MovedTo(%s %s %s %s): %q %v, want %q", apiKey, orgID, doc, gen, got, err, want)
				}
			}
			movedTo("k1", "o1", "d1", "g1", "")
			must(t, m.MarkMoved(ctx, "k1", "o1", "d1", "g1", "d2"))
			must(t, m.MarkMoved(ctx, "k1", "o1", "d1", "g1", "d2")) // again: no error
			movedTo("k1", "o1", "d1", "g1", "d2")
			movedTo("k1", "o1", "d1", "g2", "")
			movedTo("k1", "o1", "d2", "g1", "")
			movedTo("k1", "o2", "d1", "g1", "")
			movedTo("k2", "o1", "d1", "g1", "")
			must(t, m.MarkMoved(ctx, "k1", "o1", "d1", "g1", "d3")) // migrated away again later
			movedTo("k1", "o1", "d1", "g1", "d3")
			// A move is not a burial, nor the other way round.
			if buried, err := m.Buried(ctx, "k1", "o1", KindDocument, "d1", "g1"); err != nil || buried {
				t.Fatalf("a move reads as a burial: %v %v", buried, err)
			}
			must(t, m.Bury(ctx, "k1", "o1", KindDocument, "d4", "g4"))
			movedTo("k1", "o1", "d4", "g4", "")
		})
		t.Run(name+"/concurrent", func(t *testing.T) {
			t.Parallel()
			markersConcurrently(t, newMarkers(t, layout))
		})
	}
}

// markersConcurrently runs burials and migration marks of one key at once, beside those of
// other keys: every call succeeds and every mark is there afterwards.
func markersConcurrently(t *testing.T, m Markers) {
	ctx := context.Background()
	const n = 8
	errs := make([]error, 4*n)
	racetest.N(4*n, func(i int) {
		switch i % 4 {
		case 0: // one key, n times
			errs[i] = m.Bury(ctx, "k1", "o1", KindDocument, "d1", "g1")
		case 1: // one mark, n times, one target
			errs[i] = m.MarkMoved(ctx, "k1", "o1", "d1", "g0", "d9")
		case 2: // one mark, n targets
			errs[i] = m.MarkMoved(ctx, "k1", "o1", "d2", "g2", fmt.Sprintf("t%d", i))
		default: // n keys
			errs[i] = m.Bury(ctx, "k1", "o1", KindOrganization, "o1", fmt.Sprintf("og%d", i))
		}
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if ok, err := m.Buried(ctx, "k1", "o1", KindDocument, "d1", "g1"); !ok || err != nil {
		t.Fatalf("the burial of one key, buried %v (%v)", ok, err)
	}
	if to, err := m.MovedTo(ctx, "k1", "o1", "d1", "g0"); to != "d9" || err != nil {
		t.Fatalf("the mark of one key: %q (%v)", to, err)
	}
	var targets []string
	for i := 2; i < 4*n; i += 4 {
		targets = append(targets, fmt.Sprintf("t%d", i))
	}
	if to, err := m.MovedTo(ctx, "k1", "o1", "d2", "g2"); !slices.Contains(targets, to) || err != nil {
		t.Fatalf("the mark of one key, written with %d targets: %q (%v)", n, to, err)
	}
	for i := 3; i < 4*n; i += 4 {
		if ok, err := m.Buried(ctx, "k1", "o1", KindOrganization, "o1", fmt.Sprintf("og%d", i)); !ok || err != nil {
			t.Fatalf("burial og%d lost: %v (%v)", i, ok, err)
		}
	}
}

// Markers written by earlier versions read the same: memory's store kept only the _id (and a
// move's target), activity's every field, crdt's a key without the id; and BuriedGenerations
// finds the generations of both layouts, the API key's only.
func TestMongoMarkersReadOlderDocuments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := mongotest.Connect(t).Database("lifecycle")
	coll := db.Collection("tombstones")
	_, err := coll.InsertMany(ctx, []any{
		bson.M{"_id": mongodb.Key("k1", "o1", KindDocument, "d1", "g1")},              // memory's burial
		bson.M{"_id": mongodb.Key("k1", "o1", kindMoved, "d2", "g2"), "to": "d3"},     // memory's move
		bson.M{"_id": mongodb.Key("k1", "o1", KindOrganization, "og1"), "gen": "og1"}, // crdt's burial
		bson.M{"_id": mongodb.Key("k2", "o1", KindDocument, "d1", "g9")},              // another tenant's
	})
	must(t, err)
	byID, byGen := NewMongoMarkers(coll, ByID), NewMongoMarkers(coll, ByGeneration)
	if ok, err := byID.Buried(ctx, "k1", "o1", KindDocument, "d1", "g1"); !ok || err != nil {
		t.Fatalf("memory's burial: %v %v", ok, err)
	}
	if to, err := byID.MovedTo(ctx, "k1", "o1", "d2", "g2"); to != "d3" || err != nil {
		t.Fatalf("memory's move: %q %v", to, err)
	}
	if ok, err := byGen.Buried(ctx, "k1", "o1", KindOrganization, "o1", "og1"); !ok || err != nil {
		t.Fatalf("crdt's burial: %v %v", ok, err)
	}
	dead, err := byID.BuriedGenerations(ctx, "k1")
	if err != nil || len(dead) != 2 || !dead["g1"] || !dead["og1"] {
		t.Fatalf("buried generations of k1: %v %v, want g1 and og1", dead, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
