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
	var apply func(apiKey, org string) error
	orgGen := e.GetOrganizationGeneration()
	switch p := e.GetPayload().(type) {
	case *lifecyclev1.Event_OrganizationDeleted:
		apply = func(apiKey, org string) error { return s.store.DeleteOrganization(ctx, apiKey, org, orgGen) }
	case *lifecyclev1.Event_DocumentsDeleted:
		docs, err := lifecycle.DeletedDocuments(e, p.DocumentsDeleted)
		if err != nil {
			return err
		}
		apply = func(apiKey, org string) error { return s.store.DeleteDocuments(ctx, apiKey, org, docs) }
	case *lifecyclev1.Event_FolderDeleted:
		if p.FolderDeleted.GetFolderId() == "" {
			return lifecycle.Invalid(e, "folder id")
		}
		apply = func(apiKey, org string) error {
			return s.applyFolderDeleted(ctx, apiKey, org, p.FolderDeleted.GetFolderId(), p.FolderDeleted.GetGeneration())
		}
	case *lifecyclev1.Event_DocumentMigrated:
		m := p.DocumentMigrated
		if m.GetFromDocumentId() == "" || m.GetToDocumentId() == "" {
			return lifecycle.Invalid(e, "document ids")
		}
		apply = func(apiKey, org string) error { return s.applyMigration(ctx, apiKey, org, m) }
	default:
		// location.data_deleted: this service holds no feature data tied to locations (those
		// live with the features' services). users.removed: users and grants live in the users
		// and access services. Types this version does not know: nothing of ours to change.
		return nil
	}
	apiKey, org, err := lifecycle.Scoped(e)
	if err != nil {
		return err
	}
	if err := apply(apiKey, org); err != nil {
		return fmt.Errorf("documents: apply %s %s: %w", e.GetType(), e.GetId(), err)
	}
	s.log.DebugContext(ctx, "documents: event applied", "event_id", e.GetId(), "type", e.GetType(), "organization_id", org)
	return nil
}

// applyFolderDeleted removes a folder that is still empty. One that gained a subfolder or a
// document since Delete Folders checked it is refused for good (FailedPrecondition), which stops
// the event before other services drop the folder's grants.
func (s *Server) applyFolderDeleted(ctx context.Context, apiKey, org, id, gen string) error {
	found, err := s.existingFolders(ctx, apiKey, org, []string{id})
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
