// Package natstest runs NATS servers (the wake-up engine) inside a test process: one server,
// or a cluster of several routed to each other, on loopback ports, shut down with the test.
package natstest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Options tune a test server.
type Options struct {
	// Token, when set, is the authorization token clients must present.
	Token string
	// TLSCert and TLSKey, when set, are the PEM files of the server's certificate and key: the
	// server then requires TLS of every client (its ClientURL says tls://).
	TLSCert, TLSKey string
}

// options are the server options of o on a loopback port (-1: a random one).
func options(t testing.TB, o Options, port int) *server.Options {
	t.Helper()
	so := &server.Options{Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true, Authorization: o.Token}
	if o.TLSCert != "" || o.TLSKey != "" {
		c, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: o.TLSCert, KeyFile: o.TLSKey})
		if err != nil {
			t.Fatalf("natstest: TLS: %v", err)
		}
		so.TLSConfig, so.TLS, so.TLSTimeout = c, true, 5
	}
	return so
}

// Server starts one server and returns it; its ClientURL is where to connect.
func Server(t testing.TB, o Options) *server.Server {
	t.Helper()
	return start(t, options(t, o, -1))
}

// ServerOn starts one server on a given loopback port (a server coming back where clients
// look for it).
func ServerOn(t testing.TB, o Options, port string) *server.Server {
	t.Helper()
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatalf("natstest: port %q: %v", port, err)
	}
	return start(t, options(t, o, p))
}

// Cluster starts n servers routed to each other and waits until each sees the others; a
// client of any of them reaches the subscribers of all.
func Cluster(t testing.TB, n int) []*server.Server {
	t.Helper()
	seed := start(t, &server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		Cluster: server.ClusterOpts{Name: "collab-test", Host: "127.0.0.1", Port: -1}})
	routes := server.RoutesFromStr(fmt.Sprintf("nats://127.0.0.1:%d", seed.ClusterAddr().Port))
	out := []*server.Server{seed}
	for range n - 1 {
		out = append(out, start(t, &server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
			Cluster: server.ClusterOpts{Name: "collab-test", Host: "127.0.0.1", Port: -1}, Routes: routes}))
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, s := range out {
		for s.NumRoutes() < n-1 {
			if time.Now().After(deadline) {
				t.Fatalf("natstest: cluster of %d did not form (a server has %d routes)", n, s.NumRoutes())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return out
}

// Start starts a server from options of the caller's: a deployment's configuration file read
// with server.ProcessConfigFile, its listeners moved to loopback ports. The server logs
// nothing and ignores signals, whatever the options say.
func Start(t testing.TB, o *server.Options) *server.Server {
	t.Helper()
	o.NoLog, o.NoSigs = true, true
	return start(t, o)
}

// ConfigFile reads a NATS configuration file (a deployment's) as a server would with env as its
// environment: each $VAR the file names takes env's value, put in where the reference stands
// and so read as a configuration value, as the server reads one from its environment. A
// variable env lacks fails the test, as the server refuses to start without it. The process's
// own environment is not read, so parallel tests may give the same file different values.
func ConfigFile(t testing.TB, path string, env map[string]string) *server.Options {
	t.Helper()
	b, err := os.ReadFile(path) //nolint:gosec // G304: a file of the repository the test names
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	var missing []string
	text := envRef.ReplaceAllStringFunc(string(b), func(ref string) string {
		v, ok := env[ref[1:]]
		if !ok {
			missing = append(missing, ref)
		}
		return v
	})
	if len(missing) > 0 {
		t.Fatalf("natstest: %s names %v, which its environment lacks: the server would not start", path, missing)
	}
	resolved := filepath.Join(t.TempDir(), "nats-server.conf")
	if err := os.WriteFile(resolved, []byte(text), 0o600); err != nil { //nolint:gosec // G703: a file of the test's own temporary directory
		t.Fatalf("natstest: %v", err)
	}
	o, err := server.ProcessConfigFile(resolved)
	if err != nil {
		t.Fatalf("natstest: %s: %v", path, err)
	}
	return o
}

// envRef is a variable reference of a NATS configuration file.
var envRef = regexp.MustCompile(`\$[A-Za-z_][A-Za-z0-9_]*`)

// URLs joins the servers' client URLs, as a client's seed list.
func URLs(ss ...*server.Server) string {
	urls := make([]string, len(ss))
	for i, s := range ss {
		urls[i] = s.ClientURL()
	}
	return strings.Join(urls, ",")
}

func start(t testing.TB, o *server.Options) *server.Server {
	t.Helper()
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("natstest: the server did not start")
	}
	t.Cleanup(s.Shutdown)
	return s
}
