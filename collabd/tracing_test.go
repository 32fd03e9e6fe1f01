package collabd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/collab/collab/internal/outbox"
	"github.com/collab/collab/internal/testkit/tlstest"
	"github.com/collab/collab/services"
)

// startTraced runs a process whose spans go to exp, on free ports.
func startTraced(t *testing.T, exp sdktrace.SpanExporter, extra ...string) *Process {
	t.Helper()
	return startWith(t, Deps{SpanExporter: exp}, extra...)
}

// reserveAddr holds a free loopback address until release is called: the two processes of a
// split each need the other's gRPC address before either starts, and the one started first,
// listening on port 0, could otherwise be given the address the other is to take (it was, on
// a loaded machine: "bind: address already in use").
func reserveAddr(t *testing.T) (addr string, release func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln.Addr().String(), func() { _ = ln.Close() }
}

// splitTraced runs the gateway and documents in process a, every other service in process b,
// each with its own exporter.
func splitTraced(t *testing.T) (a, b *Process, expA, expB *tracetest.InMemoryExporter) {
	t.Helper()
	token := "--internal-token=" + strings.Repeat("0123456789abcdef", 4)
	return splitTracedWith(t, []string{token}, []string{token})
}

// splitTracedWith is splitTraced with each process's own extra flags (credentials, TLS).
func splitTracedWith(t *testing.T, aExtra, bExtra []string) (a, b *Process, expA, expB *tracetest.InMemoryExporter) {
	t.Helper()
	aGRPC, release := reserveAddr(t)
	var bServices []string
	for _, m := range services.All() {
		if m.Name != "documents" {
			bServices = append(bServices, m.Name)
		}
	}
	expA, expB = tracetest.NewInMemoryExporter(), tracetest.NewInMemoryExporter()
	b = startTraced(t, expB, append(slices.Clone(bExtra), "--services="+strings.Join(bServices, ","), "--documents-addr="+aGRPC)...)
	aArgs := append(slices.Clone(aExtra), "--services=gateway,documents", "--grpc-addr="+aGRPC)
	for _, s := range bServices {
		aArgs = append(aArgs, "--"+s+"-addr="+b.GRPCAddr)
	}
	release()
	a = startTraced(t, expA, aArgs...)
	return a, b, expA, expB
}

func postJSON(t *testing.T, p *Process, path string, creds map[string]string, data any) int {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"data": data})
	req, _ := http.NewRequest(http.MethodPost, "http://"+p.HTTPAddr+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range creds {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Logf("%s: %d %s", path, resp.StatusCode, b)
	}
	return resp.StatusCode
}

// find returns the one span matching, failing the test when there is not exactly one.
func find(t *testing.T, spans tracetest.SpanStubs, what string, match func(tracetest.SpanStub) bool) tracetest.SpanStub {
	t.Helper()
	var out []tracetest.SpanStub
	for _, s := range spans {
		if match(s) {
			out = append(out, s)
		}
	}
	if len(out) != 1 {
		var names []string
		for _, s := range spans {
			names = append(names, s.SpanKind.String()+" "+s.Name)
		}
		t.Fatalf("%s: %d matching spans among %v", what, len(out), names)
	}
	return out[0]
}

func isRPC(s tracetest.SpanStub) bool {
	return slices.ContainsFunc(s.Attributes, func(kv attribute.KeyValue) bool { return kv.Key == "rpc.system" })
}

func named(kind trace.SpanKind, name string) func(tracetest.SpanStub) bool {
	return func(s tracetest.SpanStub) bool { return s.SpanKind == kind && s.Name == name }
}

func childOf(t *testing.T, child, parent tracetest.SpanStub) {
	t.Helper()
	if child.SpanContext.TraceID() != parent.SpanContext.TraceID() || child.Parent.SpanID() != parent.SpanContext.SpanID() {
		t.Errorf("%s %q (trace %s, parent %s) is not the child of %s %q (trace %s, span %s)",
			child.SpanKind, child.Name, child.SpanContext.TraceID(), child.Parent.SpanID(),
			parent.SpanKind, parent.Name, parent.SpanContext.TraceID(), parent.SpanContext.SpanID())
	}
}

// One HTTP request to a split deployment is one trace: the gateway's span, its call to
// documents in the same process (in process, no transport), and documents' authentication of
// the caller by the workspace service in the other process, whose span is the child of the
// client span that called it.
func TestTracingOneTraceAcrossProcesses(t *testing.T) {
	a, b, expA, expB := splitTraced(t)
	checkOneTrace(t, a, b, expA, expB)
}

