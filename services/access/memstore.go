package access

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"
)

// MemoryStore keeps everything in the process. Grants are indexed by (tenant, organization,
// user), the way Get Permissions reads them, so a read costs the users' grants, not the
// store's. Records are copied in and out.
type MemoryStore struct {
	mu       sync.RWMutex
	grants   map[userScope]map[resourceRef]grantValue
	contexts map[userScope][]string
	keys     map[string]SigningKey
}

type (
	userScope   struct{ apiKey, orgID, userID string }
	resourceRef struct{ resourceType, resourceID string }
	grantValue  struct {
		role      string
		expiresAt time.Time
	}
)

func (v grantValue) inEffect(now time.Time) bool {
	return v.expiresAt.IsZero() || v.expiresAt.After(now)
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{
		grants:   map[userScope]map[resourceRef]grantValue{},
		contexts: map[userScope][]string{},
		keys:     map[string]SigningKey{},
	}
}

func (s *MemoryStore) put(apiKey string, g Grant) {
	us := userScope{apiKey, g.OrganizationID, g.UserID}
	m, ok := s.grants[us]
	if !ok {
		m = map[resourceRef]grantValue{}
		s.grants[us] = m
	}
	m[resourceRef{g.ResourceType, g.ResourceID}] = grantValue{g.AccessRole, storeTime(g.ExpiresAt)}
}

// remove deletes a grant and drops the user's map once empty, so deleted data leaves nothing.
func (s *MemoryStore) remove(us userScope, r resourceRef) {
	if m, ok := s.grants[us]; ok {
		delete(m, r)
		if len(m) == 0 {
			delete(s.grants, us)
		}
	}
}

func (s *MemoryStore) PutGrants(_ context.Context, apiKey string, grants []Grant) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range grants {
		s.put(apiKey, g)
	}
	return nil
}

func (s *MemoryStore) PutGrantsIfAbsent(_ context.Context, apiKey string, grants []Grant, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range grants {
		old, ok := s.grants[userScope{apiKey, g.OrganizationID, g.UserID}][resourceRef{g.ResourceType, g.ResourceID}]
		if ok && old.inEffect(now) {
			continue
		}
		s.put(apiKey, g)
	}
	return nil
}

func (s *MemoryStore) DeleteGrants(_ context.Context, apiKey string, refs []GrantRef) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range refs {
		s.remove(userScope{apiKey, r.OrganizationID, r.UserID}, resourceRef{r.ResourceType, r.ResourceID})
	}
	return nil
}

func (s *MemoryStore) Grants(_ context.Context, apiKey, orgID string, userIDs []string, now time.Time) ([]Grant, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []Grant{}
	seen := make(map[string]bool, len(userIDs))
	for _, u := range userIDs {
		if seen[u] {
			continue
		}
		seen[u] = true
		for r, v := range s.grants[userScope{apiKey, orgID, u}] {
			if v.inEffect(now) {
				out = append(out, Grant{OrganizationID: orgID, ResourceType: r.resourceType, ResourceID: r.resourceID, UserID: u, AccessRole: v.role, ExpiresAt: v.expiresAt})
			}
		}
	}
	return out, nil
}

func (s *MemoryStore) GrantsOn(_ context.Context, apiKey, orgID string, userIDs []string, on []Resource, now time.Time) ([]Grant, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []Grant{}
	refs := make([]resourceRef, 0, len(on))
	for _, r := range on {
		if ref := (resourceRef{r.Type, r.ID}); !slices.Contains(refs, ref) { // named twice, read once
			refs = append(refs, ref)
		}
	}
	seen := make(map[string]bool, len(userIDs))
	for _, u := range userIDs {
		if seen[u] {
			continue
		}
		seen[u] = true
		held := s.grants[userScope{apiKey, orgID, u}]
		for _, r := range refs {
			if v, ok := held[r]; ok && v.inEffect(now) {
				out = append(out, Grant{OrganizationID: orgID, ResourceType: r.resourceType, ResourceID: r.resourceID, UserID: u, AccessRole: v.role, ExpiresAt: v.expiresAt})
			}
		}
	}
	return out, nil
}

