package lifecycle

import (
	"context"
	"fmt"
)

// Kinds of what a generation marker names (Marked.Bury and Buried).
const (
	KindOrganization = "organization"
	KindDocument     = "document"
)

// Marked is a store whose records follow organizations and documents by the generations they
// were written under, with markers that tell a writer racing a deletion or a migration what
// happened: activity's and memory's stores implement it, and follow the events with
// MarkedHandlers.
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
	// (MarkedHandlers): MemoryMarkers or MongoMarkers, embedded.
	Markers
}

// MarkedHandlers are the handlers (Dispatch) that apply an organization deletion, a deletion
// of documents or a migration to s: the marker first (a writer that checks after it sees it
// and settles its own records), then the records. Idempotent: deletions and moves may run
// twice.
func MarkedHandlers(s Marked) Handlers {
	return Handlers{
		OrganizationDeleted: func(ctx context.Context, sc Scope) error {
			if gen := sc.OrganizationGeneration; gen != "" {
				if err := s.Bury(ctx, sc.APIKey, sc.OrganizationID, KindOrganization, sc.OrganizationID, gen); err != nil {
					return err
				}
			}
			return s.DeleteOrganization(ctx, sc.APIKey, sc.OrganizationID, sc.OrganizationGeneration)
		},
		DocumentsDeleted: func(ctx context.Context, sc Scope, docs []Incarnation) error {
			for _, d := range docs {
				if d.Generation != "" {
					if err := s.Bury(ctx, sc.APIKey, sc.OrganizationID, KindDocument, d.ID, d.Generation); err != nil {
						return err
					}
				}
				if err := s.DeleteDocument(ctx, sc.APIKey, sc.OrganizationID, d.ID, d.Generation); err != nil {
					return err
				}
			}
			return nil
		},
		DocumentMigrated: func(ctx context.Context, sc Scope, m Migration) error {
			if m.Generation != "" {
				if err := s.MarkMoved(ctx, sc.APIKey, sc.OrganizationID, m.From, m.Generation, m.To); err != nil {
					return err
				}
			}
			return s.MoveDocument(ctx, sc.APIKey, sc.OrganizationID, m.From, m.To, m.Generation)
		},
	}
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
