// Package tlsfiles holds the process's TLS material read from files (a certificate with its
// key, a CA bundle) and the tls.Configs built on it. The files are read again when they change,
// so an operator rotates certificates by replacing the files, without a restart: a handshake
// checks at most every CheckInterval whether the files' contents changed, and a new pair or
// bundle that does not load keeps the previous one (with one warning per broken version).
package tlsfiles

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"
)

// CheckInterval is how often, at most, a handshake looks at the files again. Reading two small
// files is cheap, but a busy listener handshakes far more often than certificates change.
const CheckInterval = 2 * time.Second

// MinVersion is the oldest TLS version served or spoken: TLS 1.2.
const MinVersion = tls.VersionTLS12

// cipherSuites are those of TLS 1.2 served and spoken: forward secret (ECDHE) and
// authenticated encryption only. Go's defaults also take CBC with SHA-1, which HTTP/2 forbids
// and current guidance (Mozilla's "intermediate") drops. TLS 1.3's suites are all AEAD and not
// configurable.
var cipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// watched is a value parsed from files, parsed again when their contents change. Contents, not
// modification times, decide: a Kubernetes secret volume swaps a symlink and may keep times.
type watched[T any] struct {
	what  string // for messages: "certificate and key", "CA bundle"
	files []string
	parse func(contents [][]byte) (T, error)
	log   *slog.Logger
	every time.Duration

	mu      sync.Mutex
	current T
	sum     [32]byte  // of the contents current came from
	bad     bool      // the last look failed...
	badSum  [32]byte  // ...on these contents (zero: unreadable), warned about once
	checked time.Time // when the files were last looked at
}

func newWatched[T any](what string, files []string, parse func([][]byte) (T, error), log *slog.Logger) (*watched[T], error) {
	w := &watched[T]{what: what, files: files, parse: parse, log: log, every: CheckInterval}
	contents, sum, err := w.read()
	if err != nil {
		return nil, err
	}
	if w.current, err = parse(contents); err != nil {
		return nil, fmt.Errorf("%s (%v): %w", what, files, err)
	}
	w.sum, w.checked = sum, time.Now()
	return w, nil
}

func (w *watched[T]) read() ([][]byte, [32]byte, error) {
	h := sha256.New()
	contents := make([][]byte, len(w.files))
	for i, f := range w.files {
		b, err := os.ReadFile(f) //nolint:gosec // G304: the certificate and key files the operator named
		if err != nil {
			return nil, [32]byte{}, fmt.Errorf("%s: %w", w.what, err)
		}
		contents[i] = b
		// The length first, so that moving bytes from one file to the next changes the sum.
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return contents, sum, nil
}

// get returns the current value, first reading the files again when the last look is older
// than the interval. It never fails: a failure keeps the value in use.
func (w *watched[T]) get() T {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	if now.Sub(w.checked) < w.every {
		return w.current
	}
	w.checked = now
	contents, sum, err := w.read()
	if err == nil && sum == w.sum {
		// Back to the version in use: a broken version seen before is new again next time.
		w.bad = false
		return w.current
	}
	if err == nil {
		var v T
		if v, err = w.parse(contents); err == nil {
			w.current, w.sum, w.bad = v, sum, false
			w.log.Info("tls: loaded new "+w.what, "files", w.files)
			return w.current
		}
		err = fmt.Errorf("%s: %w", w.what, err)
	}
	// Files replaced one after the other fail between the two writes; the warning says so once
	// per broken version, not on every handshake.
	if !w.bad || sum != w.badSum {
		w.log.Warn("tls: the new "+w.what+" does not load; keeping the one in use", "files", w.files, "err", err)
	}
	w.bad, w.badSum = true, sum
	return w.current
}

// Pair is a certificate and its private key, from PEM files.
type Pair struct{ w *watched[*tls.Certificate] }

// LoadPair reads a PEM certificate (chain) and its key. It fails when they do not load or do
// not match: a process does not start without its certificate.
func LoadPair(certFile, keyFile string, log *slog.Logger) (*Pair, error) {
	w, err := newWatched("certificate and key", []string{certFile, keyFile}, func(c [][]byte) (*tls.Certificate, error) {
		// X509KeyPair stops at a cut-off block: a chain caught mid-write would load without
		// its last certificates, and clients would refuse it until the next change.
		if err := whole(c[0]); err != nil {
			return nil, fmt.Errorf("certificate file: %w", err)
		}
		cert, err := tls.X509KeyPair(c[0], c[1])
		if err != nil {
			return nil, err
		}
		// Leaf is set by X509KeyPair unless GODEBUG=x509keypairleaf=0.
		if cert.Leaf == nil {
			if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
				return nil, err
			}
		}
		// Served all the same (peers decide), but an operator should hear of it before they do.
		if now := time.Now(); now.After(cert.Leaf.NotAfter) || now.Before(cert.Leaf.NotBefore) {
			log.Warn("tls: the certificate is outside its validity period; peers will refuse it",
				"file", certFile, "not_before", cert.Leaf.NotBefore, "not_after", cert.Leaf.NotAfter)
		}
		return &cert, nil
	}, log)
	if err != nil {
		return nil, err
	}
	return &Pair{w: w}, nil
}

// Certificate returns the pair in use.
func (p *Pair) Certificate() *tls.Certificate { return p.w.get() }

