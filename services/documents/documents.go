package documents

import (
	"context"
	"errors"
	"fmt"

	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/grpcserver"
	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/validate"
)

func checkAddDocuments(req *documentsv1.AddDocumentsRequest) error {
	if err := validate.ID("organizationId", req.GetOrganizationId()); err != nil {
		return err
	}
	docs := req.GetDocuments()
	return checkItems("documents", "document", "documentId", len(docs), func(i int) string { return docs[i].GetDocumentId() }, func(i int) error {
		d := docs[i]
		if err := validate.Name(field("documents", i, "documentName"), trim(d.GetDocumentName()), maxDocumentNameLength); err != nil {
			return err
		}
		return validate.OptionalID(field("documents", i, "folderId"), d.GetFolderId())
	})
}

func (s *Server) AddDocuments(ctx context.Context, req *documentsv1.AddDocumentsRequest) (*documentsv1.ItemResultsResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkAddDocuments(req); err != nil {
		return nil, err
	}
	org := req.GetOrganizationId()
	orgGen, err := s.ensureOrg(ctx, c.APIKey, org, req.GetCreateOrganization())
	if err != nil {
		return nil, err
	}
	var docIDs, folderIDs []string
	for _, d := range req.GetDocuments() {
		docIDs = append(docIDs, d.GetDocumentId())
		if d.GetFolderId() != "" {
			folderIDs = append(folderIDs, d.GetFolderId())
		}
	}
	existing, err := idSet(s.documentsByID(ctx, c.APIKey, org, docIDs))
	if err != nil {
		return nil, err
	}
	folders, err := idSet(s.foldersByID(ctx, c.APIKey, org, folderIDs))
	if err != nil {
		return nil, err
	}
	now := s.now()
	data := map[string]*documentsv1.ItemResult{}
	for _, in := range req.GetDocuments() {
		id, folder := in.GetDocumentId(), in.GetFolderId()
		if existing[id] {
			data[id] = itemResult(id, false, msgDocumentExists)
			continue
		}
		if folder != "" && !folders[folder] {
			if !req.GetCreateFolder() {
				data[id] = itemResult(id, false, msgFolderMissing)
				continue
			}
			if _, err := s.createRootFolder(ctx, c.APIKey, org, orgGen, folder); err != nil {
				return nil, err
			}
			folders[folder] = true
		}
		err := s.store.CreateDocument(ctx, &Document{APIKey: c.APIKey, OrganizationID: org, ID: id, Generation: lifecycle.NewGeneration(), OrgGeneration: orgGen,
			Name: trim(in.GetDocumentName()), FolderID: folder, CreatedAt: now})
		switch {
		case errors.Is(err, ErrExists):
			data[id] = itemResult(id, false, msgDocumentExists)
		case err != nil:
			return nil, fmt.Errorf("add document: %w", err)
		default:
			data[id] = itemResult(id, true, msgDocumentAdded)
		}
	}
	if err := s.confirmOrg(ctx, c.APIKey, org, orgGen); err != nil {
		return nil, err
	}
	return &documentsv1.ItemResultsResponse{Status: statusSuccess, Message: "Document(s) added successfully.", Data: data}, nil
}

// documentsByID returns those of ids that exist, by id, in one query.
func (s *Server) documentsByID(ctx context.Context, apiKey, org string, ids []string) (map[string]*Document, error) {
	if len(ids) == 0 {
		return map[string]*Document{}, nil
	}
	docs, err := s.store.ListDocuments(ctx, apiKey, org, DocumentFilter{IDs: ids}, nil, 0)
	if err != nil {
		return nil, fmt.Errorf("read documents: %w", err)
	}
	return byID(docs), nil
}

// foldersByID returns those of ids that exist, by id, in one query.
func (s *Server) foldersByID(ctx context.Context, apiKey, org string, ids []string) (map[string]*Folder, error) {
	if len(ids) == 0 {
		return map[string]*Folder{}, nil
	}
	folders, err := s.store.ListFolders(ctx, apiKey, org, FolderFilter{IDs: ids}, nil, 0)
	if err != nil {
		return nil, fmt.Errorf("read folders: %w", err)
	}
	return byID(folders), nil
}

// byID indexes documents or folders by id.
func byID[T interface{ position() Position }](items []T) map[string]T {
	out := make(map[string]T, len(items))
	for _, it := range items {
		out[it.position().ID] = it
	}
	return out
}

// idSet is the set of ids a documentsByID or foldersByID found (which exist), its error
// passed on.
func idSet[T any](found map[string]T, err error) (map[string]bool, error) {
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(found))
	for id := range found {
		out[id] = true
	}
	return out, nil
}

