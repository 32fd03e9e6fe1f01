package tlsfiles

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/collab/collab/internal/testkit/tlstest"
)

// A client whose CA was dropped from the bundle cannot come back by resuming a session (a TLS
// session ticket) from before: resumption is held to the bundle in use, like a full handshake.
func TestResumedSessionsFollowTheBundle(t *testing.T) {
	dir := t.TempDir()
	ca, next := tlstest.NewCA(t, "deployment CA"), tlstest.NewCA(t, "next CA")
	srv := ca.Write(t, dir, "server", ca.Issue(t, "server"))
	pool, err := LoadPool(srv.CA, logTo(&bytes.Buffer{}))
	if err != nil {
		t.Fatal(err)
	}
	pool.w.every = 0
	addr := serve(t, MutualServer(mustPair(t, srv), pool))
	leaf := ca.Issue(t, "client")
	cert, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		tlstest.Replace(t, srv.CA, ca.PEM)
		cfg := &tls.Config{RootCAs: mustPool(t, srv.CA).CertPool(), ServerName: "127.0.0.1", Certificates: []tls.Certificate{cert},
			ClientSessionCache: tls.NewLRUClientSessionCache(4), MaxVersion: version}
		resumed := func() (bool, error) {
			c, err := tls.Dial("tcp", addr, cfg)
			if err != nil {
				return false, err
			}
			defer c.Close()
			if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
				return false, err
			}
			return c.ConnectionState().DidResume, nil
		}
		if _, err := resumed(); err != nil {
			t.Fatalf("first handshake: %v", err)
		}
		if did, err := resumed(); err != nil || !did {
			t.Fatalf("TLS %x: the control resumption: %v, %v", version, did, err)
		}
		tlstest.Replace(t, srv.CA, next.PEM)
		if did, err := resumed(); err == nil {
			t.Fatalf("TLS %x: a client of a dropped CA got through (resumed: %v)", version, did)
		}
	}
}

