package documents

import (
	"context"
	"fmt"

	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/apierr"
)

// HandleEvent implements lifecycle.Handler: it applies a delivered event to this service's
// data. Every branch is idempotent (removing what is gone, moving what has moved, is no change),
// so a redelivery after a partial run finishes the job. Events are told apart by their payload,
// not their type string, so a renamed type cannot be silently skipped.
func (s *Server) HandleEvent(ctx context.Context, e *lifecyclev1.Event) error {
	apiKey, org := e.GetApiKey(), e.GetOrganizationId()
	// An event without its tenant and organization can never be applied here: InvalidArgument
	// fails it for good rather than retrying forever.
	scoped := func() error {
		if apiKey == "" || org == "" {
			return apierr.InvalidArgument("event %s (%s) has no api key or organization", e.GetId(), e.GetType())
		}
		return nil
	}
	var err error
	switch p := e.GetPayload().(type) {
	case *lifecyclev1.Event_OrganizationDeleted:
		if err = scoped(); err == nil {
			err = s.store.DeleteOrganization(ctx, apiKey, org)
		}
	case *lifecyclev1.Event_DocumentsDeleted:
		if err = scoped(); err == nil {
			err = s.store.DeleteDocuments(ctx, apiKey, org, p.DocumentsDeleted.GetDocumentIds())
		}
	case *lifecyclev1.Event_FolderDeleted:
		if err = scoped(); err == nil {
			err = s.applyFolderDeleted(ctx, apiKey, org, p.FolderDeleted.GetFolderId())
		}
	case *lifecyclev1.Event_DocumentMigrated:
		m := p.DocumentMigrated
		if err = scoped(); err == nil && (m.GetFromDocumentId() == "" || m.GetToDocumentId() == "") {
			err = apierr.InvalidArgument("event %s (%s) lacks the document ids", e.GetId(), e.GetType())
		}
		if err == nil {
			err = s.applyMigration(ctx, apiKey, org, m)
		}
	default:
		// location.data_deleted: this service holds no feature data tied to locations (those
		// live with the features' services). users.removed: users and grants live in the users
		// and access services. Types this version does not know: nothing of ours to change.
		return nil
	}
	if err != nil {
		return fmt.Errorf("documents: apply %s %s: %w", e.GetType(), e.GetId(), err)
	}
	s.log.DebugContext(ctx, "documents: event applied", "event_id", e.GetId(), "type", e.GetType(), "organization_id", org)
	return nil
}

// applyFolderDeleted removes a folder that is still empty. One that gained a subfolder or a
// document since Delete Folders checked it is refused for good (FailedPrecondition), which stops
// the event before other services drop the folder's grants.
func (s *Server) applyFolderDeleted(ctx context.Context, apiKey, org, id string) error {
	if id == "" {
		return apierr.InvalidArgument("folder.deleted event without a folder id")
	}
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
	return s.store.DeleteFolder(ctx, apiKey, org, id)
}
