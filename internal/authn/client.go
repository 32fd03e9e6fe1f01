package authn

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"

	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/logging"
)

// Client is an Authenticator that asks the workspace service over gRPC and keeps successful
// answers for a short time, so a burst of calls with one key costs one lookup. A revoked token
// keeps working for at most the cache lifetime in services that cached it.
type Client struct {
	ws            workspacev1.WorkspaceServiceClient
	internalToken string
	ttl           time.Duration
	clock         clock.Clock
	peerMarker    bool

	mu      sync.Mutex
	entries map[[32]byte]cached
}

type cached struct {
	caller  Caller
	expires time.Time
}

// maxCached bounds the cache; past it, expired entries are swept, then the cache is reset.
const maxCached = 10000

// WithPeerMarker makes the client's calls carry HeaderInternalPeer too, for a workspace service
// that takes a verified client certificate with the marker as the internal credential (mutual
// TLS without a shared token). It returns c.
func (c *Client) WithPeerMarker() *Client {
	c.peerMarker = true
	return c
}

// NewClient returns a Client. ttl 0 disables caching.
func NewClient(ws workspacev1.WorkspaceServiceClient, internalToken string, ttl time.Duration, clk clock.Clock) *Client {
	return &Client{ws: ws, internalToken: internalToken, ttl: ttl, clock: clk, entries: map[[32]byte]cached{}}
}

func (c *Client) AuthenticateKey(ctx context.Context, apiKey, authToken string) (Caller, error) {
	return c.authenticate(ctx, "k\x00"+apiKey+"\x00"+authToken, &workspacev1.AuthenticateRequest{
		Credentials: &workspacev1.AuthenticateRequest_ApiKey{ApiKey: &workspacev1.ApiKeyCredentials{ApiKey: apiKey, AuthToken: authToken}},
	})
}

func (c *Client) AuthenticateWorkspace(ctx context.Context, workspaceID, token string) (Caller, error) {
	return c.authenticate(ctx, "w\x00"+workspaceID+"\x00"+token, &workspacev1.AuthenticateRequest{
		Credentials: &workspacev1.AuthenticateRequest_Workspace{Workspace: &workspacev1.WorkspaceCredentials{WorkspaceId: workspaceID, AuthToken: token}},
	})
}

func (c *Client) authenticate(ctx context.Context, cacheKey string, req *workspacev1.AuthenticateRequest) (Caller, error) {
	key := sha256.Sum256([]byte(cacheKey))
	now := c.clock.Now()
	if c.ttl > 0 {
		c.mu.Lock()
		e, ok := c.entries[key]
		c.mu.Unlock()
		if ok && now.Before(e.expires) {
			return e.caller, nil
		}
	}
	// A fresh outgoing context: the service-to-service call carries the internal token and
	// the request id, nothing of the original caller's metadata.
	out := metadata.MD{}
	if c.internalToken != "" {
		out.Set(HeaderInternalToken, c.internalToken)
	}
	if c.peerMarker {
		out.Set(HeaderInternalPeer, internalPeerValue)
	}
	if id := logging.RequestID(ctx); id != "" {
		out.Set(logging.RequestIDHeader, id)
	}
	resp, err := c.ws.Authenticate(metadata.NewOutgoingContext(ctx, out), req)
	if err != nil {
		return Caller{}, err
	}
	caller := CallerFromProto(resp)
	if c.ttl > 0 {
		c.mu.Lock()
		if len(c.entries) >= maxCached {
			for k, e := range c.entries {
				if !now.Before(e.expires) {
					delete(c.entries, k)
				}
			}
			if len(c.entries) >= maxCached {
				c.entries = map[[32]byte]cached{}
			}
		}
		c.entries[key] = cached{caller: caller, expires: now.Add(c.ttl)}
		c.mu.Unlock()
	}
	return caller, nil
}

// CallerFromProto converts the workspace service's answer.
func CallerFromProto(r *workspacev1.AuthenticateResponse) Caller {
	s := r.GetSettings()
	return Caller{
		WorkspaceID: r.GetWorkspaceId(),
		APIKey:      r.GetApiKey(),
		Settings: Settings{
			AdvancedQueries:  s.GetAdvancedQueries(),
			Notifications:    s.GetNotifications(),
			AdvancedWebhooks: s.GetAdvancedWebhooks(),
		},
		AllowedDomains:  r.GetAllowedDomains(),
		TokenGeneration: r.GetTokenGeneration(),
	}
}

// InternalClientInterceptor adds the internal token and the request id to every call a
// service makes to another service, so internal operations accept it and the request can be
// followed across services in the logs.
func InternalClientInterceptor(internalToken string) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if internalToken != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, HeaderInternalToken, internalToken)
		}
		if id := logging.RequestID(ctx); id != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, logging.RequestIDHeader, id)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// ForwarderClientInterceptor adds HeaderForwarder with the internal token to every call: it
// goes on the gateway's connections, whose calls carry callers' x-forwarded-for.
func ForwarderClientInterceptor(internalToken string) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if internalToken != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, HeaderForwarder, internalToken)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// InternalPeerClientInterceptor adds HeaderInternalPeer to every call: it goes, with
// InternalClientInterceptor, on a service's internal connections to peers under mutual TLS,
// and never on the gateway's.
func InternalPeerClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(metadata.AppendToOutgoingContext(ctx, HeaderInternalPeer, internalPeerValue), method, req, reply, cc, opts...)
	}
}
