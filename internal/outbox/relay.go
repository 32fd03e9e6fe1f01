package outbox

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/ids"
	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/storeobserve"
	"github.com/collab/collab/internal/tracing"
	"github.com/collab/collab/internal/wakeup"
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

// Routes says who consumes what.
type Routes struct {
	// For names the services that consume an event type.
	For func(eventType string) []string
	// All are every service For can name: the relay runs one lane for each.
	All []string
}

// To routes every event type to the same subscribers (tests, and single-consumer producers).
func To(subscribers ...string) Routes {
	return Routes{For: func(string) []string { return subscribers }, All: subscribers}
}

// Outbox publishes one producer's events and relays them.
type Outbox struct {
	producer  string
	store     Store
	deliverer Deliverer
	routes    Routes
	clock     clock.Clock
	log       *slog.Logger
	retention time.Duration
	// tracer starts the delivery spans; nil: no tracing (WithTracer).
	tracer trace.Tracer
	// observer wraps the store when set (WithStoreObserver).
	observer *storeobserve.Observer

	wake map[string]chan struct{} // per lane
	// bus carries the lanes' wake-ups to this producer's outboxes in the other processes
	// (WithWakeups); nil: in-process only.
	bus wakeup.Bus
	// slots keeps one delivery of an event to a subscriber at a time in this process: a fixed set
	// of one-place channels, an (event, subscriber) taking the one its hash names, so waiting
	// for one can be bounded by a context and the set never grows. Two
	// replicas may still deliver the same event at once; handlers are idempotent, so that costs
	// work, not data.
	slots [256]chan struct{}
}

// Option configures an Outbox.
type Option func(*Outbox)

func WithClock(c clock.Clock) Option   { return func(o *Outbox) { o.clock = c } }
func WithLogger(l *slog.Logger) Option { return func(o *Outbox) { o.log = l } }

// WithTracer traces every delivery with a span on tp (a child of the publishing request's span
// when Publish delivers at once, linked to it always) and stores each event's trace context.
func WithTracer(tp trace.TracerProvider) Option {
	return func(o *Outbox) { o.tracer = tp.Tracer("github.com/collab/collab/internal/outbox") }
}

// WithStoreObserver observes every call of the outbox's store (store_observed.go: a span and
// collab_store_operation_seconds), as each service's own store is.
func WithStoreObserver(obs *storeobserve.Observer) Option {
	return func(o *Outbox) { o.observer = obs }
}

// WithWakeups announces on bus the lanes an event is pending for, so that this producer's lanes
// in every process run at once instead of at their next poll (a second); Run subscribes each
// lane. A lost wake-up costs that second, never an event: the lanes still poll.
func WithWakeups(bus wakeup.Bus) Option { return func(o *Outbox) { o.bus = bus } }

// laneSubject is the wake-up subject of a producer's lane to a subscriber (service names).
func laneSubject(producer, sub string) string { return "collab.outbox." + producer + "." + sub }

// WithRetention sets how long finished events are kept (default 7 days): a migration's status
// is readable that long, and a repeated event id is recognised that long.
func WithRetention(d time.Duration) Option { return func(o *Outbox) { o.retention = d } }

// New returns the outbox of producer, delivering each event to the subscribers routes names for
// its type. When the producer consumes the event itself it is the gate: it gets the event
// first, and the others only after it handled it. The subscribers are fixed when the event is
// stored, so a redelivery after a restart goes where the first attempt was going.
func New(producer string, store Store, deliverer Deliverer, routes Routes, opts ...Option) *Outbox {
	o := &Outbox{producer: producer, store: store, deliverer: deliverer, routes: routes, clock: clock.Real(),
		log: slog.Default(), retention: 7 * 24 * time.Hour, wake: map[string]chan struct{}{}}
	for _, opt := range opts {
		opt(o)
	}
	if o.observer != nil {
		o.store = observeStore(o.store, o.observer)
	}
	for _, s := range routes.All {
		o.wake[s] = make(chan struct{}, 1)
	}
	for i := range o.slots {
		o.slots[i] = make(chan struct{}, 1)
	}
	return o
}

