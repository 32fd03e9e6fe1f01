// Package grpcserver builds the gRPC server every service runs on, with the one interceptor
// chain they share: metrics when on, request id and logging, panic recovery, error mapping and
// authentication.
package grpcserver

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/logging"
)

// MaxMessageBytes bounds gRPC messages both ways, over TCP and in process; the gateway's body
// limit (4 MiB) sits below it.
const MaxMessageBytes = 8 << 20

// requestReadTimeout bounds how long a call's request message may take to arrive
// (receive.go). A variable for tests.
var requestReadTimeout = 60 * time.Second

// Fits reports whether an answer can be sent: handlers of reads the spec does not page (Get
// Documents v1, Get Users) check it, to refuse with a message that says what to do instead of
// failing in the transport.
func Fits(m proto.Message) bool { return proto.Size(m) <= MaxMessageBytes }

// Chain is the one unary interceptor every call passes, over TCP or in process (internal/inproc):
// request id and access log, panic recovery, error mapping (apierr.ToStatus), the request
// limits (requestLimits) and authentication, in that order. outer run first, around all of them: the tracing
// (internal/tracing) and metrics (internal/metrics) interceptors go there, so they see the code
// the caller gets, after panic recovery and error mapping, and calls authentication refuses.
func Chain(log *slog.Logger, auth *authn.Interceptor, outer ...grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	chain := append(append([]grpc.UnaryServerInterceptor{}, outer...), requestLog(log), recovery(log), errorMapping(log), requestLimits(auth.FromForwarder), auth.Unary)
	var from func(i int, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) grpc.UnaryHandler
	from = func(i int, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) grpc.UnaryHandler {
		if i == len(chain) {
			return handler
		}
		return func(ctx context.Context, req any) (any, error) {
			return chain[i](ctx, req, info, from(i+1, info, handler))
		}
	}
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		received(ctx) // the request message came whole (receive.go)
		return from(0, info, handler)(ctx, req)
	}
}

// MaxHeaderListBytes bounds a call's metadata (grpc-go's default is 16 MiB), as the HTTP
// listener bounds a request's headers (16 KiB and net/http's 4 KiB of slack): the deployment's
// own calls carry a few hundred bytes of credentials, request id and trace context.
// MaxConcurrentStreams bounds the calls one connection has open at once.
const (
	MaxHeaderListBytes   = 20 << 10
	MaxConcurrentStreams = 1000
)

// New returns a grpc.Server whose unary calls pass chain (Chain), with the message, metadata
// and stream limits and serverCodec.
func New(chain grpc.UnaryServerInterceptor, opts ...grpc.ServerOption) *grpc.Server {
	base := []grpc.ServerOption{grpc.UnaryInterceptor(chain), grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes), newServerCodec(),
		grpc.MaxHeaderListSize(MaxHeaderListBytes), grpc.MaxConcurrentStreams(MaxConcurrentStreams),
		grpc.InTapHandle(receiveDeadline), grpc.StreamInterceptor(streamReceive)}
	return grpc.NewServer(append(base, opts...)...)
}

func requestLog(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		id := ""
		if md, ok := metadata.FromIncomingContext(ctx); ok {
			if v := md.Get(logging.RequestIDHeader); len(v) > 0 && logging.ValidRequestID(v[0]) {
				id = v[0]
			}
		}
		if id == "" {
			id = logging.NewRequestID()
		}
		ctx = logging.WithRequestID(ctx, id)
		start := time.Now()
		resp, err := handler(ctx, req)
		code := status.Code(err)
		level := slog.LevelInfo
		if strings.HasPrefix(info.FullMethod, "/grpc.health.") {
			level = slog.LevelDebug
		}
		if !log.Enabled(ctx, level) {
			return resp, err
		}
		log.Log(ctx, level, "rpc", "method", info.FullMethod, "code", code.String(), "duration_ms", float64(time.Since(start).Microseconds())/1000)
		return resp, err
	}
}

func recovery(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if r := recover(); r != nil {
				log.ErrorContext(ctx, "panic in handler", "method", info.FullMethod, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				resp, err = nil, status.Error(codes.Internal, "Internal error.")
			}
		}()
		return handler(ctx, req)
	}
}

func errorMapping(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		if err != nil {
			return nil, apierr.ToStatus(ctx, log.With("method", info.FullMethod), err)
		}
		return resp, nil
	}
}
