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
//
// Records are keyed by the generation of the organization and document they belong to
// (lifecycle.Ref), and so are the changes: a late delivery removes what the deleted generation
// had, never what one created since under the same ids has.
func (s *Server) HandleEvent(ctx context.Context, e *lifecyclev1.Event) error {
	// folder.deleted (folder grants live in access), location.data_deleted (no feature data
	// here) and types this version does not know: nothing of ours to change.
	handled, err := lifecycle.Dispatch(ctx, e, lifecycle.Handlers{
		OrganizationDeleted: func(ctx context.Context, sc lifecycle.Scope) error {
			return s.store.DeleteOrganization(ctx, sc.APIKey, sc.OrgRef())
		},
		DocumentsDeleted: func(ctx context.Context, sc lifecycle.Scope, docs []lifecycle.Incarnation) error {
			return s.store.DeleteDocuments(ctx, sc.APIKey, sc.OrgRef(), lifecycle.Refs(docs))
		},
		DocumentMigrated: func(ctx context.Context, sc lifecycle.Scope, m lifecycle.Migration) error {
			return s.store.MoveDocument(ctx, sc.APIKey, sc.OrgRef(), lifecycle.Ref(m.From, m.Generation), lifecycle.Ref(m.To, m.Generation))
		},
		UsersRemoved: func(ctx context.Context, sc lifecycle.Scope, r *lifecyclev1.UsersRemoved) error {
			return s.removeUsers(ctx, sc.APIKey, sc.OrgRef(), r)
		},
	})
	if err != nil {
		return fmt.Errorf("users: apply %s %s: %w", e.GetType(), e.GetId(), err)
	}
	if handled {
		s.log.DebugContext(ctx, "users: event applied", "event_id", e.GetId(), "type", e.GetType(), "organization_id", e.GetOrganizationId())
	}
	return nil
}

// removeUsers is the users-side effect of Delete Users: organization-wide, the users leave the
// organization's contact list, every document contact list and every group of it; for one
// document, only that document's list. For a folder there is no list here (access removes the
// folder grants).
func (s *Server) removeUsers(ctx context.Context, apiKey, orgRef string, r *lifecyclev1.UsersRemoved) error {
	switch {
	case r.GetDocumentId() != "":
		return s.store.RemoveDocumentContacts(ctx, apiKey, orgRef, lifecycle.Ref(r.GetDocumentId(), r.GetDocumentGeneration()), r.GetUserIds())
	case r.GetFolderId() != "":
		return nil
	}
	return s.store.RemoveUsers(ctx, apiKey, orgRef, r.GetUserIds())
}
