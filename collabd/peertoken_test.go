package collabd

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/logging"
)

// Calls on the internal connections to peers carry the operator's internal token, which every
// process shares, and never one the process made for itself (no token given): that one guards
// the process's own internal operations and is nobody else's business. The request id goes
// either way.
func TestGeneratedTokenStaysInTheProcess(t *testing.T) {
	var mu sync.Mutex
	var got metadata.MD
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		mu.Lock()
		got = md
		mu.Unlock()
		return h(ctx, req)
	}))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)

	token := strings.Repeat("0123456789abcdef", 4)
	for _, operatorsToken := range []bool{true, false} {
		p := &Process{errs: make(chan error, 1)}
		p.tls.tokenOnly = operatorsToken
		cfg := Config{Peers: map[string]string{"workspace": ln.Addr().String()}, InternalToken: token}
		_, internal, err := p.connect(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx := logging.WithRequestID(context.Background(), "req-1")
		if _, err := healthpb.NewHealthClient(internal["workspace"]).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
		_ = p.Shutdown(context.Background())
		mu.Lock()
		sent := got.Get(authn.HeaderInternalToken)
		id := got.Get(logging.RequestIDHeader)
		mu.Unlock()
		if operatorsToken && (len(sent) != 1 || sent[0] != token) {
			t.Errorf("the operator's token: peers got %q", sent)
		}
		if !operatorsToken && len(sent) != 0 {
			t.Errorf("a token the process made itself reached a peer: %q", sent)
		}
		if len(id) != 1 || id[0] != "req-1" {
			t.Errorf("request id %q, want req-1", id)
		}
	}
}
