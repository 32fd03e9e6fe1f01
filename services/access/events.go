package access

import (
	"context"
	"fmt"

	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/lifecycle"
)

// HandleEvent implements lifecycle.Handler: it applies a delivered event to the grants and
// contexts. Every branch is idempotent (deleting what is gone, moving what has moved, is no
// change), so a redelivery after a partial run finishes the job. Events are told apart by their
// payload, not their type string, so a renamed type cannot be silently skipped.
func (s *Server) HandleEvent(ctx context.Context, e *lifecyclev1.Event) error {
	var apply func(apiKey, org string) error
	switch p := e.GetPayload().(type) {
	case *lifecyclev1.Event_OrganizationDeleted:
		apply = func(apiKey, org string) error { return s.store.DeleteOrganization(ctx, apiKey, org) }
	case *lifecyclev1.Event_DocumentsDeleted:
		apply = func(apiKey, org string) error {
			return s.store.DeleteResourceGrants(ctx, apiKey, org, ResourceDocument, p.DocumentsDeleted.GetDocumentIds())
		}
	case *lifecyclev1.Event_FolderDeleted:
		folder := p.FolderDeleted.GetFolderId()
		if folder == "" {
			return lifecycle.Invalid(e, "folder id")
		}
		apply = func(apiKey, org string) error {
			return s.store.DeleteResourceGrants(ctx, apiKey, org, ResourceFolder, []string{folder})
		}
	case *lifecyclev1.Event_DocumentMigrated:
		from, to := p.DocumentMigrated.GetFromDocumentId(), p.DocumentMigrated.GetToDocumentId()
		if from == "" || to == "" {
			return lifecycle.Invalid(e, "document ids")
		}
		apply = func(apiKey, org string) error { return s.store.MoveDocumentGrants(ctx, apiKey, org, from, to, s.now()) }
	case *lifecyclev1.Event_UsersRemoved:
		apply = func(apiKey, org string) error { return s.removeUsers(ctx, apiKey, org, p.UsersRemoved) }
	default:
		// location.data_deleted (no location data here) and payloads this version does not
		// know: nothing of ours to change.
		return nil
	}
	apiKey, org, err := lifecycle.Scoped(e)
	if err != nil {
		return err
	}
	if err := apply(apiKey, org); err != nil {
		return fmt.Errorf("access: apply %s %s: %w", e.GetType(), e.GetId(), err)
	}
	s.log.DebugContext(ctx, "access: event applied", "event_id", e.GetId(), "type", e.GetType(), "organization_id", org)
	return nil
}

// removeUsers is the access side of Delete Users: for a document or a folder, the users' grants
// on it; for the organization, every grant and the context fields of the users in it.
func (s *Server) removeUsers(ctx context.Context, apiKey, org string, r *lifecyclev1.UsersRemoved) error {
	users := r.GetUserIds()
	var on []GrantRef
	for _, target := range []struct{ typ, id string }{{ResourceDocument, r.GetDocumentId()}, {ResourceFolder, r.GetFolderId()}} {
		if target.id == "" {
			continue
		}
		for _, u := range users {
			on = append(on, GrantRef{OrganizationID: org, ResourceType: target.typ, ResourceID: target.id, UserID: u})
		}
	}
	if r.GetDocumentId() != "" || r.GetFolderId() != "" {
		return s.store.DeleteGrants(ctx, apiKey, on)
	}
	return s.store.RemoveUsers(ctx, apiKey, org, users)
}
