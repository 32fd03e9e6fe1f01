// Package authn authenticates every call by the class its method declares (docs/api.md, "Authentication") and
// puts the authenticated caller on the context, where handlers and stores take their tenant
// scope from.
package authn

import (
	"context"
	"crypto/subtle"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	optionsv1 "github.com/collab/collab/proto/collab/options/v1"

	"github.com/collab/collab/internal/apierr"
)

// Header names of the credentials (docs/api.md, "Authentication"). gRPC metadata keys are the same.
//
//nolint:gosec // G101: names of headers, not credentials
const (
	HeaderAPIKey         = "x-service-api-key"
	HeaderAuthToken      = "x-service-auth-token"
	HeaderWorkspaceID    = "x-service-workspace-id"
	HeaderWorkspaceToken = "x-service-workspace-auth-token"
	// HeaderInternalToken carries the shared secret of service-to-service calls.
	HeaderInternalToken = "x-collab-internal-token"
	// HeaderInternalPeer marks the calls of a service's internal connection under mutual TLS.
	// It is no secret: it counts only on a connection whose client certificate the process
	// verified (WithVerifiedPeers), and only says which of the peer's two connections the call
	// came on; the gateway's other connection, which carries public callers' requests, never
	// sends it (the gateway forwards x-service-* and x-request-id headers only).
	HeaderInternalPeer = "x-collab-internal-peer"
	// HeaderForwarder carries the forwarder token (or, without one, the internal token) on the
	// gateway's calls: it proves their x-forwarded-for is the gateway's (the last hop is the
	// HTTP caller's address, which services rate-limit by). It grants nothing else: internal
	// methods still need HeaderInternalToken.
	HeaderForwarder = "x-collab-forwarder-token"
	// HeaderUserToken carries an end user's JWT (Generate Token) on the operations that accept
	// one (class AUTH_KEY_OR_USER): the gateway moves an HTTP caller's Authorization: Bearer
	// here; gRPC callers send either.
	HeaderUserToken = "x-service-user-token"
	// headerAuthorization is the standard header, whose Bearer value gRPC callers may send
	// instead of HeaderUserToken.
	headerAuthorization = "authorization"
	// headerForwardedFor is the client addresses a trusted forwarder passes on.
	headerForwardedFor = "x-forwarded-for"
)

// internalPeerValue is HeaderInternalPeer's one value.
const internalPeerValue = "1"

// Settings are the workspace's console switches, as of authentication.
type Settings struct {
	AdvancedQueries  bool
	Notifications    bool
	AdvancedWebhooks bool
}

// Caller is who made the call.
type Caller struct {
	WorkspaceID string
	// APIKey is the tenant of key-level calls; empty for workspace-level calls.
	APIKey         string
	Settings       Settings
	AllowedDomains []string
	// TokenGeneration is the API key's auth-token generation (0 for workspace-level calls):
	// tokens generated for the caller carry it, and stop verifying once a reset moves it on.
	TokenGeneration int64
}

type callerKey struct{}

type userTokenKey struct{}

// UserToken returns the end user's token a call of class AUTH_KEY_OR_USER carried instead of K
// headers. It is not verified: the service verifies it (the access service's VerifyToken)
// before acting, and finds no Caller on the context until it has.
func UserToken(ctx context.Context) (string, bool) {
	t, ok := ctx.Value(userTokenKey{}).(string)
	return t, ok && t != ""
}

// WithUserToken returns ctx carrying an end user's unverified token (tests, and the
// interceptor).
func WithUserToken(ctx context.Context, token string) context.Context {
	return context.WithValue(ctx, userTokenKey{}, token)
}

// WithCaller returns ctx carrying c.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the authenticated caller. ok is false on public and internal calls.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// RequireCaller returns the caller, or an internal error when the interceptor did not set one:
// a handler that needs a tenant must never run without one.
func RequireCaller(ctx context.Context) (Caller, error) {
	c, ok := CallerFrom(ctx)
	if !ok {
		return Caller{}, apierr.Internal(errNoCaller)
	}
	return c, nil
}

type authError string

func (e authError) Error() string { return string(e) }

const errNoCaller = authError("no authenticated caller on the context")

// Authenticator checks credentials. Errors carry the spec's codes and messages.
type Authenticator interface {
	// AuthenticateKey checks an API key and one of its auth tokens.
	AuthenticateKey(ctx context.Context, apiKey, authToken string) (Caller, error)
	// AuthenticateWorkspace checks a workspace id and its workspace auth token.
	AuthenticateWorkspace(ctx context.Context, workspaceID, token string) (Caller, error)
}

// bodyCredentials is implemented by request messages that carry apiKey and authToken in data.
type bodyCredentials interface {
	GetApiKey() string
	GetAuthToken() string
}

// Interceptor authenticates unary calls.
type Interceptor struct {
	auth           Authenticator
	internalToken  string
	forwarderToken string
	verifiedPeers  bool
	classes        sync.Map // full method name -> optionsv1.Auth
}

// InterceptorOption changes what an Interceptor accepts.
type InterceptorOption func(*Interceptor)

