package tracing

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// InstrumentationName names the tracers of this package.
const InstrumentationName = "github.com/collab/collab/internal/tracing"

// The interceptors are unary interceptors, not gRPC stats handlers, because calls between
// services of one process go through internal/inproc, which runs the server's interceptor
// chain but no transport: stats handlers would see only the TCP half of the calls.

// ServerInterceptor starts a server span for every call, as the child of the trace context
// the caller sent in the metadata (ClientInterceptor's), named "package.Service/Method". It
// belongs outermost in the chain (grpcserver.Chain's outer), so the span covers the whole
// call and its status is the code the caller gets.
func ServerInterceptor(tp trace.TracerProvider) grpc.UnaryServerInterceptor {
	tracer := tp.Tracer(InstrumentationName)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if probe(info.FullMethod) {
			return handler(ctx, req)
		}
		md, _ := metadata.FromIncomingContext(ctx)
		ctx = Propagator.Extract(ctx, mdCarrier(md))
		name, attrs := rpcNames(info.FullMethod)
		ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
		defer span.End()
		resp, err := handler(ctx, req)
		code := status.Code(err)
		span.SetAttributes(semconv.RPCGRPCStatusCodeKey.Int(int(code)))
		if serverFault(code) {
			// The status message only: causes stay in the logs (they may hold internal text).
			span.SetStatus(otelcodes.Error, code.String())
		}
		return resp, err
	}
}

// ClientInterceptor starts a client span for every outgoing call and sends its trace context
// in the call's metadata, so the server's span is its child, in this process or another.
func ClientInterceptor(tp trace.TracerProvider) grpc.UnaryClientInterceptor {
	tracer := tp.Tracer(InstrumentationName)
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if probe(method) {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		name, attrs := rpcNames(method)
		ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
		defer span.End()
		ctx = Inject(ctx)
		err := invoker(ctx, method, req, reply, cc, opts...)
		code := status.Code(err)
		span.SetAttributes(semconv.RPCGRPCStatusCodeKey.Int(int(code)))
		if code != codes.OK {
			span.SetStatus(otelcodes.Error, code.String())
		}
		return err
	}
}

// Inject adds the trace context of ctx's span to its outgoing metadata (a copy: metadata
// already on ctx may be shared).
func Inject(ctx context.Context) context.Context {
	md, ok := metadata.FromOutgoingContext(ctx)
	if ok {
		md = md.Copy()
	} else {
		md = metadata.MD{}
	}
	Propagator.Inject(ctx, mdCarrier(md))
	return metadata.NewOutgoingContext(ctx, md)
}

// probe reports whether a method is a health check: orchestrators and the gateway's /readyz
// call them every few seconds, and spans of them would bury the traces of real work (the
// access log keeps them at debug level for the same reason).
func probe(fullMethod string) bool { return strings.HasPrefix(fullMethod, "/grpc.health.v1.Health/") }

// serverFault reports the codes that are the server's failure rather than the caller's
// (OpenTelemetry's gRPC conventions): only these mark a server span as an error.
func serverFault(c codes.Code) bool {
	switch c {
	case codes.Unknown, codes.DeadlineExceeded, codes.Unimplemented, codes.Internal, codes.Unavailable, codes.DataLoss:
		return true
	}
	return false
}

// rpcNames splits "/package.Service/Method" into the span name and its attributes.
func rpcNames(fullMethod string) (string, []attribute.KeyValue) {
	name := strings.TrimPrefix(fullMethod, "/")
	attrs := []attribute.KeyValue{semconv.RPCSystemGRPC}
	if svc, method, ok := strings.Cut(name, "/"); ok {
		attrs = append(attrs, semconv.RPCService(svc), semconv.RPCMethod(method))
	}
	return name, attrs
}

// mdCarrier lets the propagator read and write gRPC metadata, whose keys are lower case.
type mdCarrier metadata.MD

func (c mdCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c mdCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c mdCarrier) Keys() []string {
	out := make([]string, 0, len(c))
	for k := range c {
		out = append(out, k)
	}
	return out
}
