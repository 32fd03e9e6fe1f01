package notifications

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/collab/collab/internal/racetest"
)

// runConcurrencySuite is the part of the conformance suite that proves MongoDB's
// single-document atomicity, which the fan-out, Mark as Read and migrations rely on: concurrent
// updates of one notification and of one inbox entry, each to fields of its own, all land
// (issue 20, finding 1; the embedded server lost them).
func runConcurrencySuite(t *testing.T, newStore func(t *testing.T) Store) {
	ctx := context.Background()
	t.Run("concurrent updates of one notification and one inbox entry all land", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		for round := range 10 {
			id, docID, to := fmt.Sprint("n", round), fmt.Sprint("d", round), fmt.Sprint("moved", round)
			n := notif(org1, id, int64(round), inDoc(docID, "dg1"))
			addWith(t, s, []string{"u1", "u2"}, n)
			var read int
			racetest.Together(
				func() { fail(t, s.FinishFanOut(ctx, org1, id, []string{"u1", "u2"})) },
				func() {
					var err error
					read, err = s.SetRead(ctx, org1, id, []string{"u1"}, true)
					fail(t, err)
				},
				func() { fail(t, s.MoveDocument(ctx, docOf(org1, docID, "dg1"), to)) },
			)
			got, err := s.Notification(ctx, org1, id)
			must(t, err)
			if !got.FannedOut || !slices.Equal(got.Recipients, []string{"u1", "u2"}) || got.DocumentID != to {
				t.Fatalf("round %d: an acknowledged update of the notification was lost: %+v", round, got)
			}
			for _, u := range []string{"u1", "u2"} {
				es, err := s.InboxEntries(ctx, org1, u, []string{id})
				must(t, err)
				e := es[id]
				if e == nil || e.DocumentID != to || e.Read != (u == "u1") || read != 1 {
					t.Fatalf("round %d: an acknowledged update of %s's entry was lost: %+v (SetRead said %d)", round, u, e, read)
				}
			}
		}
	})
}

// runReplicaSuite proves, across processes, what the store's in-process claim lock guards:
// of concurrent claims of one delivery through two stores on the same data (the memory
// store's one instance twice, or two MongoDB stores on one database), exactly one wins.
func runReplicaSuite(t *testing.T, newReplicas func(t *testing.T) [2]Store) {
	ctx := context.Background()
	t.Run("a delivery is claimed by one replica", func(t *testing.T) {
		t.Parallel()
		r := newReplicas(t)
		for round := range 10 {
			d := delivery(fmt.Sprint("d", round), org1, "n1", t0)
			must(t, r[0].QueueDeliveries(ctx, []*Delivery{d}))
			var won atomic.Int32
			racetest.N(6, func(i int) {
				ok, err := r[i%2].ClaimDelivery(ctx, d.ID, t0.Add(time.Second), t0.Add(time.Minute))
				fail(t, err)
				if ok {
					won.Add(1)
				}
			})
			if won.Load() != 1 {
				t.Fatalf("round %d: %d claims won, want 1", round, won.Load())
			}
		}
	})
}

// fail fails the test, from any goroutine, when err is not nil.
func fail(t *testing.T, err error) {
	if err != nil {
		t.Error(err)
	}
}
