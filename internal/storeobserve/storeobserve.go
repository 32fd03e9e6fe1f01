// Package storeobserve is what the generated store wrappers (services/<name>/store_observed.go,
// written by ./gen from each service's Store interface) call around every store method that
// takes a context: a span "<service>.store/<Method>" and an observation of the histogram
// collab_store_operation_seconds{service, operation, outcome}. Keeping it here, and the
// per-method code generated, means no store method carries metrics or tracing code, and a new
// method is observed as soon as scripts/generate runs.
package storeobserve

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// MetricName is the histogram every service's store operations are observed in.
const MetricName = "collab_store_operation_seconds"

// TracerName is the instrumentation scope of the store spans.
const TracerName = "github.com/collab/collab/internal/storeobserve"

// Outcome is how a store call ended: the outcome label, a bounded set.
type Outcome uint8

const (
	// OK: the call returned no error.
	OK Outcome = iota
	// NotFound: the store's ErrNotFound, an expected answer (a lookup of what is not there),
	// kept apart from failures so that error rates mean something.
	NotFound
	// Refused: another of the store's documented sentinel errors (ErrExists, a limit, a lost
	// lease...): the store worked and said no.
	Refused
	// Canceled: the caller's context was canceled (it went away); not the store's fault.
	Canceled
	// Failed: anything else, a deadline exceeded included: the store could not answer.
	Failed
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"ok", "not_found", "refused", "canceled", "error"}

func (o Outcome) String() string {
	if o >= numOutcomes {
		return "unknown"
	}
	return outcomeNames[o]
}

// Classifier tells a store's expected errors (NotFound, Refused) from failures; the generated
// code writes one per service from the sentinel errors its store.go declares. It is not asked
// about nil errors or canceled contexts.
type Classifier func(error) Outcome

// Observer observes one service's store.
type Observer struct {
	service, system string
	tracer          trace.Tracer // nil when tracing is off
	seconds         prometheus.ObserverVec
}

// Config is what an observer needs of its process: where the histogram is served and where
// spans go. It is not service.Env, so that stores below the services (the outbox's) can be
// observed too; service.Env.ObserveStore fills it from a service's environment.
type Config struct {
	// Metrics is where the histogram is registered (once per registerer, however many stores
	// share it); nil: observations go to a histogram nothing serves.
	Metrics prometheus.Registerer
	// Tracing is where spans go; nil: no spans.
	Tracing trace.TracerProvider
	// MongoDB says the store is on MongoDB (the spans' db.system "mongodb", else "memory").
	MongoDB bool
}

// New returns the observer of the store named name (a service's name, the series' service
// label and the spans' prefix).
func New(name string, c Config) (*Observer, error) {
	system := "memory"
	if c.MongoDB {
		system = "mongodb"
	}
	vec, err := histogram(c.Metrics)
	if err != nil {
		return nil, fmt.Errorf("%s: store metrics: %w", name, err)
	}
	o := &Observer{service: name, system: system, seconds: vec.MustCurryWith(prometheus.Labels{"service": name})}
	if c.Tracing != nil {
		// Without tracing no tracer at all, and calls skip spans at once (a no-op tracer's Start
		// would still allocate a context per call, docs/benchmarks.md).
		o.tracer = c.Tracing.Tracer(TracerName)
	}
	return o, nil
}

func newHistogram() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: MetricName,
		Help: "Time of store operations (a method of a service's Store interface), by service, operation (the method) and outcome (ok, not_found, refused, canceled, error).",
		// From a memory store's microseconds to a slow MongoDB's seconds.
		Buckets: []float64{0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
	}, []string{"service", "operation", "outcome"})
}

// histogram registers the histogram on reg, or returns the one registered there before: every
// service of a process gets the same registerer, and each builds its own observer.
func histogram(reg prometheus.Registerer) (*prometheus.HistogramVec, error) {
	h := newHistogram()
	if reg == nil {
		return h, nil // nothing serves it; observations cost the same
	}
	err := reg.Register(h)
	if err == nil {
		return h, nil
	}
	var dup prometheus.AlreadyRegisteredError
	if errors.As(err, &dup) {
		if existing, ok := dup.ExistingCollector.(*prometheus.HistogramVec); ok {
			return existing, nil
		}
	}
	return nil, fmt.Errorf("register %s: %w", MetricName, err)
}

// Op is one store method, its span name and attributes resolved once, and each outcome's
// series resolved at its first use (not up front: most methods never see most outcomes, and
// every series costs each scrape), so a call looks nothing up after that.
type Op struct {
	tracer   trace.Tracer
	span     string
	start    []trace.SpanStartOption
	classify Classifier
	method   string
	vec      prometheus.ObserverVec
	seconds  [numOutcomes]atomic.Pointer[observer]
}

type observer struct{ prometheus.Observer }

// Op returns the observation of the store method named method; classify tells its expected
// errors (nil: every error is Failed).
func (o *Observer) Op(method string, classify Classifier) *Op {
	return &Op{
		tracer: o.tracer,
		span:   o.service + ".store/" + method,
		start: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
			attribute.String("collab.service", o.service),
			attribute.String("db.operation.name", method),
			attribute.String("db.system", o.system),
		)},
		classify: classify,
		method:   method,
		vec:      o.seconds,
	}
}

func (op *Op) observer(out Outcome) prometheus.Observer {
	if p := op.seconds[out].Load(); p != nil {
		return p.Observer
	}
	// Two first calls at once resolve the same series twice; either result is the series.
	obs := op.vec.WithLabelValues(op.method, out.String())
	op.seconds[out].Store(&observer{obs})
	return obs
}

// Call is one call in progress.
type Call struct {
	op    *Op
	span  trace.Span
	start time.Time
}

// noSpan is the span of calls when tracing is off.
var noSpan trace.Span = noop.Span{}

// Start starts a call: the span, a child of ctx's, is on the returned context, which the
// wrapper passes to the store so that what the store does nests under it. A call outside any
// recorded span (a background worker's poll, a readiness ping) starts none: it would be a trace
// of its own every few seconds, burying real work, as health checks would.
func (op *Op) Start(ctx context.Context) (context.Context, Call) {
	if op.tracer == nil || !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, Call{op: op, span: noSpan, start: time.Now()}
	}
	ctx, span := op.tracer.Start(ctx, op.span, op.start...)
	return ctx, Call{op: op, span: span, start: time.Now()}
}

// End ends the call with the store's error.
func (c Call) End(err error) {
	d := time.Since(c.start)
	out := c.op.outcome(err)
	c.op.observer(out).Observe(d.Seconds())
	if out != OK && c.span.IsRecording() {
		c.span.SetAttributes(attribute.String("collab.store.outcome", out.String()))
		if out == Failed {
			// The error's type, not its text: a driver's message may quote stored values.
			c.span.SetAttributes(attribute.String("error.type", fmt.Sprintf("%T", err)))
			c.span.SetStatus(codes.Error, "store error")
		}
	}
	c.span.End()
}

func (op *Op) outcome(err error) Outcome {
	switch {
	case err == nil:
		return OK
	case errors.Is(err, context.Canceled):
		return Canceled
	case op.classify != nil:
		// A classifier that calls an error OK would hide it: it counts as a failure.
		if o := op.classify(err); o != OK && o < numOutcomes {
			return o
		}
	}
	return Failed
}