// A bundle or a certificate chain caught mid-write (its last block cut off) does not load:
// the version in use stays whole, rather than a bundle without its last CA or a chain
// without its last certificate.
func TestCutOffFilesKeepTheVersionInUse(t *testing.T) {
	dir := t.TempDir()
	ca, other := tlstest.NewCA(t, "deployment CA"), tlstest.NewCA(t, "other CA")
	srv := ca.Write(t, dir, "server", ca.Issue(t, "server"))
	both := append(append([]byte{}, ca.PEM...), other.PEM...)
	tlstest.Replace(t, srv.CA, both)
	var logs bytes.Buffer
	pool, err := LoadPool(srv.CA, logTo(&logs))
	if err != nil {
		t.Fatal(err)
	}
	pool.w.every = 0
	addr := serve(t, MutualServer(mustPair(t, srv), pool))
	stranger := other.Write(t, t.TempDir(), "stranger", other.Issue(t, "stranger"))
	client := Client(mustPair(t, stranger), mustPool(t, srv.CA))
	if _, err := dial(t, addr, client); err != nil {
		t.Fatalf("a client of the second CA: %v", err)
	}
	// The bundle rewritten in place, caught halfway through its second certificate.
	tlstest.Replace(t, srv.CA, both[:len(ca.PEM)+len(other.PEM)/2])
	if _, err := dial(t, addr, client); err != nil {
		t.Fatalf("a client of the second CA after a cut-off bundle: %v", err)
	}
	if !strings.Contains(logs.String(), "cut off") {
		t.Fatalf("no warning about the cut-off bundle:\n%s", logs.String())
	}
	if _, err := LoadPool(srv.CA, logTo(&bytes.Buffer{})); err == nil {
		t.Fatal("a cut-off bundle loaded at start")
	}

	// A chain (leaf and a second certificate) cut off in its second certificate.
	leaf := ca.Issue(t, "leaf")
	chain := ca.Write(t, dir, "chain", leaf)
	cut := append(append([]byte{}, leaf.CertPEM...), ca.PEM[:len(ca.PEM)/2]...)
	tlstest.Replace(t, chain.Cert, cut)
	if _, err := LoadPair(chain.Cert, chain.Key, logTo(&bytes.Buffer{})); err == nil || !strings.Contains(err.Error(), "cut off") {
		t.Fatalf("a cut-off chain: %v", err)
	}
	// The whole chain loads.
	tlstest.Replace(t, chain.Cert, append(append([]byte{}, leaf.CertPEM...), ca.PEM...))
	if _, err := LoadPair(chain.Cert, chain.Key, logTo(&bytes.Buffer{})); err != nil {
		t.Fatalf("the whole chain: %v", err)
	}
	// A bundle with a certificate that does not parse is refused, not loaded without it.
	bad := append(append([]byte{}, ca.PEM...), []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")...)
	tlstest.Replace(t, srv.CA, bad)
	if _, err := LoadPool(srv.CA, logTo(&bytes.Buffer{})); err == nil {
		t.Fatal("a bundle with a broken certificate loaded")
	}
}

// TLS 1.2 is served and spoken with forward-secret AEAD suites only: a peer that offers only
// CBC with SHA-1 is refused, on either side.
func TestTLS12CipherSuites(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "CA")
	srv := ca.Write(t, dir, "server", ca.Issue(t, "server"))
	addr := serve(t, Server(mustPair(t, srv)))
	offer := func(suite uint16) error {
		cfg := Client(nil, mustPool(t, srv.CA))
		cfg.MaxVersion, cfg.CipherSuites = tls.VersionTLS12, []uint16{suite}
		_, err := dial(t, addr, cfg)
		return err
	}
	if err := offer(tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256); err != nil {
		t.Fatalf("ECDHE with AES-GCM: %v", err)
	}
	for _, suite := range []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA} {
		if err := offer(suite); err == nil {
			t.Errorf("%s was accepted", tls.CipherSuiteName(suite))
		}
	}
	// The client side: a server that takes only CBC is refused by Client.
	legacy := &tls.Config{GetCertificate: Server(mustPair(t, srv)).GetCertificate, MaxVersion: tls.VersionTLS12,
		CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}} //nolint:gosec // G402: a legacy server on purpose, to be refused
	if _, err := dial(t, serve(t, legacy), Client(nil, mustPool(t, srv.CA))); err == nil {
		t.Error("Client spoke CBC with SHA-1 to a legacy server")
	}
}

// A broken version warned about, then the version in use again, then the same broken version:
// warned about again (an operator retrying the same mistake hears of it).
func TestBrokenVersionWarnedAgainAfterARevert(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "CA")
	a, b := ca.Issue(t, "a"), ca.Issue(t, "b")
	files := ca.Write(t, dir, "server", a)
	var logs bytes.Buffer
	pair, err := LoadPair(files.Cert, files.Key, logTo(&logs))
	if err != nil {
		t.Fatal(err)
	}
	pair.w.every = 0
	for range 2 {
		tlstest.Replace(t, files.Key, b.KeyPEM)
		pair.Certificate()
		tlstest.Replace(t, files.Key, a.KeyPEM)
		if got := pair.Certificate(); got.Leaf.SerialNumber.Cmp(a.Cert.SerialNumber) != 0 {
			t.Fatal("the pair in use changed")
		}
	}
	if n := strings.Count(logs.String(), "does not load"); n != 2 {
		t.Fatalf("%d warnings, want 2:\n%s", n, logs.String())
	}
}

// The HTTP transport gives up on a peer that accepts the connection but never answers the
// handshake after the transport's TLSHandshakeTimeout, not when the request's caller does.
func TestHTTPTransportHandshakeTimeout(t *testing.T) {
	ca := tlstest.NewCA(t, "CA")
	files := ca.Write(t, t.TempDir(), "client", ca.Issue(t, "client"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, silent
		}
	}()
	tr := &http.Transport{TLSHandshakeTimeout: 200 * time.Millisecond}
	HTTPTransport(tr, mustPair(t, files), mustPool(t, files.CA))
	// The caller's own limit is far beyond the transport's: the error must be the handshake's.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+ln.Addr().String()+"/", nil)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err == nil {
		_ = resp.Body.Close() // an answer fails the test below; the connection is still freed
	}
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "handshake") {
		t.Fatalf("a silent peer: %v (caller's context: %v), want the handshake's timeout", err, ctx.Err())
	}
}

