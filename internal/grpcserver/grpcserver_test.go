package grpcserver

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"log/slog"

	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"

	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/logging"
)

// stub answers CreateWorkspace (public) by the owner email: "panic", "fail" or the request id.
type stub struct {
	workspacev1.UnimplementedWorkspaceServiceServer
}

func (stub) CreateWorkspace(ctx context.Context, req *workspacev1.CreateWorkspaceRequest) (*workspacev1.CreateWorkspaceResponse, error) {
	switch req.GetOwnerEmail() {
	case "panic":
		panic("boom")
	case "fail":
		return nil, errors.New("store exploded at 10.1.2.3")
	case "slow":
		// Longer than the test's requestReadTimeout, which must not cut it.
		select {
		case <-time.After(3 * requestReadTimeout):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &workspacev1.CreateWorkspaceResponse{Message: logging.RequestID(ctx)}, nil
}

func dial(t *testing.T, logs *strings.Builder) (workspacev1.WorkspaceServiceClient, *Health) {
	t.Helper()
	lis := bufconn.Listen(1 << 16)
	return dialOn(t, logs, lis, func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) })
}

// dialOn serves the stub and health on lis and returns clients of them, dialled with dialer.
func dialOn(t *testing.T, logs *strings.Builder, lis net.Listener, dialer func(context.Context, string) (net.Conn, error)) (workspacev1.WorkspaceServiceClient, *Health) {
	t.Helper()
	log := logging.New(logs, "text", slog.LevelDebug)
	srv := New(Chain(log, authn.NewInterceptor(nil, "")))
	workspacev1.RegisterWorkspaceServiceServer(srv, stub{})
	h := NewHealth()
	healthpb.RegisterHealthServer(srv, h)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///x", grpc.WithContextDialer(dialer),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return workspacev1.NewWorkspaceServiceClient(conn), h
}

func TestChain(t *testing.T) {
	var logs strings.Builder
	c, _ := dial(t, &logs)
	ctx := context.Background()

	_, err := c.CreateWorkspace(ctx, &workspacev1.CreateWorkspaceRequest{OwnerEmail: "panic"})
	if st := status.Convert(err); st.Code() != codes.Internal || st.Message() != "Internal error." {
		t.Fatalf("panic answered %v", err)
	}
	_, err = c.CreateWorkspace(ctx, &workspacev1.CreateWorkspaceRequest{OwnerEmail: "fail"})
	if st := status.Convert(err); st.Code() != codes.Internal || strings.Contains(st.Message(), "10.1.2.3") {
		t.Fatalf("failure answered %v", err)
	}
	if !strings.Contains(logs.String(), "boom") || !strings.Contains(logs.String(), "10.1.2.3") {
		t.Fatalf("causes not logged:\n%s", logs.String())
	}

	resp, err := c.CreateWorkspace(metadata.AppendToOutgoingContext(ctx, logging.RequestIDHeader, "rid-123"), &workspacev1.CreateWorkspaceRequest{OwnerEmail: "x"})
	if err != nil || resp.GetMessage() != "rid-123" {
		t.Fatalf("request id not on the handler's context: %v %v", resp, err)
	}
	if !strings.Contains(logs.String(), "request_id=rid-123") {
		t.Fatalf("access log lacks the request id:\n%s", logs.String())
	}
	resp, _ = c.CreateWorkspace(metadata.AppendToOutgoingContext(ctx, logging.RequestIDHeader, "bad id"), &workspacev1.CreateWorkspaceRequest{OwnerEmail: "x"})
	if resp.GetMessage() == "bad id" || resp.GetMessage() == "" {
		t.Fatalf("unsafe request id used: %q", resp.GetMessage())
	}
	// Unannotated or key-level methods never reach the handler without credentials.
	if _, err := c.GetDomains(ctx, &workspacev1.GetDomainsRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("GetDomains without credentials: %v", err)
	}
}

func TestHealthChecks(t *testing.T) {
	var logs strings.Builder
	_, h := dial(t, &logs)
	var failing error
	h.Add("svc.A", func(context.Context) error { return nil })
	h.Add("svc.B", func(context.Context) error { return failing })
	ctx := context.Background()
	check := func(service string) healthpb.HealthCheckResponse_ServingStatus {
		r, err := h.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			t.Fatalf("%s: %v", service, err)
		}
		return r.GetStatus()
	}
	if check("") != healthpb.HealthCheckResponse_SERVING || check("svc.B") != healthpb.HealthCheckResponse_SERVING {
		t.Fatal("healthy checks not serving")
	}
	failing = errors.New("store down")
	if check("svc.B") != healthpb.HealthCheckResponse_NOT_SERVING || check("") != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatal("a failing check still serving")
	}
	if check("svc.A") != healthpb.HealthCheckResponse_SERVING {
		t.Fatal("one service's failure leaked into another")
	}
	if _, err := h.Check(ctx, &healthpb.HealthCheckRequest{Service: "svc.Z"}); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown service: %v", err)
	}
}
