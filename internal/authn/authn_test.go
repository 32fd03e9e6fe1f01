package authn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	_ "google.golang.org/protobuf/types/known/emptypb" // google/protobuf/empty.proto, which brokenFile uses

	optionsv1 "github.com/collab/collab/proto/collab/options/v1"
	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/protoset"
)

// fakeAuth accepts key "k"/token "t" and workspace "w"/token "wt".
type fakeAuth struct{ calls int }

func (f *fakeAuth) AuthenticateKey(_ context.Context, key, token string) (Caller, error) {
	f.calls++
	if key != "k" {
		return Caller{}, apierr.PermissionDenied("Invalid API key.")
	}
	if token != "t" {
		return Caller{}, apierr.InvalidArgument("Auth token not found.")
	}
	return Caller{WorkspaceID: "w", APIKey: "k"}, nil
}

func (f *fakeAuth) AuthenticateWorkspace(_ context.Context, id, token string) (Caller, error) {
	f.calls++
	if id != "w" {
		return Caller{}, apierr.NotFound("Workspace not found.")
	}
	if token != "wt" {
		return Caller{}, apierr.Unauthenticated("Invalid auth token for workspace.")
	}
	return Caller{WorkspaceID: "w"}, nil
}

type bodyReq struct{ key, token string }

func (b bodyReq) GetApiKey() string    { return b.key }
func (b bodyReq) GetAuthToken() string { return b.token }

func incoming(kv ...string) context.Context {
	return metadata.NewIncomingContext(context.Background(), metadata.Pairs(kv...))
}

