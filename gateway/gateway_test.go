package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"

	"github.com/collab/collab/gateway"
	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/grpcserver"
	"github.com/collab/collab/internal/logging"
	"github.com/collab/collab/services"
)

// stubWorkspace records what reaches it and answers with canned responses, or with err.
type stubWorkspace struct {
	workspacev1.UnimplementedWorkspaceServiceServer

	mu    sync.Mutex
	err   error
	calls map[string]int
	md    metadata.MD
	req   proto.Message
	// gate, when set, runs at the start of every call, outside mu: a test holds calls in it.
	gate func(method string)
}

func (s *stubWorkspace) record(ctx context.Context, method string, req proto.Message) error {
	if s.gate != nil {
		s.gate(method)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls == nil {
		s.calls = map[string]int{}
	}
	s.calls[method]++
	s.md, _ = metadata.FromIncomingContext(ctx)
	s.req = proto.Clone(req)
	return s.err
}

func (s *stubWorkspace) setErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

func (s *stubWorkspace) last() (metadata.MD, proto.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.md, s.req
}

func (s *stubWorkspace) count(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

func (s *stubWorkspace) CreateWorkspace(ctx context.Context, req *workspacev1.CreateWorkspaceRequest) (*workspacev1.CreateWorkspaceResponse, error) {
	if err := s.record(ctx, "CreateWorkspace", req); err != nil {
		return nil, err
	}
	return &workspacev1.CreateWorkspaceResponse{Status: "success", Message: "Workspace created.", Data: &workspacev1.Workspace{
		Id: "ws-1", Name: req.GetWorkspaceName(), Owner: &workspacev1.Owner{Email: req.GetOwnerEmail(), Name: req.GetName()},
		ApiKeyList: map[string]*workspacev1.ApiKeyInfo{"key-1": {ApiKeyName: "default", Id: "key-1", Type: "testing"}},
	}}, nil
}

func (s *stubWorkspace) GetWorkspace(ctx context.Context, req *workspacev1.GetWorkspaceRequest) (*workspacev1.GetWorkspaceResponse, error) {
	if err := s.record(ctx, "GetWorkspace", req); err != nil {
		return nil, err
	}
	return &workspacev1.GetWorkspaceResponse{Status: "success", Data: &workspacev1.Workspace{Id: "ws-1"}}, nil
}

func (s *stubWorkspace) CreateApiKey(ctx context.Context, req *workspacev1.CreateApiKeyRequest) (*workspacev1.CreateApiKeyResponse, error) {
	if err := s.record(ctx, "CreateApiKey", req); err != nil {
		return nil, err
	}
	key := &workspacev1.CreatedApiKey{ApiKey: "key-2"}
	if req.CreateAuthToken == nil || req.GetCreateAuthToken() {
		key.AuthToken = proto.String("token-2")
	}
	return &workspacev1.CreateApiKeyResponse{Status: "success", Data: key}, nil
}

func (s *stubWorkspace) ListApiKeys(ctx context.Context, req *workspacev1.ListApiKeysRequest) (*workspacev1.ListApiKeysResponse, error) {
	if err := s.record(ctx, "ListApiKeys", req); err != nil {
		return nil, err
	}
	resp := &workspacev1.ListApiKeysResponse{Status: "success", Data: []*workspacev1.ApiKeyInfo{{Id: "key-1"}}}
	if req.GetPageSize() == 1 {
		resp.NextPageToken = proto.String("next")
	}
	return resp, nil
}

func (s *stubWorkspace) GetDomains(ctx context.Context, req *workspacev1.GetDomainsRequest) (*workspacev1.GetDomainsResponse, error) {
	if err := s.record(ctx, "GetDomains", req); err != nil {
		return nil, err
	}
	return &workspacev1.GetDomainsResponse{Status: "success", Data: &workspacev1.AllowedDomains{}}, nil
}

func (s *stubWorkspace) VerifyOwnerEmail(ctx context.Context, req *workspacev1.VerifyOwnerEmailRequest) (*workspacev1.VerifyOwnerEmailResponse, error) {
	if err := s.record(ctx, "VerifyOwnerEmail", req); err != nil {
		return nil, err
	}
	return &workspacev1.VerifyOwnerEmailResponse{Status: "success", Data: &workspacev1.VerifiedOwnerEmail{OwnerEmail: "o@example.com", Verified: true}}, nil
}

type stubAccess struct {
	accessv1.UnimplementedAccessServiceServer
	err atomic.Pointer[error]
}

func (s *stubAccess) GetJwks(context.Context, *accessv1.GetJwksRequest) (*accessv1.Jwks, error) {
	if p := s.err.Load(); p != nil {
		return nil, *p
	}
	return &accessv1.Jwks{Keys: []*accessv1.Jwk{{Kty: "OKP", Crv: "Ed25519", X: "eA", Kid: "k1", Alg: "EdDSA", Use: "sig"}}}, nil
}

type testEnv struct {
	gw         *gateway.Gateway
	ws         *stubWorkspace
	access     *stubAccess
	healthFail atomic.Bool
}

func dialBufconn(t *testing.T, lis *bufconn.Listener) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///x",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// upstreams are every service of the binary, all reached through conn.
func upstreams(conn grpc.ClientConnInterface) []gateway.Upstream {
	var out []gateway.Upstream
	for _, m := range services.All() {
		out = append(out, gateway.Upstream{Name: m.Name, GRPCService: m.GRPCService, Register: m.Gateway, Conn: conn})
	}
	return out
}

// newGateway builds the gateway with conn behind every upstream.
func newGateway(t *testing.T, conn grpc.ClientConnInterface) *gateway.Gateway {
	t.Helper()
	gw, err := gateway.New(t.Context(), upstreams(conn), logging.Discard())
	if err != nil {
		t.Fatalf("gateway.New: %v", err)
	}
	return gw
}

func newTestEnv(t *testing.T) *testEnv {
	t.Helper()
	e := &testEnv{ws: &stubWorkspace{}, access: &stubAccess{}}
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	workspacev1.RegisterWorkspaceServiceServer(srv, e.ws)
	accessv1.RegisterAccessServiceServer(srv, e.access)
	health := grpcserver.NewHealth()
	for _, u := range services.All() {
		health.Add(u.GRPCService, func(context.Context) error {
			if e.healthFail.Load() {
				return errors.New("store down")
			}
			return nil
		})
	}
	healthpb.RegisterHealthServer(srv, health)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	e.gw = newGateway(t, dialBufconn(t, lis))
	return e
}

func serve(h http.Handler, method, target, body string, header http.Header) *httptest.ResponseRecorder {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, r)
	req.RemoteAddr = "192.0.2.1:1234"
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func (e *testEnv) post(path, body string) *httptest.ResponseRecorder {
	return serve(e.gw, http.MethodPost, path, body, http.Header{"Content-Type": {"application/json"}})
}

// resultOf checks a success response and returns its result object.
func resultOf(t *testing.T, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d, want 200; body %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json", ct)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(rec.Body.Bytes(), &top); err != nil {
		t.Fatalf("body %s is not a JSON object: %v", rec.Body, err)
	}
	if len(top) != 1 || top["result"] == nil {
		t.Fatalf("body %s: want only a result key", rec.Body)
	}
	var res map[string]any
	if err := json.Unmarshal(top["result"], &res); err != nil {
		t.Fatalf("result in %s: %v", rec.Body, err)
	}
	return res
}

type errorEnvelope struct {
	Status  string
	Message string
	Details json.RawMessage
	Keys    map[string]bool
}

// errorOf checks an error response's HTTP status and envelope and returns the envelope.
func errorOf(t *testing.T, rec *httptest.ResponseRecorder, httpStatus int, statusName string) errorEnvelope {
	t.Helper()
	if rec.Code != httpStatus {
		t.Fatalf("status %d, want %d; body %s", rec.Code, httpStatus, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json", ct)
	}
	if got := rec.Header().Get("X-Content-Type-Options"); got != "nosniff" {
		t.Fatalf("X-Content-Type-Options %q, want nosniff", got)
	}
	var top map[string]map[string]json.RawMessage
	if err := json.Unmarshal(rec.Body.Bytes(), &top); err != nil {
		t.Fatalf("body %s is not an error envelope: %v", rec.Body, err)
	}
	inner, ok := top["error"]
	if len(top) != 1 || !ok {
		t.Fatalf("body %s: want only an error key", rec.Body)
	}
	env := errorEnvelope{Details: inner["details"], Keys: map[string]bool{}}
	for k := range inner {
		env.Keys[k] = true
	}
	if err := json.Unmarshal(inner["status"], &env.Status); err != nil {
		t.Fatalf("error.status in %s: %v", rec.Body, err)
	}
	if err := json.Unmarshal(inner["message"], &env.Message); err != nil {
		t.Fatalf("error.message in %s: %v", rec.Body, err)
	}
	if env.Status != statusName {
		t.Fatalf("error.status %q, want %q; body %s", env.Status, statusName, rec.Body)
	}
	return env
}

func TestNewNeedsEveryConnection(t *testing.T) {
	conn := dialBufconn(t, bufconn.Listen(1<<10))
	ups := upstreams(conn)
	ups[1].Conn = nil
	_, err := gateway.New(t.Context(), ups, logging.Discard())
	if err == nil || !strings.Contains(err.Error(), "no connection or routes for service "+ups[1].Name) {
		t.Fatalf("New without a connection: err = %v", err)
	}
}

func TestSuccessEnvelope(t *testing.T) {
	e := newTestEnv(t)
	rec := e.post("/v2/workspace/create", `{"data": {"ownerEmail": "owner@example.com", "name": "Ann", "workspace_name": "Acme"}}`)
	res := resultOf(t, rec)
	_, req := e.ws.last()
	want := &workspacev1.CreateWorkspaceRequest{OwnerEmail: "owner@example.com", Name: "Ann", WorkspaceName: "Acme"}
	if !proto.Equal(req, want) {
		t.Fatalf("service got %v, want %v", req, want)
	}
	if res["status"] != "success" || res["message"] != "Workspace created." {
		t.Fatalf("result = %v", res)
	}
	data, _ := res["data"].(map[string]any)
	owner, _ := data["owner"].(map[string]any)
	if data["id"] != "ws-1" || data["name"] != "Acme" || owner["email"] != "owner@example.com" {
		t.Fatalf("result.data = %v", data)
	}
	if v, ok := data["emailVerified"]; !ok || v != false {
		t.Fatalf("result.data.emailVerified = %v (present %v), want false", v, ok)
	}
	keys, _ := data["apiKeyList"].(map[string]any)
	if k, _ := keys["key-1"].(map[string]any); k["apiKeyName"] != "default" {
		t.Fatalf("result.data.apiKeyList = %v", data["apiKeyList"])
	}
	if rec.Header().Get("X-Request-Id") == "" {
		t.Fatal("no X-Request-Id on success")
	}
}

func TestEmptyBodyReachesService(t *testing.T) {
	e := newTestEnv(t)
	for _, body := range []string{"", `{"data": {}}`} {
		before := e.ws.count("GetWorkspace")
		res := resultOf(t, e.post("/v2/workspace/get", body))
		if data, _ := res["data"].(map[string]any); data["id"] != "ws-1" {
			t.Fatalf("body %q: result = %v", body, res)
		}
		if e.ws.count("GetWorkspace") != before+1 {
			t.Fatalf("body %q: service not called", body)
		}
	}
}

func TestOptionalFieldsThroughGateway(t *testing.T) {
	e := newTestEnv(t)

	res := resultOf(t, e.post("/v2/workspace/apikey/create", `{"data": {"apiKeyName": "ci", "allowedDomains": ["a.com"], "createAuthToken": false}}`))
	_, req := e.ws.last()
	got := req.(*workspacev1.CreateApiKeyRequest)
	if got.CreateAuthToken == nil || got.GetCreateAuthToken() {
		t.Fatalf("createAuthToken false arrived as %v", got.CreateAuthToken)
	}
	if len(got.GetAllowedDomains()) != 1 || got.GetAllowedDomains()[0] != "a.com" {
		t.Fatalf("allowedDomains arrived as %v", got.GetAllowedDomains())
	}
	data, _ := res["data"].(map[string]any)
	if _, ok := data["authToken"]; ok || data["apiKey"] != "key-2" {
		t.Fatalf("result.data = %v, want apiKey and no authToken", data)
	}

	res = resultOf(t, e.post("/v2/workspace/apikey/create", `{"data": {"apiKeyName": "ci"}}`))
	_, req = e.ws.last()
	if req.(*workspacev1.CreateApiKeyRequest).CreateAuthToken != nil {
		t.Fatal("absent createAuthToken arrived as present")
	}
	if data, _ := res["data"].(map[string]any); data["authToken"] != "token-2" {
		t.Fatalf("result.data = %v, want authToken", data)
	}

	res = resultOf(t, e.post("/v2/workspace/apikeys/get", `{"data": {"pageSize": "2"}}`))
	if _, ok := res["nextPageToken"]; ok {
		t.Fatalf("result = %v, want no nextPageToken", res)
	}
	_, req = e.ws.last()
	if req.(*workspacev1.ListApiKeysRequest).GetPageSize() != 2 {
		t.Fatalf("pageSize arrived as %v", req)
	}
	res = resultOf(t, e.post("/v2/workspace/apikeys/get", `{"data": {"pageSize": 1}}`))
	if res["nextPageToken"] != "next" {
		t.Fatalf("result = %v, want nextPageToken", res)
	}

	res = resultOf(t, e.post("/v2/workspace/domains/get", ``))
	if data, _ := res["data"].(map[string]any); data == nil || data["allowedDomains"] == nil {
		t.Fatalf("result = %v, want data.allowedDomains []", res)
	} else if l, ok := data["allowedDomains"].([]any); !ok || len(l) != 0 {
		t.Fatalf("result.data.allowedDomains = %#v, want []", data["allowedDomains"])
	}
}

func TestForwardedMetadata(t *testing.T) {
	e := newTestEnv(t)
	h := http.Header{
		"Content-Type":                   {"application/json"},
		"X-Service-Api-Key":              {"api-key-1"},
		"X-Service-Auth-Token":           {"auth-token-1"},
		"X-Service-Workspace-Id":         {"ws-9"},
		"X-Service-Workspace-Auth-Token": {"ws-token-9"},
		"X-Request-Id":                   {"req-123"},
		"X-Forwarded-For":                {"203.0.113.7"},
		"Cookie":                         {"session=secret"},
		"Authorization":                  {"Bearer secret"},
		"Grpc-Timeout":                   {"1n"},
		"X-Forwarded-Host":               {"evil.example.com"},
		"X-Unrelated":                    {"nope"},
		"User-Agent":                     {"test-agent"},
	}
	rec := serve(e.gw, http.MethodPost, "/v2/workspace/get", `{"data": {}}`, h)
	resultOf(t, rec)
	md, _ := e.ws.last()
	for key, want := range map[string]string{
		"x-service-api-key":              "api-key-1",
		"x-service-auth-token":           "auth-token-1",
		"x-service-workspace-id":         "ws-9",
		"x-service-workspace-auth-token": "ws-token-9",
		"x-request-id":                   "req-123",
	} {
		if got := md.Get(key); len(got) != 1 || got[0] != want {
			t.Errorf("metadata %s = %q, want [%q]", key, got, want)
		}
	}
	// The gateway appends the peer's address as the last hop; services rate-limit by it.
	xff := md.Get("x-forwarded-for")
	if len(xff) != 1 {
		t.Fatalf("metadata x-forwarded-for = %q, want one value", xff)
	}
	hops := strings.Split(xff[0], ",")
	if last := strings.TrimSpace(hops[len(hops)-1]); last != "192.0.2.1" {
		t.Errorf("x-forwarded-for %q: last hop %q, want the peer 192.0.2.1", xff[0], last)
	}
	if !strings.Contains(xff[0], "203.0.113.7") {
		t.Errorf("x-forwarded-for %q lost the incoming hop", xff[0])
	}
	// The call succeeded although Grpc-Timeout asked for 1ns: the caller cannot set deadlines.
	for _, v := range md.Get("x-forwarded-host") {
		if v == "evil.example.com" {
			t.Errorf("the caller's X-Forwarded-Host reached the service")
		}
	}
	for _, key := range []string{"cookie", "authorization", "x-unrelated", "grpcgateway-cookie", "grpcgateway-user-agent", "grpcgateway-x-unrelated"} {
		if got := md.Get(key); len(got) != 0 {
			t.Errorf("metadata %s = %q, want it not forwarded", key, got)
		}
	}
}

func TestForwardedMetadataWithoutRequestIDHeader(t *testing.T) {
	e := newTestEnv(t)
	rec := e.post("/v2/workspace/get", `{"data": {}}`)
	resultOf(t, rec)
	md, _ := e.ws.last()
	id := rec.Header().Get("X-Request-Id")
	if got := md.Get("x-request-id"); len(got) != 1 || got[0] != id || id == "" {
		t.Fatalf("metadata x-request-id = %q, response header %q: want the generated id forwarded", got, id)
	}
	if got := md.Get("x-service-api-key"); len(got) != 0 {
		t.Fatalf("metadata x-service-api-key = %q without the header", got)
	}
}

func TestRequestIDHeader(t *testing.T) {
	e := newTestEnv(t)
	e.ws.setErr(status.Error(codes.NotFound, "Workspace not found."))

	t.Run("present everywhere", func(t *testing.T) {
		cases := []struct {
			name, method, path, body string
			code                     int
		}{
			{"service error", http.MethodPost, "/v2/workspace/get", `{"data": {}}`, http.StatusNotFound},
			{"codec refusal", http.MethodPost, "/v2/workspace/get", `{"data": 1}`, http.StatusBadRequest},
			{"unknown path", http.MethodPost, "/v2/nope", `{"data": {}}`, http.StatusNotFound},
			{"unknown path GET", http.MethodGet, "/nope", ``, http.StatusNotFound},
			{"wrong method", http.MethodGet, "/v2/workspace/get", ``, http.StatusMethodNotAllowed},
			{"healthz", http.MethodGet, "/healthz", ``, http.StatusOK},
			{"readyz", http.MethodGet, "/readyz", ``, http.StatusOK},
			{"openapi", http.MethodGet, "/openapi.json", ``, http.StatusOK},
		}
		for _, c := range cases {
			rec := serve(e.gw, c.method, c.path, c.body, nil)
			if rec.Code != c.code {
				t.Errorf("%s: status %d, want %d; body %s", c.name, rec.Code, c.code, rec.Body)
			}
			if id := rec.Header().Get("X-Request-Id"); !logging.ValidRequestID(id) {
				t.Errorf("%s: X-Request-Id %q is missing or invalid", c.name, id)
			}
		}
	})

	e.ws.setErr(nil)

	t.Run("fresh ids differ", func(t *testing.T) {
		a := serve(e.gw, http.MethodGet, "/healthz", "", nil).Header().Get("X-Request-Id")
		b := serve(e.gw, http.MethodGet, "/healthz", "", nil).Header().Get("X-Request-Id")
		if a == "" || a == b {
			t.Fatalf("two requests got ids %q and %q", a, b)
		}
	})

	valid := []string{"abc-123", "A.b_c:d-9", strings.Repeat("x", 128)}
	for _, id := range valid {
		rec := serve(e.gw, http.MethodPost, "/v2/workspace/get", `{"data": {}}`, http.Header{"X-Request-Id": {id}})
		resultOf(t, rec)
		if got := rec.Header().Get("X-Request-Id"); got != id {
			t.Errorf("valid id %q: response header %q", id, got)
		}
		md, _ := e.ws.last()
		if got := md.Get("x-request-id"); len(got) != 1 || got[0] != id {
			t.Errorf("valid id %q: service saw %q", id, got)
		}
	}

	invalid := []string{"has space", strings.Repeat("x", 129), "a/b", "semi;colon", "quote\"", "é"}
	for _, id := range invalid {
		rec := serve(e.gw, http.MethodPost, "/v2/workspace/get", `{"data": {}}`, http.Header{"X-Request-Id": {id}})
		resultOf(t, rec)
		got := rec.Header().Get("X-Request-Id")
		if got == id || !logging.ValidRequestID(got) {
			t.Errorf("invalid id %q: response header %q, want a fresh valid id", id, got)
		}
		md, _ := e.ws.last()
		if fwd := md.Get("x-request-id"); len(fwd) != 1 || fwd[0] != got {
			t.Errorf("invalid id %q: service saw %q, want the replacement %q", id, fwd, got)
		}
	}

	// The invalid id is replaced on error responses too.
	rec := serve(e.gw, http.MethodPost, "/v2/nope", ``, http.Header{"X-Request-Id": {"bad id"}})
	if got := rec.Header().Get("X-Request-Id"); got == "bad id" || !logging.ValidRequestID(got) {
		t.Errorf("404 with an invalid id: X-Request-Id %q", got)
	}
}

func TestErrorCodes(t *testing.T) {
	e := newTestEnv(t)
	const unavailable = "The service is unavailable. Try again later."
	tests := []struct {
		code       codes.Code
		httpStatus int
		name       string
		message    string // "" means the service's own message
	}{
		{codes.InvalidArgument, http.StatusBadRequest, "INVALID_ARGUMENT", ""},
		{codes.NotFound, http.StatusNotFound, "NOT_FOUND", ""},
		{codes.AlreadyExists, http.StatusConflict, "ALREADY_EXISTS", ""},
		{codes.PermissionDenied, http.StatusForbidden, "PERMISSION_DENIED", ""},
		{codes.Unauthenticated, http.StatusUnauthorized, "UNAUTHENTICATED", ""},
		{codes.ResourceExhausted, http.StatusTooManyRequests, "RESOURCE_EXHAUSTED", ""},
		{codes.FailedPrecondition, http.StatusBadRequest, "FAILED_PRECONDITION", ""},
		{codes.Internal, http.StatusInternalServerError, "INTERNAL", ""},
		{codes.Unimplemented, http.StatusNotImplemented, "UNIMPLEMENTED", ""},
		{codes.Unavailable, http.StatusServiceUnavailable, "UNAVAILABLE", unavailable},
		{codes.Unknown, http.StatusInternalServerError, "INTERNAL", "Internal error."},
		{codes.Aborted, http.StatusConflict, "ABORTED", ""},
		{codes.OutOfRange, http.StatusBadRequest, "OUT_OF_RANGE", ""},
		{codes.DeadlineExceeded, http.StatusGatewayTimeout, "DEADLINE_EXCEEDED", ""},
		{codes.DataLoss, http.StatusInternalServerError, "DATA_LOSS", ""},
		{codes.Canceled, 499, "CANCELLED", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name+"/"+tt.code.String(), func(t *testing.T) {
			const svcMessage = "Service says no (10.0.0.5)."
			e.ws.setErr(status.Error(tt.code, svcMessage))
			rec := e.post("/v2/workspace/create", `{"data": {"ownerEmail": "a@b.c"}}`)
			env := errorOf(t, rec, tt.httpStatus, tt.name)
			want := tt.message
			if want == "" {
				want = svcMessage
			}
			if env.Message != want {
				t.Fatalf("error.message %q, want %q", env.Message, want)
			}
			if tt.message != "" && strings.Contains(rec.Body.String(), "10.0.0.5") {
				t.Fatalf("body %s leaks the service's message", rec.Body)
			}
			if env.Keys["details"] {
				t.Fatalf("body %s has details, want none", rec.Body)
			}
			if rec.Header().Get("X-Request-Id") == "" {
				t.Fatal("no X-Request-Id on an error")
			}
		})
	}

	t.Run("plain error is INTERNAL", func(t *testing.T) {
		e.ws.setErr(errors.New("mongo: secret connection string"))
		rec := e.post("/v2/workspace/get", ``)
		env := errorOf(t, rec, http.StatusInternalServerError, "INTERNAL")
		if env.Message != "Internal error." || strings.Contains(rec.Body.String(), "secret") {
			t.Fatalf("body %s", rec.Body)
		}
	})

	// The gRPC library's own words never reach callers: an answer over the message limit says
	// what to do, anything else is an internal error.
	t.Run("transport text", func(t *testing.T) {
		e.ws.setErr(status.Error(codes.ResourceExhausted, "grpc: received message larger than max (9999999 vs. 8388608)"))
		env := errorOf(t, e.post("/v2/workspace/get", ``), http.StatusBadRequest, "FAILED_PRECONDITION")
		if env.Message != "The answer is larger than 8 MiB; ask for fewer items at once." {
			t.Fatalf("error.message %q", env.Message)
		}
		e.ws.setErr(status.Error(codes.Internal, "grpc: error unmarshalling request: proto: exceeded maximum recursion depth"))
		rec := e.post("/v2/workspace/get", ``)
		env = errorOf(t, rec, http.StatusInternalServerError, "INTERNAL")
		if env.Message != "Internal error." || strings.Contains(rec.Body.String(), "grpc") {
			t.Fatalf("body %s", rec.Body)
		}
	})

	t.Run("apierr domain error", func(t *testing.T) {
		e.ws.setErr(apierr.RateLimited())
		env := errorOf(t, e.post("/v2/workspace/get", ``), http.StatusTooManyRequests, "RESOURCE_EXHAUSTED")
		if env.Message != "Rate limit exceeded. Try again after 1 minute." {
			t.Fatalf("error.message %q", env.Message)
		}
	})
}

func TestErrorDetails(t *testing.T) {
	e := newTestEnv(t)

	detail, err := structpb.NewStruct(map[string]any{"field": "ownerEmail", "limit": 3, "ids": []any{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	wantDetails := `{"field":"ownerEmail","ids":["a","b"],"limit":3}`

	sameJSON := func(t *testing.T, got json.RawMessage, want string) {
		t.Helper()
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("details %s: %v", got, err)
		}
		if err := json.Unmarshal([]byte(want), &w); err != nil {
			t.Fatal(err)
		}
		gb, _ := json.Marshal(g)
		wb, _ := json.Marshal(w)
		if string(gb) != string(wb) {
			t.Fatalf("details %s, want %s", gb, wb)
		}
	}

	t.Run("status with a detail", func(t *testing.T) {
		st, err := status.New(codes.InvalidArgument, "Bad email.").WithDetails(detail)
		if err != nil {
			t.Fatal(err)
		}
		e.ws.setErr(st.Err())
		env := errorOf(t, e.post("/v2/workspace/create", `{"data": {}}`), http.StatusBadRequest, "INVALID_ARGUMENT")
		if env.Message != "Bad email." {
			t.Fatalf("error.message %q", env.Message)
		}
		sameJSON(t, env.Details, wantDetails)
	})

	t.Run("apierr with details", func(t *testing.T) {
		e.ws.setErr(&apierr.Error{Code: codes.FailedPrecondition, Message: "Verify the owner email first.", Details: detail})
		env := errorOf(t, e.post("/v2/workspace/create", `{"data": {}}`), http.StatusBadRequest, "FAILED_PRECONDITION")
		if env.Message != "Verify the owner email first." {
			t.Fatalf("error.message %q", env.Message)
		}
		sameJSON(t, env.Details, wantDetails)
	})

	t.Run("first of two details", func(t *testing.T) {
		second, _ := structpb.NewStruct(map[string]any{"second": true})
		st, err := status.New(codes.AlreadyExists, "Exists.").WithDetails(detail, second)
		if err != nil {
			t.Fatal(err)
		}
		e.ws.setErr(st.Err())
		env := errorOf(t, e.post("/v2/workspace/create", `{"data": {}}`), http.StatusConflict, "ALREADY_EXISTS")
		sameJSON(t, env.Details, wantDetails)
	})

	t.Run("empty detail message", func(t *testing.T) {
		st, err := status.New(codes.NotFound, "Gone.").WithDetails(&structpb.Struct{})
		if err != nil {
			t.Fatal(err)
		}
		e.ws.setErr(st.Err())
		env := errorOf(t, e.post("/v2/workspace/create", `{"data": {}}`), http.StatusNotFound, "NOT_FOUND")
		sameJSON(t, env.Details, `{}`)
	})

	t.Run("no details key without a detail", func(t *testing.T) {
		e.ws.setErr(apierr.NotFound("Workspace not found."))
		rec := e.post("/v2/workspace/create", `{"data": {}}`)
		env := errorOf(t, rec, http.StatusNotFound, "NOT_FOUND")
		if env.Keys["details"] || len(env.Keys) != 2 {
			t.Fatalf("body %s: want exactly status and message", rec.Body)
		}
	})
}

func TestRequestRefusedBeforeService(t *testing.T) {
	e := newTestEnv(t)
	tests := []struct{ body, message string }{
		{`{"data": {"ownerEmail": 5}}`, "data.ownerEmail must be a string."},
		{`{"data": {`, "Request body is not valid JSON."},
		{`[]`, `Request body must be a JSON object: {"data": {...}}.`},
		{`{"ownerEmail": "a@b.c"}`, `Request body must have a "data" object: {"data": {...}}.`},
		{`{"data": null}`, "data must be an object."},
		{`{"data": {}} {"data": {}}`, "Request body is not valid JSON: it holds more than one value."},
	}
	for _, tt := range tests {
		rec := e.post("/v2/workspace/create", tt.body)
		env := errorOf(t, rec, http.StatusBadRequest, "INVALID_ARGUMENT")
		if env.Message != tt.message {
			t.Errorf("body %s: error.message %q, want %q", tt.body, env.Message, tt.message)
		}
	}
	if n := e.ws.count("CreateWorkspace"); n != 0 {
		t.Fatalf("service called %d times for refused bodies", n)
	}
}

func TestBodyLimit(t *testing.T) {
	e := newTestEnv(t)
	padded := func(n int) string {
		const prefix = `{"data": {"name": "n"}}`
		return prefix + strings.Repeat(" ", n-len(prefix))
	}

	rec := e.post("/v2/workspace/create", padded(gateway.MaxBodyBytes))
	resultOf(t, rec)
	if e.ws.count("CreateWorkspace") != 1 {
		t.Fatal("a body at the limit did not reach the service")
	}

	rec = e.post("/v2/workspace/create", padded(gateway.MaxBodyBytes+1))
	env := errorOf(t, rec, http.StatusBadRequest, "INVALID_ARGUMENT")
	if env.Message != "Request body is larger than 4 MiB." {
		t.Fatalf("error.message %q", env.Message)
	}
	if e.ws.count("CreateWorkspace") != 1 {
		t.Fatal("a body over the limit reached the service")
	}
	if rec.Header().Get("X-Request-Id") == "" {
		t.Fatal("no X-Request-Id")
	}

	req := httptest.NewRequest(http.MethodGet, "/v2/workspace/email/verify?token=abc", strings.NewReader(strings.Repeat(" ", gateway.MaxBodyBytes+1)))
	rec = httptest.NewRecorder()
	e.gw.ServeHTTP(rec, req)
	// The GET binding takes its input from the query and drains (ignores) the body.
	resultOf(t, rec)
	if e.ws.count("VerifyOwnerEmail") != 1 {
		t.Fatal("GET with a large body did not reach the service")
	}
}

// countingReader yields n spaces and counts what is read from it.
type countingReader struct {
	left, read int
}

func (r *countingReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	n := min(len(p), r.left)
	for i := range p[:n] {
		p[i] = ' '
	}
	r.left -= n
	r.read += n
	return n, nil
}

// Whatever the route, the gateway reads no more than MaxBodyBytes (+1 to detect the excess) of
// a request body.
func TestBodyReadIsBounded(t *testing.T) {
	e := newTestEnv(t)
	const size = 3 * gateway.MaxBodyBytes
	for _, c := range []struct{ method, target string }{
		{http.MethodPost, "/v2/workspace/create"},
		{http.MethodPost, "/v2/workspace/email/verify"},
		{http.MethodGet, "/v2/workspace/email/verify?token=abc"},
		{http.MethodPut, "/v2/workspace/create"},
		{http.MethodPost, "/v2/nope"},
	} {
		body := &countingReader{left: size}
		req := httptest.NewRequest(c.method, c.target, body)
		rec := httptest.NewRecorder()
		e.gw.ServeHTTP(rec, req)
		if body.read > gateway.MaxBodyBytes+1 {
			t.Errorf("%s %s: read %d bytes of the body, want at most %d", c.method, c.target, body.read, gateway.MaxBodyBytes+1)
		}
		if rec.Code == http.StatusOK && c.method == http.MethodPost {
			t.Errorf("%s %s: status 200 for an oversized body", c.method, c.target)
		}
	}
}

func TestRouting(t *testing.T) {
	e := newTestEnv(t)

	t.Run("unknown POST path", func(t *testing.T) {
		env := errorOf(t, e.post("/v2/workspace/nope", `{"data": {}}`), http.StatusNotFound, "NOT_FOUND")
		if env.Message != "No operation at POST /v2/workspace/nope." {
			t.Fatalf("error.message %q", env.Message)
		}
	})

	t.Run("unknown GET paths", func(t *testing.T) {
		for _, p := range []string{"/", "/nope", "/v2/workspace", "/v2/workspace/get/extra", "/healthz/x"} {
			env := errorOf(t, serve(e.gw, http.MethodGet, p, "", nil), http.StatusNotFound, "NOT_FOUND")
			if env.Message != "No operation at GET "+p+"." {
				t.Errorf("GET %s: error.message %q", p, env.Message)
			}
		}
	})

	t.Run("wrong method on a known path", func(t *testing.T) {
		for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodPatch} {
			for _, p := range []string{"/v2/workspace/get", "/v2/workspace/create"} {
				rec := serve(e.gw, m, p, `{"data": {}}`, nil)
				env := errorOf(t, rec, http.StatusMethodNotAllowed, "UNIMPLEMENTED")
				if got := rec.Header().Get("Allow"); got != http.MethodPost {
					t.Errorf("%s %s: Allow %q, want POST", m, p, got)
				}
				if want := "Method " + m + " is not allowed: every operation of this API is a POST."; env.Message != want {
					t.Errorf("%s %s: error.message %q, want %q", m, p, env.Message, want)
				}
			}
		}
		if n := e.ws.count("GetWorkspace") + e.ws.count("CreateWorkspace"); n != 0 {
			t.Fatalf("service called %d times", n)
		}
	})

	t.Run("path without a leading slash", func(t *testing.T) {
		for _, m := range []string{http.MethodOptions, http.MethodPost} {
			env := errorOf(t, serve(e.gw, m, "*", "", nil), http.StatusBadRequest, "INVALID_ARGUMENT")
			if env.Message != "Bad request." {
				t.Errorf("%s *: error.message %q", m, env.Message)
			}
		}
	})

	t.Run("wrong method on the GET and POST path", func(t *testing.T) {
		rec := serve(e.gw, http.MethodDelete, "/v2/workspace/email/verify", "", nil)
		errorOf(t, rec, http.StatusMethodNotAllowed, "UNIMPLEMENTED")
		if got := rec.Header().Get("Allow"); got != "GET, POST" {
			t.Fatalf("Allow %q, want GET, POST", got)
		}
	})
}

func TestVerifyOwnerEmail(t *testing.T) {
	e := newTestEnv(t)
	for _, target := range []string{"/v2/workspace/email/verify?token=abc", "/v2/workspace/email/verify?token=abc&utm_source=mail"} {
		rec := serve(e.gw, http.MethodGet, target, "", nil)
		res := resultOf(t, rec)
		_, req := e.ws.last()
		if got := req.(*workspacev1.VerifyOwnerEmailRequest).GetToken(); got != "abc" {
			t.Fatalf("GET %s: service got token %q", target, got)
		}
		data, _ := res["data"].(map[string]any)
		if data["verified"] != true || data["ownerEmail"] != "o@example.com" {
			t.Fatalf("GET %s: result = %v", target, res)
		}
	}

	resultOf(t, e.post("/v2/workspace/email/verify", `{"data": {"token": "xyz"}}`))
	_, req := e.ws.last()
	if got := req.(*workspacev1.VerifyOwnerEmailRequest).GetToken(); got != "xyz" {
		t.Fatalf("POST: service got token %q", got)
	}
	if n := e.ws.count("VerifyOwnerEmail"); n != 3 {
		t.Fatalf("VerifyOwnerEmail called %d times, want 3", n)
	}
}

func TestHealthz(t *testing.T) {
	e := newTestEnv(t)
	e.healthFail.Store(true) // liveness does not depend on the services
	rec := serve(e.gw, http.MethodGet, "/healthz", "", nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	var body map[string]string
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || len(body) != 1 || body["status"] != "ok" {
		t.Fatalf("body %s (%v), want {\"status\":\"ok\"}", rec.Body, err)
	}
}

type readyBody struct {
	Status   string            `json:"status"`
	Services map[string]string `json:"services"`
}

func readyz(t *testing.T, h http.Handler, wantCode int) readyBody {
	t.Helper()
	rec := serve(h, http.MethodGet, "/readyz", "", nil)
	if rec.Code != wantCode {
		t.Fatalf("/readyz status %d, want %d; body %s", rec.Code, wantCode, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	var body readyBody
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("body %s: %v", rec.Body, err)
	}
	if len(body.Services) != len(services.All()) {
		t.Fatalf("services %v, want one entry per upstream", body.Services)
	}
	return body
}

func TestReadyz(t *testing.T) {
	e := newTestEnv(t)

	body := readyz(t, e.gw, http.StatusOK)
	if body.Status != "ready" {
		t.Fatalf("status %q", body.Status)
	}
	for _, u := range services.All() {
		if body.Services[u.Name] != "ready" {
			t.Fatalf("services %v: %s not ready", body.Services, u.Name)
		}
	}

	e.healthFail.Store(true)
	body = readyz(t, e.gw, http.StatusServiceUnavailable)
	if body.Status != "not ready" {
		t.Fatalf("status %q, want not ready", body.Status)
	}
	for _, u := range services.All() {
		if body.Services[u.Name] != "not ready" {
			t.Fatalf("services %v: %s, want not ready", body.Services, u.Name)
		}
	}

	e.healthFail.Store(false)
	if body = readyz(t, e.gw, http.StatusOK); body.Status != "ready" {
		t.Fatalf("after recovery: status %q", body.Status)
	}
}

func TestReadyzUnreachable(t *testing.T) {
	lis := bufconn.Listen(1 << 10)
	_ = lis.Close()
	gw := newGateway(t, dialBufconn(t, lis))

	body := readyz(t, gw, http.StatusServiceUnavailable)
	if body.Status != "not ready" {
		t.Fatalf("status %q, want not ready", body.Status)
	}
	for _, u := range services.All() {
		if body.Services[u.Name] != "unreachable" {
			t.Fatalf("services %v: %s, want unreachable", body.Services, u.Name)
		}
	}

	// An operation against the unreachable service is 503 with the generic message.
	rec := serve(gw, http.MethodPost, "/v2/workspace/get", `{"data": {}}`, nil)
	env := errorOf(t, rec, http.StatusServiceUnavailable, "UNAVAILABLE")
	if env.Message != "The service is unavailable. Try again later." {
		t.Fatalf("error.message %q", env.Message)
	}
}

func TestOpenAPI(t *testing.T) {
	e := newTestEnv(t)
	rec := serve(e.gw, http.MethodGet, "/openapi.json", "", nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	var doc map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatalf("/openapi.json is not JSON: %v", err)
	}
	obj := func(v any, what string) map[string]any {
		t.Helper()
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%s = %#v, want an object", what, v)
		}
		return m
	}

	info := obj(doc["info"], "info")
	if info["title"] != "collab administrative API" || info["version"] != "v2" {
		t.Fatalf("info = %v", info)
	}
	defs := obj(doc["definitions"], "definitions")
	if _, ok := defs["google.rpc.Status"]; ok {
		t.Fatal("definitions still hold google.rpc.Status")
	}
	errDef := obj(defs["Error"], "definitions.Error")
	errProp := obj(obj(errDef["properties"], "Error.properties")["error"], "Error.properties.error")
	if req, _ := errProp["required"].([]any); len(req) != 2 || req[0] != "status" || req[1] != "message" {
		t.Fatalf("Error.error.required = %v", errProp["required"])
	}

	paths := obj(doc["paths"], "paths")
	post := obj(obj(paths["/v2/workspace/get"], "paths./v2/workspace/get")["post"], "get.post")
	params, _ := post["parameters"].([]any)
	var bodySchema map[string]any
	for _, p := range params {
		if pm := obj(p, "parameter"); pm["in"] == "body" {
			bodySchema = obj(pm["schema"], "body schema")
		}
	}
	if bodySchema == nil {
		t.Fatalf("no body parameter in %v", params)
	}
	if req, _ := bodySchema["required"].([]any); len(req) != 1 || req[0] != "data" {
		t.Fatalf("body schema required = %v, want [data]", bodySchema["required"])
	}
	dataSchema := obj(obj(bodySchema["properties"], "body properties")["data"], "body properties.data")
	if dataSchema["$ref"] != "#/definitions/collab.workspace.v1.GetWorkspaceRequest" {
		t.Fatalf("data schema = %v", dataSchema)
	}
	responses := obj(post["responses"], "responses")
	okSchema := obj(obj(responses["200"], "200")["schema"], "200.schema")
	result := obj(obj(okSchema["properties"], "200 properties")["result"], "200 properties.result")
	if result["$ref"] != "#/definitions/collab.workspace.v1.GetWorkspaceResponse" {
		t.Fatalf("result schema = %v", result)
	}
	if ref := obj(obj(responses["default"], "default")["schema"], "default.schema")["$ref"]; ref != "#/definitions/Error" {
		t.Fatalf("default response $ref = %v", ref)
	}

	// Every operation has the envelopes, and every $ref resolves.
	for path, p := range paths {
		for method, o := range obj(p, path) {
			op := obj(o, path+" "+method)
			rs := obj(op["responses"], path+" responses")
			if ref := obj(obj(rs["default"], "default")["schema"], "default.schema")["$ref"]; ref != "#/definitions/Error" {
				t.Errorf("%s %s: default $ref %v", method, path, ref)
			}
			if ok, _ := rs["200"].(map[string]any); ok != nil {
				if _, has := obj(obj(ok["schema"], "200.schema")["properties"], "200.properties")["result"]; !has {
					t.Errorf("%s %s: 200 schema without result", method, path)
				}
			}
			ps, _ := op["parameters"].([]any)
			for _, prm := range ps {
				if pm := obj(prm, "parameter"); pm["in"] == "body" {
					if _, has := obj(obj(pm["schema"], "schema")["properties"], "properties")["data"]; !has {
						t.Errorf("%s %s: body without data", method, path)
					}
				}
			}
		}
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok {
				name, found := strings.CutPrefix(ref, "#/definitions/")
				if _, def := defs[name]; !found || !def {
					t.Errorf("$ref %q does not resolve", ref)
				}
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(doc)

	// Served twice, the same document.
	if again := serve(e.gw, http.MethodGet, "/openapi.json", "", nil); again.Body.String() != rec.Body.String() {
		t.Fatal("second /openapi.json differs")
	}
}

func TestJWKS(t *testing.T) {
	e := newTestEnv(t)
	rec := serve(e.gw, http.MethodGet, "/.well-known/jwks.json", "", nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d; body %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/jwk-set+json" {
		t.Fatalf("Content-Type %q", ct)
	}
	if cc := rec.Header().Get("Cache-Control"); !strings.Contains(cc, "max-age=") {
		t.Fatalf("Cache-Control %q", cc)
	}
	var set struct {
		Keys []map[string]string `json:"keys"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &set); err != nil || len(set.Keys) != 1 {
		t.Fatalf("body %s (%v), want a bare key set", rec.Body, err)
	}
	if k := set.Keys[0]; k["kty"] != "OKP" || k["crv"] != "Ed25519" || k["kid"] != "k1" || k["x"] != "eA" {
		t.Fatalf("key %v", k)
	}
	if strings.Contains(rec.Body.String(), `"result"`) {
		t.Fatalf("body %s is wrapped", rec.Body)
	}

	if rec := serve(e.gw, http.MethodHead, "/.well-known/jwks.json", "", nil); rec.Code != http.StatusOK {
		t.Fatalf("HEAD: status %d", rec.Code)
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		rec = serve(e.gw, m, "/.well-known/jwks.json", "", nil)
		env := errorOf(t, rec, http.StatusMethodNotAllowed, "UNIMPLEMENTED")
		if got := rec.Header().Get("Allow"); got != "GET, HEAD" {
			t.Fatalf("%s: Allow %q", m, got)
		}
		if want := "Method " + m + " is not allowed here: use GET."; env.Message != want {
			t.Fatalf("%s: error.message %q, want %q", m, env.Message, want)
		}
	}

	err := status.Error(codes.Unavailable, "keys not loaded")
	e.access.err.Store(&err)
	env := errorOf(t, serve(e.gw, http.MethodGet, "/.well-known/jwks.json", "", nil), http.StatusServiceUnavailable, "UNAVAILABLE")
	if env.Message != "The service is unavailable. Try again later." {
		t.Fatalf("error.message %q", env.Message)
	}
}
