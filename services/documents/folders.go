package documents

import (
	"context"
	"errors"
	"fmt"
	"slices"

	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/validate"
)

func checkAddFolders(req *documentsv1.AddFoldersRequest) error {
	if err := validate.ID("organizationId", req.GetOrganizationId()); err != nil {
		return err
	}
	folders := req.GetFolders()
	return checkItems("folders", "folder", "folderId", len(folders), func(i int) string { return folders[i].GetFolderId() }, func(i int) error {
		f := folders[i]
		if err := validate.Name(field("folders", i, "folderName"), trim(f.GetFolderName()), maxNameLength); err != nil {
			return err
		}
		if err := validate.OptionalID(field("folders", i, "parentFolderId"), f.GetParentFolderId()); err != nil {
			return err
		}
		if f.GetParentFolderId() == f.GetFolderId() {
			return apierr.InvalidArgument("%s must not be the folder itself.", field("folders", i, "parentFolderId"))
		}
		if at := f.GetAccessType(); at != "" {
			return validate.AccessType(field("folders", i, "accessType"), at)
		}
		return nil
	})
}

func (s *Server) AddFolders(ctx context.Context, req *documentsv1.AddFoldersRequest) (*documentsv1.ItemResultsResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkAddFolders(req); err != nil {
		return nil, err
	}
	org := req.GetOrganizationId()
	orgGen, err := s.ensureOrg(ctx, c.APIKey, org, req.GetCreateOrganization())
	if err != nil {
		return nil, err
	}
	defer s.lockStructure(c.APIKey, org)()

	tree := s.newTree(c.APIKey, org)
	var wanted []string
	for _, f := range req.GetFolders() {
		wanted = append(wanted, f.GetFolderId(), f.GetParentFolderId())
	}
	if err := tree.load(ctx, wanted); err != nil {
		return nil, err
	}
	now := s.now()
	data := map[string]*documentsv1.ItemResult{}
	// In request order, so a folder may name one added earlier in the batch as its parent.
	for _, in := range req.GetFolders() {
		id, parent := in.GetFolderId(), in.GetParentFolderId()
		switch {
		case tree.get(id) != nil:
			data[id] = itemResult(id, false, msgFolderExists)
			continue
		case parent != "" && tree.get(parent) == nil:
			data[id] = itemResult(id, false, msgParentMissing)
			continue
		case tree.depth(parent)+1 > maxFolderDepth:
			data[id] = itemResult(id, false, msgTooDeep)
			continue
		}
		f := &Folder{APIKey: c.APIKey, OrganizationID: org, ID: id, Generation: lifecycle.NewGeneration(), OrgGeneration: orgGen,
			Name: trim(in.GetFolderName()), ParentID: parent, AccessType: in.GetAccessType(), CreatedAt: now}
		err := s.store.CreateFolder(ctx, f)
		switch {
		case errors.Is(err, ErrExists):
			data[id] = itemResult(id, false, msgFolderExists)
		case err != nil:
			return nil, fmt.Errorf("add folder: %w", err)
		default:
			tree.add(f)
			data[id] = itemResult(id, true, msgFolderAdded)
		}
	}
	if err := s.confirmOrg(ctx, c.APIKey, org, orgGen); err != nil {
		return nil, err
	}
	return &documentsv1.ItemResultsResponse{Status: statusSuccess, Message: "Folder(s) added successfully.", Data: data}, nil
}

