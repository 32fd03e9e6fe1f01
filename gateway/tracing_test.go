package gateway_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"

	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"

	"github.com/collab/collab/internal/tracing"
)

// tracedGateway is a gateway with tracing on in front of a traced workspace stub: the HTTP
// span, the gateway's client span and the service's server span all go to one exporter.
func tracedGateway(t *testing.T) (http.Handler, *tracetest.InMemoryExporter) {
	t.Helper()
	gw, exp, _ := tracedGatewayStub(t)
	return gw, exp
}

// tracedGatewayStub is tracedGateway with the workspace stub, which keeps the metadata of the
// last call.
func tracedGatewayStub(t *testing.T) (http.Handler, *tracetest.InMemoryExporter, *stubWorkspace) {
	t.Helper()
	ws := &stubWorkspace{}
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(grpc.UnaryInterceptor(tracing.ServerInterceptor(tp)))
	workspacev1.RegisterWorkspaceServiceServer(srv, ws)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn := dialBufconn(t, lis)
	gw := newGateway(t, tracedConn{conn, tracing.ClientInterceptor(tp)})
	gw.SetTracing(tp)
	return gw, exp, ws
}

// tracedConn runs a client interceptor in front of a connection, as the process's connections
// do.
type tracedConn struct {
	*grpc.ClientConn
	interceptor grpc.UnaryClientInterceptor
}

func (c tracedConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	invoke := func(ctx context.Context, method string, args, reply any, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		return cc.Invoke(ctx, method, args, reply, opts...)
	}
	return c.interceptor(ctx, method, args, reply, c.ClientConn, invoke, opts...)
}

func byKind(spans tracetest.SpanStubs, kind trace.SpanKind) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if s.SpanKind == kind {
			out = append(out, s)
		}
	}
	return out
}

func route(s tracetest.SpanStub) string {
	for _, kv := range s.Attributes {
		if kv.Key == "http.route" {
			return kv.Value.AsString()
		}
	}
	return ""
}

// A request's server span is named by its route template, and the RPC the gateway makes for
// it is its child, down to the service's span.
func TestTracingSpansOfARequest(t *testing.T) {
	gw, exp := tracedGateway(t)
	// A caller's trace context is linked, not adopted: the caller does not pick our trace or
	// its sampling.
	caller := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
	rec := serve(gw, http.MethodPost, "/v2/workspace/get", `{"data": {}}`, http.Header{"Content-Type": {"application/json"}, "Traceparent": {caller}})
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	spans := exp.GetSpans()
	clients, servers := byKind(spans, trace.SpanKindClient), []tracetest.SpanStub{}
	var root *tracetest.SpanStub
	for _, s := range byKind(spans, trace.SpanKindServer) {
		if route(s) != "" {
			root = &s
		} else if s.Name == "collab.workspace.v1.WorkspaceService/GetWorkspace" {
			servers = append(servers, s)
		}
	}
	if root == nil || len(clients) != 1 || len(servers) != 1 {
		t.Fatalf("want an HTTP span, a client and a server span; got %d spans", len(spans))
	}
	if root.Name != "POST /v2/workspace/get" || route(*root) != "/v2/workspace/get" {
		t.Errorf("HTTP span %q, route %q", root.Name, route(*root))
	}
	if root.Parent.IsValid() || root.SpanContext.TraceID().String() == "0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("the caller's traceparent became the parent: %v", root.Parent)
	}
	if len(root.Links) != 1 || root.Links[0].SpanContext.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("links %v, want the caller's trace", root.Links)
	}
	if c := clients[0]; c.Parent.SpanID() != root.SpanContext.SpanID() || c.SpanContext.TraceID() != root.SpanContext.TraceID() {
		t.Errorf("client span %q is not the HTTP span's child", c.Name)
	}
	if s := servers[0]; s.Parent.SpanID() != clients[0].SpanContext.SpanID() || s.SpanContext.TraceID() != root.SpanContext.TraceID() {
		t.Errorf("server span %q is not the client span's child", s.Name)
	}
}