func checkUpdateDocuments(req *documentsv1.UpdateDocumentsRequest) error {
	if err := validate.ID("organizationId", req.GetOrganizationId()); err != nil {
		return err
	}
	docs := req.GetDocuments()
	return checkItems("documents", "document", "documentId", len(docs), func(i int) string { return docs[i].GetDocumentId() }, func(i int) error {
		d := docs[i]
		if d.DocumentName == nil && d.FolderId == nil && d.Disabled == nil {
			return apierr.InvalidArgument("documents[%d] must change documentName, folderId or disabled.", i)
		}
		if err := validate.Name(field("documents", i, "documentName"), trim(d.GetDocumentName()), maxDocumentNameLength); err != nil {
			return err
		}
		return validate.OptionalID(field("documents", i, "folderId"), d.GetFolderId())
	})
}

func (s *Server) UpdateDocuments(ctx context.Context, req *documentsv1.UpdateDocumentsRequest) (*documentsv1.ItemResultsResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkUpdateDocuments(req); err != nil {
		return nil, err
	}
	org := req.GetOrganizationId()
	orgGen, err := s.requireOrg(ctx, c.APIKey, org)
	if err != nil {
		return nil, err
	}
	var docIDs, folderIDs []string
	for _, d := range req.GetDocuments() {
		docIDs = append(docIDs, d.GetDocumentId())
		if d.GetFolderId() != "" {
			folderIDs = append(folderIDs, d.GetFolderId())
		}
	}
	existing, err := idSet(s.documentsByID(ctx, c.APIKey, org, docIDs))
	if err != nil {
		return nil, err
	}
	folders, err := idSet(s.foldersByID(ctx, c.APIKey, org, folderIDs))
	if err != nil {
		return nil, err
	}
	createdFolders := false
	data := map[string]*documentsv1.ItemResult{}
	for _, in := range req.GetDocuments() {
		id := in.GetDocumentId()
		// A missing document is answered before any folder is made for it.
		if !existing[id] {
			data[id] = itemResult(id, false, msgDocumentMissing)
			continue
		}
		if folder := in.GetFolderId(); folder != "" && !folders[folder] {
			if !req.GetCreateFolder() {
				data[id] = itemResult(id, false, msgFolderMissing)
				continue
			}
			if _, err := s.createRootFolder(ctx, c.APIKey, org, orgGen, folder); err != nil {
				return nil, err
			}
			folders[folder] = true
			createdFolders = true
		}
		_, err := s.store.UpdateDocument(ctx, c.APIKey, org, id, DocumentPatch{Name: trimPtr(in.DocumentName), FolderID: in.FolderId, Disabled: in.Disabled})
		switch {
		case errors.Is(err, ErrNotFound):
			data[id] = itemResult(id, false, msgDocumentMissing)
		case err != nil:
			return nil, fmt.Errorf("update document: %w", err)
		default:
			data[id] = itemResult(id, true, msgDocumentUpdated)
		}
	}
	if createdFolders {
		if err := s.confirmOrg(ctx, c.APIKey, org, orgGen); err != nil {
			return nil, err
		}
	}
	return &documentsv1.ItemResultsResponse{Status: statusSuccess, Message: "Document(s) updated successfully.", Data: data}, nil
}

// DeleteDocuments publishes one document.deleted event for the existing documents; every
// service (this one first, through HandleEvent) removes its data of them.
func (s *Server) DeleteDocuments(ctx context.Context, req *documentsv1.DeleteDocumentsRequest) (*documentsv1.ItemResultsResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	org := req.GetOrganizationId()
	if err := validate.ID("organizationId", org); err != nil {
		return nil, err
	}
	ids, err := validate.IDs("documentIds", req.GetDocumentIds(), true, maxIDs)
	if err != nil {
		return nil, err
	}
	orgGen, err := s.requireOrg(ctx, c.APIKey, org)
	if err != nil {
		return nil, err
	}
	existing, err := s.documentsByID(ctx, c.APIKey, org, ids)
	if err != nil {
		return nil, err
	}
	data := map[string]*documentsv1.ItemResult{}
	gone := &lifecyclev1.DocumentsDeleted{}
	for _, id := range ids {
		if d := existing[id]; d != nil {
			gone.DocumentIds, gone.Generations = append(gone.DocumentIds, id), append(gone.Generations, d.Generation)
			data[id] = itemResult(id, true, msgDocumentDeleted)
		} else {
			data[id] = itemResult(id, false, msgDocumentMissing)
		}
	}
	if len(gone.DocumentIds) > 0 {
		e := s.event(c.APIKey, org, orgGen, eventDocumentsDeleted)
		e.Payload = &lifecyclev1.Event_DocumentsDeleted{DocumentsDeleted: gone}
		if _, err := s.events.Publish(ctx, e); err != nil {
			return nil, fmt.Errorf("delete documents: %w", err)
		}
	}
	return &documentsv1.ItemResultsResponse{Status: statusSuccess, Message: "Document(s) deleted successfully.", Data: data}, nil
}

