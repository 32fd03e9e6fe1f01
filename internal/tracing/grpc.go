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
		ctx = Propagator.Extract(ctx, incomingCarrier{ctx})
		ctx, span := tracer.Start(ctx, spanName(info.FullMethod), serverKind)
		defer span.End()
		resp, err := handler(ctx, req)
		if !span.IsRecording() {
			// Unsampled: attributes would be dropped, so they are not even built.
			return resp, err
		}
		code := status.Code(err)
		span.SetAttributes(rpcAttributes(info.FullMethod, code)...)
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
		ctx, span := tracer.Start(ctx, spanName(method), clientKind)
		defer span.End()
		ctx = Inject(ctx)
		err := invoker(ctx, method, req, reply, cc, opts...)
		if !span.IsRecording() {
			return err
		}
		code := status.Code(err)
		span.SetAttributes(rpcAttributes(method, code)...)
		if code != codes.OK {
			span.SetStatus(otelcodes.Error, code.String())
		}
		return err
	}
}

// Inject adds the trace context of ctx's span to its outgoing metadata, replacing any the
// metadata holds already; the metadata on ctx, which may be shared, is not changed.
func Inject(ctx context.Context) context.Context {
	var c pairs
	Propagator.Inject(ctx, &c)
	if len(c) == 0 {
		return ctx
	}
	if metadata.ValueFromOutgoingContext(ctx, traceparent) == nil && metadata.ValueFromOutgoingContext(ctx, tracestate) == nil {
		// The common case: appending copies no metadata.
		return metadata.AppendToOutgoingContext(ctx, c...)
	}
	md, _ := metadata.FromOutgoingContext(ctx) // a copy
	// A tracestate belongs to its traceparent: an old one must not ride along with ours.
	delete(md, tracestate)
	for i := 0; i+1 < len(c); i += 2 {
		md.Set(c[i], c[i+1])
	}
	return metadata.NewOutgoingContext(ctx, md)
}

// The keys of W3C Trace Context.
const (
	traceparent = "traceparent"
	tracestate  = "tracestate"
)

// The span kinds as start options, made once: they are the same for every call.
var (
	serverKind = trace.WithSpanKind(trace.SpanKindServer)
	clientKind = trace.WithSpanKind(trace.SpanKindClient)
)

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

// spanName is "package.Service/Method" of "/package.Service/Method".
func spanName(fullMethod string) string { return strings.TrimPrefix(fullMethod, "/") }

// rpcAttributes are a recorded RPC span's attributes: the system, service and method of
// "/package.Service/Method", and the status code.
func rpcAttributes(fullMethod string, code codes.Code) []attribute.KeyValue {
	attrs := []attribute.KeyValue{semconv.RPCSystemGRPC, semconv.RPCGRPCStatusCodeKey.Int(int(code))}
	if svc, method, ok := strings.Cut(spanName(fullMethod), "/"); ok {
		attrs = append(attrs, semconv.RPCService(svc), semconv.RPCMethod(method))
	}
	return attrs
}

// incomingCarrier lets the propagator read the incoming metadata of a call without copying
// all of it (metadata.FromIncomingContext would).
type incomingCarrier struct{ ctx context.Context }

func (c incomingCarrier) Get(key string) string {
	if v := metadata.ValueFromIncomingContext(c.ctx, key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (incomingCarrier) Set(string, string) {}

func (c incomingCarrier) Keys() []string {
	md, _ := metadata.FromIncomingContext(c.ctx)
	out := make([]string, 0, len(md))
	for k := range md {
		out = append(out, k)
	}
	return out
}

// pairs collects what the propagator writes as metadata key-value pairs, keys lower case as
// gRPC wants them (the propagator's are already).
type pairs []string

func (p *pairs) Get(key string) string {
	for i := 0; i+1 < len(*p); i += 2 {
		if (*p)[i] == key {
			return (*p)[i+1]
		}
	}
	return ""
}

func (p *pairs) Set(key, value string) { *p = append(*p, strings.ToLower(key), value) }

func (p *pairs) Keys() []string {
	var out []string
	for i := 0; i < len(*p); i += 2 {
		out = append(out, (*p)[i])
	}
	return out
}
