package access

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/validate"
)

// Messages and error codes of Get Permissions (docs/api.md, "Access").
const (
	msgPermissionsRetrieved = "User permissions retrieved successfully."
	msgNoOrganization       = "Organization does not exist."
	msgMissingResources     = "Folder or document does not exist"
	msgNoDocumentAccess     = "User does not have access to document"
	msgNoFolderAccess       = "User does not have access to folder"
	msgNoDocument           = "Document does not exist"
	msgNoFolder             = "Folder does not exist"
	codeDenied              = "permission_denied"
	codeMissing             = "does_not_exist"
)

// GetPermissions resolves each user's access to the folders and documents named, by the rules
// of docs/permissions.md.
func (s *Server) GetPermissions(ctx context.Context, req *accessv1.GetPermissionsRequest) (*accessv1.GetPermissionsResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	org := req.GetOrganizationId()
	if err := validate.ID("organizationId", org); err != nil {
		return nil, err
	}
	userIDs, err := validate.IDs("userIds", req.GetUserIds(), true, maxUserIDs)
	if err != nil {
		return nil, err
	}
	folderIDs, err := validate.IDs("folderIds", req.GetFolderIds(), false, maxResourceIDs)
	if err != nil {
		return nil, err
	}
	documentIDs, err := validate.IDs("documentIds", req.GetDocumentIds(), false, maxResourceIDs)
	if err != nil {
		return nil, err
	}

	// One call to the documents service and one read of grants and of contexts, whatever the
	// numbers of users and resources: this is the hot path.
	resolved, err := s.docs.ResolveResources(ctx, &documentsv1.ResolveResourcesRequest{
		ApiKey: c.APIKey, OrganizationId: org, FolderIds: folderIDs, DocumentIds: documentIDs,
	})
	if err != nil {
		return nil, apierr.FromPeer("resolve resources", err)
	}
	if !resolved.GetOrganizationExists() {
		return nil, apierr.NotFound(msgNoOrganization)
	}
	now := s.now()
	// Grants and contexts of the organization's current generation only: what a racing writer
	// left under a deleted one is never read.
	orgRef := lifecycle.Ref(org, resolved.GetOrganizationGeneration())
	grants, err := s.store.Grants(ctx, c.APIKey, orgRef, userIDs, now)
	if err != nil {
		return nil, fmt.Errorf("get permissions: %w", err)
	}
	contexts, err := s.store.ContextFields(ctx, c.APIKey, orgRef, userIDs)
	if err != nil {
		return nil, fmt.Errorf("get permissions: %w", err)
	}

	folders := lookup(folderIDs, resolved.GetFolders())
	documents := lookup(documentIDs, resolved.GetDocuments())
	held := groupGrants(grants, now)
	r := newResolver(org, folders, documents)
	data := make(map[string]*accessv1.UserPermissions, len(userIDs))
	for _, u := range userIDs {
		data[u] = r.user(held[u], contexts[u])
	}
	if missing(folders) || missing(documents) {
		details, err := detailsOf(data)
		if err != nil {
			return nil, fmt.Errorf("get permissions: %w", err)
		}
		e := apierr.NotFound(msgMissingResources)
		e.Details = details
		return nil, e
	}
	return &accessv1.GetPermissionsResponse{Status: statusSuccess, Message: msgPermissionsRetrieved, Data: data}, nil
}

// ref is the key of a resource's grants in one generation (lifecycle.Ref) as its two halves,
// so that looking grants up builds no string: joining them cost an allocation per resource and
// folder of every request.
type ref struct{ id, generation string }

// refOf splits a grant's key.
func refOf(key string) ref {
	id, gen := lifecycle.SplitRef(key)
	return ref{id, gen}
}

// String is the key as grants are stored under it.
func (r ref) String() string { return lifecycle.Ref(r.id, r.generation) }

// resolvedItem is one requested folder or document as the documents service sees it.
type resolvedItem struct {
	id string
	// ref is the key of its grants.
	ref ref
	// resource is nil when the item does not exist.
	resource *documentsv1.ResolvedResource
	// accessType is the effective access type, one pointer shared by every user's entry.
	accessType *string
}

