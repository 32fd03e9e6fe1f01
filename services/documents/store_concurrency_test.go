package documents

import (
	"context"
	"fmt"
	"testing"

	"github.com/collab/collab/internal/racetest"
)

// runConcurrencySuite is the part of the conformance suite that proves MongoDB's
// single-document atomicity, which Update Documents and Update Folders rely on: concurrent
// updates of one record, each to a field of its own, all land (issue 20, finding 1; the
// embedded server lost them).
func runConcurrencySuite(t *testing.T, newStore func(t *testing.T) Store) {
	ctx := context.Background()
	ptr := func(s string) *string { return &s }
	t.Run("concurrent updates of one document's fields all land", func(t *testing.T) {
		t.Parallel()
		s, ok := newStore(t), errorsTo(t)
		for round := range 10 {
			id := fmt.Sprint("d", round)
			must(t, s.CreateDocument(ctx, &Document{APIKey: "k1", OrganizationID: "o", ID: id, Name: "old", CreatedAt: at(round)}))
			name, folder, access, disabled := fmt.Sprint("name ", round), fmt.Sprint("f", round), "restricted", true
			racetest.Together(
				func() { ok(s.UpdateDocument(ctx, "k1", "o", id, DocumentPatch{Name: &name})) },
				func() { ok(s.UpdateDocument(ctx, "k1", "o", id, DocumentPatch{FolderID: &folder})) },
				func() { ok(s.UpdateDocument(ctx, "k1", "o", id, DocumentPatch{AccessType: &access})) },
				func() { ok(s.UpdateDocument(ctx, "k1", "o", id, DocumentPatch{Disabled: &disabled})) },
			)
			got, err := s.ListDocuments(ctx, "k1", "o", DocumentFilter{IDs: []string{id}}, nil, 0)
			must(t, err)
			if len(got) != 1 || got[0].Name != name || got[0].FolderID != folder || got[0].AccessType != access || !got[0].Disabled {
				t.Fatalf("round %d: an acknowledged update was lost: %+v", round, only(got))
			}
		}
	})
	t.Run("concurrent updates of one folder's fields all land", func(t *testing.T) {
		t.Parallel()
		s, ok := newStore(t), errorsTo(t)
		for round := range 10 {
			id := fmt.Sprint("f", round)
			must(t, s.CreateFolder(ctx, &Folder{APIKey: "k1", OrganizationID: "o", ID: id, Name: "old", CreatedAt: at(round)}))
			name, parent, access := fmt.Sprint("name ", round), fmt.Sprint("p", round), "restricted"
			racetest.Together(
				func() { ok(s.UpdateFolder(ctx, "k1", "o", id, FolderPatch{Name: ptr(name)})) },
				func() { ok(s.UpdateFolder(ctx, "k1", "o", id, FolderPatch{ParentID: ptr(parent)})) },
				func() { ok(s.UpdateFolder(ctx, "k1", "o", id, FolderPatch{AccessType: ptr(access)})) },
			)
			got, err := s.ListFolders(ctx, "k1", "o", FolderFilter{IDs: []string{id}}, nil, 0)
			must(t, err)
			if len(got) != 1 || got[0].Name != name || got[0].ParentID != parent || got[0].AccessType != access {
				t.Fatalf("round %d: an acknowledged update was lost: %+v", round, only(got))
			}
		}
	})
}

// errorsTo returns a function that fails t (from any goroutine) when the call whose results
// it is given failed.
func errorsTo(t *testing.T) func(any, error) {
	return func(_ any, err error) {
		if err != nil {
			t.Error(err)
		}
	}
}

// only is the one record of a listing, for messages.
func only[T any](list []*T) any {
	if len(list) != 1 {
		return list
	}
	return *list[0]
}
