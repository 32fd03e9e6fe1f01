package shapes

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/collab/collab/internal/storeobserve"
)

// store records what reaches it and answers what it is told to.
type store struct {
	calls []string
	spans []trace.SpanContext // the span on each observed call's context
	err   error
}

func (s *store) seen(ctx context.Context, call string) {
	s.calls = append(s.calls, call)
	if ctx != nil {
		s.spans = append(s.spans, trace.SpanContextFromContext(ctx))
	}
}

func (s *store) Close() error { s.seen(nil, "Close"); return s.err }
func (s *store) Get(ctx context.Context, id string) (*Item, error) {
	s.seen(ctx, "Get "+id)
	return &Item{ID: id}, s.err
}
func (s *store) Put(ctx context.Context, items ...*Item) error {
	s.seen(ctx, fmt.Sprintf("Put %d", len(items)))
	return s.err
}
func (s *store) Stamp(ctx context.Context, at time.Time) time.Duration {
	s.seen(ctx, "Stamp")
	return time.Duration(at.Unix())
}
func (s *store) Touch(ctx context.Context) { s.seen(ctx, "Touch") }
func (s *store) Split(ctx context.Context, a, b, c string, d int) (string, string, error) {
	s.seen(ctx, fmt.Sprintf("Split %s %s %s %d", a, b, c, d))
	return b, a, s.err
}
func (s *store) Keys(ctx context.Context, n int, seq iter.Seq2[string, int]) (iter.Seq[string], int, error) {
	s.seen(ctx, "Keys")
	var keys []string
	for k, v := range seq {
		keys = append(keys, k)
		n += v
	}
	return slices.Values(keys), n, s.err
}
func (s *store) Name() string { s.seen(nil, "Name"); return "fake" }
func (s *store) Count(n int, ctx context.Context) (int, error) {
	s.seen(nil, "Count")
	return n + 1, s.err
}

type counting struct{ *store }

func (c counting) Total(ctx context.Context) (int, error) { c.seen(ctx, "Total"); return 7, c.err }

type flushing struct{ *store }

func (f flushing) Flush(ctx context.Context) error { f.seen(ctx, "Flush"); return f.err }

type both struct{ *store }

func (b both) Total(ctx context.Context) (int, error) { b.seen(ctx, "Total"); return 8, b.err }
func (b both) Flush(ctx context.Context) error        { b.seen(ctx, "Flush"); return b.err }

type env struct {
	tp  *sdktrace.TracerProvider
	reg *prometheus.Registry
	rec *tracetest.SpanRecorder
	o   *storeobserve.Observer
}

func newEnv(t *testing.T) *env {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	reg := prometheus.NewRegistry()
	o, err := storeobserve.New("shapes", storeobserve.Config{Metrics: reg, Tracing: tp})
	if err != nil {
		t.Fatal(err)
	}
	return &env{tp: tp, reg: reg, rec: rec, o: o}
}

// observations returns the sample count of each operation/outcome series that has any.
func (e *env) observations(t *testing.T) map[string]uint64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if n := m.GetHistogram().GetSampleCount(); n > 0 {
				out[l["operation"]+" "+l["outcome"]] = n
			}
		}
	}
	return out
}

