package inproc

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
)

// healthSpy is a service whose Check records what reached it and answers as told.
type healthSpy struct {
	healthpb.UnimplementedHealthServer
	in, out metadata.MD
	peer    *peer.Peer
	answer  *healthpb.HealthCheckResponse
	err     error
	panics  bool
}

func (h *healthSpy) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.in, _ = metadata.FromIncomingContext(ctx)
	h.out, _ = metadata.FromOutgoingContext(ctx)
	h.peer, _ = peer.FromContext(ctx)
	if h.panics {
		panic("handler bug")
	}
	req.Service = "changed by the handler"
	_ = grpc.SetHeader(ctx, metadata.Pairs("X-Answer", "42"))
	return h.answer, h.err
}

// registrar records that services reach the real server too.
type registrar struct{ names []string }

func (r *registrar) RegisterService(desc *grpc.ServiceDesc, _ any) {
	r.names = append(r.names, desc.ServiceName)
}

func newServer(t *testing.T, spy *healthSpy, chain grpc.UnaryServerInterceptor, max int) (*Server, *registrar) {
	t.Helper()
	next := &registrar{}
	s := New(next, chain, max)
	healthpb.RegisterHealthServer(s, spy)
	return s, next
}

func TestCallRunsTheChainWithServerSideContext(t *testing.T) {
	spy := &healthSpy{answer: &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}}
	var order []string
	chain := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		order = append(order, "server:"+info.FullMethod)
		if md, _ := metadata.FromIncomingContext(ctx); strings.Join(md.Get("x-service-api-key"), "") != "k" {
			return nil, status.Error(codes.Unauthenticated, "no key")
		}
		return handler(ctx, req)
	}
	s, next := newServer(t, spy, chain, 0)
	if len(next.names) != 1 || next.names[0] != "grpc.health.v1.Health" {
		t.Fatalf("not registered on the real server: %v", next.names)
	}
	clientSide := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		order = append(order, "client")
		return invoker(metadata.AppendToOutgoingContext(ctx, "x-added", "yes"), method, req, reply, cc, opts...)
	}
	client := healthpb.NewHealthClient(s.Conn(clientSide))
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-service-api-key", "k")
	req := &healthpb.HealthCheckRequest{Service: "s"}
	var header metadata.MD
	resp, err := client.Check(ctx, req, grpc.Header(&header))
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check: %v %v", resp, err)
	}
	if strings.Join(order, ",") != "client,server:/grpc.health.v1.Health/Check" {
		t.Fatalf("order %v", order)
	}
	if spy.in.Get("x-added")[0] != "yes" || len(spy.out) != 0 {
		t.Fatalf("incoming %v, outgoing %v: the caller's metadata must arrive as incoming only", spy.in, spy.out)
	}
	if spy.peer == nil || spy.peer.Addr != Addr {
		t.Fatalf("peer %v", spy.peer)
	}
	if req.GetService() != "s" {
		t.Fatal("the handler changed the caller's request: it must get a copy")
	}
	if header.Get("x-answer")[0] != "42" {
		t.Fatalf("header %v", header)
	}
	resp.Status = healthpb.HealthCheckResponse_NOT_SERVING
	if spy.answer.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatal("the caller's reply shares memory with the handler's answer")
	}

	// Refused by the chain: the handler never runs.
	spy.in = nil
	_, err = client.Check(context.Background(), req)
	if status.Code(err) != codes.Unauthenticated || spy.in != nil {
		t.Fatalf("without a key: %v, handler ran: %v", err, spy.in != nil)
	}
}

