package users

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"sync"
)

// MemoryStore keeps everything in the process. Records are copied in and out, so callers never
// share memory with the store.
type MemoryStore struct {
	mu           sync.RWMutex
	users        map[userKey]User
	members      map[orgKey]set
	contacts     map[docKey]set
	groups       map[groupKey]Group
	groupMembers map[groupKey]set
}

type (
	userKey  struct{ apiKey, userID string }
	orgKey   struct{ apiKey, orgID string }
	docKey   struct{ apiKey, orgID, documentID string }
	groupKey struct{ apiKey, orgID, groupID string }
	set      map[string]struct{}
)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{
		users: map[userKey]User{}, members: map[orgKey]set{}, contacts: map[docKey]set{},
		groups: map[groupKey]Group{}, groupMembers: map[groupKey]set{},
	}
}

func (s set) add(ids []string) {
	for _, id := range ids {
		s[id] = struct{}{}
	}
}

func (s set) remove(ids []string) {
	for _, id := range ids {
		delete(s, id)
	}
}

// filtered returns the ids of s that only allows (every id when only is nil), sorted.
func (s set) filtered(only []string) []string {
	out := []string{}
	if only == nil {
		out = slices.AppendSeq(out, maps.Keys(s))
	} else {
		for _, id := range only {
			if _, ok := s[id]; ok && !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	slices.Sort(out)
	return out
}

// addTo adds ids to the set at k, creating it.
func addTo[K comparable](m map[K]set, k K, ids []string) {
	s, ok := m[k]
	if !ok {
		s = set{}
		m[k] = s
	}
	s.add(ids)
}

// removeFrom removes ids from the set at k and drops the set once empty, so deleted data
// leaves nothing behind.
func removeFrom[K comparable](m map[K]set, k K, ids []string) {
	if s, ok := m[k]; ok {
		s.remove(ids)
		if len(s) == 0 {
			delete(m, k)
		}
	}
}

func (s *MemoryStore) UpsertUser(_ context.Context, apiKey string, p UserPatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := userKey{apiKey, p.UserID}
	u := s.users[k]
	u.UserID = p.UserID
	if p.Name != nil {
		u.Name = *p.Name
	}
	if p.Email != nil {
		u.Email = *p.Email
	}
	if p.PhotoURL != nil {
		u.PhotoURL = *p.PhotoURL
	}
	s.users[k] = u
	return nil
}

func (s *MemoryStore) Users(_ context.Context, apiKey string, userIDs []string) ([]*User, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []*User{}
	seen := set{}
	for _, id := range userIDs {
		if _, dup := seen[id]; dup {
			continue
		}
		seen[id] = struct{}{}
		if u, ok := s.users[userKey{apiKey, id}]; ok {
			out = append(out, &u)
		}
	}
	slices.SortFunc(out, func(a, b *User) int { return cmp.Compare(a.UserID, b.UserID) })
	return out, nil
}

func (s *MemoryStore) AddMembers(_ context.Context, apiKey, orgID string, userIDs []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	addTo(s.members, orgKey{apiKey, orgID}, userIDs)
	return nil
}

func (s *MemoryStore) Members(_ context.Context, apiKey, orgID string, only []string, limit int) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := s.members[orgKey{apiKey, orgID}].filtered(only)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (s *MemoryStore) MembersAfter(_ context.Context, apiKey, orgID, after string, limit int) ([]string, error) {
	out := []string{}
	if limit <= 0 {
		return out, nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	// The set has no order: one pass keeps the ids after after, and only those are sorted.
	for id := range s.members[orgKey{apiKey, orgID}] {
		if id > after {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	if len(out) > limit {
		out = slices.Clip(out[:limit])
	}
	return out, nil
}

func (s *MemoryStore) CountMembers(_ context.Context, apiKey, orgID string) (int, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.members[orgKey{apiKey, orgID}]), nil
}

func (s *MemoryStore) RemoveUsers(_ context.Context, apiKey, orgID string, userIDs []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.contacts {
		if k.apiKey == apiKey && k.orgID == orgID {
			removeFrom(s.contacts, k, userIDs)
		}
	}
	for k := range s.groupMembers {
		if k.apiKey == apiKey && k.orgID == orgID {
			removeFrom(s.groupMembers, k, userIDs)
		}
	}
	removeFrom(s.members, orgKey{apiKey, orgID}, userIDs)
	return nil
}

func (s *MemoryStore) AddDocumentContacts(_ context.Context, apiKey, orgID, documentID string, userIDs []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	addTo(s.contacts, docKey{apiKey, orgID, documentID}, userIDs)
	return nil
}

func (s *MemoryStore) DocumentContacts(_ context.Context, apiKey, orgID, documentID string, only []string) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.contacts[docKey{apiKey, orgID, documentID}].filtered(only), nil
}

func (s *MemoryStore) RemoveDocumentContacts(_ context.Context, apiKey, orgID, documentID string, userIDs []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	removeFrom(s.contacts, docKey{apiKey, orgID, documentID}, userIDs)
	return nil
}

func (s *MemoryStore) DeleteDocuments(_ context.Context, apiKey, orgID string, documentIDs []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range documentIDs {
		delete(s.contacts, docKey{apiKey, orgID, d})
	}
	return nil
}

func (s *MemoryStore) MoveDocument(_ context.Context, apiKey, orgID, from, to string) error {
	if from == to {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	src := docKey{apiKey, orgID, from}
	if moving, ok := s.contacts[src]; ok {
		addTo(s.contacts, docKey{apiKey, orgID, to}, slices.Collect(maps.Keys(moving)))
		delete(s.contacts, src)
	}
	return nil
}

func (s *MemoryStore) UpsertGroup(_ context.Context, apiKey, orgID string, g Group) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := groupKey{apiKey, orgID, g.GroupID}
	old, exists := s.groups[k]
	if exists && g.Name == "" {
		g.Name = old.Name
	}
	s.groups[k] = g
	return !exists, nil
}

func (s *MemoryStore) Group(_ context.Context, apiKey, orgID, groupID string) (*Group, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	g, ok := s.groups[groupKey{apiKey, orgID, groupID}]
	if !ok {
		return nil, ErrNotFound
	}
	return &g, nil
}

func (s *MemoryStore) AddGroupMembers(_ context.Context, apiKey, orgID, groupID string, userIDs []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	addTo(s.groupMembers, groupKey{apiKey, orgID, groupID}, userIDs)
	return nil
}

func (s *MemoryStore) RemoveGroupMembers(_ context.Context, apiKey, orgID, groupID string, userIDs []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	removeFrom(s.groupMembers, groupKey{apiKey, orgID, groupID}, userIDs)
	return nil
}

func (s *MemoryStore) GroupMembers(_ context.Context, apiKey, orgID string, groupIDs, only []string) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	union := set{}
	for _, g := range groupIDs {
		union.add(s.groupMembers[groupKey{apiKey, orgID, g}].filtered(only))
	}
	return union.filtered(nil), nil
}

func (s *MemoryStore) DeleteOrganization(_ context.Context, apiKey, orgID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.members, orgKey{apiKey, orgID})
	for k := range s.contacts {
		if k.apiKey == apiKey && k.orgID == orgID {
			delete(s.contacts, k)
		}
	}
	for k := range s.groups {
		if k.apiKey == apiKey && k.orgID == orgID {
			delete(s.groups, k)
		}
	}
	for k := range s.groupMembers {
		if k.apiKey == apiKey && k.orgID == orgID {
			delete(s.groupMembers, k)
		}
	}
	return nil
}

func (s *MemoryStore) Ping(context.Context) error { return nil }