// Delivery limits.
const (
	firstRetry     = time.Second
	maxRetry       = 5 * time.Minute
	deliverNow     = 10 * time.Second // how long Publish waits for the first deliveries
	deliverTimeout = 30 * time.Second // one delivery attempt
	batch          = 50
	pollInterval   = time.Second
	pruneInterval  = time.Hour
)

// Publish stores the event, then tries to deliver it at once (the gate, then every other
// subscriber side by side) so callers read their own writes; whatever is not delivered within
// a few seconds the lanes finish. ErrDuplicate, with the stored record, when an event with the
// id was published before.
func (o *Outbox) Publish(ctx context.Context, e *lifecyclev1.Event) (*Record, error) {
	r, err := o.add(ctx, e)
	if err != nil {
		return r, err
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deliverNow)
	defer cancel()
	if r.Gate != "" {
		o.deliver(dctx, r.ID, r.Gate)
		if got, err := o.store.Get(ctx, r.ID); err == nil {
			r = got
		}
	}
	var wg sync.WaitGroup
	for _, sub := range r.Pending {
		if sub == r.Gate {
			continue
		}
		wg.Go(func() { o.deliver(dctx, r.ID, sub) })
	}
	wg.Wait()
	if got, err := o.store.Get(ctx, r.ID); err == nil {
		r = got
	}
	o.notify(r.Pending)
	return r, nil
}

// PublishAsync stores the event and leaves its delivery to the lanes (woken at once), for jobs
// whose caller asks for their status later (migrations).
func (o *Outbox) PublishAsync(ctx context.Context, e *lifecyclev1.Event) (*Record, error) {
	r, err := o.add(ctx, e)
	if err != nil {
		return r, err
	}
	o.notify(r.Pending)
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
	// Only subscribers with a lane: a type the module did not declare reaches no one rather
	// than sitting undelivered.
	subs := slices.DeleteFunc(slices.Clone(o.routes.For(e.GetType())), func(s string) bool { return !slices.Contains(o.routes.All, s) })
	r := &Record{
		ID: e.GetId(), Event: raw, APIKey: e.GetApiKey(), OrganizationID: e.GetOrganizationId(), Type: e.GetType(),
		Subscribers: subs, Delivered: []string{}, Refused: []string{}, Lanes: map[string]Lane{}, CreatedAt: now,
	}
	if slices.Contains(subs, o.producer) {
		r.Gate = o.producer
		r.Pending = []string{o.producer}
	} else {
		r.Pending = subs
	}
	for _, s := range r.Pending {
		r.Lanes[s] = Lane{NextAttempt: now}
	}
	if len(r.Pending) == 0 {
		r.DoneAt = &now
	}
	if o.tracer != nil {
		carrier := propagation.MapCarrier{}
		tracing.Propagator.Inject(ctx, carrier)
		// Always well formed and 55 bytes: the propagator writes it from a valid span context
		// (one from a caller's metadata was parsed and checked on the way in), or not at all.
		r.TraceParent = TraceContext(carrier.Get("traceparent"))
	}
	if err := o.store.Add(ctx, r); err != nil {
		if errors.Is(err, ErrDuplicate) {
			if stored, gerr := o.store.Get(ctx, r.ID); gerr == nil {
				return stored, ErrDuplicate
			}
			return nil, ErrDuplicate
		}
		return nil, fmt.Errorf("outbox: publish %s: %w", e.GetType(), err)
	}
	return r, nil
}

// Ping reports whether the outbox's store answers.
func (o *Outbox) Ping(ctx context.Context) error { return o.store.Ping(ctx) }

// Get returns an event's record.
func (o *Outbox) Get(ctx context.Context, id string) (*Record, error) { return o.store.Get(ctx, id) }

func (o *Outbox) notify(subs []string) {
	for _, s := range subs {
		o.wakeLane(s)
		if o.bus != nil {
			o.bus.Publish(laneSubject(o.producer, s), nil)
		}
	}
}

// wakeLane makes the lane of sub in this process run now (at most one wake-up waits).
func (o *Outbox) wakeLane(sub string) {
	select {
	case o.wake[sub] <- struct{}{}:
	default:
	}
}

