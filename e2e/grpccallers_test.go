package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	eventsv1 "github.com/collab/collab/proto/collab/events/v1"
	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"

	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/services"
)

// A direct gRPC caller cannot choose the address it is rate-limited by: an x-forwarded-for
// of its own is dropped, so rotating it buys nothing, for Create Workspace and for the email
// status check (which is limited per client address as well as per email).
func TestDirectGRPCCallersCannotChooseTheirAddress(t *testing.T) {
	t.Parallel()
	s := newSystem(t, "--rate-limit=createWorkspace=2,emailStatusPerAddress=3")
	conn, err := grpc.NewClient(s.proc.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ws := workspacev1.NewWorkspaceServiceClient(conn)
	from := func(i int) context.Context {
		return metadata.AppendToOutgoingContext(context.Background(), "x-forwarded-for", fmt.Sprintf("198.51.100.%d", i))
	}
	var created int
	for i := range 6 {
		_, err := ws.CreateWorkspace(from(i), &workspacev1.CreateWorkspaceRequest{OwnerEmail: fmt.Sprintf("g%d@example.com", i), Name: "w"})
		switch status.Code(err) {
		case codes.OK:
			created++
		case codes.ResourceExhausted:
		default:
			t.Fatalf("create %d: %v", i, err)
		}
	}
	if created != 2 {
		t.Fatalf("%d workspaces created with a new x-forwarded-for each, want the limit's 2", created)
	}
	var answered int
	for i := range 6 {
		_, err := ws.GetEmailVerificationStatus(from(i), &workspacev1.GetEmailVerificationStatusRequest{OwnerEmail: fmt.Sprintf("g%d@example.com", i%2)})
		switch status.Code(err) {
		case codes.OK:
			answered++
		case codes.ResourceExhausted:
		default:
			t.Fatalf("status %d: %v", i, err)
		}
	}
	if answered != 3 {
		t.Fatalf("%d email status checks answered from one address, want the per-address limit's 3", answered)
	}
}

// Through the gateway the caller's address is the connection's, whether the gateway runs with
// the workspace service or in another process: callers from two loopback addresses each get
// their own Create Workspace limit (the workspace process trusts the gateway's
// x-forwarded-for, and no one else's), and a third from one of them is refused however it
// sets X-Forwarded-For.
func TestGatewayForwardsTheCallersAddress(t *testing.T) {
	t.Parallel()
	const limit = "--rate-limit=createWorkspace=1"
	one := newSystem(t, limit)
	ws := start(t, config(t, "--services=workspace", "--internal-token="+testInternalToken, limit))
	// The gateway needs every service's address; only the workspace's is called.
	gwArgs := []string{"--services=gateway", "--internal-token=" + testInternalToken}
	for _, m := range services.All() {
		gwArgs = append(gwArgs, "--"+m.Name+"-addr="+ws.proc.GRPCAddr)
	}
	split := start(t, config(t, gwArgs...))
	for name, s := range map[string]*system{"one process": one, "split": split} {
		for i, ip := range []string{"127.0.0.2", "127.0.0.3"} {
			if code := createFrom(t, s, ip, fmt.Sprintf("a%d@example.com", i), "203.0.113.9"); code != http.StatusOK {
				t.Fatalf("%s: the first workspace from %s: status %d", name, ip, code)
			}
		}
		if code := createFrom(t, s, "127.0.0.2", "b@example.com", "203.0.113.10"); code != http.StatusTooManyRequests {
			t.Fatalf("%s: a second workspace from 127.0.0.2 with another X-Forwarded-For: status %d, want 429", name, code)
		}
	}
}

// createFrom calls Create Workspace over HTTP from the local address ip with the given
// X-Forwarded-For and returns the status.
func createFrom(t *testing.T, s *system, ip, email, xff string) int {
	t.Helper()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	client := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}
	defer client.CloseIdleConnections()
	body, err := json.Marshal(map[string]any{"data": map[string]any{"ownerEmail": email, "name": "w"}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, s.base+"/v2/workspace/create", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Forwarded-For", xff)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A gRPC caller gets the HTTP gateway's request limits: data nested as deep as the gateway
// takes (64 levels, data's object the first) is published either way, a level more is refused
// either way with the same message, and so is data nested 4,000 levels deep, which was stored
// and served to HTTP callers when only the gateway checked.
func TestGRPCCallersGetTheGatewaysRequestLimits(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	k := s.devKey()
	s.addOrganization(t, k, "o")
	conn, err := grpc.NewClient(s.proc.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	events := eventsv1.NewEventsServiceClient(conn)
	ctx := metadata.AppendToOutgoingContext(context.Background(), authn.HeaderAPIKey, k[authn.HeaderAPIKey], authn.HeaderAuthToken, k[authn.HeaderAuthToken])
	publish := func(levels int) error {
		data, err := structpb.NewStruct(nestedObjects(levels - 2))
		if err != nil {
			t.Fatal(err)
		}
		_, err = events.PublishEvent(ctx, &eventsv1.PublishEventRequest{Type: "comment.add", OrganizationId: "o", Data: data})
		return err
	}
	const tooDeep = "Request body is nested too deeply: at most 64 levels."
	s.call("/v2/events/publish", k, map[string]any{"type": "comment.add", "organizationId": "o", "data": nestedObjects(62)}).data(t, "Event published successfully.")
	s.call("/v2/events/publish", k, map[string]any{"type": "comment.add", "organizationId": "o", "data": nestedObjects(63)}).fails(t, 400, "INVALID_ARGUMENT", tooDeep)
	if err := publish(64); err != nil {
		t.Fatalf("64 levels over gRPC: %v", err)
	}
	for _, levels := range []int{65, 4000} {
		if st := status.Convert(publish(levels)); st.Code() != codes.InvalidArgument || st.Message() != tooDeep {
			t.Fatalf("%d levels over gRPC: %v", levels, st)
		}
	}
	// Lists nest in two messages a level, objects in three: 4,000 levels of lists are within
	// protobuf's decoder's limit (10,000 messages) and reach the request limits, 4,000 of objects
	// are past it and are refused the same way, not as the transport's INTERNAL.
	var list any = []any{}
	for range 3998 {
		list = []any{list}
	}
	data, err := structpb.NewStruct(map[string]any{"l": list})
	if err != nil {
		t.Fatal(err)
	}
	_, err = events.PublishEvent(ctx, &eventsv1.PublishEventRequest{Type: "comment.add", OrganizationId: "o", Data: data})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || st.Message() != tooDeep {
		t.Fatalf("4,000 levels of lists over gRPC: %v", st)
	}
	big, err := structpb.NewStruct(map[string]any{"s": strings.Repeat("x", 4<<20)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = events.PublishEvent(ctx, &eventsv1.PublishEventRequest{Type: "comment.add", OrganizationId: "o", Data: big})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || st.Message() != "Request body is larger than 4 MiB." {
		t.Fatalf("4 MiB of data over gRPC: %v", st)
	}
}

// nestedObjects returns an object holding n objects one in another: {"a": {"a": ... {}}}, n+1
// levels of JSON.
func nestedObjects(n int) map[string]any {
	m := map[string]any{}
	for range n {
		m = map[string]any{"a": m}
	}
	return m
}
