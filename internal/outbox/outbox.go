// Package outbox is the durable event path between services (DESIGN "Events"). A producing
// service writes an event to its outbox, in its own store; the relay delivers it at least once
// to every subscribing service, in order, through LifecycleService.HandleEvent, retrying with
// backoff; handlers are idempotent. A change that other services must follow (a deletion, a
// migration) is itself carried out by the producer's own handler of its event, so the one write
// at request time is the event: nothing is done that the event does not also finish.
package outbox

import (
	"context"
	"errors"
	"time"
)

// ErrNotFound is returned for an unknown event id.
var ErrNotFound = errors.New("event not found")

// Record is a stored event and its delivery state.
type Record struct {
	ID string `bson:"_id"`
	// Event is the marshaled collab.lifecycle.v1.Event.
	Event []byte `bson:"event"`
	// Tenant and organization, so producers can look events up within a caller's scope.
	APIKey         string `bson:"apiKey"`
	OrganizationID string `bson:"organizationId"`
	Type           string `bson:"type"`
	// Subscribers in delivery order; Delivered is the prefix of them that handled it.
	Subscribers []string  `bson:"subscribers"`
	Delivered   []string  `bson:"delivered"`
	Attempts    int       `bson:"attempts"`
	NextAttempt time.Time `bson:"nextAttempt"`
	LastError   string    `bson:"lastError"`
	// Finished: delivered to every subscriber, or failed for good.
	Finished  bool      `bson:"finished"`
	Failed    bool      `bson:"failed"`
	CreatedAt time.Time `bson:"createdAt"`
}

// Store keeps one producer's events.
type Store interface {
	// Add stores a new event.
	Add(ctx context.Context, r *Record) error
	// Get returns the event, or ErrNotFound.
	Get(ctx context.Context, id string) (*Record, error)
	// Due returns up to limit unfinished events whose NextAttempt is not after now, oldest
	// first.
	Due(ctx context.Context, now time.Time, limit int) ([]*Record, error)
	// MarkDelivered appends subscriber to Delivered unless it is there already.
	MarkDelivered(ctx context.Context, id, subscriber string) error
	// Retry records a failed attempt and when to try again.
	Retry(ctx context.Context, id string, attempts int, next time.Time, lastErr string) error
	// Finish marks the event finished, failed or not.
	Finish(ctx context.Context, id string, failed bool, lastErr string) error
}

// pending reports the subscribers not yet delivered to, in order.
func (r *Record) pending() []string {
	done := map[string]bool{}
	for _, d := range r.Delivered {
		done[d] = true
	}
	var out []string
	for _, s := range r.Subscribers {
		if !done[s] {
			out = append(out, s)
		}
	}
	return out
}

// State is the event's progress as callers see it (a migration's status).
func (r *Record) State() string {
	switch {
	case r.Finished && r.Failed:
		return "failed"
	case r.Finished:
		return "completed"
	case r.Attempts > 0 || len(r.Delivered) > 0:
		return "in_progress"
	default:
		return "pending"
	}
}
