package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/ids"
	"github.com/collab/collab/internal/lifecycle"
)

// Deliverer hands an event to one subscribing service.
type Deliverer interface {
	Deliver(ctx context.Context, subscriber string, e *lifecyclev1.Event) error
}

// GRPCDeliverer delivers through each subscriber's LifecycleService connection; the
// connections carry the internal token.
type GRPCDeliverer struct {
	Clients map[string]lifecyclev1.LifecycleServiceClient
}

func (g GRPCDeliverer) Deliver(ctx context.Context, subscriber string, e *lifecyclev1.Event) error {
	c, ok := g.Clients[subscriber]
	if !ok {
		return fmt.Errorf("no connection to subscriber %s", subscriber)
	}
	_, err := c.HandleEvent(ctx, &lifecyclev1.HandleEventRequest{Service: subscriber, Event: e})
	return err
}

// Router names the services that consume an event type, in delivery order.
type Router func(eventType string) []string

// To routes every event type to the same subscribers (tests, and single-consumer producers).
func To(subscribers ...string) Router {
	return func(string) []string { return subscribers }
}

// Outbox publishes one producer's events and relays them.
type Outbox struct {
	store     Store
	deliverer Deliverer
	route     Router
	clock     clock.Clock
	log       *slog.Logger

	wake chan struct{}
	// locks keeps one delivery of an event at a time in this process. Two replicas may still
	// deliver the same event at once; handlers are idempotent, so that costs work, not data.
	locks sync.Map // event id -> *sync.Mutex
}

// Option configures an Outbox.
type Option func(*Outbox)

func WithClock(c clock.Clock) Option   { return func(o *Outbox) { o.clock = c } }
func WithLogger(l *slog.Logger) Option { return func(o *Outbox) { o.log = l } }

// New returns an Outbox delivering each event to the subscribers route names for its type, in
// that order. The subscribers are fixed when the event is stored, so a redelivery after a
// restart goes where the first attempt was going.
func New(store Store, deliverer Deliverer, route Router, opts ...Option) *Outbox {
	o := &Outbox{store: store, deliverer: deliverer, route: route, clock: clock.Real(), log: slog.Default(), wake: make(chan struct{}, 1)}
	for _, opt := range opts {
		opt(o)
	}
	return o
}

// Delivery limits.
const (
	firstRetry   = time.Second
	maxRetry     = 5 * time.Minute
	deliverNow   = 10 * time.Second // how long Publish waits for the first delivery
	batch        = 50
	pollInterval = time.Second
)

// Publish stores the event, then tries to deliver it at once so callers read their own writes;
// whatever is not delivered within a few seconds the background loop finishes.
func (o *Outbox) Publish(ctx context.Context, e *lifecyclev1.Event) (*Record, error) {
	r, err := o.add(ctx, e)
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deliverNow)
	defer cancel()
	o.deliver(dctx, r.ID)
	if got, err := o.store.Get(ctx, r.ID); err == nil {
		r = got
	}
	o.notify()
	return r, nil
}

// PublishAsync stores the event and leaves its delivery to the background loop (woken at
// once), for jobs whose caller asks for their status later (migrations).
func (o *Outbox) PublishAsync(ctx context.Context, e *lifecyclev1.Event) (*Record, error) {
	r, err := o.add(ctx, e)
	if err != nil {
		return nil, err
	}
	o.notify()
	return r, nil
}

func (o *Outbox) add(ctx context.Context, e *lifecyclev1.Event) (*Record, error) {
	if e.GetId() == "" {
		e.Id = ids.Random(24)
	}
	now := o.clock.Now().UTC().Truncate(time.Millisecond)
	if e.GetCreatedAt() == 0 {
		e.CreatedAt = float64(now.UnixMilli())
	}
	raw, err := proto.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("outbox: marshal event: %w", err)
	}
	r := &Record{
		ID: e.GetId(), Event: raw, APIKey: e.GetApiKey(), OrganizationID: e.GetOrganizationId(), Type: e.GetType(),
		Subscribers: append([]string{}, o.route(e.GetType())...), Delivered: []string{}, NextAttempt: now, CreatedAt: now,
	}
	if err := o.store.Add(ctx, r); err != nil {
		return nil, fmt.Errorf("outbox: publish %s: %w", e.GetType(), err)
	}
	return r, nil
}

