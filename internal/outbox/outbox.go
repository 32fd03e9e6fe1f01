// Package outbox is the durable event path between services (docs/architecture.md, "Events"). A producing
// service writes an event to its outbox, in its own store; the relay delivers it at least once
// to every subscribing service through LifecycleService.HandleEvent, retrying with backoff;
// handlers are idempotent. Each subscriber has its own lane: one that fails or is slow delays
// only its own deliveries. A change that other services must follow (a deletion, a migration)
// is carried out by the producer's own handler of its event, which runs before every other
// subscriber (the gate), so the one write at request time is the event, and a change the
// producer refuses (a migration onto an existing document) reaches nobody.
package outbox

import (
	"context"
	"errors"
	"slices"
	"time"
)

var (
	// ErrNotFound is returned for an unknown event id.
	ErrNotFound = errors.New("event not found")
	// ErrDuplicate is returned by Add for an id that is stored already.
	ErrDuplicate = errors.New("event id already stored")
)

// TraceContext is a stored W3C traceparent. It only ever links spans, so a damaged one must not
// cost the event its delivery: the relay ignores a value it cannot parse, and the MongoDB store
// reads a value of another type as none (UnmarshalBSONValue) rather than failing the record.
type TraceContext string

// Record is a stored event and its delivery state.
type Record struct {
	ID string `bson:"_id"`
	// Event is the marshaled collab.lifecycle.v1.Event.
	Event []byte `bson:"event"`
	// Tenant and organization, so producers can look events up within a caller's scope.
	APIKey         string `bson:"apiKey"`
	OrganizationID string `bson:"organizationId"`
	Type           string `bson:"type"`
	// Subscribers are every service the event is for, fixed when it is stored.
	Subscribers []string `bson:"subscribers"`
	// Gate is the subscriber every other one waits for (the producer's own handler), or "".
	// While it is pending it is the only one pending; if it refuses the event, nobody else
	// gets it.
	Gate string `bson:"gate"`
	// Pending are the subscribers due for a delivery, now or after a retry; Delivered those that
	// handled it; Refused those that failed it for good.
	Pending   []string `bson:"pending"`
	Delivered []string `bson:"delivered"`
	Refused   []string `bson:"refused"`
	// Lanes hold each subscriber's attempts, keyed by subscriber.
	Lanes map[string]Lane `bson:"lanes"`
	// TraceParent is the W3C traceparent of the span that published the event, when tracing
	// was on: each delivery's span links to it, so a trace shows what its event caused later.
	// Empty on events stored without tracing or before the field existed.
	TraceParent TraceContext `bson:"traceparent,omitempty"`
	// DoneAt is set once nothing is pending; old finished events are pruned by it.
	DoneAt    *time.Time `bson:"doneAt,omitempty"`
	CreatedAt time.Time  `bson:"createdAt"`
}

// Lane is one subscriber's delivery state.
type Lane struct {
	Attempts    int       `bson:"attempts"`
	NextAttempt time.Time `bson:"next"`
	LastError   string    `bson:"lastError,omitempty"`
}

// Store keeps one producer's events. Every method is one single-document write or a read, so
// lanes of different subscribers may update one event concurrently (stores whose server does
// not apply single-document updates atomically serialise them per event in the process).
type Store interface {
	// Add stores a new event, or returns ErrDuplicate when its id is taken.
	Add(ctx context.Context, r *Record) error
	// Get returns the event, or ErrNotFound. A finished event's payload (Event) may be gone:
	// the memory store drops it.
	Get(ctx context.Context, id string) (*Record, error)
	// Due returns up to limit events pending for subscriber whose lane's next attempt is not
	// after now, oldest first.
	Due(ctx context.Context, subscriber string, now time.Time, limit int) ([]*Record, error)
	// Delivered moves subscriber from Pending to Delivered and makes release pending, due at now
	// (the subscribers that waited for the gate). ErrNotFound for an unknown event.
	Delivered(ctx context.Context, id, subscriber string, release []string, now time.Time) error
	// Retry records a failed attempt of subscriber and when to try again.
	Retry(ctx context.Context, id, subscriber string, lane Lane) error
	// Refuse moves subscriber from Pending to Refused, with the reason.
	Refuse(ctx context.Context, id, subscriber, reason string, now time.Time) error
	// Prune deletes events that finished before the time, and reports how many. A finished
	// event without DoneAt (a crash between its last update and the stamp) is stamped now, so
	// it goes a retention later.
	Prune(ctx context.Context, before, now time.Time) (int, error)
	// Ping reports whether the store answers.
	Ping(ctx context.Context) error
}

// Finished reports whether no subscriber is waiting for the event.
func (r *Record) Finished() bool { return len(r.Pending) == 0 }

// Failed reports whether a subscriber refused the event.
func (r *Record) Failed() bool { return len(r.Refused) > 0 }

// Attempts is the number of failed attempts over all lanes.
func (r *Record) Attempts() int {
	n := 0
	for _, l := range r.Lanes {
		n += l.Attempts
	}
	return n
}

// LastError is the failure still recorded on a lane (a delivery clears its lane's), the first
// subscriber's in delivery order, for logs and status.
func (r *Record) LastError() string {
	for _, s := range r.Subscribers {
		if l := r.Lanes[s]; l.LastError != "" {
			return s + ": " + l.LastError
		}
	}
	return ""
}

// waiting are the subscribers that have not got the event yet, pending or held by the gate.
func (r *Record) waiting() []string {
	var out []string
	for _, s := range r.Subscribers {
		if !slices.Contains(r.Delivered, s) && !slices.Contains(r.Refused, s) {
			out = append(out, s)
		}
	}
	return out
}

// State is the event's progress as callers see it (a migration's status): failed once the gate
// refused it, or once every lane is done and one refused.
func (r *Record) State() string {
	switch {
	case r.RefusedByGate() || r.Finished() && r.Failed():
		return "failed"
	case r.Finished():
		return "completed"
	case r.Attempts() > 0 || len(r.Delivered) > 0:
		return "in_progress"
	default:
		return "pending"
	}
}

// RefusedByGate reports whether the producer's own handler refused the event, so nobody got it.
func (r *Record) RefusedByGate() bool { return r.Gate != "" && slices.Contains(r.Refused, r.Gate) }
