package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"
)

func TestRequestEnvelopeErrors(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	k := s.devKey()
	cases := []struct {
		name, body, message string
	}{
		{"not JSON", "data=1", "Request body is not valid JSON."},
		{"truncated JSON", `{"data": {`, "Request body is not valid JSON."},
		{"array", `[{"data":{}}]`, `Request body must be a JSON object: {"data": {...}}.`},
		{"missing data", `{"allowedDomains": ["a.com"]}`, `Request body must have a "data" object: {"data": {...}}.`},
		{"data null", `{"data": null}`, "data must be an object."},
		{"data string", `{"data": "x"}`, "data must be an object."},
		{"wrong element type", `{"data": {"allowedDomains": ["a.com", 5]}}`, "data.allowedDomains[1] must be a string."},
		{"two values", `{"data": {}} {"data": {}}`, "Request body is not valid JSON: it holds more than one value."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s.post("/v2/workspace/domains/update", k, c.body).fails(t, 400, "INVALID_ARGUMENT", c.message)
		})
	}
	d := s.call("/v2/workspace/domains/get", k, map[string]any{}).data(t, "")
	if !equalStrings(d["allowedDomains"]) {
		t.Fatalf("a refused request wrote %v", d["allowedDomains"])
	}

	// Operations that need no parameters take an empty body too.
	s.post("/v2/workspace/domains/get", k, "").data(t, "Domains retrieved successfully.")

	big := `{"data": {"allowedDomains": ["` + strings.Repeat("a", 4<<20) + `"]}}`
	s.post("/v2/workspace/domains/update", k, big).fails(t, 400, "INVALID_ARGUMENT", "Request body is larger than 4 MiB.")
}

func TestRoutingAndMethods(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	r := s.call("/v2/no/such/operation", s.devKey(), map[string]any{})
	r.fails(t, 404, "NOT_FOUND", "No operation at POST /v2/no/such/operation.")
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		r := s.do(m, "/v2/workspace/get", s.devWorkspace(), nil)
		r.fails(t, 405, "UNIMPLEMENTED", "")
		if r.header.Get("Allow") != "POST" {
			t.Fatalf("%s: Allow = %q", m, r.header.Get("Allow"))
		}
	}
	s.do(http.MethodGet, "/nothing/here", nil, nil).fails(t, 404, "NOT_FOUND", "")
	// The internal Authenticate operation has no HTTP route.
	s.call("/v2/workspace/authenticate", nil, map[string]any{}).fails(t, 404, "NOT_FOUND", "")
}

func TestRequestIDHeader(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	ok := s.call("/v2/workspace/domains/get", s.devKey(), map[string]any{})
	failed := s.call("/v2/workspace/domains/get", nil, map[string]any{})
	missing := s.call("/nope", nil, map[string]any{})
	seen := map[string]bool{}
	for _, r := range []response{ok, failed, missing} {
		id := r.header.Get("X-Request-Id")
		if len(id) < 16 || seen[id] {
			t.Fatalf("request id %q missing or repeated", id)
		}
		seen[id] = true
	}
	h := s.devKey()
	h["X-Request-Id"] = "caller-chosen-id-1"
	if got := s.call("/v2/workspace/domains/get", h, map[string]any{}).header.Get("X-Request-Id"); got != "caller-chosen-id-1" {
		t.Fatalf("caller's request id replaced by %q", got)
	}
	h["X-Request-Id"] = "bad id\twith spaces"
	if got := s.call("/v2/workspace/domains/get", h, map[string]any{}).header.Get("X-Request-Id"); got == "bad id\twith spaces" || got == "" {
		t.Fatalf("unsafe request id kept: %q", got)
	}
}

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		r := s.do(http.MethodGet, path, nil, nil)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", path, r.status, r.raw)
		}
	}
	r := s.do(http.MethodGet, "/readyz", nil, nil)
	if r.body["status"] != "ready" || r.body["services"].(map[string]any)["workspace"] != "ready" {
		t.Fatalf("readyz %s", r.raw)
	}
	doc := s.do(http.MethodGet, "/openapi.json", nil, nil)
	var parsed map[string]any
	if doc.status != 200 || json.Unmarshal(doc.raw, &parsed) != nil || parsed["paths"].(map[string]any)["/v2/workspace/get"] == nil {
		t.Fatalf("openapi.json: %d %.200s", doc.status, doc.raw)
	}
}

// Internal callers reach the same operations over gRPC with the same credentials as metadata.
func TestGRPCCallers(t *testing.T) {
	t.Parallel()
	s := newSystem(t, "--internal-token="+testInternalToken)
	conn, err := grpc.NewClient(s.proc.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ws := workspacev1.NewWorkspaceServiceClient(conn)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-service-api-key", s.proc.Dev.APIKey, "x-service-auth-token", s.proc.Dev.AuthToken)
	resp, err := ws.GetDomains(ctx, &workspacev1.GetDomainsRequest{})
	if err != nil || resp.GetStatus() != "success" {
		t.Fatalf("GetDomains over gRPC: %v %v", resp, err)
	}
	_, err = ws.GetDomains(context.Background(), &workspacev1.GetDomainsRequest{})
	if status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != "API key not found in headers." {
		t.Fatalf("GetDomains without credentials: %v", err)
	}

	// Authenticate is internal: refused without the internal token, answered with it.
	req := &workspacev1.AuthenticateRequest{Credentials: &workspacev1.AuthenticateRequest_ApiKey{ApiKey: &workspacev1.ApiKeyCredentials{ApiKey: s.proc.Dev.APIKey, AuthToken: s.proc.Dev.AuthToken}}}
	if _, err := ws.Authenticate(context.Background(), req); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("Authenticate without internal token: %v", err)
	}
	internal := metadata.AppendToOutgoingContext(context.Background(), "x-collab-internal-token", testInternalToken)
	who, err := ws.Authenticate(internal, req)
	if err != nil || who.GetWorkspaceId() != s.proc.Dev.WorkspaceID || who.GetApiKey() != s.proc.Dev.APIKey {
		t.Fatalf("Authenticate: %v %v", who, err)
	}

	// Reflection is on for internal callers' tools.
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	listed, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, svc := range listed.GetListServicesResponse().GetService() {
		found = found || svc.GetName() == "collab.workspace.v1.WorkspaceService"
	}
	if !found {
		t.Fatalf("reflection lists %v", listed.GetListServicesResponse().GetService())
	}
}