// WithForwarderToken makes calls whose HeaderForwarder carries token trusted forwarders too
// (besides the internal token): the gateway's secret, which vouches for x-forwarded-for and
// opens nothing else, so a gateway needs no internal token. Empty: none.
func WithForwarderToken(token string) InterceptorOption {
	return func(i *Interceptor) { i.forwarderToken = token }
}

// WithVerifiedPeers makes a call internal without the token when it comes over TLS from a
// client whose certificate the server verified (the gRPC listener's mutual TLS) and carries
// HeaderInternalPeer. The certificate alone is not enough: the gateway's connection holds one
// too and carries public callers' requests.
func WithVerifiedPeers() InterceptorOption {
	return func(i *Interceptor) { i.verifiedPeers = true }
}

// NewInterceptor returns an Interceptor checking credentials with auth. Callers of internal
// operations must present internalToken (or, WithVerifiedPeers, a verified certificate and the
// marker); when it is empty, every internal call is refused (fail closed): there is no mode in
// which internal RPCs are open.
func NewInterceptor(auth Authenticator, internalToken string, opts ...InterceptorOption) *Interceptor {
	i := &Interceptor{auth: auth, internalToken: internalToken}
	for _, o := range opts {
		o(i)
	}
	return i
}

// internal reports whether the call carries the internal credential.
func (i *Interceptor) internal(ctx context.Context, md metadata.MD) bool {
	if i.internalToken != "" && subtle.ConstantTimeCompare([]byte(first(md, HeaderInternalToken)), []byte(i.internalToken)) == 1 {
		return true
	}
	return i.verifiedPeers && first(md, HeaderInternalPeer) == internalPeerValue && verifiedPeer(ctx)
}

// FromForwarder reports whether the call came from a trusted forwarder (forwarder): the
// gateway, which has bounded the request's JSON already, or another service.
func (i *Interceptor) FromForwarder(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	return i.forwarder(ctx, md)
}

// forwarder reports whether the call's x-forwarded-for can be trusted: it came from the
// gateway (HeaderForwarder with the forwarder or the internal token), from another service (the internal credential), or, under mutual
// TLS with verified peers, over a connection whose certificate the process verified (only the
// deployment's own processes hold one).
func (i *Interceptor) forwarder(ctx context.Context, md metadata.MD) bool {
	sent := []byte(first(md, HeaderForwarder))
	for _, token := range []string{i.forwarderToken, i.internalToken} {
		if token != "" && subtle.ConstantTimeCompare(sent, []byte(token)) == 1 {
			return true
		}
	}
	return i.internal(ctx, md) || (i.verifiedPeers && verifiedPeer(ctx))
}

// verifiedPeer reports whether the call came over TLS with a client certificate that the
// server verified against its CA bundle. In-process calls have no TLS peer.
func verifiedPeer(ctx context.Context) bool {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return false
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	return ok && len(info.State.VerifiedChains) > 0
}

// publicServices are infrastructure services outside the collab API that need no credentials.
var publicServices = map[string]bool{
	"grpc.health.v1.Health": true,
}

// ClassOf returns the auth class declared on a method, e.g. "/collab.workspace.v1.WorkspaceService/GetWorkspace".
func ClassOf(fullMethod string) optionsv1.Auth {
	name := strings.TrimPrefix(fullMethod, "/")
	service, method, ok := strings.Cut(name, "/")
	if !ok {
		return optionsv1.Auth_AUTH_UNSPECIFIED
	}
	if publicServices[service] {
		return optionsv1.Auth_AUTH_PUBLIC
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service + "." + method))
	if err != nil {
		return optionsv1.Auth_AUTH_UNSPECIFIED
	}
	md, ok := d.(protoreflect.MethodDescriptor)
	if !ok || md.Options() == nil {
		return optionsv1.Auth_AUTH_UNSPECIFIED
	}
	class, _ := proto.GetExtension(md.Options(), optionsv1.E_Auth).(optionsv1.Auth)
	return class
}

func (i *Interceptor) classOf(fullMethod string) optionsv1.Auth {
	if c, ok := i.classes.Load(fullMethod); ok {
		return c.(optionsv1.Auth)
	}
	c := ClassOf(fullMethod)
	i.classes.Store(fullMethod, c)
	return c
}

// Unary is the grpc.UnaryServerInterceptor.
func (i *Interceptor) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, err := i.Authenticate(ctx, info.FullMethod, req)
	if err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// Authenticate checks the credentials that the method's class requires and returns ctx with