// documentProtos answers documents with their effective access types, reading their folder
// chains in one query per level of nesting.
func (s *Server) documentProtos(ctx context.Context, apiKey, org string, docs []*Document) ([]*documentsv1.Document, error) {
	tree := s.newTree(apiKey, org)
	var folders []string
	for _, d := range docs {
		if d.AccessType == "" && d.FolderID != "" {
			folders = append(folders, d.FolderID)
		}
	}
	if err := tree.load(ctx, folders); err != nil {
		return nil, err
	}
	out := make([]*documentsv1.Document, 0, len(docs))
	for _, d := range docs {
		out = append(out, &documentsv1.Document{DocumentName: d.Name, Disabled: d.Disabled, AccessType: tree.documentAccess(d), Id: d.ID})
	}
	return out, nil
}

// GetDocumentsV1 answers every document of the organization, or those named, in creation
// order, without paging (clients of SDK v3 and earlier expect one answer).
func (s *Server) GetDocumentsV1(ctx context.Context, req *documentsv1.GetDocumentsV1Request) (*documentsv1.GetDocumentsV1Response, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	org := req.GetOrganizationId()
	if err := validate.ID("organizationId", org); err != nil {
		return nil, err
	}
	ids, err := validate.IDs("documentIds", req.GetDocumentIds(), false, maxV1DocumentIDs)
	if err != nil {
		return nil, err
	}
	if _, err := s.requireOrg(ctx, c.APIKey, org); err != nil {
		return nil, err
	}
	// One more than the cap tells that there are more; the answer must also fit a message.
	docs, err := s.store.ListDocuments(ctx, c.APIKey, org, DocumentFilter{IDs: ids}, nil, maxV1Documents+1)
	if err != nil {
		return nil, fmt.Errorf("list documents: %w", err)
	}
	if len(docs) > maxV1Documents {
		return nil, apierr.FailedPrecondition(msgV1TooMany)
	}
	data, err := s.documentProtos(ctx, c.APIKey, org, docs)
	if err != nil {
		return nil, err
	}
	resp := &documentsv1.GetDocumentsV1Response{Status: statusSuccess, Message: "Documents retrieved successfully.", Data: data}
	if !grpcserver.Fits(resp) {
		return nil, apierr.FailedPrecondition(msgV1TooMany)
	}
	return resp, nil
}

// GetDocuments is Get Documents v2: paged in creation order (ties by id), behind the
// advanced-queries console switch.
func (s *Server) GetDocuments(ctx context.Context, req *documentsv1.GetDocumentsRequest) (*documentsv1.GetDocumentsResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	if !c.Settings.AdvancedQueries {
		return nil, apierr.FailedPrecondition(msgAdvancedQueries)
	}
	org, folder := req.GetOrganizationId(), req.GetFolderId()
	if err := validate.ID("organizationId", org); err != nil {
		return nil, err
	}
	ids, err := validate.IDs("documentIds", req.GetDocumentIds(), false, maxIDs)
	if err != nil {
		return nil, err
	}
	if err := validate.OptionalID("folderId", folder); err != nil {
		return nil, err
	}
	size, err := checkPageSize(req.GetPageSize())
	if err != nil {
		return nil, err
	}
	scope := pageScope("documents", c.APIKey, []string{org, folder}, ids)
	after, err := openPage(s.documentPages, req.GetPageToken(), scope)
	if err != nil {
		return nil, err
	}
	if _, err := s.requireOrg(ctx, c.APIKey, org); err != nil {
		return nil, err
	}
	if folder != "" {
		found, err := idSet(s.foldersByID(ctx, c.APIKey, org, []string{folder}))
		if err != nil {
			return nil, err
		}
		if !found[folder] {
			return nil, apierr.NotFound(msgFolderMissing)
		}
	}
	// One extra row tells whether another page exists.
	docs, err := s.store.ListDocuments(ctx, c.APIKey, org, DocumentFilter{IDs: ids, FolderID: folder}, after, size+1)
	if err != nil {
		return nil, fmt.Errorf("list documents: %w", err)
	}
	resp := &documentsv1.GetDocumentsResponse{Status: statusSuccess, Message: "Documents retrieved successfully."}
	if len(docs) > size {
		docs = docs[:size]
		if resp.PageToken, err = nextPage(s.documentPages, scope, docs[size-1].position()); err != nil {
			return nil, err
		}
	}
	if resp.Data, err = s.documentProtos(ctx, c.APIKey, org, docs); err != nil {
		return nil, err
	}
	return resp, nil
}
