package grpcserver

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/tap"
)

// receiveTimerKey carries a call's receive timer (receiveDeadline) on its context.
type receiveTimerKey struct{}

// receiveDeadline is the server's tap, run when a call's headers arrive, before its request
// message is read: the call ends unless the message comes whole within requestReadTimeout, as
// an HTTP request's body must within the HTTP listener's read timeout. The message is read
// before the interceptors run, so before any credentials are checked: without it a client held
// up to MaxMessageBytes a call, MaxConcurrentStreams calls a connection, by sending all of
// each message but its last byte, for the connection's whole life (issue 20, attack pass 26).
// Chain stops the timer once the message has come; a stream (health's Watch, reflection) has
// it for each message it reads (receivingStream).
func receiveDeadline(ctx context.Context, _ *tap.Info) (context.Context, error) {
	ctx, cancel := context.WithCancel(ctx)
	t := time.AfterFunc(requestReadTimeout, cancel)
	return context.WithValue(ctx, receiveTimerKey{}, t), nil
}

// received stops the call's receive timer: its request message has come.
func received(ctx context.Context) {
	if t, ok := ctx.Value(receiveTimerKey{}).(*time.Timer); ok {
		t.Stop()
	}
}

// streamReceive is the stream interceptor: a stream starts before any message comes, and each
// message it reads must come within requestReadTimeout of the read.
func streamReceive(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	t, ok := ss.Context().Value(receiveTimerKey{}).(*time.Timer)
	if !ok {
		return handler(srv, ss)
	}
	t.Stop()
	return handler(srv, &receivingStream{ServerStream: ss, timer: t})
}

// receivingStream arms its call's receive timer while it reads a message.
type receivingStream struct {
	grpc.ServerStream
	timer *time.Timer
}

func (s *receivingStream) RecvMsg(m any) error {
	s.timer.Reset(requestReadTimeout)
	defer s.timer.Stop()
	return s.ServerStream.RecvMsg(m) //nolint:wrapcheck // the stream's own status
}
