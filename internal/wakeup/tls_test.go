package wakeup_test

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/collab/collab/internal/testkit/natstest"
	"github.com/collab/collab/internal/testkit/tlstest"
	"github.com/collab/collab/internal/wakeup"
)

// tlsEngine is a NATS server that requires TLS, with a certificate of its own CA for
// 127.0.0.1 and localhost; the PEM file of that CA, another of its certificates for another
// name, and another CA's file and certificate.
type tlsEngine struct {
	s           *server.Server
	ca, wrongCA string
	wrong       tlstest.Files // a certificate for 127.0.0.1 of the other CA
	misnamed    tlstest.Files // a certificate of the CA for nats.internal only
	port        string
}

func startTLSEngine(t *testing.T) tlsEngine {
	t.Helper()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "wake-ups CA")
	f := ca.Write(t, dir, "nats", ca.Issue(t, "nats"))
	other := tlstest.NewCA(t, "another CA")
	wrong := other.Write(t, dir, "other", other.Issue(t, "impostor"))
	misnamed := ca.Write(t, dir, "misnamed", ca.Issue(t, "misnamed", "nats.internal"))
	s := natstest.Server(t, natstest.Options{TLSCert: f.Cert, TLSKey: f.Key})
	return tlsEngine{s: s, ca: f.CA, wrongCA: wrong.CA, wrong: wrong, misnamed: misnamed, port: strings.TrimPrefix(s.ClientURL(), "tls://127.0.0.1:")}
}

// logBuffer is a logger's output, read while the bus writes it.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
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
// connects, over TLS, never in plain text; without it (the system's roots) it is refused
// (TestNATSRefusesWhatTLSDoesNotVerify).
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

// refused checks that the bus does not connect and that its log says why, within seconds:
// the engine's answer is no outage to wait out but a configuration to fix.
func refused(t *testing.T, b *wakeup.NATS, log *logBuffer, why string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(log.String(), why) {
		if b.Connected() {
			t.Fatal("connected")
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log does not say %q within 10 s:\n%s", why, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if b.Connected() {
		t.Fatal("connected")
	}
}

// A server whose certificate the CA does not verify is refused, whether the address says tls://
// or the server asked for TLS on a nats:// one; so is a server that offers no TLS to a tls://
// address or to a bus given a CA (a CA means TLS): DialNATS returns at once (the bus keeps trying in the background, as
// for an engine that is down), nothing is delivered, and the log says what is wrong, once
// however many times the bus retries.
func TestNATSRefusesWhatTLSDoesNotVerify(t *testing.T) {
	e := startTLSEngine(t)
	plain := natstest.Server(t, natstest.Options{Token: "s3cret"})
	misnamed := natstest.Server(t, natstest.Options{TLSCert: e.misnamed.Cert, TLSKey: e.misnamed.Key})
	for _, c := range []struct {
		name string
		cfg  wakeup.NATSConfig
		why  string
	}{
		{"wrong CA", wakeup.NATSConfig{URL: "tls://127.0.0.1:" + e.port, CAFile: e.wrongCA}, "certificate signed by unknown authority"},
		{"system roots", wakeup.NATSConfig{URL: "tls://127.0.0.1:" + e.port}, "certificate signed by unknown authority"},
		{"nats:// upgraded, system roots", wakeup.NATSConfig{URL: "nats://127.0.0.1:" + e.port}, "certificate signed by unknown authority"},
		{"not the certificate's address", wakeup.NATSConfig{URL: misnamed.ClientURL(), CAFile: e.ca}, "cannot validate certificate for 127.0.0.1"},
		{"a wrong token", wakeup.NATSConfig{URL: plain.ClientURL(), Token: "wrong"}, "Authorization Violation"},
		{"tls:// to a server without TLS", wakeup.NATSConfig{URL: "tls://" + strings.TrimPrefix(plain.ClientURL(), "nats://")}, "secure connection not available"},
		{"nats:// and a CA, to a server without TLS", wakeup.NATSConfig{URL: plain.ClientURL(), CAFile: e.ca}, "secure connection not available"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			log := &logBuffer{}
			c.cfg.Logger = slog.New(slog.NewTextHandler(log, nil))
			start := time.Now()
			b, _ := dial(t, c.cfg)
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("DialNATS took %v", d)
			}
			refused(t, b, log, c.why)
			time.Sleep(1500 * time.Millisecond) // three more attempts at least
			if n := strings.Count(log.String(), c.why); n != 1 {
				t.Fatalf("the refusal logged %d times, want once:\n%s", n, log)
			}
		})
	}
}

// An engine that comes back with a certificate the CA does not verify (a rotation gone wrong)
// is refused at each reconnect, and the log says why, once.
func TestNATSLogsWhyAReconnectIsRefused(t *testing.T) {
	e := startTLSEngine(t)
	log := &logBuffer{}
	b, _ := dial(t, wakeup.NATSConfig{URL: "tls://127.0.0.1:" + e.port, CAFile: e.ca, Logger: slog.New(slog.NewTextHandler(log, nil))})
	deadline := time.Now().Add(10 * time.Second)
	for !b.Connected() {
		if time.Now().After(deadline) {
			t.Fatalf("not connected:\n%s", log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.s.Shutdown()
	natstest.ServerOn(t, natstest.Options{TLSCert: e.wrong.Cert, TLSKey: e.wrong.Key}, e.port)
	refused(t, b, log, "certificate signed by unknown authority")
	time.Sleep(1500 * time.Millisecond)
	if n := strings.Count(log.String(), "certificate signed by unknown authority"); n != 1 {
		t.Fatalf("the refusal logged %d times, want once:\n%s", n, log)
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
