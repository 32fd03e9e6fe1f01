package tracing_test

import (
	"context"
	"math"
	"net"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/collab/collab/internal/inproc"
	"github.com/collab/collab/internal/tracing"
)

func TestOffWithoutEndpoint(t *testing.T) {
	tp, err := tracing.NewProvider(context.Background(), tracing.Config{SampleRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	if tp != nil {
		t.Fatal("a provider without an endpoint or exporter")
	}
}

func TestBadConfig(t *testing.T) {
	for _, cfg := range []tracing.Config{
		{Endpoint: "collector:4317", SampleRatio: 1.5},
		{Endpoint: "collector:4317", SampleRatio: -0.1},
		{Endpoint: "collector:4317", SampleRatio: math.NaN()},
		{Endpoint: "ftp://collector:4317", SampleRatio: 1},
		{Endpoint: "collector", SampleRatio: 1},
	} {
		if tp, err := tracing.NewProvider(context.Background(), cfg); err == nil {
			_ = tp.Shutdown(context.Background())
			t.Errorf("%+v: no error", cfg)
		}
	}
}

func TestParseEndpoint(t *testing.T) {
	for in, want := range map[string]string{
		"collector:4317":         "https://collector:4317",
		"https://collector:4317": "https://collector:4317",
		"http://127.0.0.1:4317/": "http://127.0.0.1:4317",
		"http://[::1]:4317":      "http://[::1]:4317",
	} {
		got, err := tracing.ParseEndpoint(in)
		if err != nil || got != want {
			t.Errorf("%q: got %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "collector", "collector:0", "collector:99999", "ftp://collector:4317",
		"http://user:secret@collector:4317", "http://collector:4317/v1/traces", "http://:4317", "http://collector:4317?a=b"} {
		if got, err := tracing.ParseEndpoint(in); err == nil {
			t.Errorf("%q: accepted as %q", in, got)
		}
	}
}

// A provider from the config samples by the ratio for new traces and follows the parent for
// the others.
func TestSampling(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp, err := tracing.NewProvider(context.Background(), tracing.Config{Exporter: exp, SampleRatio: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tp.Shutdown(context.Background()) }()
	_, span := tp.Tracer("t").Start(context.Background(), "root")
	span.End()
	if n := len(exp.GetSpans()); n != 0 {
		t.Fatalf("ratio 0 recorded %d root spans", n)
	}
	sampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled, Remote: true})
	_, span = tp.Tracer("t").Start(trace.ContextWithRemoteSpanContext(context.Background(), sampled), "child")
	span.End()
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].SpanContext.TraceID() != sampled.TraceID() {
		t.Fatalf("the child of a sampled parent: %d spans", len(spans))
	}
	found := false
	for _, kv := range spans[0].Resource.Attributes() {
		if kv.Key == "service.name" && kv.Value.AsString() == tracing.ServiceName {
			found = true
		}
	}
	if !found {
		t.Error("no service.name in the resource")
	}
}

// testService answers EmptyCall and refuses UnaryCall with NOT_FOUND.
type testService struct {
	testpb.UnimplementedTestServiceServer
}

func (testService) EmptyCall(context.Context, *testpb.Empty) (*testpb.Empty, error) {
	return &testpb.Empty{}, nil
}

func (testService) UnaryCall(context.Context, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	return nil, status.Error(codes.NotFound, "no such thing")
}

func testpbRegister(r grpc.ServiceRegistrar) { testpb.RegisterTestServiceServer(r, testService{}) }

// call makes the call whose answer has code: EmptyCall for OK, UnaryCall for NOT_FOUND.
func call(ctx context.Context, conn grpc.ClientConnInterface, code codes.Code) (string, error) {
	c := testpb.NewTestServiceClient(conn)
	if code == codes.OK {
		_, err := c.EmptyCall(ctx, &testpb.Empty{})
		return "EmptyCall", err
	}
	_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{})
	return "UnaryCall", err
}

func newProvider(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp, err := tracing.NewProvider(context.Background(), tracing.Config{Exporter: exp, SampleRatio: 1, Services: []string{"health"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

// checkPair asserts the spans of one call: a client span under the caller's span, and a
// server span whose parent is the client span, in the caller's trace, with the RPC attributes.
func checkPair(t *testing.T, spans tracetest.SpanStubs, parent trace.SpanContext, method string, code codes.Code) {
	t.Helper()
	var client, server *tracetest.SpanStub
	for i := range spans {
		switch spans[i].SpanKind {
		case trace.SpanKindClient:
			client = &spans[i]
		case trace.SpanKindServer:
			server = &spans[i]
		}
	}
	if client == nil || server == nil {
		t.Fatalf("want a client and a server span, got %d spans", len(spans))
	}
	if client.Parent.SpanID() != parent.SpanID() || client.SpanContext.TraceID() != parent.TraceID() {
		t.Errorf("client span's parent %v, want %v", client.Parent.SpanID(), parent.SpanID())
	}
	if server.Parent.SpanID() != client.SpanContext.SpanID() || server.SpanContext.TraceID() != parent.TraceID() {
		t.Errorf("server span's parent %v, want the client span %v", server.Parent.SpanID(), client.SpanContext.SpanID())
	}
	for _, s := range []*tracetest.SpanStub{client, server} {
		if s.Name != "grpc.testing.TestService/"+method {
			t.Errorf("span name %q", s.Name)
		}
		want := map[attribute.Key]string{"rpc.system": "grpc", "rpc.service": "grpc.testing.TestService", "rpc.method": method}
		for _, kv := range s.Attributes {
			if w, ok := want[kv.Key]; ok && kv.Value.AsString() == w {
				delete(want, kv.Key)
			}
			if kv.Key == "rpc.grpc.status_code" && kv.Value.AsInt64() != int64(code) {
				t.Errorf("%v span: status code %d, want %d", s.SpanKind, kv.Value.AsInt64(), code)
			}
		}
		if len(want) > 0 {
			t.Errorf("%v span misses %v", s.SpanKind, want)
		}
	}
	// NOT_FOUND is the caller's problem: an error for the client, not for the server.
	if code != codes.OK && client.Status.Code != otelcodes.Error {
		t.Errorf("client span status %v on %v", client.Status, code)
	}
	if server.Status.Code == otelcodes.Error {
		t.Errorf("server span status %v on %v", server.Status, code)
	}
}

// Over TCP the trace context travels in the call's metadata to the server's interceptor.
func TestPropagationOverTCP(t *testing.T) {
	tp, exp := newProvider(t)
	srv := grpc.NewServer(grpc.UnaryInterceptor(tracing.ServerInterceptor(tp)))
	testpb.RegisterTestServiceServer(srv, testService{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(tracing.ClientInterceptor(tp)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	for _, code := range []codes.Code{codes.OK, codes.NotFound} {
		exp.Reset()
		ctx, root := tp.Tracer("test").Start(context.Background(), "root")
		// Metadata the caller set stays, beside the trace context.
		ctx = metadata.AppendToOutgoingContext(ctx, "x-request-id", "abc")
		method, err := call(ctx, conn, code)
		root.End()
		if status.Code(err) != code {
			t.Fatalf("%s: %v", method, err)
		}
		checkPair(t, exp.GetSpans(), root.SpanContext(), method, code)
	}
}

// In process there is no transport: the interceptors alone carry the context, through the
// metadata internal/inproc turns from outgoing into incoming.
func TestPropagationInProcess(t *testing.T) {
	tp, exp := newProvider(t)
	var seen metadata.MD
	spy := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		seen, _ = metadata.FromIncomingContext(ctx)
		return tracing.ServerInterceptor(tp)(ctx, req, info, handler)
	}
	grpcSrv := grpc.NewServer()
	local := inproc.New(grpcSrv, spy, 1<<20)
	testpb.RegisterTestServiceServer(local, testService{})
	conn := local.Conn(tracing.ClientInterceptor(tp))

	ctx, root := tp.Tracer("test").Start(context.Background(), "root")
	method, err := call(ctx, conn, codes.OK)
	root.End()
	if err != nil {
		t.Fatal(err)
	}
	checkPair(t, exp.GetSpans(), root.SpanContext(), method, codes.OK)
	if len(seen.Get("traceparent")) != 1 {
		t.Errorf("incoming metadata %v has no traceparent", seen)
	}
}

// A server span from a call without trace context starts a trace of its own.
func TestServerSpanWithoutContext(t *testing.T) {
	tp, exp := newProvider(t)
	grpcSrv := grpc.NewServer()
	local := inproc.New(grpcSrv, tracing.ServerInterceptor(tp), 1<<20)
	testpb.RegisterTestServiceServer(local, testService{})
	if _, err := call(context.Background(), local.Conn(), codes.OK); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].SpanKind != trace.SpanKindServer || spans[0].Parent.IsValid() {
		t.Fatalf("want one root server span, got %+v", spans)
	}
}

// Inject keeps the metadata already on the context and does not change the caller's copy.
func TestInjectCopiesMetadata(t *testing.T) {
	tp, _ := newProvider(t)
	md := metadata.Pairs("x-service-api-key", "k")
	ctx, span := tp.Tracer("test").Start(metadata.NewOutgoingContext(context.Background(), md), "s")
	defer span.End()
	out, _ := metadata.FromOutgoingContext(tracing.Inject(ctx))
	if out.Get("x-service-api-key")[0] != "k" || len(out.Get("traceparent")) != 1 {
		t.Fatalf("injected metadata %v", out)
	}
	if len(md.Get("traceparent")) != 0 {
		t.Fatal("Inject wrote into the caller's metadata")
	}
}

// A mistyped endpoint never brings its credentials into the error (and so the log).
func TestParseEndpointHidesCredentials(t *testing.T) {
	for _, in := range []string{"http://user:hunter2@collector:x", "http://user:hunter2@collector:4317", "http://user:hunter2@[::1"} {
		_, err := tracing.ParseEndpoint(in)
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%q: %v", in, err)
		}
	}
}

// Health checks (probes, /readyz) get no spans on either side.
func TestHealthChecksAreNotTraced(t *testing.T) {
	tp, exp := newProvider(t)
	local := inproc.New(grpc.NewServer(), tracing.ServerInterceptor(tp), 1<<20)
	healthpb.RegisterHealthServer(local, health.NewServer())
	testpb.RegisterTestServiceServer(local, testService{})
	conn := local.Conn(tracing.ClientInterceptor(tp))
	if _, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	if n := len(exp.GetSpans()); n != 0 {
		t.Fatalf("a health check made %d spans", n)
	}
	// The same channel traces other calls.
	if _, err := call(context.Background(), conn, codes.OK); err != nil {
		t.Fatal(err)
	}
	if n := len(exp.GetSpans()); n != 2 {
		t.Fatalf("a call made %d spans, want 2", n)
	}
}

// Trace context already in the outgoing metadata (a handler passing its caller's metadata on,
// say) is replaced, never sent beside ours: the server reads the first value.
func TestInjectReplacesStaleTraceContext(t *testing.T) {
	tp, _ := newProvider(t)
	const stale = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	md := metadata.Pairs("traceparent", stale, "tracestate", "vendor=old", "x-request-id", "r")
	ctx, span := tp.Tracer("test").Start(metadata.NewOutgoingContext(context.Background(), md), "s")
	defer span.End()
	out, _ := metadata.FromOutgoingContext(tracing.Inject(ctx))
	got := out.Get("traceparent")
	if len(got) != 1 || !strings.Contains(got[0], span.SpanContext().TraceID().String()) {
		t.Fatalf("traceparent %q, want only ours", got)
	}
	if len(out.Get("tracestate")) != 0 || out.Get("x-request-id")[0] != "r" {
		t.Fatalf("metadata %v", out)
	}
	if md.Get("traceparent")[0] != stale {
		t.Fatal("Inject wrote into the caller's metadata")
	}
}

// A context without a span sends no trace context, and gets no metadata it did not have.
func TestInjectWithoutSpan(t *testing.T) {
	ctx := tracing.Inject(context.Background())
	if md, ok := metadata.FromOutgoingContext(ctx); ok {
		t.Fatalf("metadata %v without a span", md)
	}
}

// Attribute values hold callers' text (the HTTP span's url.path and user_agent.original, up to
// the HTTP server's 1 MiB of headers): each is cut to MaxAttributeLength, or the batcher's queue
// of spans could hold gigabytes while a collector is slow.
func TestAttributeValuesAreBounded(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp, err := tracing.NewProvider(context.Background(), tracing.Config{Exporter: exp, SampleRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tp.Shutdown(context.Background()) }()
	_, span := tp.Tracer("test").Start(context.Background(), "s", trace.WithAttributes(attribute.String("user_agent.original", strings.Repeat("a", 1<<20))))
	span.End()
	spans := exp.GetSpans()
	if len(spans) != 1 || len(spans[0].Attributes) != 1 {
		t.Fatalf("spans %v", spans)
	}
	if n := len(spans[0].Attributes[0].Value.AsString()); n != tracing.MaxAttributeLength {
		t.Fatalf("an attribute of 1 MiB kept %d bytes, want %d", n, tracing.MaxAttributeLength)
	}
}

// OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT may lower the bound, not raise it.
func TestAttributeLimitFromTheEnvironment(t *testing.T) {
	for env, want := range map[string]int{"100": 100, "1000000": tracing.MaxAttributeLength, "0": tracing.MaxAttributeLength, "-1": tracing.MaxAttributeLength} {
		t.Setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", env)
		exp := tracetest.NewInMemoryExporter()
		tp, err := tracing.NewProvider(context.Background(), tracing.Config{Exporter: exp, SampleRatio: 1})
		if err != nil {
			t.Fatal(err)
		}
		_, span := tp.Tracer("test").Start(context.Background(), "s", trace.WithAttributes(attribute.String("k", strings.Repeat("a", 1<<20))))
		span.End()
		spans := exp.GetSpans() // before Shutdown, which empties the exporter
		_ = tp.Shutdown(context.Background())
		if len(spans) != 1 || len(spans[0].Attributes) != 1 {
			t.Fatalf("spans %v", spans)
		}
		if n := len(spans[0].Attributes[0].Value.AsString()); n != want {
			t.Errorf("limit %s: %d bytes kept, want %d", env, n, want)
		}
	}
}