func (s *Server) GetFolders(ctx context.Context, req *documentsv1.GetFoldersRequest) (*documentsv1.GetFoldersResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	org, parent := req.GetOrganizationId(), req.GetParentFolderId()
	if err := validate.ID("organizationId", org); err != nil {
		return nil, err
	}
	ids, err := validate.IDs("folderIds", req.GetFolderIds(), false, maxIDs)
	if err != nil {
		return nil, err
	}
	if err := validate.OptionalID("parentFolderId", parent); err != nil {
		return nil, err
	}
	size, err := checkPageSize(req.GetPageSize())
	if err != nil {
		return nil, err
	}
	scope := pageScope("folders", c.APIKey, []string{org, parent}, ids)
	after, err := openPage(s.folderPages, req.GetPageToken(), scope)
	if err != nil {
		return nil, err
	}
	if _, err := s.requireOrg(ctx, c.APIKey, org); err != nil {
		return nil, err
	}
	tree := s.newTree(c.APIKey, org)
	filter := FolderFilter{IDs: ids}
	if parent != "" {
		// A filter on a folder that does not exist is a mistake worth telling, as Get
		// Documents v2 does for its folderId.
		if err := tree.load(ctx, []string{parent}); err != nil {
			return nil, err
		}
		if tree.get(parent) == nil {
			return nil, apierr.NotFound(msgFolderMissing)
		}
		filter.ParentIDs = []string{parent}
	}
	folders, err := s.store.ListFolders(ctx, c.APIKey, org, filter, after, size+1)
	if err != nil {
		return nil, fmt.Errorf("list folders: %w", err)
	}
	resp := &documentsv1.GetFoldersResponse{Status: statusSuccess, Message: "Folders retrieved successfully.", Data: []*documentsv1.FolderRecord{}}
	if len(folders) > size {
		folders = folders[:size]
		if resp.PageToken, err = nextPage(s.folderPages, scope, folders[size-1].position()); err != nil {
			return nil, err
		}
	}
	tree.add(folders...)
	if err := tree.load(ctx, nil); err != nil {
		return nil, err
	}
	for _, f := range folders {
		ancestors := tree.ancestors(f.ID)
		slices.Reverse(ancestors) // root first
		resp.Data = append(resp.Data, &documentsv1.FolderRecord{
			FolderId: f.ID, FolderName: f.Name, ParentFolderId: f.ParentID,
			Ancestors: append([]string{}, ancestors...), AccessType: tree.access(f.ID),
		})
	}
	return resp, nil
}

func checkUpdateFolders(req *documentsv1.UpdateFoldersRequest) error {
	if err := validate.ID("organizationId", req.GetOrganizationId()); err != nil {
		return err
	}
	folders := req.GetFolders()
	return checkItems("folders", "folder", "folderId", len(folders), func(i int) string { return folders[i].GetFolderId() }, func(i int) error {
		f := folders[i]
		if f.FolderName == nil && f.ParentFolderId == nil {
			return apierr.InvalidArgument("folders[%d] must change folderName or parentFolderId.", i)
		}
		if err := validate.Name(field("folders", i, "folderName"), trim(f.GetFolderName()), maxNameLength); err != nil {
			return err
		}
		return validate.OptionalID(field("folders", i, "parentFolderId"), f.GetParentFolderId())
	})
}

func (s *Server) UpdateFolders(ctx context.Context, req *documentsv1.UpdateFoldersRequest) (*documentsv1.ItemResultsResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkUpdateFolders(req); err != nil {
		return nil, err
	}
	org := req.GetOrganizationId()
	if _, err := s.requireOrg(ctx, c.APIKey, org); err != nil {
		return nil, err
	}
	defer s.lockStructure(c.APIKey, org)()

	tree := s.newTree(c.APIKey, org)
	var wanted []string
	for _, f := range req.GetFolders() {
		wanted = append(wanted, f.GetFolderId(), f.GetParentFolderId())
	}
	if err := tree.load(ctx, wanted); err != nil {
		return nil, err
	}
	data := map[string]*documentsv1.ItemResult{}
	for _, in := range req.GetFolders() {
		id := in.GetFolderId()
		if tree.get(id) == nil {
			data[id] = itemResult(id, false, msgFolderMissing)
			continue
		}
		if in.ParentFolderId != nil {
			msg, err := s.checkMove(ctx, tree, id, in.GetParentFolderId())
			if err != nil {
				return nil, err
			}
			if msg != "" {
				data[id] = itemResult(id, false, msg)
				continue
			}
		}
		f, err := s.store.UpdateFolder(ctx, c.APIKey, org, id, FolderPatch{Name: trimPtr(in.FolderName), ParentID: in.ParentFolderId})
		switch {
		case errors.Is(err, ErrNotFound):
			data[id] = itemResult(id, false, msgFolderMissing)
		case err != nil:
			return nil, fmt.Errorf("update folder: %w", err)
		default:
			tree.add(f) // later items of the batch see the move
			data[id] = itemResult(id, true, msgFolderUpdated)
		}
	}
	return &documentsv1.ItemResultsResponse{Status: statusSuccess, Message: "Folder(s) updated successfully.", Data: data}, nil
}