func TestInterceptorClasses(t *testing.T) {
	i := NewInterceptor(&fakeAuth{}, "internal-secret")
	i.classes.Store("/t/Key", optionsv1.Auth_AUTH_KEY)
	i.classes.Store("/t/Body", optionsv1.Auth_AUTH_BODY)
	i.classes.Store("/t/KeyBody", optionsv1.Auth_AUTH_KEY_AND_BODY)
	i.classes.Store("/t/WS", optionsv1.Auth_AUTH_WORKSPACE)
	i.classes.Store("/t/Public", optionsv1.Auth_AUTH_PUBLIC)
	i.classes.Store("/t/Internal", optionsv1.Auth_AUTH_INTERNAL)
	i.classes.Store("/t/User", optionsv1.Auth_AUTH_KEY_OR_USER)

	cases := []struct {
		name   string
		method string
		ctx    context.Context
		req    any
		code   codes.Code
		msg    string
		caller string // expected APIKey/WorkspaceID pair "key|ws" on success
	}{
		{"key ok", "/t/Key", incoming(HeaderAPIKey, "k", HeaderAuthToken, "t"), nil, codes.OK, "", "k|w"},
		{"key missing", "/t/Key", incoming(), nil, codes.InvalidArgument, "API key not found in headers.", ""},
		{"token missing", "/t/Key", incoming(HeaderAPIKey, "k"), nil, codes.InvalidArgument, "Auth Token not found in headers.", ""},
		{"key unknown", "/t/Key", incoming(HeaderAPIKey, "x", HeaderAuthToken, "t"), nil, codes.PermissionDenied, "Invalid API key.", ""},
		{"body ok", "/t/Body", incoming(), bodyReq{"k", "t"}, codes.OK, "", "k|w"},
		{"body headers ignored", "/t/Body", incoming(HeaderAPIKey, "k", HeaderAuthToken, "t"), bodyReq{}, codes.InvalidArgument, "apiKey is required.", ""},
		{"body no token", "/t/Body", incoming(), bodyReq{"k", ""}, codes.InvalidArgument, "authToken is required.", ""},
		{"key and body match", "/t/KeyBody", incoming(HeaderAPIKey, "k", HeaderAuthToken, "t"), bodyReq{"k", "t"}, codes.OK, "", "k|w"},
		{"key and body, body empty", "/t/KeyBody", incoming(HeaderAPIKey, "k", HeaderAuthToken, "t"), bodyReq{}, codes.OK, "", "k|w"},
		{"key and body differ", "/t/KeyBody", incoming(HeaderAPIKey, "k", HeaderAuthToken, "t"), bodyReq{"other", "t"}, codes.InvalidArgument, "apiKey in data does not match the x-service-api-key header.", ""},
		{"key and body token differ", "/t/KeyBody", incoming(HeaderAPIKey, "k", HeaderAuthToken, "t"), bodyReq{"k", "x"}, codes.InvalidArgument, "authToken in data does not match the x-service-auth-token header.", ""},
		{"key and body, headers missing", "/t/KeyBody", incoming(), bodyReq{"other", "t"}, codes.InvalidArgument, "API key not found in headers.", ""},
		{"workspace ok", "/t/WS", incoming(HeaderWorkspaceID, "w", HeaderWorkspaceToken, "wt"), nil, codes.OK, "", "|w"},
		{"workspace id missing", "/t/WS", incoming(HeaderWorkspaceToken, "wt"), nil, codes.InvalidArgument, "Workspace ID not found in headers.", ""},
		{"workspace token missing", "/t/WS", incoming(HeaderWorkspaceID, "w"), nil, codes.InvalidArgument, "Auth Token not found in headers.", ""},
		{"workspace key headers do not count", "/t/WS", incoming(HeaderAPIKey, "k", HeaderAuthToken, "t"), nil, codes.InvalidArgument, "Workspace ID not found in headers.", ""},
		{"public", "/t/Public", incoming(), nil, codes.OK, "", "none"},
		{"internal without token", "/t/Internal", incoming(), nil, codes.PermissionDenied, "This operation is for internal callers.", ""},
		{"internal wrong token", "/t/Internal", incoming(HeaderInternalToken, "nope"), nil, codes.PermissionDenied, "", ""},
		{"internal ok", "/t/Internal", incoming(HeaderInternalToken, "internal-secret"), nil, codes.OK, "", "none"},
		{"key or user: key", "/t/User", incoming(HeaderAPIKey, "k", HeaderAuthToken, "t"), nil, codes.OK, "", "k|w"},
		{"key or user: key wins over a token", "/t/User", incoming(HeaderAPIKey, "k", HeaderAuthToken, "t", HeaderUserToken, "jwt"), nil, codes.OK, "", "k|w"},
		{"key or user: a wrong key is not excused by a token", "/t/User", incoming(HeaderAPIKey, "x", HeaderAuthToken, "t", HeaderUserToken, "jwt"), nil, codes.PermissionDenied, "Invalid API key.", ""},
		{"key or user: a user token, no caller until the service verifies it", "/t/User", incoming(HeaderUserToken, "jwt"), nil, codes.OK, "", "none"},
		{"key or user: a Bearer authorization", "/t/User", incoming("authorization", "Bearer jwt"), nil, codes.OK, "", "none"},
		{"key or user: neither", "/t/User", incoming("authorization", "Basic x"), nil, codes.InvalidArgument, "API key not found in headers.", ""},
		{"key headers only: a user token opens nothing", "/t/Key", incoming(HeaderUserToken, "jwt"), nil, codes.InvalidArgument, "API key not found in headers.", ""},
		{"unannotated method fails closed", "/collab.nothing.v1.X/Y", incoming(), nil, codes.Internal, "Internal error.", ""},
		{"body class on a message without credentials", "/t/Body", incoming(), struct{}{}, codes.Internal, "Internal error.", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got *Caller
			_, err := i.Unary(c.ctx, c.req, &grpc.UnaryServerInfo{FullMethod: c.method}, func(ctx context.Context, _ any) (any, error) {
				if cl, ok := CallerFrom(ctx); ok {
					got = &cl
				}
				return "ok", nil
			})
			st := status.Convert(err)
			if st.Code() != c.code || (c.msg != "" && st.Message() != c.msg) {
				t.Fatalf("got %v %q, want %v %q", st.Code(), st.Message(), c.code, c.msg)
			}
			if c.code != codes.OK {
				return
			}
			switch {
			case c.caller == "none" && got != nil:
				t.Fatalf("caller set on an unauthenticated call: %+v", got)
			case c.caller != "none" && (got == nil || got.APIKey+"|"+got.WorkspaceID != c.caller):
				t.Fatalf("caller %+v, want %s", got, c.caller)
			}
		})
	}
}

