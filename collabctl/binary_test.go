package collabctl

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/collab/collab/internal/testkit/tlstest"
)

// The built binary runs: cmd/collabctl passes arguments, environment and exit codes through,
// and SIGINT ends a tail cleanly.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "collabctl")
	build := exec.Command("go", "build", "-o", bin, "../cmd/collabctl")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	p := startProcess(t)
	var env []string
	for k, v := range devEnv(p) {
		env = append(env, k+"="+v)
	}
	cmd := exec.Command(bin, "-o", "json", "keys", "list")
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("collabctl keys list: %v", err)
	}
	var keys []map[string]any
	if err := json.Unmarshal(out, &keys); err != nil || len(keys) != 1 || keys[0]["id"] != p.Dev.APIKey {
		t.Fatalf("keys %s (%v)", out, err)
	}
	cmd = exec.Command(bin, "workspace", "settings", "--set", "nonsense=1")
	cmd.Env = env
	if err := cmd.Run(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != ExitUsage {
		t.Fatalf("a usage error: %v", err)
	}

	// The tail goes through a proxy that says when it has polled, so the signal comes after the
	// program set up its handling.
	target, _ := url.Parse("http://" + p.HTTPAddr)
	polled := make(chan struct{}, 1)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(r *http.Response) error {
		select {
		case polled <- struct{}{}:
		default:
		}
		return nil
	}
	front := httptest.NewServer(proxy)
	defer front.Close()
	tail := exec.Command(bin, "--url", front.URL, "webhooks", "attempts", "tail", "--endpoint", "ep_none", "--interval", "100ms")
	tail.Env = env
	stderr := &syncBuffer{}
	tail.Stderr = stderr
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- tail.Wait() }()
	select {
	case <-polled:
	case err := <-exited:
		t.Fatalf("tail ended by itself: %v: %s", err, stderr.String())
	}
	if err := tail.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Fatalf("tail after SIGINT: %v: %s", err, stderr.String())
	}
}

// Against collabd's own TLS: HTTPS on its HTTP listener (--ca-file), and internal operations
// over its mutual-TLS gRPC listener with a client certificate of the deployment's CA, which is
// the internal credential there (no internal token).
func TestCollabdTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "collab test CA")
	dir := t.TempDir()
	server := ca.Write(t, dir, "server", ca.Issue(t, "collabd"))
	client := ca.Write(t, dir, "operator", ca.Issue(t, "operator"))
	p := startProcess(t, "--tls-cert-file="+server.Cert, "--tls-key-file="+server.Key,
		"--grpc-tls-ca-file="+server.CA, "--grpc-tls-cert-file="+server.Cert, "--grpc-tls-key-file="+server.Key)
	ctx := context.Background()
	env := devEnv(p)
	env["COLLABCTL_URL"] = "https://" + p.HTTPAddr
	if o := run(ctx, env, "", "keys", "list"); o.code != ExitFailed || !strings.Contains(o.stderr, "--ca-file") {
		t.Fatalf("https without the CA: %+v", o)
	}
	// https to a plain listener (the gRPC one speaks TLS here, so a plain process's HTTP one).
	plain := startProcess(t)
	if o := run(ctx, env, "", "--url", "https://"+plain.HTTPAddr, "keys", "list"); o.code != ExitFailed || !strings.Contains(o.stderr, plain.HTTPAddr+" does not speak TLS: use an http:// --url") {
		t.Fatalf("https to a plain listener: %+v", o)
	}
	env["COLLABCTL_CA_FILE"] = server.CA
	if o := run(ctx, env, "", "keys", "list").ok(t); !strings.Contains(o.stdout, p.Dev.APIKey) {
		t.Fatalf("https:\n%s", o.stdout)
	}
	if o := run(ctx, env, "", "--url", "http://"+p.HTTPAddr, "keys", "list"); o.code != ExitFailed || !strings.Contains(o.stderr, p.HTTPAddr+" serves HTTPS: use an https:// --url") {
		t.Fatalf("http to the https listener: %+v", o)
	}
	if o := run(ctx, env, "", "--ca-file", filepath.Join(dir, "none.pem"), "keys", "list"); o.code != ExitUsage || !strings.Contains(o.stderr, "--ca-file") {
		t.Fatalf("a missing CA file: %+v", o)
	}
	if o := run(ctx, env, "", "--ca-file", server.Key, "keys", "list"); o.code != ExitUsage || !strings.Contains(o.stderr, "holds no PEM certificate") {
		t.Fatalf("a key as CA file: %+v", o)
	}

	env["COLLABCTL_GRPC_ADDR"] = p.GRPCAddr
	data := `{"apiKey": {"apiKey": "` + p.Dev.APIKey + `", "authToken": "` + p.Dev.AuthToken + `"}}`
	const authenticate = "collab.workspace.v1.WorkspaceService.Authenticate"
	// TLS without a client certificate: the listener refuses the connection; no credential for
	// an internal operation either.
	env["COLLABCTL_GRPC_TLS"] = "true"
	if o := run(ctx, env, data, "call", "/v2/workspace/domains/get", "--via", "grpc"); o.code != ExitFailed || !strings.Contains(o.stderr, "cannot reach the gRPC listener") {
		t.Fatalf("gRPC without a client certificate: %+v", o)
	}
	if o := run(ctx, env, data, "call", authenticate, "-f", "-"); o.code != ExitUsage || !strings.Contains(o.stderr, "--grpc-cert-file") {
		t.Fatalf("internal without a credential: %+v", o)
	}
	env["COLLABCTL_GRPC_CERT_FILE"], env["COLLABCTL_GRPC_KEY_FILE"] = client.Cert, client.Key
	got := run(ctx, env, data, "-o", "json", "call", authenticate, "-f", "-").ok(t).json(t)
	if got["workspaceId"] != p.Dev.WorkspaceID {
		t.Fatalf("Authenticate over mutual TLS: %v", got)
	}
	// A certificate of another CA is refused.
	other := tlstest.NewCA(t, "other CA")
	stranger := other.Write(t, t.TempDir(), "stranger", other.Issue(t, "stranger"))
	env["COLLABCTL_GRPC_CERT_FILE"], env["COLLABCTL_GRPC_KEY_FILE"] = stranger.Cert, stranger.Key
	if o := run(ctx, env, data, "call", authenticate, "-f", "-"); o.code != ExitFailed {
		t.Fatalf("a stranger's certificate: %+v", o)
	}
	delete(env, "COLLABCTL_GRPC_KEY_FILE")
	if o := run(ctx, env, data, "call", authenticate, "-f", "-"); o.code != ExitUsage || !strings.Contains(o.stderr, "go together") {
		t.Fatalf("a certificate without its key: %+v", o)
	}
}
