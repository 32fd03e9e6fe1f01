package documents

import (
	"context"
	"fmt"

	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/lifecycle"
)

// HandleEvent implements lifecycle.Handler: it applies a delivered event to this service's
// data. Every branch is idempotent (removing what is gone, moving what has moved, is no change),
// so a redelivery after a partial run finishes the job. Events are told apart by their payload,
// not their type string, so a renamed type cannot be silently skipped.
//
// Every change is scoped by generation: a late delivery of an organization's or a document's
// deletion removes the generation that was deleted, never one created since under the same id.
func (s *Server) HandleEvent(ctx context.Context, e *lifecyclev1.Event) error {
	// location.data_deleted: this service holds no feature data tied to locations (those live
	// with the features' services). users.removed: users and grants live in the users and
	// access services. Types this version does not know: nothing of ours to change.
	handled, err := lifecycle.Dispatch(ctx, e, lifecycle.Handlers{
		OrganizationDeleted: func(ctx context.Context, sc lifecycle.Scope) error {
			return s.store.DeleteOrganization(ctx, sc.APIKey, sc.OrganizationID, sc.OrganizationGeneration)
		},
		DocumentsDeleted: func(ctx context.Context, sc lifecycle.Scope, docs []lifecycle.Incarnation) error {
			return s.store.DeleteDocuments(ctx, sc.APIKey, sc.OrganizationID, docs)
		},
		FolderDeleted: func(ctx context.Context, sc lifecycle.Scope, f lifecycle.Incarnation) error {
			return s.applyFolderDeleted(ctx, sc.APIKey, sc.OrganizationID, f.ID, f.Generation)
		},
		DocumentMigrated: func(ctx context.Context, sc lifecycle.Scope, m lifecycle.Migration) error {
			return s.applyMigration(ctx, sc.APIKey, sc.OrganizationID, m)
		},
	})
	if err != nil {
		return fmt.Errorf("documents: apply %s %s: %w", e.GetType(), e.GetId(), err)
	}
	if handled {
		s.log.DebugContext(ctx, "documents: event applied", "event_id", e.GetId(), "type", e.GetType(), "organization_id", e.GetOrganizationId())
	}
	return nil
}

// applyFolderDeleted removes a folder that is still empty. One that gained a subfolder or a
// document since Delete Folders checked it is refused for good (FailedPrecondition), which stops
// the event before other services drop the folder's grants.
func (s *Server) applyFolderDeleted(ctx context.Context, apiKey, org, id, gen string) error {
	found, err := idSet(s.foldersByID(ctx, apiKey, org, []string{id}))
	if err != nil || !found[id] {
		return err // gone already: done
	}
	inUse, err := s.folderInUse(ctx, apiKey, org, id)
	if err != nil {
		return err
	}
	if inUse {
		return apierr.FailedPrecondition(msgFolderNotEmpty)
	}
	return s.store.DeleteFolder(ctx, apiKey, org, id, gen)
}