func TestErrorsAndLimits(t *testing.T) {
	spy := &healthSpy{}
	pass := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return handler(ctx, req)
	}
	s, _ := newServer(t, spy, pass, 40)
	client := healthpb.NewHealthClient(s.Conn())
	ctx := context.Background()

	spy.err = errors.New("plain error")
	if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Unknown {
		t.Fatalf("plain error: %v", err)
	}
	spy.err = status.Error(codes.NotFound, "gone")
	if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); status.Code(err) != codes.NotFound {
		t.Fatalf("status error: %v", err)
	}
	spy.err = nil
	spy.answer = &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}
	if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("small answer: %v", err)
	}
	// An answer over the limit fails as over a real connection, both ways of answering.
	s.maxMessage = 1
	if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("over the limit: %v", err)
	}
	if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.ForceCodecV2(encoding.GetCodecV2("proto"))); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("over the limit, forced codec: %v", err)
	}
	s.maxMessage = 0

	// A forced codec decides how the reply is filled: here it keeps the bytes.
	var reply healthpb.HealthCheckResponse
	conn := s.Conn()
	if err := conn.Invoke(ctx, "/grpc.health.v1.Health/Check", &healthpb.HealthCheckRequest{}, &reply, grpc.ForceCodecV2(rawCodec{})); err != nil {
		t.Fatal(err)
	}
	if len(reply.ProtoReflect().GetUnknown()) == 0 || reply.GetStatus() != 0 {
		t.Fatalf("the forced codec was not used: %v", &reply)
	}

	// A codec that takes bytes over gets them whole, once, and under the limit only.
	owned := &ownedCodec{}
	reply.Reset()
	if err := conn.Invoke(ctx, "/grpc.health.v1.Health/Check", &healthpb.HealthCheckRequest{}, &reply, grpc.ForceCodecV2(owned)); err != nil {
		t.Fatal(err)
	}
	if want, _ := proto.Marshal(spy.answer); owned.calls != 1 || string(reply.ProtoReflect().GetUnknown()) != string(want) {
		t.Fatalf("owned codec: %d calls, bytes %x, want %x", owned.calls, reply.ProtoReflect().GetUnknown(), want)
	}
	s.maxMessage = 1
	if err := conn.Invoke(ctx, "/grpc.health.v1.Health/Check", &healthpb.HealthCheckRequest{}, &reply, grpc.ForceCodecV2(owned)); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("over the limit, owned codec: %v", err)
	}
	s.maxMessage = 0

	if err := conn.Invoke(ctx, "/grpc.health.v1.Health/Nope", &healthpb.HealthCheckRequest{}, &reply); status.Code(err) != codes.Unimplemented {
		t.Fatalf("unknown method: %v", err)
	}
	if _, err := conn.NewStream(ctx, &grpc.StreamDesc{}, "/grpc.health.v1.Health/Watch"); status.Code(err) != codes.Unimplemented {
		t.Fatalf("stream: %v", err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := client.Check(canceled, &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Canceled {
		t.Fatalf("canceled: %v", err)
	}
}

// rawCodec keeps the answer's bytes as the reply's unknown fields, as the gateway's codec does.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }
func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, err := proto.Marshal(v.(proto.Message))
	return mem.BufferSlice{mem.SliceBuffer(b)}, err
}
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	v.(proto.Message).ProtoReflect().SetUnknown(data.Materialize())
	return nil
}

// ownedCodec is rawCodec that also takes bytes over without a copy, as the gateway's does.
type ownedCodec struct {
	rawCodec
	calls int
}

func (c *ownedCodec) UnmarshalOwned(b []byte, v any) error {
	c.calls++
	v.(proto.Message).ProtoReflect().SetUnknown(b)
	return nil
}