// Run runs every lane until ctx ends, and prunes finished events hourly.
func (o *Outbox) Run(ctx context.Context) {
	var wg sync.WaitGroup
	var unsubscribes []func()
	defer func() {
		for _, u := range unsubscribes {
			u()
		}
	}()
	for _, s := range o.routes.All {
		if o.bus != nil {
			unsubscribe, err := o.bus.Subscribe(laneSubject(o.producer, s), func([]byte) { o.wakeLane(s) })
			if err != nil {
				o.log.ErrorContext(ctx, "outbox: subscribing to a lane's wake-ups; it polls only", "subscriber", s, "error", err)
			} else {
				unsubscribes = append(unsubscribes, unsubscribe)
			}
		}
		wg.Go(func() { o.runLane(ctx, s) })
	}
	wg.Go(func() { o.prune(ctx) })
	wg.Wait()
}

// runLane delivers one subscriber's due events: at start (events left by a previous run), when
// woken, and every second.
func (o *Outbox) runLane(ctx context.Context, sub string) {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		o.runDue(ctx, sub)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-o.wake[sub]:
		}
	}
}

func (o *Outbox) prune(ctx context.Context) {
	t := time.NewTicker(pruneInterval)
	defer t.Stop()
	for {
		if n, err := o.store.Prune(ctx, o.clock.Now().Add(-o.retention), o.clock.Now()); err != nil {
			if ctx.Err() == nil {
				o.log.ErrorContext(ctx, "outbox: pruning finished events", "error", err)
			}
		} else if n > 0 {
			o.log.InfoContext(ctx, "outbox: pruned finished events", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// RunDue delivers every event that is due now, lane by lane (tests step the relay with it).
func (o *Outbox) RunDue(ctx context.Context) {
	for _, s := range o.routes.All {
		o.runDue(ctx, s)
	}
}

func (o *Outbox) runDue(ctx context.Context, sub string) {
	for ctx.Err() == nil {
		due, err := o.store.Due(ctx, sub, o.clock.Now(), batch)
		if err != nil {
			if ctx.Err() == nil {
				o.log.ErrorContext(ctx, "outbox: reading due events", "subscriber", sub, "error", err)
			}
			return
		}
		for _, r := range due {
			o.deliver(ctx, r.ID, sub)
		}
		if len(due) < batch {
			return
		}
	}
}

// deliver hands the event to one subscriber if it is still pending and due there, and records
// the outcome: delivered (releasing the others when it is the gate), retried with backoff, or
// refused for good. While a lane delivers the same event it waits, for at most as long as ctx
// allows, so Publish never waits longer than its own bound and still reads the outcome when
// the lane finishes in time.
func (o *Outbox) deliver(ctx context.Context, id, sub string) {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(sub))
	slot := o.slots[h.Sum32()%uint32(len(o.slots))]
	// Bounded also for the lanes: two pairs may share a slot, and a handler that published into
	// this same outbox while holding one must not block a lane for ever.
	actx, cancel := context.WithTimeout(ctx, deliverTimeout)
	select {
	case slot <- struct{}{}:
		cancel()
	case <-actx.Done():
		cancel()
		return
	}
	defer func() { <-slot }()
	r, err := o.store.Get(ctx, id)
	if err != nil {
		o.log.ErrorContext(ctx, "outbox: reading event", "event_id", id, "error", err)
		return
	}
	if !slices.Contains(r.Pending, sub) || r.Lanes[sub].NextAttempt.After(o.clock.Now()) {
		return
	}
	var e lifecyclev1.Event
	if err := proto.Unmarshal(r.Event, &e); err != nil {
		o.refuse(ctx, r, sub, fmt.Sprintf("undecodable event: %v", err))
		return
	}
	dctx, cancel := context.WithTimeout(ctx, deliverTimeout)
	dctx, span := o.startDelivery(dctx, r, sub)
	err = o.deliverer.Deliver(dctx, sub, &e)
	cancel()
	o.endDelivery(ctx, span, err)
	if err == nil {
		var release []string
		if sub == r.Gate {
			release = slices.DeleteFunc(r.waiting(), func(s string) bool { return s == sub })
		}
		if err := o.store.Delivered(ctx, id, sub, release, o.clock.Now()); err != nil {
			o.log.ErrorContext(ctx, "outbox: recording delivery", "event_id", id, "subscriber", sub, "error", err)
			return
		}
		o.notify(release)
		return
	}
	if lifecycle.Permanent(err) {
		o.log.WarnContext(ctx, "outbox: event refused", "event_id", id, "type", r.Type, "subscriber", sub, "error", err)
		o.refuse(ctx, r, sub, err.Error())
		return
	}
	if ctx.Err() != nil {
		return // shutting down or the caller gave up waiting: the lane picks it up
	}
	lane := r.Lanes[sub]
	lane.Attempts++
	lane.NextAttempt = o.clock.Now().Add(backoff(lane.Attempts))
	lane.LastError = err.Error()
	o.log.WarnContext(ctx, "outbox: delivery failed, will retry", "event_id", id, "type", r.Type, "subscriber", sub,
		"attempt", lane.Attempts, "retry_at", lane.NextAttempt, "error", err)
	if err := o.store.Retry(ctx, id, sub, lane); err != nil {
		o.log.ErrorContext(ctx, "outbox: recording retry", "event_id", id, "error", err)
	}
}

// startDelivery starts the span of one delivery attempt, linked to the trace that published the
// event; a nil span when tracing is off.
func (o *Outbox) startDelivery(ctx context.Context, r *Record, sub string) (context.Context, trace.Span) {
	if o.tracer == nil {
		return ctx, nil
	}
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			semconv.MessagingSystemKey.String("collab.outbox"),
			semconv.MessagingOperationName("deliver"),
			semconv.MessagingMessageID(r.ID),
			semconv.MessagingDestinationName(sub),
			ProducerKey.String(o.producer),
			SubscriberKey.String(sub),
			EventTypeKey.String(r.Type),
			AttemptKey.Int(r.Lanes[sub].Attempts+1),
		),
	}
	if r.TraceParent != "" {
		origin := trace.SpanContextFromContext(tracing.Propagator.Extract(context.Background(), propagation.MapCarrier{"traceparent": string(r.TraceParent)}))
		if origin.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: origin}))
		}
	}
	return o.tracer.Start(ctx, deliverySpanName(r.Type), opts...)
}

