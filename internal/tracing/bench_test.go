package tracing_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/collab/collab/internal/inproc"
	"github.com/collab/collab/internal/tracing"
)

// The cost tracing adds to an in-process call: off (nothing installed), on with every trace
// sampled (spans built and handed to an exporter that drops them), and on with none sampled.
func BenchmarkInProcessCall(b *testing.B) {
	pass := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return handler(ctx, req)
	}
	for _, c := range []struct {
		name    string
		sampler sdktrace.Sampler
	}{{"off", nil}, {"sampled", sdktrace.AlwaysSample()}, {"unsampled", sdktrace.NeverSample()}} {
		b.Run(c.name, func(b *testing.B) {
			var conn grpc.ClientConnInterface
			if c.sampler == nil {
				local := inproc.New(grpc.NewServer(), pass, 1<<20)
				testpbRegister(local)
				conn = local.Conn()
			} else {
				tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(c.sampler), sdktrace.WithSyncer(tracetest.NewNoopExporter()))
				defer func() { _ = tp.Shutdown(context.Background()) }()
				local := inproc.New(grpc.NewServer(), tracing.ServerInterceptor(tp), 1<<20)
				testpbRegister(local)
				local.InterceptClients(tracing.ClientInterceptor(tp))
				conn = local.Conn()
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := call(ctx, conn, codes.OK); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
