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
	// location.data_deleted (no location data here) and payloads this version does not know:
	// nothing of ours to change.
	handled, err := lifecycle.Dispatch(ctx, e, lifecycle.Handlers{
		OrganizationDeleted: func(ctx context.Context, sc lifecycle.Scope) error {
			return s.store.DeleteOrganization(ctx, sc.APIKey, sc.OrgRef())
		},
		DocumentsDeleted: func(ctx context.Context, sc lifecycle.Scope, docs []lifecycle.Incarnation) error {
			return s.store.DeleteResourceGrants(ctx, sc.APIKey, sc.OrgRef(), ResourceDocument, lifecycle.Refs(docs))
		},
		FolderDeleted: func(ctx context.Context, sc lifecycle.Scope, f lifecycle.Incarnation) error {
			return s.store.DeleteResourceGrants(ctx, sc.APIKey, sc.OrgRef(), ResourceFolder, []string{f.Ref()})
		},
		DocumentMigrated: func(ctx context.Context, sc lifecycle.Scope, m lifecycle.Migration) error {
			from, to := lifecycle.Ref(m.From, m.Generation), lifecycle.Ref(m.To, m.Generation)
			return s.store.MoveDocumentGrants(ctx, sc.APIKey, sc.OrgRef(), from, to, s.now())
		},
		UsersRemoved: func(ctx context.Context, sc lifecycle.Scope, r *lifecyclev1.UsersRemoved) error {
			return s.removeUsers(ctx, sc.APIKey, sc.OrgRef(), r)
		},
	})
	if err != nil {
		return fmt.Errorf("access: apply %s %s: %w", e.GetType(), e.GetId(), err)
	}
	if handled {
		s.log.DebugContext(ctx, "access: event applied", "event_id", e.GetId(), "type", e.GetType(), "organization_id", e.GetOrganizationId())
	}
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
