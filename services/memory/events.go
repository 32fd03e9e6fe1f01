package memory

import (
	"context"

	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/lifecycle"
)

// consumes are the lifecycle events judgments and executions follow. location.data_deleted is
// not among them: neither has a location (docs/api.md "Memory and agents").
var consumes = []string{lifecycle.OrganizationDeleted, lifecycle.DocumentDeleted, lifecycle.DocumentMigrated}

// HandleEvent applies the lifecycle events to judgments and executions
// (lifecycle.MarkedHandlers). Idempotent: deletions and moves may run twice.
func (s *Server) HandleEvent(ctx context.Context, e *lifecyclev1.Event) error {
	_, err := lifecycle.Dispatch(ctx, e, lifecycle.MarkedHandlers(s.store))
	return err
}

// settle runs after a write under the generations (lifecycle.Settle) and names what is gone:
// the write's data went with a deletion that came meanwhile.
func (s *Server) settle(ctx context.Context, apiKey, org, orgGen, doc, docGen string) (string, error) {
	switch gone, err := lifecycle.Settle(ctx, s.store, apiKey, org, orgGen, doc, docGen); {
	case err != nil:
		return "", err
	case gone == lifecycle.OrganizationGone:
		return msgOrgMissing, nil
	case gone == lifecycle.DocumentGone:
		return msgDocumentMissing, nil
	}
	return "", nil
}
