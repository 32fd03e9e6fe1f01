package crdt

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
)

// runConcurrencySuite is the part of the conformance suite that proves MongoDB's
// single-document atomicity for the two field updates of an editor's record: compactions
// dropping the records' bases while a migration records the document's new id on them lose
// neither (issue 20, finding 1; the embedded server wrote a record back over the other's
// change).
func runConcurrencySuite(t *testing.T, newStore func(t *testing.T) Store) {
	ctx := context.Background()
	t.Run("compactions and a migration of one document's editors all land", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		const editors = 6
		for round := range 3 {
			var metas []*Meta
			for i := range editors {
				m := meta(fmt.Sprint("e", i))
				m.DocGen = fmt.Sprint("dg-", round) // a document incarnation per round, moved once
				create(t, s, m, "a")
				appendN(t, s, m.Stream, "b", "c")
				metas = append(metas, m)
			}
			// The migration starts when every compaction has merged: each then writes its
			// snapshot, deletes what it covers and drops its record's base, so the record
			// writes of both meet.
			var merged, wg sync.WaitGroup
			merged.Add(editors)
			for _, m := range metas {
				wg.Go(func() {
					reached := sync.OnceFunc(merged.Done) // also when Compact fails before merging
					defer reached()
					merge := func(parts ...[]byte) ([]byte, error) {
						reached()
						return fakeMerge(parts...)
					}
					if done, err := s.Compact(ctx, m.Editor, Compaction{MaxUpdates: 1}, merge); err != nil || !done {
						t.Errorf("compact: %v %v", done, err)
					}
				})
			}
			merged.Wait()
			if err := s.MoveDocument(ctx, "k1", "o1", "d1", "d9", metas[0].DocGen); err != nil {
				t.Error(err)
			}
			wg.Wait()
			for _, m := range metas {
				st := load(t, s, m.Editor)
				if st.Meta.DocumentID != "d9" || !slices.Equal(texts(t, st), []string{"a", "b", "c"}) || st.BaseSeq != 2 {
					t.Fatalf("round %d: %+v holds %v from %d, want document d9 and a, b, c from 2", round, st.Meta, texts(t, st), st.BaseSeq)
				}
			}
		}
	})
}