// Pool is a bundle of CA certificates, from a PEM file.
type Pool struct{ w *watched[*x509.CertPool] }

// LoadPool reads a PEM file of one or more CA certificates.
func LoadPool(caFile string, log *slog.Logger) (*Pool, error) {
	w, err := newWatched("CA bundle", []string{caFile}, parseBundle, log)
	if err != nil {
		return nil, err
	}
	return &Pool{w: w}, nil
}

// parseBundle reads every certificate of a CA bundle. Unlike AppendCertsFromPEM, which skips
// what it cannot parse, it refuses a bundle with a broken or cut-off certificate: a bundle
// caught mid-write would otherwise load without its last CAs and refuse their peers.
func parseBundle(c [][]byte) (*x509.CertPool, error) {
	if err := whole(c[0]); err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	n := 0
	for rest := c[0]; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d of the bundle: %w", n+1, err)
		}
		pool.AddCert(cert)
		n++
	}
	if n == 0 {
		return nil, errors.New("no PEM certificate in the file")
	}
	return pool, nil
}

// whole refuses PEM data whose last block is cut off (its BEGIN line without an END line),
// which pem.Decode takes for text after the blocks.
func whole(b []byte) error {
	rest := b
	for {
		block, r := pem.Decode(rest)
		if block == nil {
			break
		}
		rest = r
	}
	if bytes.Contains(rest, []byte("-----BEGIN")) {
		return errors.New("a PEM block is cut off (the file is incomplete)")
	}
	return nil
}

// CertPool returns the bundle in use.
func (p *Pool) CertPool() *x509.CertPool { return p.w.get() }

// Server is the configuration of a TLS listener serving pair.
func Server(pair *Pair) *tls.Config {
	return &tls.Config{
		MinVersion:     MinVersion,
		CipherSuites:   cipherSuites,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return pair.Certificate(), nil },
	}
}

// MutualServer is the configuration of a listener serving pair that requires every client to
// present a certificate the CA bundle verifies.
func MutualServer(pair *Pair, ca *Pool) *tls.Config {
	base := Server(pair)
	// A configuration per handshake, so a replaced CA bundle counts from the next connection.
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		c := base.Clone()
		c.GetConfigForClient = nil
		c.ClientAuth = tls.RequireAndVerifyClientCert
		c.ClientCAs = ca.CertPool()
		return c, nil
	}
	return base
}

// Client is the configuration of one connection that verifies the server against the CA
// bundle in use now (not the system's roots) and, when pair is not nil, presents it as the
// client certificate. The server's name is the host dialled (tls.Config.ServerName, which gRPC
// sets from the target and HTTPClient from the URL): the server's certificate must hold it as a
// SAN, a DNS name or an IP address. Long-lived clients take a new one per connection (GRPC,
// HTTPClient), so that a replaced bundle counts.
func Client(pair *Pair, ca *Pool) *tls.Config {
	c := &tls.Config{MinVersion: MinVersion, CipherSuites: cipherSuites, RootCAs: ca.CertPool()}
	if pair != nil {
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return pair.Certificate(), nil }
	}
	return c
}

// GRPC is the gRPC transport credentials of mutual TLS: a server with them requires clients
// of the CA (MutualServer), a client presents pair and verifies the server (Client).
func GRPC(pair *Pair, ca *Pool) credentials.TransportCredentials {
	return &grpcCreds{TransportCredentials: credentials.NewTLS(MutualServer(pair, ca)), pair: pair, ca: ca}
}

// grpcCreds builds the client's configuration per connection; the server's reads the files
// per handshake already (GetConfigForClient).
type grpcCreds struct {
	credentials.TransportCredentials
	pair *Pair
	ca   *Pool
}

func (c *grpcCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return credentials.NewTLS(Client(c.pair, c.ca)).ClientHandshake(ctx, authority, raw)
}

func (c *grpcCreds) Clone() credentials.TransportCredentials {
	return &grpcCreds{TransportCredentials: c.TransportCredentials.Clone(), pair: c.pair, ca: c.ca}
}

// HTTPTransport sets t to dial https URLs with Client(pair, ca), a new configuration per
// connection, within t's TLSHandshakeTimeout; plain http URLs are unchanged.
func HTTPTransport(t *http.Transport, pair *Pair, ca *Pool) {
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	t.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("tls: dial %s: %w", addr, err)
		}
		raw, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cfg := Client(pair, ca)
		cfg.ServerName = host
		// HTTP/1.1 only: a proxied WebSocket upgrade needs it, and the transport speaks HTTP/2
		// only over the connections it dials itself.
		cfg.NextProtos = []string{"http/1.1"}
		// A dialler of its own bypasses the transport's TLSHandshakeTimeout: keep it, so a peer
		// that accepts and never answers does not hold the request until its caller gives up.
		hctx := ctx
		if t.TLSHandshakeTimeout > 0 {
			var cancel context.CancelFunc
			hctx, cancel = context.WithTimeout(ctx, t.TLSHandshakeTimeout)
			defer cancel()
		}
		conn := tls.Client(raw, cfg)
		if err := conn.HandshakeContext(hctx); err != nil {
			raw.Close()
			return nil, fmt.Errorf("tls: handshake with %s: %w", addr, err)
		}
		return conn, nil
	}
}