// checkMove returns why the folder cannot move under parent ("" is the root), or "" when it can.
func (s *Server) checkMove(ctx context.Context, tree *folderTree, id, parent string) (string, error) {
	if parent == "" {
		return "", nil
	}
	if parent == id || slices.Contains(tree.ancestors(parent), id) {
		return msgFolderIntoSelf, nil
	}
	if tree.get(parent) == nil {
		return msgParentMissing, nil
	}
	// The moved folder lands one level below parent, and its subfolders come along.
	room := maxFolderDepth - tree.depth(parent) - 1
	if room < 0 {
		return msgTooDeep, nil
	}
	height, err := s.subtreeHeight(ctx, tree.apiKey, tree.org, id, room)
	if err != nil {
		return "", err
	}
	if height > room {
		return msgTooDeep, nil
	}
	return "", nil
}

// DeleteFolders publishes folder.deleted for each existing, empty folder; this service's own
// handler removes the folder (checking again that it is empty) before other services remove
// their folder records.
func (s *Server) DeleteFolders(ctx context.Context, req *documentsv1.DeleteFoldersRequest) (*documentsv1.ItemResultsResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	org := req.GetOrganizationId()
	if err := validate.ID("organizationId", org); err != nil {
		return nil, err
	}
	ids, err := validate.IDs("folderIds", req.GetFolderIds(), true, maxIDs)
	if err != nil {
		return nil, err
	}
	orgGen, err := s.requireOrg(ctx, c.APIKey, org)
	if err != nil {
		return nil, err
	}
	existing, err := s.store.ListFolders(ctx, c.APIKey, org, FolderFilter{IDs: ids}, nil, 0)
	if err != nil {
		return nil, fmt.Errorf("read folders: %w", err)
	}
	data := map[string]*documentsv1.ItemResult{}
	// In request order, so a subfolder named before its parent empties the parent in time.
	for _, id := range ids {
		i := slices.IndexFunc(existing, func(f *Folder) bool { return f.ID == id })
		if i < 0 {
			data[id] = itemResult(id, false, msgFolderMissing)
			continue
		}
		inUse, err := s.folderInUse(ctx, c.APIKey, org, id)
		if err != nil {
			return nil, err
		}
		if inUse {
			data[id] = itemResult(id, false, msgFolderNotEmpty)
			continue
		}
		e := s.event(c.APIKey, org, orgGen, eventFolderDeleted)
		e.Payload = &lifecyclev1.Event_FolderDeleted{FolderDeleted: &lifecyclev1.FolderDeleted{FolderId: id, Generation: existing[i].Generation}}
		r, err := s.events.Publish(ctx, e)
		if err != nil {
			return nil, fmt.Errorf("delete folder: %w", err)
		}
		// Our handler refuses for good when something moved into the folder meanwhile.
		if r.RefusedByGate() {
			data[id] = itemResult(id, false, msgFolderNotEmpty)
			continue
		}
		data[id] = itemResult(id, true, msgFolderDeleted)
	}
	return &documentsv1.ItemResultsResponse{Status: statusSuccess, Message: "Folder(s) deleted successfully.", Data: data}, nil
}
