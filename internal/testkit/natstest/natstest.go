// Package natstest runs NATS servers (the wake-up engine) inside a test process: one server,
// or a cluster of several routed to each other, on loopback ports, shut down with the test.
package natstest

import (
	"fmt"
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
