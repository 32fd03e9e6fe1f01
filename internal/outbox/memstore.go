package outbox

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"
)

// MemoryStore keeps events in the process. A finished event keeps its id, type, scope and
// state for the retention (a repeated id is recognised, a migration's status is readable), but
// not its payload, which nothing reads once every subscriber has it: in memory, a week of a
// busy process's events with their contents (live edits are announced with the document) would
// be the largest thing it holds.
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
	c.Pending = slices.Clone(r.Pending)
	c.Delivered = slices.Clone(r.Delivered)
	c.Refused = slices.Clone(r.Refused)
	c.Lanes = maps.Clone(r.Lanes)
	if r.DoneAt != nil {
		t := *r.DoneAt
		c.DoneAt = &t
	}
	return &c
}

func (s *MemoryStore) Add(_ context.Context, r *Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.events[r.ID]; ok {
		return ErrDuplicate
	}
	c := copyRecord(r)
	if c.Lanes == nil {
		c.Lanes = map[string]Lane{}
	}
	s.events[r.ID] = c
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

func (s *MemoryStore) Due(_ context.Context, subscriber string, now time.Time, limit int) ([]*Record, error) {
	s.mu.Lock()
	var out []*Record
	for _, r := range s.events {
		if slices.Contains(r.Pending, subscriber) && !r.Lanes[subscriber].NextAttempt.After(now) {
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

// settle stamps DoneAt once nothing is pending.
func settle(r *Record, now time.Time) {
	if len(r.Pending) == 0 && r.DoneAt == nil {
		t := now
		r.DoneAt = &t
		r.Event = nil
	}
}

func (s *MemoryStore) Delivered(_ context.Context, id, subscriber string, release []string, now time.Time) error {
	return s.update(id, func(r *Record) {
		if !slices.Contains(r.Pending, subscriber) {
			return
		}
		r.Pending = slices.DeleteFunc(r.Pending, func(p string) bool { return p == subscriber })
		r.Delivered = append(r.Delivered, subscriber)
		r.Lanes[subscriber] = Lane{Attempts: r.Lanes[subscriber].Attempts}
		for _, n := range release {
			if !slices.Contains(r.Pending, n) && !slices.Contains(r.Delivered, n) && !slices.Contains(r.Refused, n) {
				r.Pending = append(r.Pending, n)
				r.Lanes[n] = Lane{NextAttempt: now}
			}
		}
		settle(r, now)
	})
}

func (s *MemoryStore) Retry(_ context.Context, id, subscriber string, lane Lane) error {
	return s.update(id, func(r *Record) {
		if slices.Contains(r.Pending, subscriber) {
			r.Lanes[subscriber] = lane
		}
	})
}

func (s *MemoryStore) Refuse(_ context.Context, id, subscriber, reason string, now time.Time) error {
	return s.update(id, func(r *Record) {
		if !slices.Contains(r.Pending, subscriber) {
			return
		}
		r.Pending = slices.DeleteFunc(r.Pending, func(p string) bool { return p == subscriber })
		r.Refused = append(r.Refused, subscriber)
		l := r.Lanes[subscriber]
		l.LastError = reason
		r.Lanes[subscriber] = l
		settle(r, now)
	})
}

func (s *MemoryStore) Prune(_ context.Context, before, now time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for id, r := range s.events {
		settle(r, now)
		if r.DoneAt != nil && r.DoneAt.Before(before) {
			delete(s.events, id)
			n++
		}
	}
	return n, nil
}

func (s *MemoryStore) Ping(context.Context) error { return nil }

// Backlog counts the events pending for subscriber and returns the creation time of the
// oldest (zero when none).
func (s *MemoryStore) Backlog(_ context.Context, subscriber string) (int, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, oldest := 0, time.Time{}
	for _, r := range s.events {
		if slices.Contains(r.Pending, subscriber) {
			n++
			if oldest.IsZero() || r.CreatedAt.Before(oldest) {
				oldest = r.CreatedAt
			}
		}
	}
	return n, oldest, nil
}
