package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"

	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"

	"github.com/collab/collab/gateway"
	"github.com/collab/collab/internal/inproc"
	"github.com/collab/collab/internal/logging"
	"github.com/collab/collab/internal/tracing"
)

// What tracing adds to one HTTP request through the gateway to an in-process service: off
// (nothing installed, as without --otlp-endpoint), on with the request sampled (spans built and
// handed to an exporter that drops them), and on with it not sampled.
func BenchmarkGatewayRequestTracing(b *testing.B) {
	pass := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return handler(ctx, req)
	}
	for _, c := range []struct {
		name    string
		sampler sdktrace.Sampler
	}{{"off", nil}, {"sampled", sdktrace.AlwaysSample()}, {"unsampled", sdktrace.NeverSample()}} {
		b.Run(c.name, func(b *testing.B) {
			var gw *gateway.Gateway
			var err error
			if c.sampler == nil {
				local := inproc.New(grpc.NewServer(), pass, 1<<20)
				workspacev1.RegisterWorkspaceServiceServer(local, &stubWorkspace{})
				gw, err = gateway.New(context.Background(), upstreams(local.Conn()), logging.Discard())
			} else {
				tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(c.sampler), sdktrace.WithSyncer(tracetest.NewNoopExporter()))
				defer func() { _ = tp.Shutdown(context.Background()) }()
				local := inproc.New(grpc.NewServer(), tracing.ServerInterceptor(tp), 1<<20)
				workspacev1.RegisterWorkspaceServiceServer(local, &stubWorkspace{})
				local.InterceptClients(tracing.ClientInterceptor(tp))
				gw, err = gateway.New(context.Background(), upstreams(local.Conn()), logging.Discard())
				if err == nil {
					gw.SetTracing(tp)
				}
			}
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/v2/workspace/get", strings.NewReader(`{"data": {}}`))
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				gw.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
			}
		})
	}
}
