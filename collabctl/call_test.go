package collabctl

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/collab/collab/collabd"
	optionsv1 "github.com/collab/collab/proto/collab/options/v1"
)

func organizations(t *testing.T, p *collabd.Process) []string {
	t.Helper()
	_, got := post(t, p, "/v2/organizations/get", keyHeaders(p.Dev.APIKey, p.Dev.AuthToken), map[string]any{})
	var ids []string
	data, _ := got["result"].(map[string]any)["data"].([]any)
	for _, o := range data {
		id, _ := o.(map[string]any)["organizationId"].(string)
		ids = append(ids, id)
	}
	return ids
}

// call sends data from stdin, a file or the command line to an operation named by path or by
// method; the API then holds what was sent.
func TestCallAnyOperation(t *testing.T) {
	p := startProcess(t)
	ctx := context.Background()
	env := devEnv(p)

	stdin := `{"organizations": [{"organizationId": "org-stdin", "organizationName": "From stdin"}]}`
	run(ctx, env, stdin, "call", "/v2/organizations/add", "-f", "-").ok(t)
	file := filepath.Join(t.TempDir(), "data.json")
	if err := os.WriteFile(file, []byte(`{"organizations": [{"organizationId": "org-file", "organizationName": "From a file"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	run(ctx, env, "", "call", "collab.documents.v1.DocumentsService.AddOrganizations", "-f", file).ok(t)
	run(ctx, env, "", "call", "-d", `{"organizations": [{"organizationId": "org-inline", "organizationName": "Inline"}]}`, "DocumentsService.AddOrganizations").ok(t)
	got := strings.Join(organizations(t, p), ",")
	for _, want := range []string{"org-stdin", "org-file", "org-inline"} {
		if !strings.Contains(got, want) {
			t.Errorf("organization %s not created: %s", want, got)
		}
	}

	// The gRPC form of a method name, workspace credentials chosen from its declared class,
	// JSON out: the result as the API sent it.
	ws := run(ctx, env, "", "-o", "json", "call", "/collab.workspace.v1.WorkspaceService/GetWorkspace").ok(t).json(t)
	if ws["data"].(map[string]any)["id"] != p.Dev.WorkspaceID {
		t.Fatalf("GetWorkspace: %v", ws)
	}
	// Table out: the page's rows.
	table := run(ctx, env, "", "call", "/v2/organizations/get").ok(t)
	if !strings.Contains(table.stdout, "ORGANIZATIONID") || !strings.Contains(table.stdout, "org-file") {
		t.Fatalf("table:\n%s", table.stdout)
	}
}

// Bad input is refused before anything is sent (exit 2), with the place of the mistake; the
// API's refusals are printed from its envelope (exit 1).
func TestCallBadInput(t *testing.T) {
	p := startProcess(t)
	ctx := context.Background()
	env := devEnv(p)
	before := len(organizations(t, p))
	for _, c := range []struct {
		name, stdin string
		args        []string
		want        string
	}{
		{"broken JSON", "{\"organizations\": [\n  {\"organizationId\": \"x\",}\n]}", []string{"-f", "-"}, "is not valid JSON: invalid character '}' looking for beginning of object key string (line 2, column 26)"},
		{"cut short", `{"organizations": [`, []string{"-f", "-"}, "it ends early"},
		{"not an object", `[1, 2]`, []string{"-f", "-"}, "is not a JSON object"},
		{"two values", `{} {}`, []string{"-f", "-"}, "more than one JSON value"},
		{"empty", "  \n", []string{"-f", "-"}, "is empty"},
		{"both sources", "", []string{"-f", "-", "-d", "{}"}, "not both"},
		{"missing file", "", []string{"-f", filepath.Join(t.TempDir(), "none.json")}, "no such file"},
		{"unknown flag", "", []string{"--bogus"}, "flag provided but not defined: -bogus"},
	} {
		o := run(ctx, env, c.stdin, append([]string{"call", "/v2/organizations/add"}, c.args...)...)
		if o.code != ExitUsage || !strings.Contains(o.stderr, c.want) {
			t.Errorf("%s: exit %d, stderr %q, want %q", c.name, o.code, o.stderr, c.want)
		}
	}
	if after := len(organizations(t, p)); after != before {
		t.Fatalf("refused input created organizations: %d then %d", before, after)
	}

	// Well-formed JSON the API refuses: its status and message.
	o := run(ctx, env, `{"organizations": "not a list"}`, "call", "/v2/organizations/add", "-f", "-")
	if o.code != ExitFailed || !strings.Contains(o.stderr, "INVALID_ARGUMENT (HTTP 400): ") || !strings.Contains(o.stderr, "organizations") {
		t.Fatalf("API refusal: %+v", o)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"call"}, "call needs OPERATION"},
		{[]string{"call", "NoSuchService.Method"}, `no operation "NoSuchService.Method"`},
		{[]string{"call", "collab.workspace.v1.WorkspaceService.Nothing"}, "no method collab.workspace.v1.WorkspaceService.Nothing"},
		{[]string{"call", "collab.workspace.v1.WorkspaceService.Authenticate"}, "is called over gRPC: give the address of a process that runs its service with --grpc-addr"},
		{[]string{"call", "collab.workspace.v1.WorkspaceService.Authenticate", "--via", "http"}, "is an internal operation: it has no HTTP route"},
		{[]string{"call", "/v2/not/a/route"}, "--auth key|workspace|none"},
		{[]string{"call", "/v2/organizations/get", "--auth", "root"}, "--auth must be"},
	} {
		if o := run(ctx, env, "", c.args...); o.code != ExitUsage || !strings.Contains(o.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, o.code, o.stderr, c.want)
		}
	}
	// An unknown path with --auth goes to the server, whose 404 envelope is printed.
	if o := run(ctx, env, "", "call", "/v2/not/a/route", "--auth", "key"); o.code != ExitFailed || !strings.Contains(o.stderr, "NOT_FOUND (HTTP 404)") {
		t.Fatalf("unknown route: %+v", o)
	}
}

// Every route of the built-in http_rules.yaml resolves both ways, to a method whose auth class
// this binary knows. collabctl resolves through internal/protoset, not the global registry
// (which this test binary fills by importing the services), so a proto package missing from
// protoset fails here: checked by hand with crdt's import and file taken out of
// protoset.pb.go, every /v2/crdt/ route failed (Class:AUTH_UNSPECIFIED, "no method
// collab.crdt.v1.CrdtService.AddCrdtData in the API this collabctl was built with").
func TestEveryRouteResolves(t *testing.T) {
	table, err := routes()
	if err != nil {
		t.Fatal(err)
	}
	if len(table.byMethod) < 50 {
		t.Fatalf("only %d routes read", len(table.byMethod))
	}
	for method, path := range table.byMethod {
		byPath, err := resolveOperation(path)
		if err != nil || byPath.Method != method || byPath.Class == optionsv1.Auth_AUTH_UNSPECIFIED {
			t.Errorf("%s: %+v %v", path, byPath, err)
		}
		byName, err := resolveOperation(method)
		if err != nil || byName.Path != path {
			t.Errorf("%s: %+v %v", method, byName, err)
		}
	}
}

// Connection failures say what failed and what to check, and exit 1.
func TestUnreachableServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	env := map[string]string{"COLLABCTL_URL": "http://" + addr, "COLLABCTL_WORKSPACE_ID": "w", "COLLABCTL_WORKSPACE_TOKEN": "secret-token"}
	o := run(context.Background(), env, "", "keys", "list")
	if o.code != ExitFailed || !strings.Contains(o.stderr, "cannot reach collab at http://"+addr+": connection refused") || strings.Contains(o.stderr, "secret-token") {
		t.Fatalf("closed port: %+v", o)
	}
	// A listener that takes connections and never answers: the time limit ends the call, over
	// HTTP and over gRPC, and says so.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	env["COLLABCTL_URL"] = "http://" + silent.Addr().String()
	if o := run(context.Background(), env, "", "--timeout", "300ms", "keys", "list"); o.code != ExitFailed || !strings.Contains(o.stderr, "no answer from "+silent.Addr().String()+" in time (--timeout)") {
		t.Errorf("silent HTTP: %+v", o)
	}
	env["COLLABCTL_GRPC_ADDR"] = silent.Addr().String()
	if o := run(context.Background(), env, "", "--timeout", "300ms", "call", "/v2/workspace/apikeys/get", "--via", "grpc"); o.code != ExitFailed || !strings.Contains(o.stderr, "in time (--timeout)") {
		t.Errorf("silent gRPC: %+v", o)
	}
	for _, bad := range []string{"ftp://x", "127.0.0.1:8080", "http://user:pw@127.0.0.1:1"} {
		if o := run(context.Background(), env, "", "--url", bad, "keys", "list"); o.code != ExitUsage || strings.Contains(o.stderr, "pw") {
			t.Errorf("--url %s: %+v", bad, o)
		}
	}
}

// Internal operations go over gRPC with the internal token; any other may too (--via grpc),
// with its credentials as metadata. Refusals come back as the API's statuses.
func TestCallOverGRPC(t *testing.T) {
	token := strings.Repeat("0123456789abcdef", 4)
	p := startProcess(t, "--internal-token="+token)
	ctx := context.Background()
	env := devEnv(p)
	env["COLLABCTL_GRPC_ADDR"] = p.GRPCAddr
	data := `{"apiKey": {"apiKey": "` + p.Dev.APIKey + `", "authToken": "` + p.Dev.AuthToken + `"}}`
	const authenticate = "collab.workspace.v1.WorkspaceService.Authenticate"

	if o := run(ctx, env, data, "call", authenticate, "-f", "-"); o.code != ExitUsage || !strings.Contains(o.stderr, "COLLABCTL_INTERNAL_TOKEN") {
		t.Fatalf("without the internal token: %+v", o)
	}
	env["COLLABCTL_INTERNAL_TOKEN"] = "f" + token[1:]
	if o := run(ctx, env, data, "call", authenticate, "-f", "-"); o.code != ExitFailed || !strings.Contains(o.stderr, "PERMISSION_DENIED (gRPC): This operation is for internal callers.") || strings.Contains(o.stderr, token[1:]) {
		t.Fatalf("a wrong internal token: %+v", o)
	}
	env["COLLABCTL_INTERNAL_TOKEN"] = token
	got := run(ctx, env, data, "-o", "json", "call", authenticate, "-f", "-").ok(t).json(t)
	if got["workspaceId"] != p.Dev.WorkspaceID || got["apiKey"] != p.Dev.APIKey {
		t.Fatalf("Authenticate: %v", got)
	}
	bad := `{"apiKey": {"apiKey": "` + p.Dev.APIKey + `", "authToken": "wrong"}}`
	if o := run(ctx, env, bad, "call", authenticate, "-f", "-"); o.code != ExitFailed || !strings.Contains(o.stderr, "(gRPC)") {
		t.Fatalf("Authenticate with a wrong token: %+v", o)
	}
	if o := run(ctx, env, `{"apiKey": 5}`, "call", authenticate, "-f", "-"); o.code != ExitUsage || !strings.Contains(o.stderr, "does not fit collab.workspace.v1.AuthenticateRequest") {
		t.Fatalf("data of the wrong shape: %+v", o)
	}

	// A key operation over gRPC: the same answer as over HTTP.
	run(ctx, env, `{"allowedDomains": ["grpc.example.com"]}`, "call", "/v2/workspace/domains/update", "-f", "-").ok(t)
	domains := run(ctx, env, "", "-o", "json", "call", "/v2/workspace/domains/get", "--via", "grpc").ok(t).json(t)
	if list, _ := domains["data"].(map[string]any)["allowedDomains"].([]any); len(list) != 1 || list[0] != "grpc.example.com" {
		t.Fatalf("GetDomains over gRPC: %v", domains)
	}

	// A public operation without a route goes over gRPC with no credential.
	if o := run(ctx, env, "", "call", "AccessService.GetJwks", "--via", "http"); o.code != ExitUsage || !strings.Contains(o.stderr, "GetJwks has no HTTP route; call it over gRPC") {
		t.Fatalf("GetJwks over HTTP: %+v", o)
	}
	jwks := run(ctx, map[string]string{"COLLABCTL_GRPC_ADDR": p.GRPCAddr}, "", "-o", "json", "call", "AccessService.GetJwks").ok(t).json(t)
	if _, ok := jwks["keys"]; !ok {
		t.Fatalf("GetJwks: %v", jwks)
	}

	env["COLLABCTL_GRPC_ADDR"] = closedAddr(t)
	if o := run(ctx, env, data, "call", authenticate, "-f", "-"); o.code != ExitFailed || !strings.Contains(o.stderr, "cannot reach the gRPC listener") {
		t.Fatalf("a closed gRPC port: %+v", o)
	}
}

// A URL given with credentials is never quoted with them in a message, whichever check
// refuses it.
func TestURLCredentialsNotShown(t *testing.T) {
	env := map[string]string{"COLLABCTL_WORKSPACE_ID": "w", "COLLABCTL_WORKSPACE_TOKEN": "t"}
	for _, args := range [][]string{
		{"--url", "ftp://ops:secretpw@127.0.0.1:1", "keys", "list"},
		{"--url", "https://secretpw@127.0.0.1:1/%zz", "keys", "list"},
		{"--url", "http://ops:secretpw@[::1", "keys", "list"},
		{"relay", "backlog", "--metrics-url", "http://ops:secretpw@127.0.0.1:1/metrics"},
		{"relay", "backlog", "--metrics-url", "gopher://secretpw@127.0.0.1:1"},
	} {
		o := run(context.Background(), env, "", args...)
		if o.code != ExitUsage || strings.Contains(o.stdout+o.stderr, "secretpw") || o.stderr == "" {
			t.Errorf("%v: %+v", args, o)
		}
	}
	// Without credentials the URL is quoted, so the operator sees what was wrong.
	if o := run(context.Background(), env, "", "--url", "ftp://127.0.0.1:1", "keys", "list"); o.code != ExitUsage || !strings.Contains(o.stderr, `"ftp://127.0.0.1:1"`) {
		t.Errorf("ftp URL: %+v", o)
	}
}

// In a table, call shows the fields beside data, such as the token of the next page, which an
// operator needs to read on; status and message are left out.
func TestCallTableShowsPageToken(t *testing.T) {
	p := startProcess(t)
	ctx := context.Background()
	env := devEnv(p)
	run(ctx, env, "", "keys", "create", "--name", "second").ok(t)
	table := run(ctx, env, "", "call", "/v2/workspace/apikeys/get", "-d", `{"pageSize": 1}`).ok(t)
	var token string
	for _, line := range strings.Split(table.stdout, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "nextPageToken:" {
			token = f[1]
		}
	}
	if token == "" || !strings.Contains(table.stdout, p.Dev.APIKey) || strings.Contains(table.stdout, "second") || strings.Contains(table.stdout, "success") {
		t.Fatalf("table:\n%s", table.stdout)
	}
	// The token shown reads the next page.
	next := run(ctx, env, "", "call", "/v2/workspace/apikeys/get", "-d", `{"pageSize": 1, "pageToken": "`+token+`"}`).ok(t)
	if !strings.Contains(next.stdout, "second") || strings.Contains(next.stdout, p.Dev.APIKey) {
		t.Fatalf("second page:\n%s", next.stdout)
	}
}

// What answers in the gateway's place (a proxy, another server) may send an error envelope of
// its own: its status, message and details reach the terminal with control characters escaped.
func TestErrorEnvelopeEscaped(t *testing.T) {
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, `{"error": {"status": "BAD\u001b]0;owned\u0007", "message": "gone\u001b[2J", "details": {"x": "\u001b[31m"}}}`)
	}))
	defer front.Close()
	env := map[string]string{"COLLABCTL_URL": front.URL, "COLLABCTL_API_KEY": "k", "COLLABCTL_AUTH_TOKEN": "t"}
	o := run(context.Background(), env, "", "call", "/v2/organizations/get")
	if o.code != ExitFailed || strings.ContainsRune(o.stderr, 0x1b) || strings.ContainsRune(o.stderr, 0x07) ||
		!strings.Contains(o.stderr, `BAD\x1b]0;owned\a (HTTP 502): gone\x1b[2J`) {
		t.Fatalf("%+v", o)
	}
}

// Every route, called with collabctl's own choice of credentials against a real process, is
// authenticated: the class each operation declares picks credentials the server takes. Empty
// data is refused by many handlers, but never for want of credentials (body-credential
// operations carry theirs in the data, so they are called with them).
func TestEveryRouteAuthenticates(t *testing.T) {
	p := startProcess(t)
	ctx := context.Background()
	env := devEnv(p)
	table, err := routes()
	if err != nil {
		t.Fatal(err)
	}
	for method, path := range table.byMethod {
		op, err := resolveOperation(path)
		if err != nil {
			t.Fatal(err)
		}
		data := "{}"
		if op.Class == optionsv1.Auth_AUTH_BODY {
			data = `{"apiKey": "` + p.Dev.APIKey + `", "authToken": "` + p.Dev.AuthToken + `"}`
		}
		o := run(ctx, env, "", "call", path, "-d", data)
		// The API words a missing header credential as INVALID_ARGUMENT "... not found in headers."
		for _, refusal := range []string{"UNAUTHENTICATED", "PERMISSION_DENIED", "not found in headers", "does not match the", "not the API's JSON envelope"} {
			if o.code == ExitUsage || strings.Contains(o.stderr, refusal) {
				t.Errorf("%s (%s, %v): exit %d: %s", path, method, op.Class, o.code, o.stderr)
				break
			}
		}
	}
}

// With -o json, characters a terminal acts on that JSON lets through raw (a C1 control, a
// bidirectional override, a byte that is not UTF-8) are printed as escapes; the JSON still
// decodes to the same text, bad bytes to U+FFFD.
func TestJSONOutputEscaped(t *testing.T) {
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "{\"result\": {\"data\": {\"response\": \"a\xc2\x9b31m b\xe2\x80\xaec \x9b d \U0001f600 \u007f\"}}}")
	}))
	defer front.Close()
	env := map[string]string{"COLLABCTL_URL": front.URL, "COLLABCTL_API_KEY": "k", "COLLABCTL_AUTH_TOKEN": "t"}
	o := run(context.Background(), env, "", "-o", "json", "call", "/v2/organizations/get").ok(t)
	if strings.Contains(o.stdout, "\u009b") || strings.Contains(o.stdout, "\u202e") || strings.Contains(o.stdout, "\x9b") || strings.Contains(o.stdout, "\x7f") {
		t.Fatalf("raw control characters in %q", o.stdout)
	}
	got, _ := o.json(t)["data"].(map[string]any)["response"].(string)
	if want := "a\u009b31m b\u202ec \ufffd d \U0001f600 \u007f"; got != want {
		t.Fatalf("decoded %q, want %q", got, want)
	}
}
