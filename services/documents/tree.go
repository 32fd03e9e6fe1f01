package documents

import (
	"context"
	"fmt"
	"slices"

	"github.com/collab/collab/internal/validate"
)

// folderTree holds the folders of one organization that a request needs, with their ancestors.
// Folders point at their parent only, so chains are walked here: loading costs one store query
// per level of nesting, whatever the number of folders asked about.
type folderTree struct {
	store       Store
	apiKey, org string
	// folders maps a folder id to its record, or to nil when it is known not to exist.
	folders map[string]*Folder
	// chains holds the chains already walked (chain), by folder id.
	chains map[string][]string
}

func (s *Server) newTree(apiKey, org string) *folderTree {
	return &folderTree{store: s.store, apiKey: apiKey, org: org, folders: map[string]*Folder{}}
}

// add records folders already read.
func (t *folderTree) add(fs ...*Folder) {
	t.chains = nil
	for _, f := range fs {
		t.folders[f.ID] = f
	}
}

// load reads the folders among ids that are not known yet, and their ancestors.
func (t *folderTree) load(ctx context.Context, ids []string) error {
	var pending []string
	for _, id := range ids {
		if _, known := t.folders[id]; !known && id != "" && !slices.Contains(pending, id) {
			pending = append(pending, id)
		}
	}
	// Known parents of folders already held may be missing too (folders added from a listing).
	for _, f := range t.folders {
		if f == nil || f.ParentID == "" {
			continue
		}
		if _, known := t.folders[f.ParentID]; !known && !slices.Contains(pending, f.ParentID) {
			pending = append(pending, f.ParentID)
		}
	}
	// Past maxFolderDepth levels the chain is cut: deeper nesting is refused on write, so only
	// a cycle left by a race between replicas could get here.
	for level := 0; len(pending) > 0 && level <= maxFolderDepth; level++ {
		found, err := t.store.ListFolders(ctx, t.apiKey, t.org, FolderFilter{IDs: pending}, nil, 0)
		if err != nil {
			return fmt.Errorf("read folders: %w", err)
		}
		t.chains = nil
		for _, id := range pending {
			t.folders[id] = nil
		}
		var next []string
		for _, f := range found {
			t.folders[f.ID] = f
		}
		for _, f := range found {
			if _, known := t.folders[f.ParentID]; f.ParentID != "" && !known && !slices.Contains(next, f.ParentID) {
				next = append(next, f.ParentID)
			}
		}
		pending = next
	}
	return nil
}

// get returns the folder, or nil when it does not exist (or was not loaded).
func (t *folderTree) get(id string) *Folder { return t.folders[id] }

// ancestors returns the ids of the folder's existing ancestors, nearest first. It stops at a
// missing parent, at a repeated folder and after maxFolderDepth steps.
func (t *folderTree) ancestors(id string) []string {
	f := t.folders[id]
	if f == nil {
		return nil
	}
	var out []string
	seen := map[string]bool{id: true}
	for p := f.ParentID; p != "" && !seen[p] && len(out) < maxFolderDepth; {
		parent := t.folders[p]
		if parent == nil {
			break
		}
		out = append(out, p)
		seen[p] = true
		p = parent.ParentID
	}
	return out
}

// chain returns the folder (when it exists) followed by its ancestors: the folder chain of a
// document in it. A folder's chain is walked once, after the folders are loaded; callers share
// it and must not change it.
func (t *folderTree) chain(id string) []string {
	if t.folders[id] == nil {
		return nil
	}
	if c, ok := t.chains[id]; ok {
		return c
	}
	c := append([]string{id}, t.ancestors(id)...)
	if t.chains == nil {
		t.chains = map[string][]string{}
	}
	t.chains[id] = c
	return c
}

// depth is the folder's nesting level: 1 at the root, 0 for no folder.
func (t *folderTree) depth(id string) int {
	if id == "" || t.folders[id] == nil {
		return 0
	}
	return len(t.ancestors(id)) + 1
}

// access returns the effective access type of a folder (docs/permissions.md): its own, else
// its parent's effective one, else public. A missing folder counts as none.
func (t *folderTree) access(id string) string {
	for _, fid := range t.chain(id) {
		if at := t.folders[fid].AccessType; at != "" {
			return at
		}
	}
	return validate.AccessPublic
}

// documentAccess returns a document's effective access type: its own wins over its folder's.
func (t *folderTree) documentAccess(d *Document) string {
	if d.AccessType != "" {
		return d.AccessType
	}
	return t.access(d.FolderID)
}

// subtreeHeight returns how many levels of subfolders lie below the folder, counting no
// further than limit+1 levels (enough to know the limit is passed). One query per level.
func (s *Server) subtreeHeight(ctx context.Context, apiKey, org, id string, limit int) (int, error) {
	level := []string{id}
	seen := map[string]bool{id: true}
	height := 0
	for height <= limit {
		children, err := s.store.ListFolders(ctx, apiKey, org, FolderFilter{ParentIDs: level}, nil, 0)
		if err != nil {
			return 0, fmt.Errorf("read subfolders: %w", err)
		}
		level = level[:0:0]
		for _, c := range children {
			if !seen[c.ID] {
				seen[c.ID] = true
				level = append(level, c.ID)
			}
		}
		if len(level) == 0 {
			break
		}
		height++
	}
	return height, nil
}

// folderInUse reports whether a folder holds subfolders or documents.
func (s *Server) folderInUse(ctx context.Context, apiKey, org, id string) (bool, error) {
	sub, err := s.store.ListFolders(ctx, apiKey, org, FolderFilter{ParentIDs: []string{id}}, nil, 1)
	if err != nil {
		return false, fmt.Errorf("read subfolders: %w", err)
	}
	if len(sub) > 0 {
		return true, nil
	}
	docs, err := s.store.ListDocuments(ctx, apiKey, org, DocumentFilter{FolderID: id}, nil, 1)
	if err != nil {
		return false, fmt.Errorf("read folder documents: %w", err)
	}
	return len(docs) > 0, nil
}
