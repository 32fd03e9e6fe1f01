// Package notes is a throwaway service that scripts/check-new-service adds to a scratch copy
// of the repository: a store, a module, two RPCs.
package notes

import (
	"context"
	"errors"
	"sync"
)

// ErrNotFound is returned for a document without notes.
var ErrNotFound = errors.New("not found")

// Store keeps notes per tenant and document.
type Store interface {
	// Add appends a note to the document's.
	Add(ctx context.Context, apiKey, documentID, text string) error
	// Notes returns the document's notes, or ErrNotFound.
	Notes(ctx context.Context, apiKey, documentID string) ([]string, error)
}

// MemoryStore is the Store in memory.
type MemoryStore struct {
	mu    sync.Mutex
	notes map[[2]string][]string
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{notes: map[[2]string][]string{}} }

// Add implements Store.
func (m *MemoryStore) Add(_ context.Context, apiKey, documentID, text string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{apiKey, documentID}
	m.notes[k] = append(m.notes[k], text)
	return nil
}

// Notes implements Store.
func (m *MemoryStore) Notes(_ context.Context, apiKey, documentID string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.notes[[2]string{apiKey, documentID}]
	if !ok {
		return nil, ErrNotFound
	}
	return append([]string(nil), n...), nil
}