// The trace context crosses processes the same way under mutual TLS (no internal token: the
// peer certificates are the credential), where the metadata travels inside TLS.
func TestTracingOneTraceAcrossProcessesUnderMutualTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "deployment CA")
	a, b, expA, expB := splitTracedWith(t, mtlsFlags(t, ca, "localhost"), mtlsFlags(t, ca, "localhost"))
	if !a.tls.mutual() || !b.tls.mutual() {
		t.Fatal("the processes do not run mutual TLS")
	}
	checkOneTrace(t, a, b, expA, expB)
}

// checkOneTrace makes one request to the split deployment of splitTraced and checks its spans
// form one trace across both processes.
func checkOneTrace(t *testing.T, a, b *Process, expA, expB *tracetest.InMemoryExporter) {
	t.Helper()
	creds := map[string]string{"x-service-api-key": b.Dev.APIKey, "x-service-auth-token": b.Dev.AuthToken}
	expA.Reset()
	expB.Reset()
	if code := postJSON(t, a, "/v2/organizations/add", creds, map[string]any{"organizations": []any{map[string]any{"organizationId": "org1", "organizationName": "O"}}}); code != http.StatusOK {
		t.Fatalf("add organization: %d", code)
	}
	spansA, spansB := expA.GetSpans(), expB.GetSpans()

	httpSpan := find(t, spansA, "the HTTP span", named(trace.SpanKindServer, "POST /v2/organizations/add"))
	const add = "collab.documents.v1.DocumentsService/AddOrganizations"
	const authenticate = "collab.workspace.v1.WorkspaceService/Authenticate"
	gwClient := find(t, spansA, "the gateway's call", named(trace.SpanKindClient, add))
	docsServer := find(t, spansA, "documents' span", named(trace.SpanKindServer, add))
	authClient := find(t, spansA, "the call to authenticate", named(trace.SpanKindClient, authenticate))
	authServer := find(t, spansB, "workspace's span in the other process", named(trace.SpanKindServer, authenticate))
	if httpSpan.Parent.IsValid() {
		t.Error("the HTTP span has a parent")
	}
	childOf(t, gwClient, httpSpan)
	childOf(t, docsServer, gwClient)
	childOf(t, authClient, docsServer)
	childOf(t, authServer, authClient)

	// Every RPC span of both processes in this window belongs to the request's trace (nothing
	// else calls a service meanwhile: no events, no background work due). Spans of other kinds
	// (a background worker's store polls) may have traces of their own.
	for _, s := range slices.Concat(spansA, spansB) {
		if isRPC(s) && s.SpanContext.TraceID() != httpSpan.SpanContext.TraceID() {
			t.Errorf("%s %q is in trace %s, not the request's", s.SpanKind, s.Name, s.SpanContext.TraceID())
		}
	}
	// Each process says which services it runs.
	for exp, want := range map[*tracetest.InMemoryExporter]string{expA: "documents", expB: "workspace"} {
		got := ""
		for _, kv := range exp.GetSpans()[0].Resource.Attributes() {
			if kv.Key == "collab.services" {
				got = kv.Value.String()
			}
		}
		if !strings.Contains(got, want) {
			t.Errorf("resource collab.services %q, want %s in it", got, want)
		}
	}
}