// chainLen returns the number of folders in the item's folder chain.
func (it resolvedItem) chainLen() int { return len(it.resource.GetFolderChain()) }

// link returns the key of the grants of the j-th folder of its chain, nearest first.
func (it resolvedItem) link(j int) ref {
	gen := ""
	if gens := it.resource.GetFolderChainGenerations(); j < len(gens) {
		gen = gens[j]
	}
	return ref{it.resource.GetFolderChain()[j], gen}
}

// lookup pairs the requested ids with their resolution. An id the documents service left out
// counts as missing.
func lookup(ids []string, m map[string]*documentsv1.ResolvedResource) []resolvedItem {
	out := make([]resolvedItem, len(ids))
	for i, id := range ids {
		out[i] = resolvedItem{id: id}
		if r := m[id]; r.GetExists() {
			// The answer is this call's alone: its access type serves as the entries' own.
			at := &r.AccessType
			if *at == "" {
				public := validate.AccessPublic // the documents service's default, should it send none
				at = &public
			}
			out[i].resource, out[i].accessType = r, at
			out[i].ref = ref{id, r.GetGeneration()}
		}
	}
	return out
}

func missing(items []resolvedItem) bool {
	for _, it := range items {
		if it.resource == nil {
			return true
		}
	}
	return false
}

// heldGrants are one user's grants in effect in the organization.
type heldGrants struct {
	organization *Grant // nil: not a member
	folders      map[ref]Grant
	documents    map[ref]Grant
}

func groupGrants(grants []Grant, now time.Time) map[string]*heldGrants {
	out := map[string]*heldGrants{}
	for _, g := range grants {
		if !g.inEffect(now) { // the store filtered already; this keeps the rule in one place
			continue
		}
		h, ok := out[g.UserID]
		if !ok {
			h = &heldGrants{folders: map[ref]Grant{}, documents: map[ref]Grant{}}
			out[g.UserID] = h
		}
		switch g.ResourceType {
		case ResourceOrganization:
			h.organization = &g
		case ResourceFolder:
			h.folders[refOf(g.ResourceID)] = g
		case ResourceDocument:
			h.documents[refOf(g.ResourceID)] = g
		}
	}
	return out
}

// resolver answers every user of one Get Permissions call. Entries point at strings the
// resolver holds once per call (roles, messages, each resource's access type) rather than a
// copy each: with 100 users × 30 documents that saves thousands of allocations. Nothing changes
// an entry once answered, so the sharing is safe.
type resolver struct {
	org                 string
	folders, documents  []resolvedItem
	folderMsgs, docMsgs entryMessages
	codeMissing         *string
	codeDenied          *string
	// texts are the strings the pointers above and role's point at, in the resolver's own
	// allocation.
	texts resolverTexts
}

// resolverTexts are the strings a resolver's entries share.
type resolverTexts struct {
	editor, viewer                                         string
	noFolder, noFolderAccess, noDocument, noDocumentAccess string
	codeMissing, codeDenied                                string
}

// entryMessages are the texts of missing and denied entries of one kind of resource.
type entryMessages struct{ missing, denied *string }

func newResolver(org string, folders, documents []resolvedItem) *resolver {
	r := &resolver{org: org, folders: folders, documents: documents, texts: resolverTexts{
		editor: validate.RoleEditor, viewer: validate.RoleViewer,
		noFolder: msgNoFolder, noFolderAccess: msgNoFolderAccess, noDocument: msgNoDocument, noDocumentAccess: msgNoDocumentAccess,
		codeMissing: codeMissing, codeDenied: codeDenied,
	}}
	t := &r.texts
	r.folderMsgs = entryMessages{missing: &t.noFolder, denied: &t.noFolderAccess}
	r.docMsgs = entryMessages{missing: &t.noDocument, denied: &t.noDocumentAccess}
	r.codeMissing, r.codeDenied = &t.codeMissing, &t.codeDenied
	return r
}