// Every method reaches the store with its arguments and returns the store's results; those
// taking a context first are observed, with the span on the context the store gets.
func TestWrapperForwards(t *testing.T) {
	e := newEnv(t)
	inner := &store{}
	s := observeStore(inner, e.o)
	ctx, request := e.tp.Tracer("test").Start(context.Background(), "request") // store spans are children
	defer request.End()

	if it, err := s.Get(ctx, "i1"); err != nil || it.ID != "i1" {
		t.Fatalf("Get: %v %v", it, err)
	}
	if err := s.Put(ctx, &Item{}, &Item{}, &Item{}); err != nil {
		t.Fatal(err)
	}
	if d := s.Stamp(ctx, time.Unix(42, 0)); d != 42 {
		t.Fatalf("Stamp: %v", d)
	}
	s.Touch(ctx)
	if a, b, err := s.Split(ctx, "s", "call", "err", 3); a != "call" || b != "s" || err != nil {
		t.Fatalf("Split: %q %q %v", a, b, err)
	}
	keys, n, err := s.Keys(ctx, 1, func(yield func(string, int) bool) { _ = yield("k", 2) && yield("l", 3) })
	if err != nil || n != 6 || !slices.Equal(slices.Collect(keys), []string{"k", "l"}) {
		t.Fatalf("Keys: %d %v", n, err)
	}
	if s.Name() != "fake" {
		t.Fatal("Name")
	}
	if n, err := s.Count(4, ctx); n != 5 || err != nil {
		t.Fatalf("Count: %d %v", n, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	want := []string{"Get i1", "Put 3", "Stamp", "Touch", "Split s call err 3", "Keys", "Name", "Count", "Close"}
	if !slices.Equal(inner.calls, want) {
		t.Fatalf("calls %q, want %q", inner.calls, want)
	}
	spans := e.rec.Ended()
	var names []string
	for i, sp := range spans {
		names = append(names, sp.Name())
		if inner.spans[i].SpanID() != sp.SpanContext().SpanID() {
			t.Errorf("%s: the store got another span on its context", sp.Name())
		}
	}
	if w := []string{"shapes.store/Get", "shapes.store/Put", "shapes.store/Stamp", "shapes.store/Touch", "shapes.store/Split", "shapes.store/Keys"}; !slices.Equal(names, w) {
		t.Errorf("spans %q, want %q", names, w)
	}
	got := e.observations(t)
	for _, op := range []string{"Get", "Put", "Stamp", "Touch", "Split", "Keys"} {
		if got[op+" ok"] != 1 {
			t.Errorf("%s: %v", op, got)
		}
	}
	if len(got) != 6 {
		t.Errorf("observations %v: the methods without a leading context are not observed", got)
	}
}

// The sentinel errors beside Store are expected answers; anything else is a failure.
func TestWrapperOutcomes(t *testing.T) {
	e := newEnv(t)
	inner := &store{}
	s := observeStore(inner, e.o)
	ctx := context.Background()
	for _, err := range []error{fmt.Errorf("get i1: %w", ErrNotFound), ErrTaken, errors.New("disk full")} {
		inner.err = err
		if _, got := s.Get(ctx, "i1"); got != err {
			t.Fatalf("Get returned %v, want the store's %v", got, err)
		}
	}
	got := e.observations(t)
	if got["Get not_found"] != 1 || got["Get refused"] != 1 || got["Get error"] != 1 || len(got) != 3 {
		t.Errorf("observations %v", got)
	}
}

// The wrapper implements an optional interface exactly when the store it wraps does, and
// observes its methods too.
func TestWrapperOptionalInterfaces(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, c := range []struct {
		name           string
		s              Store
		counter, flush bool
		total          int
	}{
		{"plain", &store{}, false, false, 0},
		{"counter", counting{&store{}}, true, false, 7},
		{"flusher", flushing{&store{}}, false, true, 0},
		{"both", both{&store{}}, true, true, 8},
	} {
		w := observeStore(c.s, e.o)
		cn, isCounter := w.(Counter)
		fl, isFlusher := w.(Flusher)
		if isCounter != c.counter || isFlusher != c.flush {
			t.Errorf("%s: Counter %v Flusher %v", c.name, isCounter, isFlusher)
			continue
		}
		if isCounter {
			if n, err := cn.Total(ctx); n != c.total || err != nil {
				t.Errorf("%s: Total %d %v", c.name, n, err)
			}
		}
		if isFlusher {
			if err := fl.Flush(ctx); err != nil || fl.Name() != "fake" {
				t.Errorf("%s: Flush %v", c.name, err)
			}
		}
	}
	got := e.observations(t)
	if got["Total ok"] != 2 || got["Flush ok"] != 2 {
		t.Errorf("observations %v", got)
	}
}