func (s *MemoryStore) DeleteResourceGrants(_ context.Context, apiKey, orgID, resourceType string, resourceIDs []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for us := range s.grants {
		if us.apiKey != apiKey || us.orgID != orgID {
			continue
		}
		for _, id := range resourceIDs {
			s.remove(us, resourceRef{resourceType, id})
		}
	}
	return nil
}

func (s *MemoryStore) MoveDocumentGrants(_ context.Context, apiKey, orgID, from, to string, now time.Time) error {
	if from == to {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	src, dst := resourceRef{ResourceDocument, from}, resourceRef{ResourceDocument, to}
	for us, m := range s.grants {
		if us.apiKey != apiKey || us.orgID != orgID {
			continue
		}
		moving, ok := m[src]
		if !ok {
			continue
		}
		if existing, has := m[dst]; moving.inEffect(now) && (!has || !existing.inEffect(now)) {
			m[dst] = moving
		}
		s.remove(us, src)
	}
	return nil
}

func (s *MemoryStore) SetContextFields(_ context.Context, apiKey, orgID, userID string, fields []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	us := userScope{apiKey, orgID, userID}
	if len(fields) == 0 {
		delete(s.contexts, us)
		return nil
	}
	s.contexts[us] = slices.Clone(fields)
	return nil
}

func (s *MemoryStore) ContextFields(_ context.Context, apiKey, orgID string, userIDs []string) (map[string][]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[string][]string{}
	for _, u := range userIDs {
		if f, ok := s.contexts[userScope{apiKey, orgID, u}]; ok {
			out[u] = slices.Clone(f)
		}
	}
	return out, nil
}

func (s *MemoryStore) RemoveUsers(_ context.Context, apiKey, orgID string, userIDs []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range userIDs {
		us := userScope{apiKey, orgID, u}
		delete(s.grants, us)
		delete(s.contexts, us)
	}
	return nil
}

func (s *MemoryStore) DeleteOrganization(_ context.Context, apiKey, orgID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for us := range s.grants {
		if us.apiKey == apiKey && us.orgID == orgID {
			delete(s.grants, us)
		}
	}
	for us := range s.contexts {
		if us.apiKey == apiKey && us.orgID == orgID {
			delete(s.contexts, us)
		}
	}
	return nil
}

func copySigningKey(k SigningKey) *SigningKey {
	k.PublicKey = slices.Clone(k.PublicKey)
	k.SealedPrivateKey = slices.Clone(k.SealedPrivateKey)
	return &k
}

func (s *MemoryStore) InsertSigningKey(_ context.Context, k *SigningKey) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.keys[k.ID]; ok {
		return ErrKeyExists
	}
	c := copySigningKey(*k)
	c.NotBefore, c.NotAfter, c.CreatedAt = storeTime(c.NotBefore), storeTime(c.NotAfter), storeTime(c.CreatedAt)
	s.keys[k.ID] = *c
	return nil
}

func (s *MemoryStore) SigningKey(_ context.Context, id string) (*SigningKey, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	k, ok := s.keys[id]
	if !ok {
		return nil, ErrNotFound
	}
	return copySigningKey(k), nil
}

func (s *MemoryStore) SigningKeys(_ context.Context, notAfterAfter time.Time) ([]*SigningKey, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []*SigningKey{}
	for _, k := range s.keys {
		if k.NotAfter.After(notAfterAfter) {
			out = append(out, copySigningKey(k))
		}
	}
	sortSigningKeys(out)
	return out, nil
}

// sortSigningKeys orders keys by NotBefore, then ID, in every store alike.
func sortSigningKeys(keys []*SigningKey) {
	slices.SortFunc(keys, func(a, b *SigningKey) int {
		return cmp.Or(a.NotBefore.Compare(b.NotBefore), cmp.Compare(a.ID, b.ID))
	})
}

func (s *MemoryStore) Ping(context.Context) error { return nil }