// role returns the shared string of a role, or a copy of one it does not know.
func (r *resolver) role(v string) *string {
	switch v {
	case validate.RoleEditor:
		return &r.texts.editor
	case validate.RoleViewer:
		return &r.texts.viewer
	}
	other := v // copied here only: taking v's address would move every call's v to the heap
	return &other
}

// user answers one user; held is nil for a user without grants.
func (r *resolver) user(held *heldGrants, context []string) *accessv1.UserPermissions {
	if held == nil {
		held = &heldGrants{}
	}
	up := &accessv1.UserPermissions{
		Folders:      make(map[string]*accessv1.PermissionEntry, len(r.folders)),
		Documents:    make(map[string]*accessv1.PermissionEntry, len(r.documents)),
		Organization: map[string]*accessv1.OrganizationAccess{},
	}
	if held.organization != nil {
		up.Organization[r.org] = &accessv1.OrganizationAccess{AccessRole: held.organization.AccessRole}
	}
	// One allocation for all of the user's entries.
	entries := make([]accessv1.PermissionEntry, len(r.folders)+len(r.documents))
	for i, f := range r.folders {
		e := &entries[i]
		r.resolve(e, held, held.folders, f, r.folderMsgs)
		up.Folders[f.id] = e
	}
	for i, d := range r.documents {
		e := &entries[len(r.folders)+i]
		r.resolve(e, held, held.documents, d, r.docMsgs)
		up.Documents[d.id] = e
	}
	if len(context) > 0 {
		up.Context = &accessv1.AccessContext{AccessFields: context}
	}
	return up
}

// resolve fills e by the rows of docs/permissions.md for one folder or document. own holds the
// user's grants on resources of the item's kind.
func (r *resolver) resolve(e *accessv1.PermissionEntry, held *heldGrants, own map[ref]Grant, it resolvedItem, msgs entryMessages) {
	// Row 1: the resource does not exist.
	if it.resource == nil {
		e.Error, e.ErrorCode = msgs.missing, r.codeMissing
		return
	}
	e.AccessType = it.accessType // every answered entry carries the effective type
	// Row 2: a grant on the resource itself.
	if g, ok := own[it.ref]; ok {
		r.grant(e, g)
		return
	}
	// Row 3: the nearest folder of the chain with a grant.
	for j := range it.chainLen() {
		if g, ok := held.folders[it.link(j)]; ok {
			r.grant(e, g)
			return
		}
	}
	member := held.organization
	switch *it.accessType {
	case validate.AccessPublic:
		if member != nil {
			r.grant(e, *member) // row 4
		} else {
			e.AccessRole = &r.texts.viewer // row 5
		}
		return
	case validate.AccessOrganizationPrivate:
		if member != nil {
			r.grant(e, *member) // row 6
			return
		}
	}
	// Row 7 (organizationPrivate, not a member), row 8 (restricted), and any access type this
	// version does not know: grants only.
	e.Error, e.ErrorCode = msgs.denied, r.codeDenied
}

// grant gives e the access that comes from g; a temporary grant shows when it lapses.
func (r *resolver) grant(e *accessv1.PermissionEntry, g Grant) {
	e.AccessRole = r.role(g.AccessRole)
	if !g.ExpiresAt.IsZero() {
		e.ExpiresAt = proto.Float64(unixSeconds(g.ExpiresAt))
	}
}

// detailsOf renders the per-user answers as error.details: the same JSON as the success
// response's data (lowerCamelCase names, empty maps shown), as a Struct so it travels as a
// status detail.
func detailsOf(data map[string]*accessv1.UserPermissions) (*structpb.Struct, error) {
	b, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(&accessv1.GetPermissionsResponse{Data: data})
	if err != nil {
		return nil, fmt.Errorf("encode details: %w", err)
	}
	var whole structpb.Struct
	if err := protojson.Unmarshal(b, &whole); err != nil {
		return nil, fmt.Errorf("encode details: %w", err)
	}
	return whole.GetFields()["data"].GetStructValue(), nil
}