// the caller on it. An x-forwarded-for that no trusted forwarder sent is removed first, so a
// direct gRPC caller cannot choose the address it is rate-limited by (docs/operations.md,
// "Rate limits").
func (i *Interceptor) Authenticate(ctx context.Context, fullMethod string, req any) (context.Context, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if len(md.Get(headerForwardedFor)) > 0 && !i.forwarder(ctx, md) {
		md = md.Copy()
		delete(md, headerForwardedFor)
		ctx = metadata.NewIncomingContext(ctx, md)
	}
	switch i.classOf(fullMethod) {
	case optionsv1.Auth_AUTH_PUBLIC:
		return ctx, nil
	case optionsv1.Auth_AUTH_INTERNAL:
		if !i.internal(ctx, md) {
			return nil, apierr.PermissionDenied("This operation is for internal callers.")
		}
		return ctx, nil
	case optionsv1.Auth_AUTH_KEY:
		return i.key(ctx, md)
	case optionsv1.Auth_AUTH_KEY_OR_USER:
		return i.keyOrUser(ctx, md)
	case optionsv1.Auth_AUTH_KEY_AND_BODY:
		return i.keyAndBody(ctx, md, req)
	case optionsv1.Auth_AUTH_BODY:
		return i.body(ctx, fullMethod, req)
	case optionsv1.Auth_AUTH_WORKSPACE:
		return i.workspace(ctx, md)
	default:
		// A method without a declared class is refused rather than guessed at.
		return nil, apierr.Internal(authError("method has no auth class: " + fullMethod))
	}
}

// keyOrUser authenticates AUTH_KEY_OR_USER: K headers, else an end user's token left on the
// context for the service to verify.
func (i *Interceptor) keyOrUser(ctx context.Context, md metadata.MD) (context.Context, error) {
	// K headers win: a backend acts as itself even when it passes a user's token along.
	if first(md, HeaderAPIKey) == "" {
		if token := userToken(md); token != "" {
			return WithUserToken(ctx, token), nil
		}
	}
	return i.key(ctx, md)
}

// keyAndBody authenticates AUTH_KEY_AND_BODY: the headers are required first; the data may
// then only repeat them.
func (i *Interceptor) keyAndBody(ctx context.Context, md metadata.MD, req any) (context.Context, error) {
	if first(md, HeaderAPIKey) == "" || first(md, HeaderAuthToken) == "" {
		return i.key(ctx, md)
	}
	if body, ok := req.(bodyCredentials); ok {
		if k := body.GetApiKey(); k != "" && k != first(md, HeaderAPIKey) {
			return nil, apierr.InvalidArgument("apiKey in data does not match the %s header.", HeaderAPIKey)
		}
		if t := body.GetAuthToken(); t != "" && t != first(md, HeaderAuthToken) {
			return nil, apierr.InvalidArgument("authToken in data does not match the %s header.", HeaderAuthToken)
		}
	}
	return i.key(ctx, md)
}

// body authenticates AUTH_BODY: apiKey and authToken in the request's data.
func (i *Interceptor) body(ctx context.Context, fullMethod string, req any) (context.Context, error) {
	body, ok := req.(bodyCredentials)
	if !ok {
		return nil, apierr.Internal(authError("body-credential method without apiKey/authToken fields: " + fullMethod))
	}
	if body.GetApiKey() == "" {
		return nil, apierr.InvalidArgument("apiKey is required.")
	}
	if body.GetAuthToken() == "" {
		return nil, apierr.InvalidArgument("authToken is required.")
	}
	c, err := i.auth.AuthenticateKey(ctx, body.GetApiKey(), body.GetAuthToken())
	if err != nil {
		return nil, err
	}
	return WithCaller(ctx, c), nil
}

// workspace authenticates AUTH_WORKSPACE: the workspace id and its token in the headers.
func (i *Interceptor) workspace(ctx context.Context, md metadata.MD) (context.Context, error) {
	id := first(md, HeaderWorkspaceID)
	if id == "" {
		return nil, apierr.InvalidArgument("Workspace ID not found in headers.")
	}
	token := first(md, HeaderWorkspaceToken)
	if token == "" {
		return nil, apierr.InvalidArgument("Auth Token not found in headers.")
	}
	c, err := i.auth.AuthenticateWorkspace(ctx, id, token)
	if err != nil {
		return nil, err
	}
	return WithCaller(ctx, c), nil
}

func (i *Interceptor) key(ctx context.Context, md metadata.MD) (context.Context, error) {
	key := first(md, HeaderAPIKey)
	if key == "" {
		return nil, apierr.InvalidArgument("API key not found in headers.")
	}
	token := first(md, HeaderAuthToken)
	if token == "" {
		return nil, apierr.InvalidArgument("Auth Token not found in headers.")
	}
	c, err := i.auth.AuthenticateKey(ctx, key, token)
	if err != nil {
		return nil, err
	}
	return WithCaller(ctx, c), nil
}

// userToken is the end user's token of the call: HeaderUserToken, else a Bearer
// Authorization.
func userToken(md metadata.MD) string {
	if t := first(md, HeaderUserToken); t != "" {
		return t
	}
	return BearerToken(first(md, headerAuthorization))
}

// BearerToken is the token of an Authorization header's value "Bearer <token>", "" for any
// other value: the one reading of it for gRPC metadata, the gateway and the routes services
// serve themselves (the comments stream).
func BearerToken(authorization string) string {
	if v, ok := strings.CutPrefix(authorization, "Bearer "); ok {
		return strings.TrimSpace(v)
	}
	return ""
}

func first(md metadata.MD, key string) string {
	if v := md.Get(key); len(v) > 0 {
		return strings.TrimSpace(v[0])
	}
	return ""
}
