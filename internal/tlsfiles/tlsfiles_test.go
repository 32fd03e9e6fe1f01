package tlsfiles

import (
	"bytes"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/collab/collab/internal/testkit/tlstest"
)

// serve accepts TLS connections with cfg on a loopback port and completes their handshakes.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				// One byte after a complete handshake: what the client reads tells it whether the
				// server accepted it.
				if tc, ok := c.(*tls.Conn); ok && tc.Handshake() == nil {
					_, _ = c.Write([]byte{1})
					_, _ = io.Copy(io.Discard, c)
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// dial completes a handshake with cfg and returns the certificate the server presented.
func dial(t *testing.T, addr string, cfg *tls.Config) (serial string, err error) {
	t.Helper()
	cfg = cfg.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName = "127.0.0.1"
	}
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return "", err
	}
	defer c.Close()
	// TLS 1.3 reports a refused client certificate on the first read, not in the handshake.
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		return "", err
	}
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

func logTo(buf *bytes.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// A replaced pair is served from the next look at the files; a broken one keeps the old pair,
// with one warning however many handshakes see it.
func TestPairReloadsAndKeepsTheOldOnFailure(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "test CA")
	first, second := ca.Issue(t, "first"), ca.Issue(t, "second")
	files := ca.Write(t, dir, "server", first)
	var logs bytes.Buffer
	pair, err := LoadPair(files.Cert, files.Key, logTo(&logs))
	if err != nil {
		t.Fatal(err)
	}
	pair.w.every = 0 // look at the files on every handshake
	addr := serve(t, Server(pair))
	client := Client(nil, mustPool(t, files.CA))

	if got, err := dial(t, addr, client); err != nil || got != first.Cert.SerialNumber.String() {
		t.Fatalf("served %s, %v; want the first certificate", got, err)
	}
	tlstest.Replace(t, files.Cert, second.CertPEM)
	tlstest.Replace(t, files.Key, second.KeyPEM)
	if got, err := dial(t, addr, client); err != nil || got != second.Cert.SerialNumber.String() {
		t.Fatalf("served %s, %v; want the second certificate", got, err)
	}
	// A key that does not match: the second pair stays.
	tlstest.Replace(t, files.Key, first.KeyPEM)
	for range 3 {
		if got, err := dial(t, addr, client); err != nil || got != second.Cert.SerialNumber.String() {
			t.Fatalf("served %s, %v; want the second certificate kept", got, err)
		}
	}
	if n := strings.Count(logs.String(), "does not load"); n != 1 {
		t.Fatalf("%d warnings, want 1:\n%s", n, logs.String())
	}
	// A missing file: kept too, and warned about once more.
	if err := os.Remove(files.Cert); err != nil {
		t.Fatal(err)
	}
	if got, err := dial(t, addr, client); err != nil || got != second.Cert.SerialNumber.String() {
		t.Fatalf("served %s, %v; want the second certificate kept", got, err)
	}
	if n := strings.Count(logs.String(), "does not load"); n != 2 {
		t.Fatalf("%d warnings, want 2:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), "PRIVATE KEY") {
		t.Fatal("key material in the log")
	}
}

func TestLoadRefusesBrokenFiles(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "test CA")
	a, b := ca.Issue(t, "a"), ca.Issue(t, "b")
	files := ca.Write(t, dir, "a", a)
	log := logTo(&bytes.Buffer{})
	if _, err := LoadPair(files.Cert, filepath.Join(dir, "missing.key"), log); err == nil {
		t.Fatal("a missing key loaded")
	}
	tlstest.Replace(t, files.Key, b.KeyPEM)
	if _, err := LoadPair(files.Cert, files.Key, log); err == nil {
		t.Fatal("a key of another certificate loaded")
	}
	if _, err := LoadPool(files.Key, log); err == nil {
		t.Fatal("a bundle without certificates loaded")
	}
}

