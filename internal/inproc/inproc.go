// Package inproc is a gRPC channel to services of the same process that runs the server's
// interceptor chain and the handler directly, without HTTP/2 framing and without serialising the
// request. The gateway and the services of an all-in-one process call each other through it:
// authentication, logging, recovery and error mapping run on every call exactly as over TCP
// (the gateway must never skip them: docs/architecture.md, "Request path"), at a fraction of the cost
// of a loopback or bufconn connection. Only unary calls are served; streams (reflection) go to
// the real server.
package inproc

import (
	"context"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Server collects the services registered on it and serves them to its channels. It is a
// grpc.ServiceRegistrar: registering on it registers on the real gRPC server too, so both
// always hold the same services.
type Server struct {
	next        grpc.ServiceRegistrar
	interceptor grpc.UnaryServerInterceptor
	maxMessage  int
	// clients run first on every channel's calls (InterceptClients).
	clients []grpc.UnaryClientInterceptor

	mu      sync.RWMutex
	methods map[string]method // "/pkg.Service/Method"
}

type method struct {
	desc *grpc.MethodDesc
	impl any
}

// New returns a Server that runs interceptor (the real server's whole unary chain) around every
// handler and registers every service on next as well. maxMessage bounds answers as the real
// server's MaxSendMsgSize does.
func New(next grpc.ServiceRegistrar, interceptor grpc.UnaryServerInterceptor, maxMessage int) *Server {
	return &Server{next: next, interceptor: interceptor, maxMessage: maxMessage, methods: map[string]method{}}
}

// RegisterService implements grpc.ServiceRegistrar.
func (s *Server) RegisterService(desc *grpc.ServiceDesc, impl any) {
	s.next.RegisterService(desc, impl)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range desc.Methods {
		m := &desc.Methods[i]
		s.methods["/"+desc.ServiceName+"/"+m.MethodName] = method{desc: m, impl: impl}
	}
}

// Conn returns a channel to the server's services; interceptors run on the calling side
// first, as a grpc.ClientConn's would (they add the internal token, say), after those of
// InterceptClients.
func (s *Server) Conn(interceptors ...grpc.UnaryClientInterceptor) grpc.ClientConnInterface {
	return &conn{server: s, interceptors: append(slices.Clip(s.clients), interceptors...)}
}

// InterceptClients adds client interceptors that run first on the calls of every channel Conn
// returns from now on: what every connection of the process does (tracing), set once where
// the server is made rather than at each Conn. Call it before Conn.
func (s *Server) InterceptClients(interceptors ...grpc.UnaryClientInterceptor) {
	s.clients = append(s.clients, interceptors...)
}

type conn struct {
	server       *Server
	interceptors []grpc.UnaryClientInterceptor
}

func (c *conn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	if len(c.interceptors) == 0 {
		return c.server.invoke(ctx, method, args, reply, opts...)
	}
	return c.intercept(0)(ctx, method, args, reply, nil, opts...)
}

// intercept chains the client interceptors from the i-th on, ending in the server.
func (c *conn) intercept(i int) grpc.UnaryInvoker {
	if i == len(c.interceptors) {
		return func(ctx context.Context, method string, args, reply any, _ *grpc.ClientConn, opts ...grpc.CallOption) error {
			return c.server.invoke(ctx, method, args, reply, opts...)
		}
	}
	return func(ctx context.Context, method string, args, reply any, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		return c.interceptors[i](ctx, method, args, reply, cc, c.intercept(i+1), opts...)
	}
}

func (c *conn) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, status.Error(codes.Unimplemented, "streaming calls are not served in process")
}

// Addr is the peer address handlers see on in-process calls.
var Addr net.Addr = addr{}

type addr struct{}

func (addr) Network() string { return "inproc" }
func (addr) String() string  { return "inproc" }

func (s *Server) invoke(ctx context.Context, fullMethod string, args, reply any, opts ...grpc.CallOption) error {
	s.mu.RLock()
	m, ok := s.methods[fullMethod]
	s.mu.RUnlock()
	if !ok {
		return status.Errorf(codes.Unimplemented, "unknown method %s", fullMethod)
	}
	in, ok := args.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "request of %s is not a protobuf message", fullMethod)
	}
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}

	// The handler sees what a server sees: the caller's metadata as incoming metadata, none of
	// it as outgoing (so it is never forwarded by accident), a peer, and a stream for headers.
	md, _ := metadata.FromOutgoingContext(ctx) // a copy already, with lower-case keys
	sctx := metadata.NewIncomingContext(metadata.NewOutgoingContext(ctx, nil), md)
	sctx = peer.NewContext(sctx, inprocPeer)
	stream := &transportStream{method: fullMethod}
	sctx = grpc.NewContextWithServerTransportStream(sctx, stream)

	dec := func(target any) error {
		t, ok := target.(proto.Message)
		if !ok {
			return status.Errorf(codes.Internal, "request of %s is not a protobuf message", fullMethod)
		}
		proto.Merge(t, in)
		return nil
	}
	resp, err := m.desc.Handler(m.impl, sctx, dec, s.interceptor)
	stream.deliver(opts)
	if err != nil {
		if _, isStatus := status.FromError(err); !isStatus {
			err = status.Error(codes.Unknown, err.Error())
		}
		return err
	}
	out, ok := resp.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "answer of %s is not a protobuf message", fullMethod)
	}
	return s.answer(out, reply, opts)
}

