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
//
// Grants are keyed by the generations of the organization and resource they are on
// (lifecycle.Ref), and so are the changes: a late delivery removes what the deleted generation
// had, never what one created since under the same ids has.
func (s *Server) HandleEvent(ctx context.Context, e *lifecyclev1.Event) error {
	var apply func(apiKey, orgRef string) error
	switch p := e.GetPayload().(type) {
	case *lifecyclev1.Event_OrganizationDeleted:
		apply = func(apiKey, orgRef string) error { return s.store.DeleteOrganization(ctx, apiKey, orgRef) }
	case *lifecyclev1.Event_DocumentsDeleted:
		deleted, err := lifecycle.DeletedDocuments(e, p.DocumentsDeleted)
		if err != nil {
			return err
		}
		docs := lifecycle.Refs(deleted)
		apply = func(apiKey, orgRef string) error {
			return s.store.DeleteResourceGrants(ctx, apiKey, orgRef, ResourceDocument, docs)
		}
	case *lifecyclev1.Event_FolderDeleted:
		if p.FolderDeleted.GetFolderId() == "" {
			return lifecycle.Invalid(e, "folder id")
		}
		folder := lifecycle.Ref(p.FolderDeleted.GetFolderId(), p.FolderDeleted.GetGeneration())
		apply = func(apiKey, orgRef string) error {
			return s.store.DeleteResourceGrants(ctx, apiKey, orgRef, ResourceFolder, []string{folder})
		}
	case *lifecyclev1.Event_DocumentMigrated:
		m := p.DocumentMigrated
		if m.GetFromDocumentId() == "" || m.GetToDocumentId() == "" {
			return lifecycle.Invalid(e, "document ids")
		}
		from, to := lifecycle.Ref(m.GetFromDocumentId(), m.GetGeneration()), lifecycle.Ref(m.GetToDocumentId(), m.GetGeneration())
		apply = func(apiKey, orgRef string) error {
			return s.store.MoveDocumentGrants(ctx, apiKey, orgRef, from, to, s.now())
		}
	case *lifecyclev1.Event_UsersRemoved:
		apply = func(apiKey, orgRef string) error { return s.removeUsers(ctx, apiKey, orgRef, p.UsersRemoved) }
	default:
		// location.data_deleted (no location data here) and payloads this version does not
		// know: nothing of ours to change.
		return nil
	}
	apiKey, org, err := lifecycle.Scoped(e)
	if err != nil {
		return err
	}
	if err := apply(apiKey, lifecycle.Ref(org, e.GetOrganizationGeneration())); err != nil {
		return fmt.Errorf("access: apply %s %s: %w", e.GetType(), e.GetId(), err)
	}
	s.log.DebugContext(ctx, "access: event applied", "event_id", e.GetId(), "type", e.GetType(), "organization_id", org)
	return nil
}

// removeUsers is the access side of Delete Users: for a document or a folder, the users' grants
// on it; for the organization, every grant and the context fields of the users in it.
func (s *Server) removeUsers(ctx context.Context, apiKey, orgRef string, r *lifecyclev1.UsersRemoved) error {
	users := r.GetUserIds()
	var on []GrantRef
	for _, target := range []struct{ typ, id, gen string }{
		{ResourceDocument, r.GetDocumentId(), r.GetDocumentGeneration()},
		{ResourceFolder, r.GetFolderId(), r.GetFolderGeneration()},
	} {
		if target.id == "" {
			continue
		}
		for _, u := range users {
			on = append(on, GrantRef{OrganizationID: orgRef, ResourceType: target.typ, ResourceID: lifecycle.Ref(target.id, target.gen), UserID: u})
		}
	}
	if r.GetDocumentId() != "" || r.GetFolderId() != "" {
		return s.store.DeleteGrants(ctx, apiKey, on)
	}
	return s.store.RemoveUsers(ctx, apiKey, orgRef, users)
}