// What a handshake pays for the files being watched: the pair and the bundle in use, from many
// goroutines at once (the files are read again at most every CheckInterval, not per call).
func BenchmarkWatchedPerHandshake(b *testing.B) {
	ca := tlstest.NewCA(b, "CA")
	files := ca.Write(b, b.TempDir(), "server", ca.Issue(b, "server"))
	log := logTo(&bytes.Buffer{})
	pair, err := LoadPair(files.Cert, files.Key, log)
	if err != nil {
		b.Fatal(err)
	}
	pool, err := LoadPool(files.CA, log)
	if err != nil {
		b.Fatal(err)
	}
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if pair.Certificate() == nil || pool.CertPool() == nil {
				b.Fatal("nothing in use")
			}
		}
	})
}

// A full mutual TLS 1.3 handshake against MutualServer (per-handshake configuration and CA
// bundle) next to the same server with a fixed configuration: the cost of reloading is the
// difference.
func BenchmarkMutualHandshake(b *testing.B) {
	ca := tlstest.NewCA(b, "CA")
	dir := b.TempDir()
	srvFiles := ca.Write(b, dir, "server", ca.Issue(b, "server"))
	cliFiles := ca.Write(b, dir, "client", ca.Issue(b, "client"))
	log := logTo(&bytes.Buffer{})
	pair, _ := LoadPair(srvFiles.Cert, srvFiles.Key, log)
	pool, _ := LoadPool(srvFiles.CA, log)
	cpair, _ := LoadPair(cliFiles.Cert, cliFiles.Key, log)
	fixed := &tls.Config{MinVersion: MinVersion, Certificates: []tls.Certificate{*pair.Certificate()}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool.CertPool()}
	for name, cfg := range map[string]*tls.Config{"reloading": MutualServer(pair, pool), "fixed": fixed} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				c1, c2 := net.Pipe()
				srv := tls.Server(c1, cfg)
				cli := Client(cpair, pool)
				cli.ServerName = "127.0.0.1"
				done := make(chan error, 1)
				go func() { done <- srv.Handshake() }()
				if err := tls.Client(c2, cli).Handshake(); err != nil {
					b.Fatal(err)
				}
				if err := <-done; err != nil {
					b.Fatal(err)
				}
				c1.Close()
				c2.Close()
			}
		})
	}
}

// A certificate outside its validity period loads (peers decide), with a warning at start
// and when it comes in by a reload; a valid one loads without.
func TestCertificateOutsideItsValidityIsWarnedAbout(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "CA")
	valid := ca.Issue(t, "valid")
	expired := ca.IssueValid(t, "expired", time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour))
	early := ca.IssueValid(t, "early", time.Now().Add(time.Hour), time.Now().Add(48*time.Hour))
	files := ca.Write(t, dir, "server", expired)
	var logs bytes.Buffer
	pair, err := LoadPair(files.Cert, files.Key, logTo(&logs))
	if err != nil {
		t.Fatalf("an expired certificate: %v", err)
	}
	if n := strings.Count(logs.String(), "outside its validity period"); n != 1 {
		t.Fatalf("%d warnings at start, want 1:\n%s", n, logs.String())
	}
	pair.w.every = 0
	for i, l := range []tlstest.Leaf{valid, early} {
		tlstest.Replace(t, files.Cert, l.CertPEM)
		tlstest.Replace(t, files.Key, l.KeyPEM)
		if got := pair.Certificate(); got.Leaf.SerialNumber.Cmp(l.Cert.SerialNumber) != 0 {
			t.Fatalf("version %d not loaded", i)
		}
		if n := strings.Count(logs.String(), "outside its validity period"); n != 1+i {
			t.Fatalf("after version %d: %d warnings, want %d:\n%s", i, n, 1+i, logs.String())
		}
	}
}