// An event a request publishes is delivered during the request, or by a lane woken meanwhile
// (the gate's delivery wakes them, and whichever comes first delivers): each delivery span is
// in the request's trace or starts its own, links to the request's, and the consumer in the
// other process handles the event under the delivery's span.
func TestTracingFollowsEventsAcrossProcesses(t *testing.T) {
	a, b, expA, expB := splitTraced(t)
	creds := map[string]string{"x-service-api-key": b.Dev.APIKey, "x-service-auth-token": b.Dev.AuthToken}
	if code := postJSON(t, a, "/v2/organizations/add", creds, map[string]any{"organizations": []any{map[string]any{"organizationId": "o", "organizationName": "O"}}}); code != http.StatusOK {
		t.Fatalf("add: %d", code)
	}
	expA.Reset()
	expB.Reset()
	if code := postJSON(t, a, "/v2/organizations/delete", creds, map[string]any{"organizationIds": []string{"o"}}); code != http.StatusOK {
		t.Fatalf("delete: %d", code)
	}
	spansA, spansB := expA.GetSpans(), expB.GetSpans()
	httpSpan := find(t, spansA, "the HTTP span", named(trace.SpanKindServer, "POST /v2/organizations/delete"))
	var remote []tracetest.SpanStub
	for _, s := range spansA {
		if s.SpanKind != trace.SpanKindProducer || !strings.HasPrefix(s.Name, "deliver ") {
			continue
		}
		if len(s.Links) != 1 || s.Links[0].SpanContext.TraceID() != httpSpan.SpanContext.TraceID() {
			t.Errorf("%q: links %v, want the request's trace", s.Name, s.Links)
		}
		if s.SpanContext.TraceID() != httpSpan.SpanContext.TraceID() && s.Parent.IsValid() {
			t.Errorf("%q: in another trace, under a parent", s.Name)
		}
		for _, kv := range s.Attributes {
			if kv.Key == outbox.SubscriberKey && kv.Value.AsString() != "documents" {
				remote = append(remote, s)
			}
		}
	}
	if len(remote) == 0 {
		t.Fatal("no delivery to a service of the other process")
	}
	for _, d := range remote {
		client := find(t, spansA, "the delivery's call", func(s tracetest.SpanStub) bool {
			return s.SpanKind == trace.SpanKindClient && s.Parent.SpanID() == d.SpanContext.SpanID()
		})
		server := find(t, spansB, "the consumer's span", func(s tracetest.SpanStub) bool {
			return s.SpanKind == trace.SpanKindServer && s.Parent.SpanID() == client.SpanContext.SpanID()
		})
		if server.Name != "collab.lifecycle.v1.LifecycleService/HandleEvent" {
			t.Errorf("the consumer's span is %q", server.Name)
		}
		childOf(t, server, client)
	}
}

