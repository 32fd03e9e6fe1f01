package documents

import (
	"context"
	"errors"
	"fmt"

	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/lifecycle"
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
	o, err := s.store.Organization(ctx, apiKey, org)
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
	resp.OrganizationExists, resp.OrganizationGeneration = true, o.Generation

	var docs []*Document
	if len(docIDs) > 0 {
		if docs, err = s.store.ListDocuments(ctx, apiKey, org, DocumentFilter{IDs: docIDs}, nil, 0); err != nil {
			return nil, fmt.Errorf("read documents: %w", err)
		}
	}
	tree := s.newTree(apiKey, org)
	wanted := append(make([]string, 0, len(folderIDs)+len(docs)), folderIDs...)
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
		resp.Folders[id] = &documentsv1.ResolvedResource{Exists: true, AccessType: tree.access(id), Generation: tree.get(id).Generation,
			FolderChain: append([]string{}, tree.ancestors(id)...)}
	}
	s.resolveDocuments(resp, tree, docIDs, docs)
	return resp, nil
}

// resolveDocuments answers each of ids from docs, the records found of them. The documents'
// answers, their folder chains and the chains' generations take one allocation each for all
// documents, not one or more per document: this is most of Get Permissions' answer.
func (s *Server) resolveDocuments(resp *documentsv1.ResolveResourcesResponse, tree *folderTree, ids []string, docs []*Document) {
	found := make(map[string]*Document, len(docs))
	links := 0
	for _, d := range docs {
		found[d.ID] = d
		links += len(tree.chain(d.FolderID))
	}
	answers := make([]documentsv1.ResolvedResource, len(docs))
	chains, gens := make([]string, 0, links), make([]string, 0, links)
	for _, id := range ids {
		d := found[id]
		if d == nil {
			resp.Documents[id] = &documentsv1.ResolvedResource{FolderChain: []string{}}
			continue
		}
		start := len(chains)
		for _, f := range tree.chain(d.FolderID) {
			chains, gens = append(chains, f), append(gens, tree.get(f).Generation)
		}
		a := &answers[0]
		answers = answers[1:]
		a.Exists, a.AccessType, a.Generation = true, tree.documentAccess(d), d.Generation
		// Capped, so that nothing appended to one chain can reach the next.
		a.FolderChain, a.FolderChainGenerations = chains[start:len(chains):len(chains)], gens[start:len(gens):len(gens)]
		resp.Documents[id] = a
	}
}

// EnsureResources checks, and with the create flags creates, an organization, folder and
// document for the users service, and answers their generations. Everything is checked before
// anything is created, so a refusal leaves nothing behind. A created folder is at the root with
// no access type of its own; a created document goes into folder_id when one is given.
func (s *Server) EnsureResources(ctx context.Context, req *documentsv1.EnsureResourcesRequest) (*documentsv1.EnsureResourcesResponse, error) {
	apiKey, org, folder, doc := req.GetApiKey(), req.GetOrganizationId(), req.GetFolderId(), req.GetDocumentId()
	for _, c := range []struct {
		check        func(field, v string) error
		field, value string
	}{{validate.ID, "apiKey", apiKey}, {validate.ID, "organizationId", org}, {validate.OptionalID, "folderId", folder}, {validate.OptionalID, "documentId", doc}} {
		if err := c.check(c.field, c.value); err != nil {
			return nil, err
		}
	}
	found, err := s.existingResources(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := &documentsv1.EnsureResourcesResponse{}
	created := false
	if found.org != nil {
		resp.OrganizationGeneration = found.org.Generation
	} else {
		if resp.OrganizationGeneration, err = s.ensureOrg(ctx, apiKey, org, true); err != nil {
			return nil, err
		}
		created = true
	}
	switch {
	case found.folder != nil:
		resp.FolderGeneration = found.folder.Generation
	case folder != "":
		if resp.FolderGeneration, err = s.createRootFolder(ctx, apiKey, org, resp.GetOrganizationGeneration(), folder); err != nil {
			return nil, err
		}
		created = true
	}
	switch {
	case found.doc != nil:
		resp.DocumentGeneration = found.doc.Generation
	case doc != "":
		if resp.DocumentGeneration, err = s.createDocument(ctx, apiKey, org, resp.GetOrganizationGeneration(), doc, folder); err != nil {
			return nil, err
		}
		created = true
	}
	if created {
		if err := s.confirmOrg(ctx, apiKey, org, resp.GetOrganizationGeneration()); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// ensured is what of an EnsureResources request exists already (nil: it does not).
type ensured struct {
	org    *Organization
	folder *Folder
	doc    *Document
}

// existingResources reads what of the request's organization, folder and document exists, and
// refuses (NOT_FOUND) one that does not and may not be created.
func (s *Server) existingResources(ctx context.Context, req *documentsv1.EnsureResourcesRequest) (ensured, error) {
	apiKey, org, folder, doc := req.GetApiKey(), req.GetOrganizationId(), req.GetFolderId(), req.GetDocumentId()
	var found ensured
	o, err := s.store.Organization(ctx, apiKey, org)
	switch {
	case err == nil:
		found.org = o
	case !errors.Is(err, ErrNotFound):
		return found, fmt.Errorf("read organization: %w", err)
	case !req.GetCreateOrganization():
		return found, apierr.NotFound(msgOrgMissing)
	}
	if found.org != nil && folder != "" {
		folders, err := s.foldersByID(ctx, apiKey, org, []string{folder})
		if err != nil {
			return found, err
		}
		found.folder = folders[folder]
	}
	if found.org != nil && doc != "" {
		docs, err := s.documentsByID(ctx, apiKey, org, []string{doc})
		if err != nil {
			return found, err
		}
		found.doc = docs[doc]
	}
	if folder != "" && found.folder == nil && !req.GetCreateFolder() {
		return found, apierr.NotFound(msgFolderMissing)
	}
	if doc != "" && found.doc == nil && !req.GetCreateDocument() {
		return found, apierr.NotFound(msgDocumentMissing)
	}
	return found, nil
}

// createDocument makes a nameless document for the create-document flag and returns its
// generation; one that appeared meanwhile is as good.
func (s *Server) createDocument(ctx context.Context, apiKey, org, orgGen, id, folder string) (string, error) {
	d := &Document{APIKey: apiKey, OrganizationID: org, ID: id, Generation: lifecycle.NewGeneration(), OrgGeneration: orgGen, FolderID: folder, CreatedAt: s.now()}
	err := s.store.CreateDocument(ctx, d)
	switch {
	case err == nil:
		return d.Generation, nil
	case !errors.Is(err, ErrExists):
		return "", fmt.Errorf("create document: %w", err)
	}
	found, err := s.documentsByID(ctx, apiKey, org, []string{id})
	if err != nil {
		return "", err
	}
	if found[id] == nil {
		return "", apierr.NotFound(msgDocumentMissing)
	}
	return found[id].Generation, nil
}