// What no route matches is named "other", never by its raw path.
func TestTracingUnknownPathIsBounded(t *testing.T) {
	gw, exp := tracedGateway(t)
	rec := serve(gw, http.MethodPost, "/v2/no/such/route/12345", `{"data": {}}`, http.Header{"Content-Type": {"application/json"}})
	if rec.Code != http.StatusNotFound {
		t.Fatalf("status %d", rec.Code)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Name != "POST other" || route(spans[0]) != "other" {
		t.Fatalf("spans %v", spans)
	}
	if strings.Contains(spans[0].Name, "12345") {
		t.Error("the raw path named the span")
	}
}

// Behind a ServeMux (a process that serves services' own routes mounts the gateway at "/"),
// otelhttp renames the span by the mux's pattern at the end; the route template still wins.
func TestTracingNameBehindAServeMux(t *testing.T) {
	gw, exp := tracedGateway(t)
	mux := http.NewServeMux()
	mux.Handle("/", gw)
	if rec := serve(mux, http.MethodPost, "/v2/workspace/get", `{"data": {}}`, http.Header{"Content-Type": {"application/json"}}); rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	var names []string
	for _, s := range byKind(exp.GetSpans(), trace.SpanKindServer) {
		names = append(names, s.Name)
	}
	if !slices.Contains(names, "POST /v2/workspace/get") {
		t.Fatalf("server spans %v", names)
	}
}

// Probes are not traced.
func TestTracingSkipsProbes(t *testing.T) {
	gw, exp := tracedGateway(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		serve(gw, http.MethodGet, path, "", nil)
	}
	if spans := exp.GetSpans(); len(spans) != 0 {
		t.Fatalf("probes made %d spans", len(spans))
	}
	serve(gw, http.MethodGet, "/openapi.json", "", nil)
	if spans := exp.GetSpans(); len(spans) != 1 || spans[0].Name != "GET /openapi.json" {
		t.Fatalf("spans %v", spans)
	}
}

// The method a caller sends is its own text: a span named by it would let every request open a
// new span name. Methods other than HTTP's own are named _OTHER (OpenTelemetry's convention).
func TestTracingUnknownMethodIsBounded(t *testing.T) {
	gw, exp := tracedGateway(t)
	for _, target := range []string{"/v2/workspace/get", "/v2/no/such/route"} {
		exp.Reset()
		rec := serve(gw, "PURGE12345", target, "", nil)
		if rec.Code < 400 {
			t.Fatalf("%s: status %d", target, rec.Code)
		}
		spans := exp.GetSpans()
		if len(spans) != 1 || !strings.HasPrefix(spans[0].Name, "_OTHER ") {
			var names []string
			for _, s := range spans {
				names = append(names, s.Name)
			}
			t.Fatalf("%s: spans %q, want one named _OTHER and the route", target, names)
		}
	}
}

// Nothing of a public caller's trace context reaches the services: not its traceparent or
// tracestate (as headers or as grpc-gateway's Grpc-Metadata-* pass-through), and no W3C
// baggage, which is never propagated at all. The service sees our own traceparent only.
func TestTracingCallersContextDoesNotReachServices(t *testing.T) {
	gw, exp, ws := tracedGatewayStub(t)
	const callerTrace = "0af7651916cd43dd8448eb211c80319c"
	caller := "00-" + callerTrace + "-b7ad6b7169203331-01"
	header := http.Header{"Content-Type": {"application/json"},
		"Traceparent": {caller}, "Tracestate": {"vendor=opaque"}, "Baggage": {"user=alice"},
		"Grpc-Metadata-Traceparent": {caller}, "Grpc-Metadata-Tracestate": {"vendor=opaque"}, "Grpc-Metadata-Baggage": {"user=alice"}}
	if rec := serve(gw, http.MethodPost, "/v2/workspace/get", `{"data": {}}`, header); rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	md, _ := ws.last()
	for _, k := range []string{"tracestate", "baggage"} {
		if v := md.Get(k); len(v) != 0 {
			t.Errorf("the service got %s %q from the HTTP caller", k, v)
		}
	}
	if tp := md.Get("traceparent"); len(tp) != 1 || strings.Contains(tp[0], callerTrace) {
		t.Errorf("the service got traceparent %q, want one of ours", tp)
	}
	for _, s := range exp.GetSpans() {
		if s.SpanContext.TraceID().String() == callerTrace || s.SpanContext.TraceState().Len() != 0 {
			t.Errorf("%v span %q: trace %s, state %q", s.SpanKind, s.Name, s.SpanContext.TraceID(), s.SpanContext.TraceState())
		}
	}
}

// The emailed verification link carries its secret in the query: no span holds it, in a name
// or an attribute (otelhttp records url.path, never url.query).
func TestTracingKeepsTheVerificationTokenOut(t *testing.T) {
	gw, exp := tracedGateway(t)
	const secret = "ws1.s3cr3tt0k3n"
	serve(gw, http.MethodGet, "/v2/workspace/email/verify?token="+secret, "", nil)
	spans := exp.GetSpans()
	if len(spans) == 0 {
		t.Fatal("no spans")
	}
	for _, s := range spans {
		if strings.Contains(s.Name, "s3cr3t") {
			t.Errorf("span name %q", s.Name)
		}
		for _, kv := range s.Attributes {
			if strings.Contains(kv.Value.String(), "s3cr3t") {
				t.Errorf("%v span %q: %s=%s", s.SpanKind, s.Name, kv.Key, kv.Value.String())
			}
		}
	}
}

// A caller's sampled flag does not make us record its request: with a ratio of 0 nothing is.
func TestTracingCallerCannotForceSampling(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp, err := tracing.NewProvider(context.Background(), tracing.Config{Exporter: exp, SampleRatio: 0})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(grpc.UnaryInterceptor(tracing.ServerInterceptor(tp)))
	workspacev1.RegisterWorkspaceServiceServer(srv, &stubWorkspace{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	gw := newGateway(t, tracedConn{dialBufconn(t, lis), tracing.ClientInterceptor(tp)})
	gw.SetTracing(tp)
	sampled := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, h := range []string{"Traceparent", "Grpc-Metadata-Traceparent"} {
		rec := serve(gw, http.MethodPost, "/v2/workspace/get", `{"data": {}}`, http.Header{"Content-Type": {"application/json"}, h: {sampled}})
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d", rec.Code)
		}
	}
	if spans := exp.GetSpans(); len(spans) != 0 {
		t.Fatalf("a caller's sampled flag recorded %d spans", len(spans))
	}
}