// Every method of every service of proto/ declares how its caller authenticates. The methods
// come from internal/protoset, every proto package, not from the global registry, which in this
// test binary holds only the packages authn links.
func TestEveryMethodHasAnAuthClass(t *testing.T) {
	methods := protoset.Methods()
	if len(methods) < 50 {
		t.Fatalf("only %d methods in protoset", len(methods))
	}
	for _, m := range unclassified(methods) {
		t.Errorf("%s has no auth class: give it the option (collab.options.v1.auth)", m)
	}
}

// The guard above fails on a method without the option, and the interceptor refuses to serve
// it: a test-only proto file, registered as generated code registers its own, whose service has
// one method with the option and one without.
func TestUnclassifiedMethodIsCaught(t *testing.T) {
	fd, err := brokenFile()
	if err != nil {
		t.Fatal(err)
	}
	ms := fd.Services().Get(0).Methods()
	got := unclassified([]protoreflect.MethodDescriptor{ms.Get(0), ms.Get(1)})
	if want := []string{"/collab.authntest.v1.BrokenService/Unmarked"}; !slices.Equal(got, want) {
		t.Fatalf("unclassified %v, want %v", got, want)
	}
	i := NewInterceptor(&fakeAuth{}, "internal-secret")
	handler := func(context.Context, any) (any, error) { return "ok", nil }
	if _, err := i.Unary(incoming(HeaderAPIKey, "k", HeaderAuthToken, "t"), nil, &grpc.UnaryServerInfo{FullMethod: "/collab.authntest.v1.BrokenService/Marked"}, handler); err != nil {
		t.Fatalf("the marked method: %v", err)
	}
	_, err = i.Unary(incoming(HeaderAPIKey, "k", HeaderAuthToken, "t"), nil, &grpc.UnaryServerInfo{FullMethod: "/collab.authntest.v1.BrokenService/Unmarked"}, handler)
	if st := status.Convert(err); st.Code() != codes.Internal || st.Message() != "Internal error." {
		t.Fatalf("the unmarked method: %v", err)
	}
}

// unclassified returns the gRPC names of the methods without an auth class, as the interceptor
// reads it (ClassOf).
func unclassified(methods []protoreflect.MethodDescriptor) []string {
	var out []string
	for _, md := range methods {
		full := "/" + string(md.Parent().FullName()) + "/" + string(md.Name())
		if ClassOf(full) == optionsv1.Auth_AUTH_UNSPECIFIED {
			out = append(out, full)
		}
	}
	return out
}

// brokenFile registers, once per test binary, collab/authntest/v1/broken.proto: BrokenService
// with Marked (AUTH_KEY) and Unmarked (no auth option).
var brokenFile = sync.OnceValues(func() (protoreflect.FileDescriptor, error) {
	marked := &descriptorpb.MethodOptions{}
	proto.SetExtension(marked, optionsv1.E_Auth, optionsv1.Auth_AUTH_KEY)
	empty := proto.String(".google.protobuf.Empty")
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name:       proto.String("collab/authntest/v1/broken.proto"),
		Package:    proto.String("collab.authntest.v1"),
		Syntax:     proto.String("proto3"),
		Dependency: []string{"google/protobuf/empty.proto"},
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: proto.String("BrokenService"),
			Method: []*descriptorpb.MethodDescriptorProto{
				{Name: proto.String("Marked"), InputType: empty, OutputType: empty, Options: marked},
				{Name: proto.String("Unmarked"), InputType: empty, OutputType: empty},
			},
		}},
	}, protoregistry.GlobalFiles)
	if err != nil {
		return nil, err
	}
	return fd, protoregistry.GlobalFiles.RegisterFile(fd)
})

func TestRequireCaller(t *testing.T) {
	if _, err := RequireCaller(context.Background()); status.Code(apierrStatus(err)) != codes.Internal {
		t.Fatalf("RequireCaller without caller: %v", err)
	}
	c, err := RequireCaller(WithCaller(context.Background(), Caller{APIKey: "k"}))
	if err != nil || c.APIKey != "k" {
		t.Fatalf("RequireCaller: %v %v", c, err)
	}
}

