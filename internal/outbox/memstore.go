package outbox

import (
	"context"
	"slices"
	"sync"
	"time"
)

// MemoryStore keeps events in the process.
type MemoryStore struct {
	mu     sync.Mutex
	events map[string]*Record
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{events: map[string]*Record{}} }

func copyRecord(r *Record) *Record {
	c := *r
	c.Event = slices.Clone(r.Event)
	c.Subscribers = slices.Clone(r.Subscribers)
	c.Delivered = slices.Clone(r.Delivered)
	return &c
}

func (s *MemoryStore) Add(_ context.Context, r *Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events[r.ID] = copyRecord(r)
	return nil
}

func (s *MemoryStore) Get(_ context.Context, id string) (*Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.events[id]
	if !ok {
		return nil, ErrNotFound
	}
	return copyRecord(r), nil
}

func (s *MemoryStore) Due(_ context.Context, now time.Time, limit int) ([]*Record, error) {
	s.mu.Lock()
	var out []*Record
	for _, r := range s.events {
		if !r.Finished && !r.NextAttempt.After(now) {
			out = append(out, copyRecord(r))
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b *Record) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		if a.ID < b.ID {
			return -1
		}
		return 1
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (s *MemoryStore) update(id string, f func(r *Record)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.events[id]
	if !ok {
		return ErrNotFound
	}
	f(r)
	return nil
}

func (s *MemoryStore) MarkDelivered(_ context.Context, id, subscriber string) error {
	return s.update(id, func(r *Record) {
		if !slices.Contains(r.Delivered, subscriber) {
			r.Delivered = append(r.Delivered, subscriber)
		}
	})
}

func (s *MemoryStore) Retry(_ context.Context, id string, attempts int, next time.Time, lastErr string) error {
	return s.update(id, func(r *Record) {
		r.Attempts, r.NextAttempt, r.LastError = attempts, next, lastErr
	})
}

func (s *MemoryStore) Finish(_ context.Context, id string, failed bool, lastErr string) error {
	return s.update(id, func(r *Record) {
		r.Finished, r.Failed = true, failed
		if lastErr != "" {
			r.LastError = lastErr
		}
	})
}