// InterceptClients' interceptors run first on every channel made after, then the channel's own.
func TestInterceptClientsRunFirstOnEveryConn(t *testing.T) {
	spy := &healthSpy{answer: &healthpb.HealthCheckResponse{}}
	noChain := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return handler(ctx, req)
	}
	s, _ := newServer(t, spy, noChain, 0)
	var order []string
	tag := func(name string) grpc.UnaryClientInterceptor {
		return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			order = append(order, name)
			return invoker(metadata.AppendToOutgoingContext(ctx, "x-by", name), method, req, reply, cc, opts...)
		}
	}
	s.InterceptClients(tag("process"))
	for _, c := range []struct {
		conn grpc.ClientConnInterface
		want string
	}{{s.Conn(), "process"}, {s.Conn(tag("conn")), "process,conn"}} {
		order = nil
		if _, err := healthpb.NewHealthClient(c.conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(order, ","); got != c.want {
			t.Errorf("interceptors ran %q, want %q", got, c.want)
		}
		if got := strings.Join(spy.in.Get("x-by"), ","); got != c.want {
			t.Errorf("the server saw %q, want %q", got, c.want)
		}
	}
}

// accessAnswer answers Get Permissions with a rich answer: maps of messages, optional fields,
// a list.
type accessAnswer struct {
	accessv1.UnimplementedAccessServiceServer
	answer *accessv1.GetPermissionsResponse
}

func (a *accessAnswer) GetPermissions(context.Context, *accessv1.GetPermissionsRequest) (*accessv1.GetPermissionsResponse, error) {
	return a.answer, nil
}

// Collab messages are sized and marshalled by their generated code (vtprotobuf): the bytes a
// codec that takes them over gets are the answer's, and the size limit holds, whether the
// answer goes as bytes or moves.
func TestGeneratedMarshalling(t *testing.T) {
	role, denied, code := "viewer", "User does not have access to document", "permission_denied"
	user := &accessv1.UserPermissions{
		Documents:    map[string]*accessv1.PermissionEntry{"a": {AccessRole: &role, ExpiresAt: proto.Float64(1.5e9)}, "b": {Error: &denied, ErrorCode: &code}},
		Folders:      map[string]*accessv1.PermissionEntry{},
		Organization: map[string]*accessv1.OrganizationAccess{"o": {AccessRole: "editor"}},
		Context:      &accessv1.AccessContext{AccessFields: []string{"region:eu", "p:7"}},
	}
	answer := &accessv1.GetPermissionsResponse{Status: "success", Message: "ok", Data: map[string]*accessv1.UserPermissions{"u": user, "v": {}}}
	if _, ok := proto.Message(answer).(generated); !ok {
		t.Fatal("collab messages have no generated marshalling: run scripts/generate")
	}
	pass := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return handler(ctx, req)
	}
	s := New(&registrar{}, pass, 0)
	accessv1.RegisterAccessServiceServer(s, &accessAnswer{answer: answer})
	conn, ctx := s.Conn(), context.Background()

	owned := &ownedCodec{}
	var reply accessv1.GetPermissionsResponse
	if err := conn.Invoke(ctx, accessv1.AccessService_GetPermissions_FullMethodName, &accessv1.GetPermissionsRequest{}, &reply, grpc.ForceCodecV2(owned)); err != nil {
		t.Fatal(err)
	}
	var got accessv1.GetPermissionsResponse
	if err := proto.Unmarshal(reply.ProtoReflect().GetUnknown(), &got); err != nil || !proto.Equal(&got, answer) || owned.calls != 1 {
		t.Fatalf("bytes handed over decode to %v (%v), want %v", &got, err, answer)
	}

	s.maxMessage = proto.Size(answer) - 1
	if err := conn.Invoke(ctx, accessv1.AccessService_GetPermissions_FullMethodName, &accessv1.GetPermissionsRequest{}, &reply, grpc.ForceCodecV2(owned)); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("over the limit, owned codec: %v", err)
	}
	if _, err := accessv1.NewAccessServiceClient(conn).GetPermissions(ctx, &accessv1.GetPermissionsRequest{}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("over the limit, moved: %v", err)
	}
	s.maxMessage = proto.Size(answer)
	if moved, err := accessv1.NewAccessServiceClient(conn).GetPermissions(ctx, &accessv1.GetPermissionsRequest{}); err != nil || !proto.Equal(moved, answer) {
		t.Fatalf("at the limit, moved: %v, %v", moved, err)
	}
}
