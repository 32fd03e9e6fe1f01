package storeobserve

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

var (
	errNotFound = errors.New("not found")
	errExists   = errors.New("exists")
)

func classify(err error) Outcome {
	switch {
	case errors.Is(err, errNotFound):
		return NotFound
	case errors.Is(err, errExists):
		return Refused
	}
	return Failed
}

// tracing returns a provider recording every span.
func tracing(t *testing.T) (trace.TracerProvider, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, rec
}

func count(t *testing.T, reg *prometheus.Registry, service, op, outcome string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != MetricName {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["service"] == service && l["operation"] == op && l["outcome"] == outcome {
				return m.GetHistogram().GetSampleCount()
			}
		}
	}
	return 0
}

// Each outcome lands in its own series of the operation, and the span says the same.
func TestOutcomes(t *testing.T) {
	reg := prometheus.NewRegistry()
	tp, rec := tracing(t)
	o, err := New("things", Config{Metrics: reg, Tracing: tp})
	if err != nil {
		t.Fatal(err)
	}
	op := o.Op("Get", classify)
	// Store calls are traced inside a request's span.
	bg, request := tp.Tracer("test").Start(context.Background(), "request")
	defer request.End()
	canceled, cancel := context.WithCancel(bg)
	cancel()
	cases := []struct {
		ctx     context.Context
		err     error
		outcome string
	}{
		{bg, nil, "ok"},
		{bg, fmt.Errorf("get: %w", errNotFound), "not_found"},
		{bg, errExists, "refused"},
		{canceled, fmt.Errorf("find: %w", context.Canceled), "canceled"},
		{bg, context.DeadlineExceeded, "error"},
		{bg, errors.New("connection reset"), "error"},
	}
	for _, c := range cases {
		_, call := op.Start(c.ctx)
		call.End(c.err)
	}
	for outcome, want := range map[string]uint64{"ok": 1, "not_found": 1, "refused": 1, "canceled": 1, "error": 2} {
		if got := count(t, reg, "things", "Get", outcome); got != want {
			t.Errorf("outcome %s: %d observations, want %d", outcome, got, want)
		}
	}

	spans := rec.Ended()
	if len(spans) != len(cases) {
		t.Fatalf("%d spans, want %d", len(spans), len(cases))
	}
	for i, s := range spans {
		if s.Name() != "things.store/Get" || s.SpanKind() != trace.SpanKindInternal {
			t.Errorf("span %d: %q kind %v", i, s.Name(), s.SpanKind())
		}
		attrs := map[attribute.Key]string{}
		for _, a := range s.Attributes() {
			attrs[a.Key] = a.Value.String()
		}
		if attrs["collab.service"] != "things" || attrs["db.operation.name"] != "Get" || attrs["db.system"] != "memory" {
			t.Errorf("span %d attributes %v", i, attrs)
		}
		want := cases[i].outcome
		if want == "ok" {
			want = ""
		}
		if attrs["collab.store.outcome"] != want {
			t.Errorf("span %d: outcome %q, want %q", i, attrs["collab.store.outcome"], want)
		}
		if failed := cases[i].outcome == "error"; failed != (s.Status().Code == codes.Error) {
			t.Errorf("span %d (%s): status %v", i, cases[i].outcome, s.Status())
		}
		// The error's text never reaches the span (a driver's message may quote stored values).
		if strings.Contains(fmt.Sprint(s.Attributes(), s.Events(), s.Status()), "connection reset") {
			t.Errorf("span %d carries the error's text", i)
		}
	}
	if got := spans[5].Status(); got.Description != "store error" {
		t.Errorf("status %v", got)
	}
}

// A span started by the wrapper is the parent of what the store does with the context it is
// given, and the child of the caller's.
func TestSpanNests(t *testing.T) {
	tp, rec := tracing(t)
	o, err := New("things", Config{Metrics: prometheus.NewRegistry(), Tracing: tp})
	if err != nil {
		t.Fatal(err)
	}
	ctx, parent := tp.Tracer("test").Start(context.Background(), "handler")
	inner, call := o.Op("Put", nil).Start(ctx)
	_, child := tp.Tracer("test").Start(inner, "mongo")
	child.End()
	call.End(errExists) // no classifier: a failure
	parent.End()
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		byName[s.Name()] = s
	}
	store, mongo := byName["things.store/Put"], byName["mongo"]
	if store == nil || mongo == nil {
		t.Fatalf("spans %v", byName)
	}
	if store.Parent().SpanID() != parent.SpanContext().SpanID() || mongo.Parent().SpanID() != store.SpanContext().SpanID() {
		t.Error("the store's span is not between the caller's and the store's own")
	}
	if store.Status().Code != codes.Error {
		t.Errorf("status %v without a classifier", store.Status())
	}
}

