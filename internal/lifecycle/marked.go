package lifecycle

import (
	"context"
	"fmt"

	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"
)

// Kinds of what a generation marker names (Marked.Bury and Buried).
const (
	KindOrganization = "organization"
	KindDocument     = "document"
)

// Marked is a store whose records follow organizations and documents by the generations they
// were written under, with markers that tell a writer racing a deletion or a migration what
// happened: activity's and memory's stores embed it.
type Marked interface {
	// DeleteOrganization removes every record of the organization written under generation
	// gen or under the empty generation.
	DeleteOrganization(ctx context.Context, apiKey, orgID, gen string) error
	// DeleteDocument removes every record of the document written under generation gen or
	// under the empty generation.
	DeleteDocument(ctx context.Context, apiKey, orgID, docID, gen string) error
	// MoveDocument gives every record of document from (written under generation gen or the
	// empty one) the document id to. Run again after a partial run, it finishes the move.
	MoveDocument(ctx context.Context, apiKey, orgID, from, to, gen string) error

	// The markers a writer checks after writing (Settle), and the events set first
	// (ApplyToMarked): MemoryMarkers or MongoMarkers, embedded.
	Markers
}

// ApplyToMarked applies an organization deletion, a deletion of documents or a migration to
// s: the marker first (a writer that checks after it sees it and settles its own records),
// then the records. handled is false for the other payloads, which it leaves alone.
// Idempotent: deletions and moves may run twice.
func ApplyToMarked(ctx context.Context, s Marked, e *lifecyclev1.Event) (handled bool, err error) {
	switch p := e.GetPayload().(type) {
	case *lifecyclev1.Event_OrganizationDeleted:
		apiKey, org, err := Scoped(e)
		if err != nil {
			return true, err
		}
		gen := e.GetOrganizationGeneration()
		if gen != "" {
			if err := s.Bury(ctx, apiKey, org, KindOrganization, org, gen); err != nil {
				return true, err
			}
		}
		return true, s.DeleteOrganization(ctx, apiKey, org, gen)
	case *lifecyclev1.Event_DocumentsDeleted:
		apiKey, org, err := Scoped(e)
		if err != nil {
			return true, err
		}
		docs, err := DeletedDocuments(e, p.DocumentsDeleted)
		if err != nil {
			return true, err
		}
		for _, d := range docs {
			if d.Generation != "" {
				if err := s.Bury(ctx, apiKey, org, KindDocument, d.ID, d.Generation); err != nil {
					return true, err
				}
			}
			if err := s.DeleteDocument(ctx, apiKey, org, d.ID, d.Generation); err != nil {
				return true, err
			}
		}
		return true, nil
	case *lifecyclev1.Event_DocumentMigrated:
		apiKey, org, err := Scoped(e)
		if err != nil {
			return true, err
		}
		m := p.DocumentMigrated
		if m.GetGeneration() != "" {
			if err := s.MarkMoved(ctx, apiKey, org, m.GetFromDocumentId(), m.GetGeneration(), m.GetToDocumentId()); err != nil {
				return true, err
			}
		}
		return true, s.MoveDocument(ctx, apiKey, org, m.GetFromDocumentId(), m.GetToDocumentId(), m.GetGeneration())
	}
	return false, nil
}

// Gone is what Settle found deleted.
type Gone int

const (
	// NothingGone: the records stand (moved along a migration, if there was one).
	NothingGone Gone = iota
	// OrganizationGone: the organization's generation was deleted; its records are swept.
	OrganizationGone
	// DocumentGone: the document's generation was deleted; its records are swept.
	DocumentGone
)

// maxMoves bounds the migrations Settle follows: ids cannot repeat within one generation, but
// a corrupt store must not loop.
const maxMoves = 16

// Settle runs after records were written under the generations, and again on every retry of
// the write (it is idempotent): if the organization or document was deleted meanwhile, that
// generation's records go, as if the deletion had come after them, and it says which; if the
// document was migrated meanwhile, its records follow it, along a chain of migrations to its
// end.
func Settle(ctx context.Context, s Marked, apiKey, org, orgGen, doc, docGen string) (Gone, error) {
	if orgGen != "" {
		buried, err := s.Buried(ctx, apiKey, org, KindOrganization, org, orgGen)
		if err != nil {
			return NothingGone, fmt.Errorf("check organization generation: %w", err)
		}
		if buried {
			if err := s.DeleteOrganization(ctx, apiKey, org, orgGen); err != nil {
				return NothingGone, fmt.Errorf("sweep the records of a deleted organization: %w", err)
			}
			return OrganizationGone, nil
		}
	}
	if doc == "" || docGen == "" {
		return NothingGone, nil
	}
	for range maxMoves {
		buried, err := s.Buried(ctx, apiKey, org, KindDocument, doc, docGen)
		if err != nil {
			return NothingGone, fmt.Errorf("check document generation: %w", err)
		}
		if buried {
			if err := s.DeleteDocument(ctx, apiKey, org, doc, docGen); err != nil {
				return NothingGone, fmt.Errorf("sweep the records of a deleted document: %w", err)
			}
			return DocumentGone, nil
		}
		to, err := s.MovedTo(ctx, apiKey, org, doc, docGen)
		if err != nil {
			return NothingGone, fmt.Errorf("check document migration: %w", err)
		}
		if to == "" {
			return NothingGone, nil
		}
		if err := s.MoveDocument(ctx, apiKey, org, doc, to, docGen); err != nil {
			return NothingGone, fmt.Errorf("move the records of a migrated document: %w", err)
		}
		doc = to
	}
	return NothingGone, nil
}
