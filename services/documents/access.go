package documents

import (
	"context"
	"errors"
	"fmt"

	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"

	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/validate"
)

// accessUpdate is what Update Access for Documents and Update Access for Folders differ in:
// the ids' field, the words of the answers, and how the store sets a resource's own type.
type accessUpdate struct {
	idsField string // "documentIds", "folderIds"
	noun     string // "document", "folder": in the wrapped store errors
	missing  string // an item's message when the resource does not exist
	updated  string // an item's message when its type was set
	done     string // the answer's message
	// set sets the resource's own access type: ErrNotFound when it does not exist.
	set func(ctx context.Context, apiKey, org, id string, at *string) error
}

func (s *Server) UpdateDocumentAccess(ctx context.Context, req *documentsv1.UpdateDocumentAccessRequest) (*documentsv1.AccessResultsResponse, error) {
	return s.updateAccess(ctx, req.GetOrganizationId(), req.GetDocumentIds(), req.GetAccessType(), accessUpdate{
		idsField: "documentIds", noun: "document", missing: msgDocumentMissing,
		updated: "Document access type updated.", done: "Updated access for documents successfully.",
		set: func(ctx context.Context, apiKey, org, id string, at *string) error {
			// The document's own type wins over its folder's, so the effective type is the one set.
			_, err := s.store.UpdateDocument(ctx, apiKey, org, id, DocumentPatch{AccessType: at})
			return err
		},
	})
}

func (s *Server) UpdateFolderAccess(ctx context.Context, req *documentsv1.UpdateFolderAccessRequest) (*documentsv1.AccessResultsResponse, error) {
	return s.updateAccess(ctx, req.GetOrganizationId(), req.GetFolderIds(), req.GetAccessType(), accessUpdate{
		idsField: "folderIds", noun: "folder", missing: msgFolderMissing,
		updated: "Folder access type updated.", done: "Updated access for folders successfully.",
		set: func(ctx context.Context, apiKey, org, id string, at *string) error {
			_, err := s.store.UpdateFolder(ctx, apiKey, org, id, FolderPatch{AccessType: at})
			return err
		},
	})
}

// updateAccess sets the own access type of each of ids (documents or folders, as u says) and
// answers each one's result.
func (s *Server) updateAccess(ctx context.Context, org string, ids []string, at string, u accessUpdate) (*documentsv1.AccessResultsResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	if err := validate.ID("organizationId", org); err != nil {
		return nil, err
	}
	if ids, err = validate.IDs(u.idsField, ids, true, maxIDs); err != nil {
		return nil, err
	}
	if err := validate.AccessType("accessType", at); err != nil {
		return nil, err
	}
	if _, err := s.requireOrg(ctx, c.APIKey, org); err != nil {
		return nil, err
	}
	data := map[string]*documentsv1.AccessResult{}
	for _, id := range ids {
		err := u.set(ctx, c.APIKey, org, id, &at)
		switch {
		case errors.Is(err, ErrNotFound):
			data[id] = &documentsv1.AccessResult{Success: false, AccessType: at, Message: u.missing}
		case err != nil:
			return nil, fmt.Errorf("update %s access: %w", u.noun, err)
		default:
			data[id] = &documentsv1.AccessResult{Success: true, AccessType: at, Message: u.updated}
		}
	}
	return &documentsv1.AccessResultsResponse{Status: statusSuccess, Message: u.done, Data: data}, nil
}