func apierrStatus(err error) error { return status.Convert(err).Err() }

// fakeWorkspace counts Authenticate calls.
type fakeWorkspace struct {
	workspacev1.WorkspaceServiceClient
	calls int
	md    metadata.MD
}

func (f *fakeWorkspace) Authenticate(ctx context.Context, req *workspacev1.AuthenticateRequest, _ ...grpc.CallOption) (*workspacev1.AuthenticateResponse, error) {
	f.calls++
	f.md, _ = metadata.FromOutgoingContext(ctx)
	if req.GetApiKey().GetAuthToken() != "t" {
		return nil, status.Error(codes.InvalidArgument, "Auth token not found.")
	}
	return &workspacev1.AuthenticateResponse{WorkspaceId: "w", ApiKey: req.GetApiKey().GetApiKey(), Settings: &workspacev1.Settings{AdvancedQueries: true}, TokenGeneration: 7}, nil
}

func TestClientCachesSuccessesOnly(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	ws := &fakeWorkspace{}
	c := NewClient(ws, "tok", 5*time.Second, clk)
	ctx := context.Background()
	for range 3 {
		caller, err := c.AuthenticateKey(ctx, "k", "t")
		if err != nil || caller.WorkspaceID != "w" || !caller.Settings.AdvancedQueries || caller.TokenGeneration != 7 {
			t.Fatalf("%+v %v", caller, err)
		}
	}
	if ws.calls != 1 {
		t.Fatalf("%d calls, want 1 (cached)", ws.calls)
	}
	if got := ws.md.Get(HeaderInternalToken); len(got) != 1 || got[0] != "tok" {
		t.Fatalf("internal token not sent: %v", ws.md)
	}
	for range 2 {
		if _, err := c.AuthenticateKey(ctx, "k", "bad"); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("bad token: %v", err)
		}
	}
	if ws.calls != 3 {
		t.Fatalf("%d calls, want failures not cached", ws.calls)
	}
	clk.Advance(5 * time.Second)
	_, _ = c.AuthenticateKey(ctx, "k", "t")
	if ws.calls != 4 {
		t.Fatalf("%d calls: cache entry outlived its ttl", ws.calls)
	}
	// A different token for the same key is a different entry.
	_, _ = c.AuthenticateKey(ctx, "k", "t2")
	if ws.calls != 5 {
		t.Fatalf("%d calls", ws.calls)
	}
	off := NewClient(ws, "", 0, clk)
	_, _ = off.AuthenticateKey(ctx, "k", "t")
	_, _ = off.AuthenticateKey(ctx, "k", "t")
	if ws.calls != 7 {
		t.Fatalf("ttl 0 cached: %d calls", ws.calls)
	}
}

// With no internal token configured, internal operations answer nobody: there is no open mode.
func TestInternalOperationsFailClosedWithoutToken(t *testing.T) {
	i := NewInterceptor(&fakeAuth{}, "")
	i.classes.Store("/t/Internal", optionsv1.Auth_AUTH_INTERNAL)
	for name, ctx := range map[string]context.Context{
		"no metadata":    incoming(),
		"empty token":    incoming(HeaderInternalToken, ""),
		"with a key":     incoming(HeaderAPIKey, "k", HeaderAuthToken, "t"),
		"any token":      incoming(HeaderInternalToken, "anything"),
		"key and tokens": incoming(HeaderAPIKey, "k", HeaderAuthToken, "t", HeaderInternalToken, ""),
	} {
		_, err := i.Unary(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/t/Internal"}, func(context.Context, any) (any, error) { return "ok", nil })
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s: %v, want PermissionDenied", name, err)
		}
	}
}