// The mutual server takes clients with a certificate from its CA only; the client takes
// servers whose certificate its CA signed for the name it dialled.
func TestMutual(t *testing.T) {
	dir := t.TempDir()
	ca, other := tlstest.NewCA(t, "deployment CA"), tlstest.NewCA(t, "other CA")
	srv := ca.Write(t, dir, "server", ca.Issue(t, "server"))
	good := ca.Write(t, dir, "client", ca.Issue(t, "client"))
	stranger := other.Write(t, dir, "stranger", other.Issue(t, "stranger"))
	log := logTo(&bytes.Buffer{})
	addr := serve(t, MutualServer(mustPair(t, srv), mustPool(t, srv.CA)))

	if _, err := dial(t, addr, Client(mustPair(t, good), mustPool(t, good.CA))); err != nil {
		t.Fatalf("a client of the CA: %v", err)
	}
	if _, err := dial(t, addr, Client(nil, mustPool(t, good.CA))); err == nil {
		t.Fatal("a client without a certificate got through")
	}
	// The stranger trusts the server (it has the right bundle) but its own certificate is
	// from another CA.
	if _, err := dial(t, addr, Client(mustPair(t, stranger), mustPool(t, good.CA))); err == nil {
		t.Fatal("a client of another CA got through")
	}
	// A client that trusts another CA refuses the server.
	if _, err := dial(t, addr, Client(mustPair(t, good), mustPool(t, stranger.CA))); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("a server of another CA: %v", err)
	}
	// The server's certificate must name the host dialled.
	named := ca.Write(t, dir, "named", ca.Issue(t, "named", "documents.internal"))
	addr2 := serve(t, Server(mustPair(t, named)))
	if _, err := dial(t, addr2, Client(nil, mustPool(t, named.CA))); err == nil {
		t.Fatal("a certificate for documents.internal was accepted for 127.0.0.1")
	}
	cfg := Client(nil, mustPool(t, named.CA))
	cfg.ServerName = "documents.internal"
	if _, err := dial(t, addr2, cfg); err != nil {
		t.Fatalf("the right name: %v", err)
	}

	// A replaced CA bundle counts from the next handshake.
	pool, err := LoadPool(srv.CA, log)
	if err != nil {
		t.Fatal(err)
	}
	pool.w.every = 0
	addr3 := serve(t, MutualServer(mustPair(t, srv), pool))
	if _, err := dial(t, addr3, Client(mustPair(t, stranger), mustPool(t, srv.CA))); err == nil {
		t.Fatal("a client of another CA got through")
	}
	tlstest.Replace(t, srv.CA, append(append([]byte{}, ca.PEM...), other.PEM...))
	if _, err := dial(t, addr3, Client(mustPair(t, stranger), mustPool(t, srv.CA))); err != nil {
		t.Fatalf("after adding its CA to the bundle: %v", err)
	}
}

func mustPair(t *testing.T, f tlstest.Files) *Pair {
	t.Helper()
	p, err := LoadPair(f.Cert, f.Key, logTo(&bytes.Buffer{}))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustPool(t *testing.T, file string) *Pool {
	t.Helper()
	p, err := LoadPool(file, logTo(&bytes.Buffer{}))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The HTTP transport verifies https servers against the bundle in use at each new connection.
func TestHTTPTransport(t *testing.T) {
	dir := t.TempDir()
	ca, other := tlstest.NewCA(t, "deployment CA"), tlstest.NewCA(t, "other CA")
	srv := ca.Write(t, dir, "server", ca.Issue(t, "server"))
	// Not httptest's TLS server: it adds a certificate of its own, served to clients that send
	// no server name (an IP address).
	ln, err := tls.Listen("tcp", "127.0.0.1:0", Server(mustPair(t, srv)))
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })}
	go func() { _ = hs.Serve(ln) }()
	defer func() { _ = hs.Close() }()
	url := "https://" + ln.Addr().String()

	bundle := filepath.Join(dir, "bundle.crt")
	tlstest.Replace(t, bundle, other.PEM)
	pool := mustPool(t, bundle)
	pool.w.every = 0
	tr := &http.Transport{}
	HTTPTransport(tr, nil, pool)
	client := &http.Client{Transport: tr}
	resp, err := client.Get(url)
	if err == nil {
		_ = resp.Body.Close() // an answer fails the test below; the connection is still freed
	}
	if err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("a server of another CA: %v", err)
	}
	tlstest.Replace(t, bundle, ca.PEM)
	resp, err = client.Get(url)
	if err != nil {
		t.Fatalf("after the bundle changed: %v", err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); string(b) != "ok" || resp.TLS == nil {
		t.Fatalf("answer %q, tls %v", b, resp.TLS)
	}
}
