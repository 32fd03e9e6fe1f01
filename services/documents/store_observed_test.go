package documents

import (
	"context"
	"flag"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"

	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/mongodb"
	"github.com/collab/collab/internal/outbox"
	"github.com/collab/collab/internal/service"
	"github.com/collab/collab/internal/storeobserve"
	"github.com/collab/collab/internal/testkit/mongotest"
)

// registrar keeps the servers a module registers, so a test calls them as gRPC would.
type registrar map[string]any

func (r registrar) RegisterService(d *grpc.ServiceDesc, impl any) { r[d.ServiceName] = impl }

// storeSamples returns the observations of the operation and outcome in the documents series.
func storeSamples(t *testing.T, reg *prometheus.Registry, op, outcome string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != storeobserve.MetricName {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["service"] == "documents" && l["operation"] == op && l["outcome"] == outcome {
				return m.GetHistogram().GetSampleCount()
			}
		}
	}
	return 0
}

// The service its module builds observes its store, memory or MongoDB: calls through the
// server move collab_store_operation_seconds for the store operations they make, with their
// outcomes, and leave a span per operation, naming the store's kind.
func TestModuleObservesStore(t *testing.T) {
	t.Run("memory", func(t *testing.T) { testModuleObservesStore(t, nil, "memory") })
	t.Run("mongodb", func(t *testing.T) { testModuleObservesStore(t, mongotest.Connect(t), "mongodb") })
}

func testModuleObservesStore(t *testing.T, mongo *mongodb.Conn, system string) {
	reg := prometheus.NewRegistry()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ob := outbox.New("documents", outbox.NewMemoryStore(), deliverFunc(func(context.Context, string, *lifecyclev1.Event) error { return nil }),
		outbox.To("documents"), outbox.WithLogger(quiet))
	build := Module().Setup(service.NewFlags(flag.NewFlagSet("test", flag.ContinueOnError), func(string) string { return "" }))
	inst, err := build(context.Background(), service.Env{Log: quiet, Clock: clock.NewFake(t0), Secret: []byte("0123456789abcdef0123456789abcdef"),
		Outbox: ob, Metrics: reg, Tracing: tp, Mongo: mongo})
	if err != nil {
		t.Fatal(err)
	}
	regs := registrar{}
	inst.Register(regs)
	srv := regs[documentsv1.DocumentsService_ServiceDesc.ServiceName].(documentsv1.DocumentsServiceServer)

	// Store calls are traced inside a request's span (the RPC's, in a process).
	ctx, request := tp.Tracer("test").Start(k1, "request")
	defer request.End()
	add := &documentsv1.AddOrganizationsRequest{Organizations: []*documentsv1.Organization{{OrganizationId: "o1", OrganizationName: "One"}}}
	for range 2 { // added, then refused as existing
		if _, err := srv.AddOrganizations(ctx, add); err != nil {
			t.Fatal(err)
		}
	}
	rename := &documentsv1.UpdateOrganizationsRequest{Organizations: []*documentsv1.Organization{{OrganizationId: "missing", OrganizationName: "M"}}}
	if _, err := srv.UpdateOrganizations(ctx, rename); err != nil {
		t.Fatal(err)
	}
	if err := inst.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		op, outcome string
		want        uint64
	}{
		{"CreateOrganization", "ok", 1},
		{"CreateOrganization", "refused", 1},
		{"RenameOrganization", "not_found", 1},
		{"RenameOrganization", "ok", 0},
		{"Ping", "ok", 1},
	} {
		if got := storeSamples(t, reg, c.op, c.outcome); got != c.want {
			t.Errorf("%s %s: %d observations, want %d", c.op, c.outcome, got, c.want)
		}
	}
	if n, err := testutil.GatherAndCount(reg, storeobserve.MetricName); err != nil || n == 0 {
		t.Errorf("%s: %d series, %v", storeobserve.MetricName, n, err)
	}

	spans := map[string]int{}
	for _, s := range rec.Ended() {
		spans[s.Name()]++
		got := ""
		for _, a := range s.Attributes() {
			if a.Key == attribute.Key("db.system") {
				got = a.Value.AsString()
			}
		}
		if got != system {
			t.Errorf("%s: db.system %q, want %q", s.Name(), got, system)
		}
	}
	if spans["documents.store/CreateOrganization"] != 2 || spans["documents.store/RenameOrganization"] != 1 || spans["documents.store/Ping"] != 1 {
		t.Errorf("spans %v", spans)
	}
}

// The store conformance suite holds through the wrapper.
func TestObservedMemoryStore(t *testing.T) {
	o, err := storeobserve.New("documents", storeobserve.Config{Metrics: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	runStoreSuite(t, func(t *testing.T) Store { return observeStore(NewMemoryStore(), o) })
}

// What the wrapper adds to a memory store's lookup (the cheapest store call there is): with
// tracing off (no provider, as without --otlp-endpoint) and on (inside a request's recorded
// span; the store's span recorded, then dropped). docs/benchmarks.md has the results.
func BenchmarkObservedStore(b *testing.B) {
	bg := context.Background()
	mem := NewMemoryStore()
	if err := mem.CreateOrganization(bg, &Organization{APIKey: "k1", ID: "o1", Generation: "g1", Name: "One", CreatedAt: storeTime(t0)}); err != nil {
		b.Fatal(err)
	}
	observed := func(env service.Env) Store {
		env.Metrics = prometheus.NewRegistry()
		o, err := env.ObserveStore("documents")
		if err != nil {
			b.Fatal(err)
		}
		return observeStore(mem, o)
	}
	tp := sdktrace.NewTracerProvider()
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	request, span := tp.Tracer("bench").Start(bg, "request")
	defer span.End()
	for _, c := range []struct {
		name  string
		ctx   context.Context
		store Store
	}{
		{"bare", bg, mem},
		{"observed", bg, observed(service.Env{})},
		{"observed-traced", request, observed(service.Env{Tracing: tp})},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.store.Organization(c.ctx, "k1", "o1"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
