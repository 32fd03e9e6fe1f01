package users

import (
	"context"
	"fmt"

	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/lifecycle"
)

// HandleEvent implements lifecycle.Handler: it applies a delivered event to this service's data.
// Every branch is idempotent (removing what is gone, moving what has moved, is no change), so a
// redelivery after a partial run finishes the job. Events are told apart by their payload, not
// their type string, so a renamed type cannot be silently skipped.
func (s *Server) HandleEvent(ctx context.Context, e *lifecyclev1.Event) error {
	var apply func(apiKey, org string) error
	switch p := e.GetPayload().(type) {
	case *lifecyclev1.Event_OrganizationDeleted:
		apply = func(apiKey, org string) error { return s.store.DeleteOrganization(ctx, apiKey, org) }
	case *lifecyclev1.Event_DocumentsDeleted:
		apply = func(apiKey, org string) error {
			return s.store.DeleteDocuments(ctx, apiKey, org, p.DocumentsDeleted.GetDocumentIds())
		}
	case *lifecyclev1.Event_DocumentMigrated:
		from, to := p.DocumentMigrated.GetFromDocumentId(), p.DocumentMigrated.GetToDocumentId()
		if from == "" || to == "" {
			return lifecycle.Invalid(e, "document ids")
		}
		apply = func(apiKey, org string) error { return s.store.MoveDocument(ctx, apiKey, org, from, to) }
	case *lifecyclev1.Event_UsersRemoved:
		apply = func(apiKey, org string) error { return s.removeUsers(ctx, apiKey, org, p.UsersRemoved) }
	default:
		// folder.deleted (folder grants live in access), location.data_deleted (no feature data
		// here) and types this version does not know: nothing of ours to change.
		return nil
	}
	apiKey, org, err := lifecycle.Scoped(e)
	if err != nil {
		return err
	}
	if err := apply(apiKey, org); err != nil {
		return fmt.Errorf("users: apply %s %s: %w", e.GetType(), e.GetId(), err)
	}
	s.log.DebugContext(ctx, "users: event applied", "event_id", e.GetId(), "type", e.GetType(), "organization_id", org)
	return nil
}

// removeUsers is the users-side effect of Delete Users: organization-wide, the users leave the
// organization's contact list, every document contact list and every group of it; for one
// document, only that document's list. For a folder there is no list here (access removes the
// folder grants).
func (s *Server) removeUsers(ctx context.Context, apiKey, org string, r *lifecyclev1.UsersRemoved) error {
	switch {
	case r.GetDocumentId() != "":
		return s.store.RemoveDocumentContacts(ctx, apiKey, org, r.GetDocumentId(), r.GetUserIds())
	case r.GetFolderId() != "":
		return nil
	}
	return s.store.RemoveUsers(ctx, apiKey, org, r.GetUserIds())
}