// Get returns an event's record.
func (o *Outbox) Get(ctx context.Context, id string) (*Record, error) { return o.store.Get(ctx, id) }

func (o *Outbox) notify() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// Run delivers due events until ctx ends: at start (events left by a previous run), when woken,
// and every second.
func (o *Outbox) Run(ctx context.Context) {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		o.RunDue(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-o.wake:
		}
	}
}

// RunDue delivers every event that is due now.
func (o *Outbox) RunDue(ctx context.Context) {
	for ctx.Err() == nil {
		due, err := o.store.Due(ctx, o.clock.Now(), batch)
		if err != nil {
			if ctx.Err() == nil {
				o.log.ErrorContext(ctx, "outbox: reading due events", "error", err)
			}
			return
		}
		for _, r := range due {
			o.deliver(ctx, r.ID)
		}
		if len(due) < batch {
			return
		}
	}
}

// deliver hands the event to each subscriber still waiting for it, in order, stopping at the
// first failure.
func (o *Outbox) deliver(ctx context.Context, id string) {
	lock, _ := o.locks.LoadOrStore(id, &sync.Mutex{})
	mu := lock.(*sync.Mutex)
	mu.Lock()
	defer func() {
		mu.Unlock()
		o.locks.Delete(id)
	}()
	r, err := o.store.Get(ctx, id)
	if err != nil {
		o.log.ErrorContext(ctx, "outbox: reading event", "event_id", id, "error", err)
		return
	}
	if r.Finished || r.NextAttempt.After(o.clock.Now()) {
		return
	}
	var e lifecyclev1.Event
	if err := proto.Unmarshal(r.Event, &e); err != nil {
		o.finish(ctx, r, true, fmt.Sprintf("undecodable event: %v", err))
		return
	}
	for _, sub := range r.pending() {
		err := o.deliverer.Deliver(ctx, sub, &e)
		if err == nil {
			if err := o.store.MarkDelivered(ctx, id, sub); err != nil {
				o.log.ErrorContext(ctx, "outbox: recording delivery", "event_id", id, "error", err)
				return
			}
			continue
		}
		msg := fmt.Sprintf("%s: %v", sub, err)
		if lifecycle.Permanent(err) {
			o.log.WarnContext(ctx, "outbox: event failed", "event_id", id, "type", r.Type, "error", msg)
			o.finish(ctx, r, true, msg)
			return
		}
		if errors.Is(err, context.Canceled) || ctx.Err() != nil {
			return // shutting down or the caller gave up waiting: the loop picks it up
		}
		attempts := r.Attempts + 1
		next := o.clock.Now().Add(backoff(attempts))
		o.log.WarnContext(ctx, "outbox: delivery failed, will retry", "event_id", id, "type", r.Type, "attempt", attempts, "retry_at", next, "error", msg)
		if err := o.store.Retry(ctx, id, attempts, next, msg); err != nil {
			o.log.ErrorContext(ctx, "outbox: recording retry", "event_id", id, "error", err)
		}
		return
	}
	o.finish(ctx, r, false, "")
}

func (o *Outbox) finish(ctx context.Context, r *Record, failed bool, msg string) {
	if err := o.store.Finish(ctx, r.ID, failed, msg); err != nil {
		o.log.ErrorContext(ctx, "outbox: finishing event", "event_id", r.ID, "error", err)
	}
}

// backoff doubles from one second up to five minutes, with ±20% jitter so retries of many
// events spread out.
func backoff(attempt int) time.Duration {
	d := firstRetry
	for i := 1; i < attempt && d < maxRetry; i++ {
		d *= 2
	}
	d = min(d, maxRetry)
	jitter := 0.8 + rand.Float64()*0.4
	return time.Duration(float64(d) * jitter)
}