// inprocPeer is the peer of every in-process call; nothing changes a call's peer.
var inprocPeer = &peer.Peer{Addr: Addr, LocalAddr: Addr}

// ownedUnmarshaler is a codec that can take bytes over without copying them (the gateway's,
// which keeps answers as bytes).
type ownedUnmarshaler interface {
	UnmarshalOwned(b []byte, v any) error
}

// answer fills reply from out: through the codec the caller forced (the gateway keeps answers
// as bytes), else by moving it. Answers over the size limit fail as over a real connection.
func (s *Server) answer(out proto.Message, reply any, opts []grpc.CallOption) error {
	for _, o := range opts {
		codec, ok := o.(grpc.ForceCodecV2CallOption)
		if !ok {
			continue
		}
		if owned, ok := codec.CodecV2.(ownedUnmarshaler); ok {
			b, err := s.marshal(out)
			if err != nil {
				return err
			}
			return owned.UnmarshalOwned(b, reply)
		}
		b, err := codec.CodecV2.Marshal(out)
		if err != nil {
			return status.Errorf(codes.Internal, "marshal answer: %v", err)
		}
		defer b.Free() //nolint:revive // the loop returns in this iteration: one deferred call
		if s.maxMessage > 0 && b.Len() > s.maxMessage {
			return tooLarge(b.Len(), s.maxMessage)
		}
		return codec.CodecV2.Unmarshal(b, reply)
	}
	r, ok := reply.(proto.Message)
	if !ok {
		return status.Error(codes.Internal, "reply is not a protobuf message")
	}
	if s.maxMessage > 0 {
		if n := size(out); n > s.maxMessage {
			return tooLarge(n, s.maxMessage)
		}
	}
	// The handler's answer is the caller's alone from here on (nothing else holds it), so when
	// both are the same generated type the answer moves into the reply as is: copying it, a
	// deep walk of maps and lists, was most of the cost of an in-process call.
	rv, ov := reflect.ValueOf(r), reflect.ValueOf(out)
	if rv.Type() == ov.Type() && rv.Kind() == reflect.Pointer && !rv.IsNil() && !ov.IsNil() {
		rv.Elem().Set(ov.Elem())
		return nil
	}
	proto.Reset(r)
	proto.Merge(r, out)
	return nil
}

// generated is a message with generated sizing and marshalling (vtprotobuf, buf.gen.yaml):
// every collab message. It takes none of proto.Marshal's reflection, which on maps of
// messages (Get Permissions' answer) is most of the cost.
type generated interface {
	SizeVT() int
	MarshalToSizedBufferVT(b []byte) (int, error)
}

// size is proto.Size, by the generated code when there is some.
func size(m proto.Message) int {
	if g, ok := m.(generated); ok {
		return g.SizeVT()
	}
	return proto.Size(m)
}

// marshal returns m's bytes in a buffer of their exact size, or the error of an answer over
// the size limit.
func (s *Server) marshal(m proto.Message) ([]byte, error) {
	if g, ok := m.(generated); ok {
		n := g.SizeVT()
		if s.maxMessage > 0 && n > s.maxMessage {
			return nil, tooLarge(n, s.maxMessage)
		}
		b := make([]byte, n)
		// The generated code writes from the end: with the exact size, b is filled whole.
		if w, err := g.MarshalToSizedBufferVT(b); err != nil || w != n {
			return nil, status.Errorf(codes.Internal, "marshal answer: %d of %d bytes: %v", w, n, err)
		}
		return b, nil
	}
	// One sizing pass: the marshalling reuses the sizes it cached.
	n := proto.Size(m)
	if s.maxMessage > 0 && n > s.maxMessage {
		return nil, tooLarge(n, s.maxMessage)
	}
	b, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(make([]byte, 0, n), m)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "marshal answer: %v", err)
	}
	return b, nil
}

// tooLarge fails as a gRPC client does on an answer over its limit, code and words alike, so
// whoever maps transport errors (the gateway) treats both the same.
func tooLarge(n, limit int) error {
	return status.Errorf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", n, limit)
}

// transportStream collects the headers and trailers a handler sets, for the caller's
// grpc.Header and grpc.Trailer options.
type transportStream struct {
	method string

	mu              sync.Mutex
	header, trailer metadata.MD
}

func (t *transportStream) Method() string { return t.method }

func (t *transportStream) SetHeader(md metadata.MD) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.header = metadata.Join(t.header, md)
	return nil
}

func (t *transportStream) SendHeader(md metadata.MD) error { return t.SetHeader(md) }

func (t *transportStream) SetTrailer(md metadata.MD) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.trailer = metadata.Join(t.trailer, md)
	return nil
}

func (t *transportStream) deliver(opts []grpc.CallOption) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			*o.HeaderAddr = lower(t.header)
		case grpc.TrailerCallOption:
			*o.TrailerAddr = lower(t.trailer)
		case grpc.PeerCallOption:
			*o.PeerAddr = peer.Peer{Addr: Addr, LocalAddr: Addr}
		}
	}
}

// lower copies md with lower-case keys, as metadata arrives over a real connection; nil when
// the handler set none.
func lower(md metadata.MD) metadata.MD {
	if len(md) == 0 {
		return nil
	}
	out := metadata.MD{}
	for k, v := range md {
		k = strings.ToLower(k)
		out[k] = append(out[k], v...)
	}
	return out
}
