package wakeup_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/collab/collab/internal/testkit/natstest"
	"github.com/collab/collab/internal/testkit/tlstest"
	"github.com/collab/collab/internal/wakeup"
)

// tlsEngine is a NATS server that requires TLS, with a certificate of its own CA for
// 127.0.0.1 and localhost, and the PEM file of that CA.
type tlsEngine struct {
	s    *server.Server
	ca   string
	port string
}

func startTLSEngine(t *testing.T) tlsEngine {
	t.Helper()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "wake-ups CA")
	f := ca.Write(t, dir, "nats", ca.Issue(t, "nats"))
	s := natstest.Server(t, natstest.Options{TLSCert: f.Cert, TLSKey: f.Key})
	return tlsEngine{s: s, ca: f.CA, port: strings.TrimPrefix(s.ClientURL(), "tls://127.0.0.1:")}
}

// tlsConns counts the server's client connections that speak TLS, and all of them.
func tlsConns(t *testing.T, s *server.Server) (secure, all int) {
	t.Helper()
	cz, err := s.Connz(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cz.Conns {
		if c.TLSVersion != "" {
			secure++
		}
	}
	return secure, len(cz.Conns)
}

// Over tls:// with the CA that signed the server's certificate (--wakeup-tls-ca-file), a
// wake-up goes through, and every connection the server holds speaks TLS.
func TestNATSOverTLS(t *testing.T) {
	e := startTLSEngine(t)
	a, _ := dial(t, wakeup.NATSConfig{URL: "tls://127.0.0.1:" + e.port, CAFile: e.ca})
	b, _ := dial(t, wakeup.NATSConfig{URL: "tls://localhost:" + e.port, CAFile: e.ca})
	ch, _ := recv(t, b, "room.tls")
	waitInterest(t, e.s, "room.tls")
	a.Publish("room.tls", []byte("secret edit"))
	expect(t, ch, "secret edit")
	if secure, all := tlsConns(t, e.s); all != 2 || secure != 2 {
		t.Fatalf("%d connections, %d over TLS; want 2 over TLS", all, secure)
	}
}

// A nats:// address of a server that requires TLS is upgraded to TLS (the client library does
// so when the server asks), and the upgrade verifies the server as tls:// does: with the CA it
// connects, over TLS, never in plain text.
func TestNATSPlainURLToTLSServerIsUpgraded(t *testing.T) {
	e := startTLSEngine(t)
	good, _ := dial(t, wakeup.NATSConfig{URL: "nats://127.0.0.1:" + e.port, CAFile: e.ca})
	ch, _ := recv(t, good, "room.up")
	waitInterest(t, e.s, "room.up")
	good.Publish("room.up", []byte("upgraded"))
	expect(t, ch, "upgraded")
	if secure, all := tlsConns(t, e.s); all != 1 || secure != 1 {
		t.Fatalf("%d connections, %d over TLS; want 1 over TLS", all, secure)
	}
}

// An unreadable CA file is DialNATS's error, naming the file.
func TestNATSUnreadableCAFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.pem")
	if _, err := wakeup.DialNATS(wakeup.NATSConfig{URL: "tls://127.0.0.1:4222", CAFile: missing}, nil); err == nil {
		t.Fatal("dialed with a missing CA file")
	}
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := wakeup.DialNATS(wakeup.NATSConfig{URL: "tls://127.0.0.1:4222", CAFile: garbage}, nil)
	if err == nil || !strings.Contains(err.Error(), "garbage.pem") {
		t.Fatalf("a CA file that is not PEM: %v", err)
	}
}
