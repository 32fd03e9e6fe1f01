package tracing_test

import (
	"context"
	"net"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/collab/collab/internal/tracing"
)

// collector is a real OTLP/gRPC receiver keeping the span names and the metadata of the calls.
type collector struct {
	collectortrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names []string
	md    []metadata.MD
}

func (c *collector) Export(ctx context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	md, _ := metadata.FromIncomingContext(ctx)
	c.md = append(c.md, md)
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.names = append(c.names, s.GetName())
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func startCollector(t *testing.T) (*collector, string) {
	t.Helper()
	col := &collector{}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, col)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return col, ln.Addr().String()
}

// What the OTEL_* environment does to a process (docs/operations.md, "Tracing"): the endpoint
// and TLS choice are the flag's, whatever OTEL_EXPORTER_OTLP_*ENDPOINT and _INSECURE say; the
// exporter's headers come from OTEL_EXPORTER_OTLP_HEADERS.
func TestOTELEnvironmentBesideTheFlag(t *testing.T) {
	col, addr := startCollector(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := ln.Addr().String()
	ln.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+elsewhere)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://"+elsewhere)
	t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "false")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-collector-key=k3y")

	if tp, err := tracing.NewProvider(context.Background(), tracing.Config{SampleRatio: 1}); err != nil || tp != nil {
		t.Fatalf("OTEL_EXPORTER_OTLP_ENDPOINT alone turned tracing on (%v)", err)
	}
	tp, err := tracing.NewProvider(context.Background(), tracing.Config{Endpoint: "http://" + addr, SampleRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tp.Tracer("test").Start(context.Background(), "work")
	span.End()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatalf("flush to the flag's collector: %v", err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.names) != 1 || col.names[0] != "work" {
		t.Fatalf("the collector got %v", col.names)
	}
	if got := col.md[0].Get("x-collector-key"); len(got) != 1 || got[0] != "k3y" {
		t.Errorf("OTEL_EXPORTER_OTLP_HEADERS not sent: %v", col.md[0])
	}
}

// The sampler and service.name are ours whatever OTEL_TRACES_SAMPLER and OTEL_SERVICE_NAME say;
// OTEL_RESOURCE_ATTRIBUTES adds to the resource.
func TestOTELEnvironmentSamplerAndResource(t *testing.T) {
	t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
	t.Setenv("OTEL_SERVICE_NAME", "other")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=staging")
	exp := tracetest.NewInMemoryExporter()
	tp, err := tracing.NewProvider(context.Background(), tracing.Config{Exporter: exp, SampleRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tp.Shutdown(context.Background()) }()
	_, span := tp.Tracer("test").Start(context.Background(), "work")
	span.End()
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("OTEL_TRACES_SAMPLER overrode the ratio: %d spans", len(spans))
	}
	attrs := map[string]string{}
	for _, kv := range spans[0].Resource.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	if attrs["service.name"] != tracing.ServiceName || attrs["deployment.environment.name"] != "staging" {
		t.Errorf("resource %v", attrs)
	}
}
