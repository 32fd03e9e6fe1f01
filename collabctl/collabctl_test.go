package collabctl

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/collab/collab/collabd"
	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/services"
)

// startProcess runs collabd (every service unless extra says otherwise, memory store) on
// loopback ports chosen by the system.
func startProcess(t *testing.T, extra ...string) *collabd.Process {
	t.Helper()
	args := append([]string{"--http-addr=127.0.0.1:0", "--grpc-addr=127.0.0.1:0", "--rate-limit=off", "--auth-cache-ttl=0s", "--log-level=error"}, extra...)
	cfg, err := collabd.ParseFlags(services.All(), args, func(string) string { return "" })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	p, err := collabd.Start(context.Background(), cfg, collabd.Deps{Clock: clock.Real(), LogOutput: io.Discard})
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
	return p
}

// devEnv is the environment of an operator holding the development workspace's credentials.
func devEnv(p *collabd.Process) map[string]string {
	return map[string]string{
		"COLLABCTL_URL":             "http://" + p.HTTPAddr,
		"COLLABCTL_WORKSPACE_ID":    p.Dev.WorkspaceID,
		"COLLABCTL_WORKSPACE_TOKEN": p.Dev.WorkspaceToken,
		"COLLABCTL_API_KEY":         p.Dev.APIKey,
		"COLLABCTL_AUTH_TOKEN":      p.Dev.AuthToken,
	}
}

// outcome is what one run of collabctl did.
type outcome struct {
	code           int
	stdout, stderr string
}

func (o outcome) json(t *testing.T) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(o.stdout), &v); err != nil {
		t.Fatalf("stdout is not a JSON object: %v\n%s", err, o.stdout)
	}
	return v
}

func (o outcome) ok(t *testing.T) outcome {
	t.Helper()
	if o.code != ExitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", o.code, o.stdout, o.stderr)
	}
	return o
}

// run runs Main with env as the whole environment and stdin as its input.
func run(ctx context.Context, env map[string]string, stdin string, args ...string) outcome {
	var out, errOut bytes.Buffer
	code := Main(ctx, args, strings.NewReader(stdin), &out, &errOut, func(k string) string { return env[k] })
	return outcome{code: code, stdout: out.String(), stderr: errOut.String()}
}

// post calls the API directly, not through collabctl, to check what collabctl did.
func post(t *testing.T, p *collabd.Process, path string, headers map[string]string, data any) (int, map[string]any) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"data": data})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, "http://"+p.HTTPAddr+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return resp.StatusCode, v
}

func workspaceHeaders(id, token string) map[string]string {
	return map[string]string{"x-service-workspace-id": id, "x-service-workspace-auth-token": token}
}

func keyHeaders(key, token string) map[string]string {
	return map[string]string{"x-service-api-key": key, "x-service-auth-token": token}
}

// eventually waits for cond, failing the test after a generous bound (a hang, not a speed).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// syncBuffer is a buffer written by a command running in another goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// -h, of collabctl and of each command, prints the usage to stdout and exits 0, and shows none
// of the secrets in the environment or on the command line (flag defaults are the built-in
// ones, never the environment's).
func TestHelpShowsNoSecret(t *testing.T) {
	secrets := map[string]string{
		"COLLABCTL_WORKSPACE_TOKEN": "secret-workspace-token", "COLLABCTL_AUTH_TOKEN": "secret-auth-token",
		"COLLABCTL_INTERNAL_TOKEN": "secret-internal-token", "COLLABCTL_WORKSPACE_ID": "w", "COLLABCTL_API_KEY": "k",
	}
	helps := [][]string{{"-h"}, {"--auth-token", "secret-flag-token", "-h"}}
	for _, c := range commands() {
		helps = append(helps, append(strings.Fields(c.words), "-h"))
	}
	for _, args := range helps {
		o := run(context.Background(), secrets, "", args...)
		if o.code != ExitOK || !strings.Contains(o.stdout, "Usage: collabctl") || strings.Contains(o.stdout+o.stderr, "secret-") {
			t.Errorf("%v: %+v", args, o)
		}
	}
}
