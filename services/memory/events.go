package memory

import (
	"context"
	"fmt"

	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/lifecycle"
)

// consumes are the lifecycle events judgments and executions follow. location.data_deleted is
// not among them: neither has a location (docs/api.md "Memory and agents").
var consumes = []string{lifecycle.OrganizationDeleted, lifecycle.DocumentDeleted, lifecycle.DocumentMigrated}

// HandleEvent applies the lifecycle events to judgments and executions. Idempotent: deletions
// and moves may run twice.
func (s *Server) HandleEvent(ctx context.Context, e *lifecyclev1.Event) error {
	switch p := e.GetPayload().(type) {
	case *lifecyclev1.Event_OrganizationDeleted:
		apiKey, org, err := lifecycle.Scoped(e)
		if err != nil {
			return err
		}
		gen := e.GetOrganizationGeneration()
		// Buried first: a writer that checks after this sees it and sweeps its own records.
		if gen != "" {
			if err := s.store.Bury(ctx, apiKey, org, KindOrganization, org, gen); err != nil {
				return err
			}
		}
		return s.store.DeleteOrganization(ctx, apiKey, org, gen)
	case *lifecyclev1.Event_DocumentsDeleted:
		apiKey, org, err := lifecycle.Scoped(e)
		if err != nil {
			return err
		}
		docs, err := lifecycle.DeletedDocuments(e, p.DocumentsDeleted)
		if err != nil {
			return err
		}
		for _, d := range docs {
			if d.Generation != "" {
				if err := s.store.Bury(ctx, apiKey, org, KindDocument, d.ID, d.Generation); err != nil {
					return err
				}
			}
			if err := s.store.DeleteDocument(ctx, apiKey, org, d.ID, d.Generation); err != nil {
				return err
			}
		}
		return nil
	case *lifecyclev1.Event_DocumentMigrated:
		apiKey, org, err := lifecycle.Scoped(e)
		if err != nil {
			return err
		}
		m := p.DocumentMigrated
		// Marked first: a writer that checks after this follows the move.
		if m.GetGeneration() != "" {
			if err := s.store.MarkMoved(ctx, apiKey, org, m.GetFromDocumentId(), m.GetGeneration(), m.GetToDocumentId()); err != nil {
				return err
			}
		}
		return s.store.MoveDocument(ctx, apiKey, org, m.GetFromDocumentId(), m.GetToDocumentId(), m.GetGeneration())
	}
	return nil
}

// settle runs after a write under the generations (and is idempotent): if the organization or
// document was deleted meanwhile, that generation's data goes, as if the deletion had come
// after the write, and it names what is gone; if the document was migrated meanwhile, its data
// follows to the new id.
func (s *Server) settle(ctx context.Context, apiKey, org, orgGen, doc, docGen string) (string, error) {
	if orgGen != "" {
		buried, err := s.store.Buried(ctx, apiKey, org, KindOrganization, org, orgGen)
		if err != nil {
			return "", fmt.Errorf("check organization generation: %w", err)
		}
		if buried {
			if err := s.store.DeleteOrganization(ctx, apiKey, org, orgGen); err != nil {
				return "", fmt.Errorf("sweep memory of a deleted organization: %w", err)
			}
			return msgOrgMissing, nil
		}
	}
	if doc == "" || docGen == "" {
		return "", nil
	}
	for range maxMoves {
		buried, err := s.store.Buried(ctx, apiKey, org, KindDocument, doc, docGen)
		if err != nil {
			return "", fmt.Errorf("check document generation: %w", err)
		}
		if buried {
			if err := s.store.DeleteDocument(ctx, apiKey, org, doc, docGen); err != nil {
				return "", fmt.Errorf("sweep memory of a deleted document: %w", err)
			}
			return msgDocumentMissing, nil
		}
		to, err := s.store.MovedTo(ctx, apiKey, org, doc, docGen)
		if err != nil {
			return "", fmt.Errorf("check document migration: %w", err)
		}
		if to == "" {
			return "", nil
		}
		if err := s.store.MoveDocument(ctx, apiKey, org, doc, to, docGen); err != nil {
			return "", fmt.Errorf("move memory of a migrated document: %w", err)
		}
		doc = to
	}
	return "", nil
}

// maxMoves bounds the migrations settle follows.
const maxMoves = 16
