package documents

import (
	"context"
	"errors"
	"fmt"

	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/validate"
)

// ResolveResources tells the access service whether the organization, folders and documents
// exist, their effective access types and folder chains. It is on the Get Permissions hot path,
// so it reads the organization, the documents (one query) and the folder chains (one query per
// level of nesting), whatever the number of resources.
func (s *Server) ResolveResources(ctx context.Context, req *documentsv1.ResolveResourcesRequest) (*documentsv1.ResolveResourcesResponse, error) {
	apiKey, org := req.GetApiKey(), req.GetOrganizationId()
	if err := validate.ID("apiKey", apiKey); err != nil {
		return nil, err
	}
	if err := validate.ID("organizationId", org); err != nil {
		return nil, err
	}
	folderIDs, err := validate.IDs("folderIds", req.GetFolderIds(), false, maxResolveIDs)
	if err != nil {
		return nil, err
	}
	docIDs, err := validate.IDs("documentIds", req.GetDocumentIds(), false, maxResolveIDs)
	if err != nil {
		return nil, err
	}
	resp := &documentsv1.ResolveResourcesResponse{
		Folders:   make(map[string]*documentsv1.ResolvedResource, len(folderIDs)),
		Documents: make(map[string]*documentsv1.ResolvedResource, len(docIDs)),
	}
	missing := func() *documentsv1.ResolvedResource { return &documentsv1.ResolvedResource{FolderChain: []string{}} }
	_, err = s.store.Organization(ctx, apiKey, org)
	switch {
	case errors.Is(err, ErrNotFound):
		// Nothing of a missing organization exists, whatever records may linger.
		for _, id := range folderIDs {
			resp.Folders[id] = missing()
		}
		for _, id := range docIDs {
			resp.Documents[id] = missing()
		}
		return resp, nil
	case err != nil:
		return nil, fmt.Errorf("read organization: %w", err)
	}
	resp.OrganizationExists = true

	var docs []*Document
	if len(docIDs) > 0 {
		if docs, err = s.store.ListDocuments(ctx, apiKey, org, DocumentFilter{IDs: docIDs}, nil, 0); err != nil {
			return nil, fmt.Errorf("read documents: %w", err)
		}
	}
	tree := s.newTree(apiKey, org)
	wanted := append([]string{}, folderIDs...)
	for _, d := range docs {
		wanted = append(wanted, d.FolderID)
	}
	if err := tree.load(ctx, wanted); err != nil {
		return nil, err
	}
	for _, id := range folderIDs {
		if tree.get(id) == nil {
			resp.Folders[id] = missing()
			continue
		}
		resp.Folders[id] = &documentsv1.ResolvedResource{Exists: true, AccessType: tree.access(id), FolderChain: append([]string{}, tree.ancestors(id)...)}
	}
	found := make(map[string]*Document, len(docs))
	for _, d := range docs {
		found[d.ID] = d
	}
	for _, id := range docIDs {
		d := found[id]
		if d == nil {
			resp.Documents[id] = missing()
			continue
		}
		resp.Documents[id] = &documentsv1.ResolvedResource{Exists: true, AccessType: tree.documentAccess(d), FolderChain: tree.chain(d.FolderID)}
	}
	return resp, nil
}

// EnsureResources checks, and with the create flags creates, an organization, folder and
// document for the users service. Everything is checked before anything is created, so a
// refusal leaves nothing behind. A created folder is at the root with no access type of its
// own; a created document goes into folder_id when one is given.
func (s *Server) EnsureResources(ctx context.Context, req *documentsv1.EnsureResourcesRequest) (*documentsv1.EnsureResourcesResponse, error) {
	apiKey, org, folder, doc := req.GetApiKey(), req.GetOrganizationId(), req.GetFolderId(), req.GetDocumentId()
	if err := validate.ID("apiKey", apiKey); err != nil {
		return nil, err
	}
	if err := validate.ID("organizationId", org); err != nil {
		return nil, err
	}
	if err := validate.OptionalID("folderId", folder); err != nil {
		return nil, err
	}
	if err := validate.OptionalID("documentId", doc); err != nil {
		return nil, err
	}
	_, err := s.store.Organization(ctx, apiKey, org)
	orgExists := err == nil
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("read organization: %w", err)
	}
	if !orgExists && !req.GetCreateOrganization() {
		return nil, apierr.NotFound(msgOrgMissing)
	}
	folderExists, docExists := folder == "", doc == ""
	if orgExists && !folderExists {
		found, err := s.existingFolders(ctx, apiKey, org, []string{folder})
		if err != nil {
			return nil, err
		}
		folderExists = found[folder]
	}
	if orgExists && !docExists {
		found, err := s.existingDocuments(ctx, apiKey, org, []string{doc})
		if err != nil {
			return nil, err
		}
		docExists = found[doc]
	}
	if !folderExists && !req.GetCreateFolder() {
		return nil, apierr.NotFound(msgFolderMissing)
	}
	if !docExists && !req.GetCreateDocument() {
		return nil, apierr.NotFound(msgDocumentMissing)
	}

	if !orgExists {
		if err := s.ensureOrg(ctx, apiKey, org, true); err != nil {
			return nil, err
		}
	}
	if !folderExists {
		if err := s.createRootFolder(ctx, apiKey, org, folder); err != nil {
			return nil, err
		}
	}
	if !docExists {
		d := &Document{APIKey: apiKey, OrganizationID: org, ID: doc, FolderID: folder, CreatedAt: s.now()}
		if err := s.store.CreateDocument(ctx, d); err != nil && !errors.Is(err, ErrExists) {
			return nil, fmt.Errorf("create document: %w", err)
		}
	}
	return &documentsv1.EnsureResourcesResponse{}, nil
}