func TestCheckInternalToken(t *testing.T) {
	good := []string{NewInternalToken(), "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "Zx7-q9LmP2vR8sT4wY6uB1nC3dE5fG0h"}
	for _, tok := range good {
		if err := CheckInternalToken(tok); err != nil {
			t.Errorf("%q refused: %v", tok, err)
		}
	}
	bad := []string{"", "t0k", "s3cret", "change-me-internal-token", "CHANGE-ME-openssl-rand-hex-32",
		"changeme-9f86d081884c7d659a2feaa0c55ad015", "my-example-9f86d081884c7d659a2feaa0c55ad015",
		strings.Repeat("ab", 32), "0123456789012345678901234567890123456789"[:9] + strings.Repeat("0", 30)}
	for _, tok := range bad {
		if err := CheckInternalToken(tok); err == nil {
			t.Errorf("%q accepted", tok)
		}
	}
	if a, b := NewInternalToken(), NewInternalToken(); a == b || len(a) != 64 {
		t.Fatalf("tokens %q %q", a, b)
	}
}

// Under mutual TLS, a verified client certificate with the marker is the internal credential;
// either alone is not, and neither is the marker on an interceptor that does not take peers.
// (collabd's tests prove it over real TLS connections.)
func TestVerifiedPeerWithMarkerIsInternal(t *testing.T) {
	verified := &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{
		PeerCertificates: []*x509.Certificate{{}}, VerifiedChains: [][]*x509.Certificate{{{}}},
	}}}
	unverified := &peer.Peer{Addr: verified.Addr, AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{}}}
	plain := &peer.Peer{Addr: verified.Addr}
	with := func(p *peer.Peer, kv ...string) context.Context { return peer.NewContext(incoming(kv...), p) }
	takes, ignores := NewInterceptor(&fakeAuth{}, "internal-secret", WithVerifiedPeers()), NewInterceptor(&fakeAuth{}, "internal-secret")
	for _, i := range []*Interceptor{takes, ignores} {
		i.classes.Store("/t/Internal", optionsv1.Auth_AUTH_INTERNAL)
	}
	for _, c := range []struct {
		name string
		i    *Interceptor
		ctx  context.Context
		want codes.Code
	}{
		{"verified peer with marker", takes, with(verified, HeaderInternalPeer, "1"), codes.OK},
		{"verified peer without marker (the gateway's connection)", takes, with(verified), codes.PermissionDenied},
		{"verified peer with another marker value", takes, with(verified, HeaderInternalPeer, "true"), codes.PermissionDenied},
		{"marker without a verified certificate", takes, with(unverified, HeaderInternalPeer, "1"), codes.PermissionDenied},
		{"marker without TLS", takes, with(plain, HeaderInternalPeer, "1"), codes.PermissionDenied},
		{"marker without a peer (in process)", takes, incoming(HeaderInternalPeer, "1"), codes.PermissionDenied},
		{"the token still counts", takes, with(plain, HeaderInternalToken, "internal-secret"), codes.OK},
		{"peers not taken", ignores, with(verified, HeaderInternalPeer, "1"), codes.PermissionDenied},
	} {
		_, err := c.i.Unary(c.ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/t/Internal"}, func(context.Context, any) (any, error) { return "ok", nil })
		if status.Code(err) != c.want {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// The client adds the marker only when told to, and the peer interceptor always.
func TestPeerMarkerSent(t *testing.T) {
	ws := &fakeWorkspace{}
	if _, err := NewClient(ws, "tok", 0, clock.Real()).AuthenticateKey(context.Background(), "k", "t"); err != nil {
		t.Fatal(err)
	}
	if got := ws.md.Get(HeaderInternalPeer); len(got) != 0 {
		t.Fatalf("marker sent unasked: %v", got)
	}
	if _, err := NewClient(ws, "tok", 0, clock.Real()).WithPeerMarker().AuthenticateKey(context.Background(), "k", "t"); err != nil {
		t.Fatal(err)
	}
	if got := ws.md.Get(HeaderInternalPeer); len(got) != 1 || got[0] != "1" {
		t.Fatalf("marker %v", got)
	}
	var sent metadata.MD
	err := InternalPeerClientInterceptor()(context.Background(), "/t/M", nil, nil, nil, func(ctx context.Context, _ string, _, _ any, _ *grpc.ClientConn, _ ...grpc.CallOption) error {
		sent, _ = metadata.FromOutgoingContext(ctx)
		return nil
	})
	if err != nil || len(sent.Get(HeaderInternalPeer)) != 1 {
		t.Fatalf("interceptor sent %v, %v", sent, err)
	}
}

// An x-forwarded-for reaches the handler only from a trusted forwarder: the gateway (the
// internal token in HeaderForwarder), another service (the internal credential), or a verified
// peer under mutual TLS with verified peers. Anyone else's is dropped, the rest of the
// metadata kept.
func TestForwardedForOnlyFromTrustedForwarders(t *testing.T) {
	verified := &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{
		PeerCertificates: []*x509.Certificate{{}}, VerifiedChains: [][]*x509.Certificate{{{}}},
	}}}
	const xff = "203.0.113.7"
	plain, peers := NewInterceptor(&fakeAuth{}, "internal-secret"), NewInterceptor(&fakeAuth{}, "internal-secret", WithVerifiedPeers())
	for _, i := range []*Interceptor{plain, peers} {
		i.classes.Store("/t/Public", optionsv1.Auth_AUTH_PUBLIC)
	}
	for _, c := range []struct {
		name string
		i    *Interceptor
		ctx  context.Context
		kept bool
	}{
		{"direct caller", plain, incoming("x-forwarded-for", xff, "x-request-id", "r"), false},
		{"a wrong forwarder token", plain, incoming("x-forwarded-for", xff, HeaderForwarder, "guess", "x-request-id", "r"), false},
		{"an empty forwarder token", NewInterceptor(&fakeAuth{}, ""), incoming("x-forwarded-for", xff, HeaderForwarder, "", "x-request-id", "r"), false},
		{"the gateway", plain, incoming("x-forwarded-for", xff, HeaderForwarder, "internal-secret", "x-request-id", "r"), true},
		{"a service", plain, incoming("x-forwarded-for", xff, HeaderInternalToken, "internal-secret", "x-request-id", "r"), true},
		{"a verified peer, peers taken", peers, peer.NewContext(incoming("x-forwarded-for", xff, "x-request-id", "r"), verified), true},
		{"a verified peer, peers not taken", plain, peer.NewContext(incoming("x-forwarded-for", xff, "x-request-id", "r"), verified), false},
	} {
		c.i.classes.Store("/t/Public", optionsv1.Auth_AUTH_PUBLIC)
		var md metadata.MD
		_, err := c.i.Unary(c.ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/t/Public"}, func(ctx context.Context, _ any) (any, error) {
			md, _ = metadata.FromIncomingContext(ctx)
			return "ok", nil
		})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := md.Get("x-forwarded-for"); (len(got) == 1 && got[0] == xff) != c.kept || (!c.kept && len(got) != 0) {
			t.Errorf("%s: x-forwarded-for %q, want kept %v", c.name, got, c.kept)
		}
		if got := md.Get("x-request-id"); len(got) != 1 {
			t.Errorf("%s: the other metadata was lost: %v", c.name, md)
		}
	}
	// The original metadata is not changed: another reader of the caller's context sees it.
	ctx := incoming("x-forwarded-for", xff)
	_, _ = plain.Unary(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/t/Public"}, func(context.Context, any) (any, error) { return nil, nil })
	if md, _ := metadata.FromIncomingContext(ctx); len(md.Get("x-forwarded-for")) != 1 {
		t.Fatal("the caller's metadata was changed in place")
	}
}

// The gateway's interceptor sends the token in HeaderForwarder, and nothing without a token.
func TestForwarderTokenSent(t *testing.T) {
	for token, want := range map[string]int{"tok": 1, "": 0} {
		var sent metadata.MD
		err := ForwarderClientInterceptor(token)(context.Background(), "/t/M", nil, nil, nil, func(ctx context.Context, _ string, _, _ any, _ *grpc.ClientConn, _ ...grpc.CallOption) error {
			sent, _ = metadata.FromOutgoingContext(ctx)
			return nil
		})
		if err != nil || len(sent.Get(HeaderForwarder)) != want || (want == 1 && sent.Get(HeaderForwarder)[0] != token) {
			t.Fatalf("token %q: sent %v, %v", token, sent, err)
		}
	}
}
