// Package ratelimit counts calls per key in fixed one-window buckets, for the operations the
// spec rate limits (Create Workspace per client address, Get Workspace per workspace, Email
// Status per email). Counts live in the process: each replica limits on its own.
package ratelimit

import (
	"sync"
	"time"

	"github.com/collab/collab/internal/clock"
)

// Limiter allows at most limit calls per key in each window.
type Limiter struct {
	limit  int
	window time.Duration
	clock  clock.Clock

	mu     sync.Mutex
	counts map[string]bucket
	// sweepNext is the number of keys at which the next sweep runs: twice those kept by the
	// last, so that many keys live in one window (one per address or email a caller makes up)
	// cost a sweep per doubling, not one per new key.
	sweepNext int
	sweeps    int // passes over the map so far
}

type bucket struct {
	start time.Time
	n     int
}

// sweepAt is the fewest keys at which stale buckets are dropped.
const sweepAt = 4096

// New returns a Limiter. A limit of 0 or less allows everything.
func New(limit int, window time.Duration, clk clock.Clock) *Limiter {
	return &Limiter{limit: limit, window: window, clock: clk, counts: map[string]bucket{}}
}

// Allow records a call for key and reports whether it is within the limit.
func (l *Limiter) Allow(key string) bool {
	if l == nil || l.limit <= 0 {
		return true
	}
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.counts[key]
	if !ok || now.Sub(b.start) >= l.window {
		if !ok && len(l.counts) >= max(sweepAt, l.sweepNext) {
			l.sweep(now)
			l.sweepNext = 2 * len(l.counts)
		}
		b = bucket{start: now}
	}
	if b.n >= l.limit {
		return false
	}
	b.n++
	l.counts[key] = b
	return true
}

func (l *Limiter) sweep(now time.Time) {
	l.sweeps++
	for k, b := range l.counts {
		if now.Sub(b.start) >= l.window {
			delete(l.counts, k)
		}
	}
}
