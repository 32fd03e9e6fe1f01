package access

import (
	"context"
	"fmt"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/validate"
)

// msgDocumentMissing is the documents service's word for a document that does not exist.
const msgDocumentMissing = "Document does not exist."

// FilterReaders tells the notifications service which of the users can read a document: those
// Get Permissions would answer with a role (viewer or editor) on it, by the same resolver
// (docs/permissions.md). The tenant is the request's apiKey, as internal calls carry no caller.
//
// It costs one call to the documents service and one grant read per readerBatch users, each
// narrowed to the grants that decide (the document's, its folder chain's and the
// organization's), so 10,000 users are about ten small queries.
func (s *Server) FilterReaders(ctx context.Context, req *accessv1.FilterReadersRequest) (*accessv1.FilterReadersResponse, error) {
	apiKey, org, doc := req.GetApiKey(), req.GetOrganizationId(), req.GetDocumentId()
	if err := validate.ID("apiKey", apiKey); err != nil {
		return nil, err
	}
	if err := validate.ID("organizationId", org); err != nil {
		return nil, err
	}
	if err := validate.ID("documentId", doc); err != nil {
		return nil, err
	}
	userIDs, err := validate.IDs("userIds", req.GetUserIds(), false, maxReaderUserIDs)
	if err != nil {
		return nil, err
	}
	resolved, err := s.docs.ResolveResources(ctx, &documentsv1.ResolveResourcesRequest{ApiKey: apiKey, OrganizationId: org, DocumentIds: []string{doc}})
	if err != nil {
		return nil, apierr.FromPeer("resolve resources", err)
	}
	if !resolved.GetOrganizationExists() {
		return nil, apierr.NotFound(msgNoOrganization)
	}
	items := lookup([]string{doc}, resolved.GetDocuments())
	it := items[0]
	if it.resource == nil {
		return nil, apierr.NotFound(msgDocumentMissing)
	}

	// The grants that can decide, under the current generations: the document's, its folder
	// chain's and the organization's (membership).
	orgRef := lifecycle.Ref(org, resolved.GetOrganizationGeneration())
	on := make([]Resource, 0, it.chainLen()+2)
	on = append(on, Resource{ResourceOrganization, orgRef}, Resource{ResourceDocument, it.ref.String()})
	for j := range it.chainLen() {
		on = append(on, Resource{ResourceFolder, it.link(j).String()})
	}
	now := s.now()
	r := newResolver(org, nil, items)
	out := make([]string, 0, len(userIDs))
	roles := make(map[string]string, len(userIDs))
	for start := 0; start < len(userIDs); start += readerBatch {
		batch := userIDs[start:min(start+readerBatch, len(userIDs))]
		grants, err := s.store.GrantsOn(ctx, apiKey, orgRef, batch, on, now)
		if err != nil {
			return nil, fmt.Errorf("filter readers: %w", err)
		}
		held := groupGrants(grants, now)
		none := &heldGrants{}
		for _, u := range batch {
			h := held[u]
			if h == nil {
				h = none
			}
			var e accessv1.PermissionEntry
			r.resolve(&e, h, h.documents, it, r.docMsgs)
			if role := e.GetAccessRole(); role == validate.RoleEditor || role == validate.RoleViewer {
				out = append(out, u)
				roles[u] = role
			}
		}
	}
	return &accessv1.FilterReadersResponse{UserIds: out, Roles: roles}, nil
}