// Without --otlp-endpoint there is no provider, no interceptor and no closer: nothing runs.
func TestNoTracingByDefault(t *testing.T) {
	cfg, err := parse(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OTLPEndpoint != "" {
		t.Fatalf("tracing on by default: %q", cfg.OTLPEndpoint)
	}
	p := &Process{}
	tp, server, client, err := p.startTracing(context.Background(), cfg, Deps{})
	if err != nil || tp != nil || server != nil || client != nil || len(p.closers) != 0 {
		t.Fatalf("tracing off built %v, %d server and %d client interceptors, %d closers (%v)", tp, len(server), len(client), len(p.closers), err)
	}
	running := startProcess(t)
	if running.tracing != nil {
		t.Fatal("a process without --otlp-endpoint has a tracer provider")
	}
	if code := post(t, running, "/v2/workspace/activityconfig/get", map[string]string{"x-service-api-key": running.Dev.APIKey, "x-service-auth-token": running.Dev.AuthToken}); code != http.StatusOK {
		t.Fatalf("call: %d", code)
	}
}

// collector is a real OTLP/gRPC endpoint that keeps what it receives.
type collector struct {
	collectortrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names []string
	attrs []string
}

func (c *collector) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			c.attrs = append(c.attrs, kv.GetKey()+"="+kv.GetValue().GetStringValue())
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.names = append(c.names, s.GetName())
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// --otlp-endpoint sends the spans to an OTLP collector; shutting down flushes them.
func TestTracingExportsOverOTLP(t *testing.T) {
	col := &collector{}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, col)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	cfg, err := parse(t, nil, "--http-addr=127.0.0.1:0", "--grpc-addr=127.0.0.1:0", "--log-level=error", "--otlp-endpoint=http://"+ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	p, err := Start(context.Background(), cfg, Deps{LogOutput: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	code := post(t, p, "/v2/workspace/activityconfig/get", map[string]string{"x-service-api-key": p.Dev.APIKey, "x-service-auth-token": p.Dev.AuthToken})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if code != http.StatusOK {
		t.Fatalf("call: %d", code)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	for _, want := range []string{"POST /v2/workspace/activityconfig/get", "collab.activity.v1.ActivityService/GetActivityConfig"} {
		if !slices.Contains(col.names, want) {
			t.Errorf("the collector got no %q span: %v", want, col.names)
		}
	}
	if !slices.Contains(col.attrs, "service.name=collab") {
		t.Errorf("resource attributes %v", col.attrs)
	}
}

// The tracing flags and their environment twins; bad values are refused at start.
func TestTracingFlags(t *testing.T) {
	c, err := parse(t, map[string]string{"COLLAB_OTLP_ENDPOINT": "collector:4317", "COLLAB_TRACE_SAMPLE_RATIO": "0.25"})
	if err != nil || c.OTLPEndpoint != "collector:4317" || c.TraceSampleRatio != 0.25 {
		t.Fatalf("from the environment: %q %v %v", c.OTLPEndpoint, c.TraceSampleRatio, err)
	}
	c, err = parse(t, map[string]string{"COLLAB_TRACE_SAMPLE_RATIO": "0.25"}, "--otlp-endpoint=http://127.0.0.1:4317", "--trace-sample-ratio=0.5")
	if err != nil || c.OTLPEndpoint != "http://127.0.0.1:4317" || c.TraceSampleRatio != 0.5 {
		t.Fatalf("the flag wins: %q %v %v", c.OTLPEndpoint, c.TraceSampleRatio, err)
	}
	if c, err = parse(t, nil); err != nil || c.TraceSampleRatio != 1 {
		t.Fatalf("default ratio %v %v", c.TraceSampleRatio, err)
	}
	for _, args := range [][]string{
		{"--trace-sample-ratio=2"}, {"--trace-sample-ratio=-1"}, {"--trace-sample-ratio=half"}, {"--trace-sample-ratio=NaN"},
		{"--otlp-endpoint=collector"}, {"--otlp-endpoint=ftp://collector:4317"}, {"--otlp-endpoint=http://u:p@collector:4317"},
	} {
		if _, err := parse(t, nil, args...); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	if _, err := parse(t, map[string]string{"COLLAB_TRACE_SAMPLE_RATIO": "x"}); err == nil {
		t.Error("a bad ratio in the environment accepted")
	}
}

// lineWatcher is a log output that hands over the first line containing want.
type lineWatcher struct {
	want string
	mu   sync.Mutex
	buf  []byte
	got  chan string
}

func (w *lineWatcher) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		if strings.Contains(line, w.want) {
			select {
			case w.got <- line:
			default:
			}
		}
	}
}

// A collector that cannot be reached shows in the process's own log, in its format (JSON
// here), not as OpenTelemetry's plain lines on stderr.
func TestTracingExportFailureInTheProcessLog(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	// Export soon and give up soon: the defaults are 5 and 10 seconds.
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "200")
	cfg, err := parse(t, nil, "--http-addr=127.0.0.1:0", "--grpc-addr=127.0.0.1:0", "--log-format=json", "--otlp-endpoint=http://"+closed)
	if err != nil {
		t.Fatal(err)
	}
	w := &lineWatcher{want: "tracing: spans not exported", got: make(chan string, 1)}
	p, err := Start(context.Background(), cfg, Deps{LogOutput: w})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Shutdown(ctx)
	}()
	if code := post(t, p, "/v2/workspace/activityconfig/get", map[string]string{"x-service-api-key": p.Dev.APIKey, "x-service-auth-token": p.Dev.AuthToken}); code != http.StatusOK {
		t.Fatalf("call: %d", code)
	}
	var line string
	select {
	case line = <-w.got:
	case <-time.After(30 * time.Second): // a guard against a hang, not a measure
		t.Fatal("no export failure logged")
	}
	var entry map[string]any
	if err := json.Unmarshal([]byte(line), &entry); err != nil {
		t.Fatalf("not a JSON log line: %q", line)
	}
	if entry["level"] != "WARN" || entry["spans"] == nil || entry["error"] == nil {
		t.Errorf("log entry %v", entry)
	}
}

// A collector that accepts connections and never answers holds a process's Shutdown no longer
// than its context: the flush gives up with the context's error, named as tracing's.
func TestTracingShutdownWithAHungCollector(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	cfg, err := parse(t, nil, "--http-addr=127.0.0.1:0", "--grpc-addr=127.0.0.1:0", "--log-level=error", "--otlp-endpoint=http://"+ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	p, err := Start(context.Background(), cfg, Deps{LogOutput: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if code := post(t, p, "/v2/workspace/activityconfig/get", map[string]string{"x-service-api-key": p.Dev.APIKey, "x-service-auth-token": p.Dev.AuthToken}); code != http.StatusOK {
		t.Fatalf("call: %d", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err = p.Shutdown(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "tracing") {
		t.Fatalf("shutdown: %v, want tracing's flush ended by the context", err)
	}
}
