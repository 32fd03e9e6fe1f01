package workspace

import (
	"context"
	"slices"
	"sync"
)

// MemoryStore keeps everything in the process. Records are copied in and out, so callers never
// share memory with the store.
type MemoryStore struct {
	mu         sync.RWMutex
	workspaces map[string]*Workspace
	byEmail    map[string]string // owner email -> workspace id
	keys       map[string]*APIKey
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{workspaces: map[string]*Workspace{}, byEmail: map[string]string{}, keys: map[string]*APIKey{}}
}

func copyWorkspace(w *Workspace) *Workspace {
	c := *w
	return &c
}

func copyKey(k *APIKey) *APIKey {
	c := *k
	c.AllowedDomains = slices.Clone(k.AllowedDomains)
	c.Tokens = slices.Clone(k.Tokens)
	return &c
}

func (s *MemoryStore) CreateWorkspace(_ context.Context, ws *Workspace, key *APIKey) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byEmail[ws.OwnerEmail]; ok {
		return ErrOwnerEmailTaken
	}
	if _, ok := s.keys[key.Key]; ok {
		return ErrKeyExists
	}
	if _, ok := s.workspaces[ws.ID]; ok {
		return ErrWorkspaceExists
	}
	s.workspaces[ws.ID] = copyWorkspace(ws)
	s.byEmail[ws.OwnerEmail] = ws.ID
	s.keys[key.Key] = copyKey(key)
	return nil
}

func (s *MemoryStore) Workspace(_ context.Context, id string) (*Workspace, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	w, ok := s.workspaces[id]
	if !ok {
		return nil, ErrNotFound
	}
	return copyWorkspace(w), nil
}

func (s *MemoryStore) WorkspaceByOwnerEmail(_ context.Context, email string) (*Workspace, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	id, ok := s.byEmail[email]
	if !ok {
		return nil, ErrNotFound
	}
	return copyWorkspace(s.workspaces[id]), nil
}

func (s *MemoryStore) update(id string, change func(w *Workspace) bool) (*Workspace, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.workspaces[id]
	if !ok {
		return nil, ErrNotFound
	}
	c := copyWorkspace(w)
	if !change(c) {
		return nil, ErrNotFound
	}
	s.workspaces[id] = c
	return copyWorkspace(c), nil
}

func (s *MemoryStore) UpdateSettings(_ context.Context, id string, p SettingsPatch) (*Workspace, error) {
	return s.update(id, func(w *Workspace) bool {
		applyPatch(&w.Settings, p)
		if p.SlackWebhookURL != nil {
			w.SlackWebhookURL = *p.SlackWebhookURL
		}
		return true
	})
}

func applyPatch(s *Settings, p SettingsPatch) {
	if p.AdvancedQueries != nil {
		s.AdvancedQueries = *p.AdvancedQueries
	}
	if p.Notifications != nil {
		s.Notifications = *p.Notifications
	}
	if p.AdvancedWebhooks != nil {
		s.AdvancedWebhooks = *p.AdvancedWebhooks
	}
}

func (s *MemoryStore) SetWorkspaceToken(_ context.Context, id, hash, last4 string) error {
	_, err := s.update(id, func(w *Workspace) bool {
		w.TokenHash, w.TokenLast4 = hash, last4
		return true
	})
	return err
}

func (s *MemoryStore) VerifyEmail(_ context.Context, id, tokenHash string, activateKeys bool) (*Workspace, error) {
	return s.update(id, func(w *Workspace) bool {
		if w.VerifyTokenHash == "" || w.VerifyTokenHash != tokenHash {
			return false
		}
		w.EmailVerified = true
		w.VerifyTokenHash = ""
		w.KeysActive = w.KeysActive || activateKeys
		return true
	})
}

func (s *MemoryStore) ActivateKeys(_ context.Context, id string) error {
	_, err := s.update(id, func(w *Workspace) bool {
		w.KeysActive = true
		return true
	})
	return err
}

func (s *MemoryStore) CreateAPIKey(_ context.Context, key *APIKey, limit int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.keys[key.Key]; ok {
		return ErrKeyExists
	}
	if _, ok := s.workspaces[key.WorkspaceID]; !ok {
		return ErrNotFound
	}
	if limit > 0 {
		n := 0
		for _, k := range s.keys {
			if k.WorkspaceID == key.WorkspaceID {
				n++
			}
		}
		if n >= limit {
			return ErrKeyLimit
		}
	}
	s.keys[key.Key] = copyKey(key)
	return nil
}

func (s *MemoryStore) CountAPIKeys(_ context.Context, workspaceID string) (int, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for _, k := range s.keys {
		if k.WorkspaceID == workspaceID {
			n++
		}
	}
	return n, nil
}

func (s *MemoryStore) APIKey(_ context.Context, key string) (*APIKey, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	k, ok := s.keys[key]
	if !ok {
		return nil, ErrNotFound
	}
	return copyKey(k), nil
}

func (s *MemoryStore) WorkspaceAPIKey(_ context.Context, workspaceID, key string) (*APIKey, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	k, ok := s.keys[key]
	if !ok || k.WorkspaceID != workspaceID {
		return nil, ErrNotFound
	}
	return copyKey(k), nil
}

func keyBefore(a, b KeyPosition) bool {
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.Before(b.CreatedAt)
	}
	return a.Key < b.Key
}

func (s *MemoryStore) ListAPIKeys(_ context.Context, workspaceID string, after *KeyPosition, limit int) ([]*APIKey, error) {
	s.mu.RLock()
	var out []*APIKey
	for _, k := range s.keys {
		if k.WorkspaceID != workspaceID {
			continue
		}
		if after != nil && !keyBefore(*after, KeyPosition{k.CreatedAt, k.Key}) {
			continue
		}
		out = append(out, copyKey(k))
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b *APIKey) int {
		switch {
		case keyBefore(KeyPosition{a.CreatedAt, a.Key}, KeyPosition{b.CreatedAt, b.Key}):
			return -1
		case a.Key == b.Key:
			return 0
		default:
			return 1
		}
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (s *MemoryStore) updateKey(match func(k *APIKey) bool, change func(k *APIKey), key string) (*APIKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.keys[key]
	if !ok || !match(k) {
		return nil, ErrNotFound
	}
	c := copyKey(k)
	change(c)
	s.keys[key] = c
	return copyKey(c), nil
}

func (s *MemoryStore) SetAuthTokens(_ context.Context, workspaceID, key string, tokens []AuthToken) (*APIKey, error) {
	return s.updateKey(func(k *APIKey) bool { return k.WorkspaceID == workspaceID },
		func(k *APIKey) {
			k.Tokens = slices.Clone(tokens)
			k.TokenGeneration++
		}, key)
}

func (s *MemoryStore) SetAllowedDomains(_ context.Context, key string, domains []string) (*APIKey, error) {
	return s.updateKey(func(*APIKey) bool { return true },
		func(k *APIKey) { k.AllowedDomains = slices.Clone(domains) }, key)
}

func (s *MemoryStore) Ping(context.Context) error { return nil }
