package documents

import (
	"context"
	"slices"
	"sync"

	"github.com/collab/collab/internal/lifecycle"
)

// MemoryStore keeps everything in the process. Records are copied in and out, so callers never
// share memory with the store.
type MemoryStore struct {
	mu        sync.RWMutex
	orgs      map[orgKey]*Organization
	folders   map[itemKey]*Folder
	documents map[itemKey]*Document
}

type orgKey struct{ apiKey, org string }

type itemKey struct{ apiKey, org, id string }

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{orgs: map[orgKey]*Organization{}, folders: map[itemKey]*Folder{}, documents: map[itemKey]*Document{}}
}

func copyOf[T any](v *T) *T {
	c := *v
	return &c
}

// page sorts records, keeps those after the position and cuts to limit.
func page[T any](out []*T, pos func(*T) Position, after *Position, limit int) []*T {
	if after != nil {
		out = slices.DeleteFunc(out, func(r *T) bool { return !positionBefore(*after, pos(r)) })
	}
	slices.SortFunc(out, func(a, b *T) int { return comparePositions(pos(a), pos(b)) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// idFilter is an optional set filter: nil lets everything pass.
type idFilter map[string]bool

func filterOf(ids []string) idFilter {
	if len(ids) == 0 {
		return nil
	}
	f := make(idFilter, len(ids))
	for _, id := range ids {
		f[id] = true
	}
	return f
}

func (f idFilter) has(v string) bool { return f == nil || f[v] }

// listed returns copies of an organization's records that keep accepts: those of ids, looked
// up by key, when ids are given (Get Permissions reads its documents and folders so, and a scan
// of every tenant's records cost it most of its time), else all of them. The copies take two
// allocations whatever their number. Callers hold s.mu.
func listed[T any](records map[itemKey]*T, apiKey, org string, ids []string, keep func(*T) bool) []*T {
	var found []*T
	if len(ids) > 0 {
		found = make([]*T, 0, len(ids))
		only := idFilter(nil)
		if len(ids) > 64 {
			only = make(idFilter, len(ids))
		}
		for _, id := range ids {
			r, ok := records[itemKey{apiKey, org, id}]
			switch {
			case !ok || !keep(r):
			case only != nil:
				if !only[id] {
					only[id] = true
					found = append(found, r)
				}
			case !slices.Contains(found, r):
				found = append(found, r)
			}
		}
	} else {
		for k, r := range records {
			if k.apiKey == apiKey && k.org == org && keep(r) {
				found = append(found, r)
			}
		}
	}
	copies := make([]T, len(found))
	for i, r := range found {
		copies[i] = *r
		found[i] = &copies[i]
	}
	return found
}

func (s *MemoryStore) CreateOrganization(_ context.Context, o *Organization) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := orgKey{o.APIKey, o.ID}
	if _, ok := s.orgs[k]; ok {
		return ErrExists
	}
	s.orgs[k] = copyOf(o)
	return nil
}

func (s *MemoryStore) Organization(_ context.Context, apiKey, id string) (*Organization, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	o, ok := s.orgs[orgKey{apiKey, id}]
	if !ok {
		return nil, ErrNotFound
	}
	return copyOf(o), nil
}

func (s *MemoryStore) ListOrganizations(_ context.Context, apiKey string, ids []string, after *Position, limit int) ([]*Organization, error) {
	only := filterOf(ids)
	s.mu.RLock()
	var out []*Organization
	for k, o := range s.orgs {
		if k.apiKey == apiKey && only.has(k.org) {
			out = append(out, copyOf(o))
		}
	}
	s.mu.RUnlock()
	return page(out, (*Organization).position, after, limit), nil
}

func (s *MemoryStore) RenameOrganization(_ context.Context, apiKey, id, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orgs[orgKey{apiKey, id}]
	if !ok {
		return ErrNotFound
	}
	c := copyOf(o)
	c.Name = name
	s.orgs[orgKey{apiKey, id}] = c
	return nil
}

func (s *MemoryStore) DeleteOrganization(_ context.Context, apiKey, id, generation string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.orgs[orgKey{apiKey, id}]; ok && o.Generation == generation {
		delete(s.orgs, orgKey{apiKey, id})
	}
	for k, f := range s.folders {
		if k.apiKey == apiKey && k.org == id && f.OrgGeneration == generation {
			delete(s.folders, k)
		}
	}
	for k, d := range s.documents {
		if k.apiKey == apiKey && k.org == id && d.OrgGeneration == generation {
			delete(s.documents, k)
		}
	}
	return nil
}

func (s *MemoryStore) CreateFolder(_ context.Context, f *Folder) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := itemKey{f.APIKey, f.OrganizationID, f.ID}
	if _, ok := s.folders[k]; ok {
		return ErrExists
	}
	s.folders[k] = copyOf(f)
	return nil
}

func (s *MemoryStore) ListFolders(_ context.Context, apiKey, orgID string, filter FolderFilter, after *Position, limit int) ([]*Folder, error) {
	parents := filterOf(filter.ParentIDs)
	s.mu.RLock()
	out := listed(s.folders, apiKey, orgID, filter.IDs, func(f *Folder) bool { return parents.has(f.ParentID) })
	s.mu.RUnlock()
	return page(out, (*Folder).position, after, limit), nil
}

func (s *MemoryStore) UpdateFolder(_ context.Context, apiKey, orgID, id string, patch FolderPatch) (*Folder, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := itemKey{apiKey, orgID, id}
	f, ok := s.folders[k]
	if !ok {
		return nil, ErrNotFound
	}
	c := copyOf(f)
	patch.apply(c)
	s.folders[k] = c
	return copyOf(c), nil
}

func (s *MemoryStore) DeleteFolder(_ context.Context, apiKey, orgID, id, generation string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := itemKey{apiKey, orgID, id}
	if f, ok := s.folders[k]; ok && f.Generation == generation {
		delete(s.folders, k)
	}
	return nil
}

func (s *MemoryStore) CreateDocument(_ context.Context, d *Document) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := itemKey{d.APIKey, d.OrganizationID, d.ID}
	if _, ok := s.documents[k]; ok {
		return ErrExists
	}
	s.documents[k] = copyOf(d)
	return nil
}

func (s *MemoryStore) ListDocuments(_ context.Context, apiKey, orgID string, filter DocumentFilter, after *Position, limit int) ([]*Document, error) {
	s.mu.RLock()
	out := listed(s.documents, apiKey, orgID, filter.IDs, func(d *Document) bool { return filter.FolderID == "" || d.FolderID == filter.FolderID })
	s.mu.RUnlock()
	return page(out, (*Document).position, after, limit), nil
}

func (s *MemoryStore) UpdateDocument(_ context.Context, apiKey, orgID, id string, patch DocumentPatch) (*Document, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := itemKey{apiKey, orgID, id}
	d, ok := s.documents[k]
	if !ok {
		return nil, ErrNotFound
	}
	c := copyOf(d)
	patch.apply(c)
	s.documents[k] = c
	return copyOf(c), nil
}

func (s *MemoryStore) DeleteDocuments(_ context.Context, apiKey, orgID string, docs []lifecycle.Incarnation) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range docs {
		k := itemKey{apiKey, orgID, r.ID}
		if d, ok := s.documents[k]; ok && d.Generation == r.Generation {
			delete(s.documents, k)
		}
	}
	return nil
}

func (s *MemoryStore) Ping(context.Context) error { return nil }
