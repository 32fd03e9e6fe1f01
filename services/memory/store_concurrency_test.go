package memory

import (
	"errors"
	"fmt"
	"testing"

	"github.com/collab/collab/internal/racetest"
)

// runConcurrencySuite is the part of the conformance suite that proves MongoDB's
// single-document atomicity, which re-embedding relies on: vectors are stored only onto the
// revision they were computed from, so a judgment replaced while its vectors are being set
// keeps its new text whichever write comes first (issue 20, finding 1; the embedded server
// applied the vectors to the judgment it had read and wrote the replaced text back).
func runConcurrencySuite(t *testing.T, newStore func(t *testing.T) Store) {
	t.Run("a judgment replaced while its vectors are set is kept", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		for round := range 20 {
			id := fmt.Sprint("j", round)
			old := judgment(id, "d1", int64(round))
			put(t, s, old)
			next := judgment(id, "d2", int64(round))
			next.Decision, next.Reasoning, next.Rev = "reject", "replaced "+id, "r2-"+id
			racetest.Together(
				func() {
					if _, err := s.PutJudgment(bg, next); err != nil {
						t.Error(err)
					}
				},
				func() {
					if err := s.SetVectors(bg, old, "other-8", old.ReviewVector, old.ContentVector); err != nil && !errors.Is(err, ErrChanged) {
						t.Error(err)
					}
				},
			)
			var got *Judgment
			if err := s.ScanJudgments(bg, Scope{APIKey: "k1", OrganizationID: "o1"}, Filter{}, EmbedReview, func(j *Judgment) bool {
				if j.RecordID == id {
					got = copyJudgment(j)
				}
				return true
			}); err != nil {
				t.Fatal(err)
			}
			if got == nil || got.Decision != "reject" || got.Reasoning != next.Reasoning || got.DocumentID != "d2" || got.Rev != next.Rev || got.Embedder != "bag-8" {
				t.Fatalf("round %d: the replacement was lost: %+v", round, got)
			}
		}
	})
}