// deliverySpanName names a delivery's span by the event type when collab itself publishes that
// type; a product's types (/v2/events/publish takes any <feature>.<action>) are caller text,
// which would make span names unbounded, so they share one name and keep the type in an
// attribute.
func deliverySpanName(eventType string) string {
	if lifecycle.Reserved(eventType) {
		return "deliver " + eventType
	}
	return "deliver domain event"
}

// endDelivery records the attempt's outcome, as the relay goes on to record it in the store.
func (o *Outbox) endDelivery(ctx context.Context, span trace.Span, err error) {
	if span == nil {
		return
	}
	outcome := "delivered"
	switch {
	case err == nil:
	case lifecycle.Permanent(err):
		outcome = "refused"
	case ctx.Err() != nil:
		outcome = "interrupted"
	default:
		outcome = "retry"
	}
	span.SetAttributes(OutcomeKey.String(outcome))
	if err != nil {
		// The code only: a peer's message may carry internal text.
		span.SetStatus(otelcodes.Error, status.Code(err).String())
	}
	span.End()
}

// Attributes of the delivery spans.
const (
	ProducerKey   = attribute.Key("collab.outbox.producer")
	SubscriberKey = attribute.Key("collab.outbox.subscriber")
	EventTypeKey  = attribute.Key("collab.event.type")
	AttemptKey    = attribute.Key("collab.outbox.attempt")
	// OutcomeKey is delivered, retry, refused (for good) or interrupted (shutdown, or the
	// publisher stopped waiting: the lane tries again).
	OutcomeKey = attribute.Key("collab.outbox.outcome")
)

func (o *Outbox) refuse(ctx context.Context, r *Record, sub, reason string) {
	if err := o.store.Refuse(ctx, r.ID, sub, reason, o.clock.Now()); err != nil {
		o.log.ErrorContext(ctx, "outbox: recording refusal", "event_id", r.ID, "error", err)
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
	jitter := 0.8 + rand.Float64()*0.4 //nolint:gosec // G404: jitter spreading retries needs no unpredictability
	return time.Duration(float64(d) * jitter)
}