// A store call outside a recorded span (a worker's poll, a readiness ping) starts no trace of
// its own, and is measured all the same; inside an unsampled one it records nothing either.
func TestNoRootSpans(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	o, err := New("things", Config{Metrics: reg, Tracing: tp})
	if err != nil {
		t.Fatal(err)
	}
	op := o.Op("Poll", nil)
	ctx, call := op.Start(context.Background())
	if trace.SpanFromContext(ctx).SpanContext().IsValid() {
		t.Error("a span on the store's context")
	}
	call.End(nil)
	unsampled := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	ctx, parent := unsampled.Tracer("test").Start(context.Background(), "unsampled")
	_, call = op.Start(ctx)
	call.End(nil)
	parent.End()
	if n := len(rec.Ended()) + len(rec.Started()); n != 0 {
		t.Errorf("%d spans", n)
	}
	if got := count(t, reg, "things", "Poll", "ok"); got != 2 {
		t.Errorf("%d observations, want 2", got)
	}
}

// Every service of a process builds its observer on the same registerer: the histogram is
// registered once and shared, and each service's series carry its name.
func TestSharedRegisterer(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := New("a", Config{Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New("b", Config{Metrics: reg, MongoDB: true})
	if err != nil {
		t.Fatalf("second service: %v", err)
	}
	for _, o := range []*Observer{a, b, a} {
		_, call := o.Op("Ping", nil).Start(context.Background())
		call.End(nil)
	}
	if got := count(t, reg, "a", "Ping", "ok"); got != 2 {
		t.Errorf("a: %d", got)
	}
	if got := count(t, reg, "b", "Ping", "ok"); got != 1 {
		t.Errorf("b: %d", got)
	}
	if b.system != "mongodb" || a.system != "memory" {
		t.Errorf("db.system %q, %q", a.system, b.system)
	}
	if n, err := testutil.GatherAndCount(reg, MetricName); err != nil || n != 2 {
		// Only the outcomes seen have series.
		t.Errorf("%d series (%v), want 2", n, err)
	}
}

// Another collector under the name is a programming error the build reports, not a panic.
func TestConflictingRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: MetricName, Help: "not ours"}))
	if _, err := New("a", Config{Metrics: reg}); err == nil || !strings.Contains(err.Error(), MetricName) {
		t.Fatalf("err %v", err)
	}
}

// Without a registerer (tests building a service.Env by hand) observations go to a histogram
// nothing serves.
func TestNoRegisterer(t *testing.T) {
	o, err := New("a", Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, call := o.Op("Ping", nil).Start(context.Background())
	call.End(errors.New("down"))
	if n := testutil.CollectAndCount(o.seconds, MetricName); n != 1 {
		t.Errorf("%d series, want 1", n)
	}
}

// A classifier cannot hide an error by calling it OK.
func TestClassifierCannotSayOK(t *testing.T) {
	reg := prometheus.NewRegistry()
	o, err := New("a", Config{Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	_, call := o.Op("Get", func(error) Outcome { return OK }).Start(context.Background())
	call.End(errors.New("boom"))
	if got := count(t, reg, "a", "Get", "error"); got != 1 {
		t.Errorf("error: %d", got)
	}
}

// Concurrent first calls of an operation resolve its series once between them, and every call
// is counted.
func TestConcurrentCalls(t *testing.T) {
	reg := prometheus.NewRegistry()
	o, err := New("a", Config{Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	op := o.Op("Get", classify)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			_, call := op.Start(context.Background())
			if i%2 == 0 {
				call.End(nil)
			} else {
				call.End(errNotFound)
			}
		})
	}
	wg.Wait()
	if ok, nf := count(t, reg, "a", "Get", "ok"), count(t, reg, "a", "Get", "not_found"); ok != 4 || nf != 4 {
		t.Errorf("ok %d, not_found %d", ok, nf)
	}
}
