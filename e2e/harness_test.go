package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/collab/collab/collabd"
	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/email"
	"github.com/collab/collab/services"
)

// system is one running collab process and what a test needs to drive it.
type system struct {
	t     *testing.T
	base  string
	proc  *collabd.Process
	mail  *email.Memory
	clock *clock.Fake
}

// config is the configuration of a test process: everything on loopback random ports, memory
// store, no rate limits, immediate credential checks.
func config(t *testing.T, args ...string) collabd.Config {
	t.Helper()
	base := []string{"--http-addr=127.0.0.1:0", "--grpc-addr=127.0.0.1:0", "--rate-limit=off", "--auth-cache-ttl=0s", "--log-level=error"}
	cfg, err := collabd.ParseFlags(services.All(), append(base, args...), func(string) string { return "" })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

// serviceNames are the names of services.All() but those given, in the list's order.
func serviceNames(except ...string) []string {
	var out []string
	for _, m := range services.All() {
		if !slices.Contains(except, m.Name) {
			out = append(out, m.Name)
		}
	}
	return out
}

// peerFlags are the flags that put each of the services at addr (--<name>-addr).
func peerFlags(addr string, names ...string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, "--"+n+"-addr="+addr)
	}
	return out
}

func start(t *testing.T, cfg collabd.Config) *system {
	t.Helper()
	return startLogging(t, cfg, io.Discard)
}

// startLogging is start with the process's log written to logOut (which must be safe for
// concurrent writes).
func startLogging(t *testing.T, cfg collabd.Config, logOut io.Writer) *system {
	t.Helper()
	s := &system{t: t, mail: &email.Memory{}, clock: clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))}
	p, err := collabd.Start(context.Background(), cfg, collabd.Deps{Clock: s.clock, Email: s.mail, LogOutput: logOut})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	s.proc = p
	s.base = "http://" + p.HTTPAddr
	return s
}

// response is what came back, decoded.
type response struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

// headers of the two credential classes.
func keyHeaders(apiKey, authToken string) map[string]string {
	return map[string]string{"x-service-api-key": apiKey, "x-service-auth-token": authToken}
}

func workspaceHeaders(id, token string) map[string]string {
	return map[string]string{"x-service-workspace-id": id, "x-service-workspace-auth-token": token}
}

func (s *system) devKey() map[string]string {
	return keyHeaders(s.proc.Dev.APIKey, s.proc.Dev.AuthToken)
}

func (s *system) devWorkspace() map[string]string {
	return workspaceHeaders(s.proc.Dev.WorkspaceID, s.proc.Dev.WorkspaceToken)
}

// post sends body (a Go value marshaled as JSON, or a string sent as is) to path.
func (s *system) post(path string, headers map[string]string, body any) response {
	s.t.Helper()
	var raw []byte
	switch b := body.(type) {
	case string:
		raw = []byte(b)
	case []byte:
		raw = b
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			s.t.Fatal(err)
		}
	}
	return s.do(http.MethodPost, path, headers, raw)
}

// call posts {"data": data}.
func (s *system) call(path string, headers map[string]string, data any) response {
	s.t.Helper()
	return s.post(path, headers, map[string]any{"data": data})
}

func (s *system) do(method, path string, headers map[string]string, body []byte) response {
	s.t.Helper()
	req, err := http.NewRequest(method, s.base+path, bytes.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out := response{status: resp.StatusCode, header: resp.Header}
	if out.raw, err = io.ReadAll(resp.Body); err != nil {
		s.t.Fatal(err)
	}
	if len(out.raw) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(out.raw, &out.body); err != nil {
			s.t.Fatalf("%s %s: response is not a JSON object: %v\n%s", method, path, err, out.raw)
		}
	}
	return out
}

// ok checks a success envelope and returns result.
func (r response) ok(t *testing.T) map[string]any {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("status %d, want 200: %s", r.status, r.raw)
	}
	result, isObj := r.body["result"].(map[string]any)
	if !isObj || len(r.body) != 1 {
		t.Fatalf("not a result envelope: %s", r.raw)
	}
	return result
}

// data returns result.data as an object after checking status and message.
func (r response) data(t *testing.T, message string) map[string]any {
	t.Helper()
	result := r.ok(t)
	if result["status"] != "success" {
		t.Fatalf("result.status = %v: %s", result["status"], r.raw)
	}
	if message != "" && result["message"] != message {
		t.Fatalf("result.message = %q, want %q", result["message"], message)
	}
	d, _ := result["data"].(map[string]any)
	return d
}

// fails checks an error envelope.
func (r response) fails(t *testing.T, httpStatus int, status, message string) {
	t.Helper()
	if r.status != httpStatus {
		t.Fatalf("HTTP status %d, want %d: %s", r.status, httpStatus, r.raw)
	}
	e, isObj := r.body["error"].(map[string]any)
	if !isObj || len(r.body) != 1 {
		t.Fatalf("not an error envelope: %s", r.raw)
	}
	if e["status"] != status {
		t.Fatalf("error.status = %v, want %s: %s", e["status"], status, r.raw)
	}
	if message != "" && e["message"] != message {
		t.Fatalf("error.message = %q, want %q", e["message"], message)
	}
	if msg, _ := e["message"].(string); msg == "" {
		t.Fatalf("error without a message: %s", r.raw)
	}
}

// newWorkspace creates a workspace for email and returns its id and workspace auth token.
func (s *system) newWorkspace(ownerEmail string) (id, token string) {
	s.t.Helper()
	d := s.call("/v2/workspace/create", nil, map[string]any{"ownerEmail": ownerEmail, "name": "Owner"}).data(s.t, "Workspace created successfully")
	id, _ = d["id"].(string)
	token, _ = d["authToken"].(string)
	if id == "" || token == "" {
		s.t.Fatalf("created workspace without id or token: %v", d)
	}
	return id, token
}

// newKey creates an API key with an auth token in the workspace.
func (s *system) newKey(wsID, wsToken string) (apiKey, authToken string) {
	s.t.Helper()
	d := s.call("/v2/workspace/apikey/create", workspaceHeaders(wsID, wsToken), map[string]any{"apiKeyName": "k"}).data(s.t, "API key created successfully.")
	apiKey, _ = d["apiKey"].(string)
	authToken, _ = d["authToken"].(string)
	if apiKey == "" || authToken == "" {
		s.t.Fatalf("created key without key or token: %v", d)
	}
	return apiKey, authToken
}

func newSystem(t *testing.T, args ...string) *system {
	t.Helper()
	return start(t, config(t, args...))
}

// tampered returns a page token with one character in its middle changed: every bit of a middle
// character counts, where the last one of unpadded base64 may carry bits a decoder ignores (so
// changing the end can leave the token as it was).
func tampered(token string) string {
	b := []byte(token)
	i := len(b) / 2
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}
