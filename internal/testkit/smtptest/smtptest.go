// Package smtptest gives tests a real SMTP server on loopback (github.com/emersion/go-smtp): it
// accepts every sender and recipient, optionally requires PLAIN auth and offers STARTTLS,
// records every message it receives, can fail the next deliveries on purpose (a 4xx to test
// retries, a 5xx to test giving up), and parses what it received the way a mail client would.
// It is a normal package so that any package's tests and the e2e tests can use it.
package smtptest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Received is one message the server accepted.
type Received struct {
	From string   // envelope sender (MAIL FROM)
	To   []string // envelope recipients (RCPT TO), in order
	// Data is the message as transferred: header and body, CRLF line ends, dots unstuffed.
	Data []byte
	// Username is who authenticated on the connection; empty without AUTH.
	Username string
	// TLS says whether the message came over a connection upgraded by STARTTLS.
	TLS bool
}

// Parsed decodes r.Data (Parse), failing the test when it cannot.
func (r Received) Parsed(t testing.TB) Mail {
	t.Helper()
	m, err := Parse(r.Data)
	if err != nil {
		t.Fatalf("smtptest: %v", err)
	}
	return m
}

// Option changes what Start starts.
type Option func(*Server)

// WithAuth makes the server offer AUTH PLAIN and refuse MAIL FROM until a client has logged in
// with exactly this username and password. Without WithSTARTTLS the server allows the login
// in the clear, as net/smtp does towards 127.0.0.1; with it, only after STARTTLS.
func WithAuth(username, password string) Option {
	return func(s *Server) { s.username, s.password = username, password }
}

// WithSTARTTLS makes the server offer STARTTLS with a self-signed certificate for 127.0.0.1,
// localhost and ::1, made for this server; clients trust it through RootCAs.
func WithSTARTTLS() Option { return func(s *Server) { s.startTLS = true } }

// Server is a running SMTP server. Safe for concurrent use.
type Server struct {
	username, password string
	startTLS           bool

	addr  string
	roots *x509.CertPool

	mu       sync.Mutex
	received []Received
	attempts int
	failNext int
	rejNext  int
	changed  chan struct{} // closed and replaced whenever received grows
}

// Start starts a server on 127.0.0.1 at a free port; it stops when the test ends.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s := &Server{changed: make(chan struct{})}
	for _, o := range opts {
		o(s)
	}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) { return &session{s: s, conn: c}, nil }))
	srv.Domain = "smtptest.localhost"
	// RFC 5321's limit of 1000 octets a line, CRLF included, as strict servers enforce it
	// (go-smtp allows twice that): a sender writing longer lines fails here, not in production.
	srv.MaxLineLength = 1000
	srv.ReadTimeout, srv.WriteTimeout = 30*time.Second, 30*time.Second
	// Login in the clear only without TLS on offer: with STARTTLS, a client must use it first,
	// as real submission servers demand.
	srv.AllowInsecureAuth = !s.startTLS
	logs := &testLog{t: t}
	srv.ErrorLog = logs // no Debug writer: the server never writes a transcript, so never a body
	if s.startTLS {
		cert, roots, err := selfSigned()
		if err != nil {
			t.Fatalf("smtptest: %v", err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		s.roots = roots
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("smtptest: listen: %v", err)
	}
	s.addr = ln.Addr().String()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close() // closes the listener and every open connection
		if err := <-served; err != nil {
			t.Errorf("smtptest: serve: %v", err)
		}
		logs.stop()
	})
	return s
}

// Addr is the server's host:port, for email.SMTP.Addr or collabd's --smtp-addr.
func (s *Server) Addr() string { return s.addr }

// RootCAs holds the certificate the server presents on STARTTLS, for a client's
// tls.Config.RootCAs; nil without WithSTARTTLS.
func (s *Server) RootCAs() *x509.CertPool { return s.roots }

// Messages returns the messages accepted so far, in arrival order.
func (s *Server) Messages() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Received(nil), s.received...)
}

// Attempts is how many messages clients finished transferring (end of DATA), accepted or
// failed on purpose: with FailNext, how many times a sender tried.
func (s *Server) Attempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts
}

// WaitFor waits until at least n messages have been accepted and returns all accepted so far;
// it fails the test when timeout passes first. Call it from the test's goroutine.
func (s *Server) WaitFor(t testing.TB, n int, timeout time.Duration) []Received {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		s.mu.Lock()
		got, changed := len(s.received), s.changed
		if got >= n {
			out := append([]Received(nil), s.received...)
			s.mu.Unlock()
			return out
		}
		s.mu.Unlock()
		select {
		case <-changed:
		case <-timer.C:
			t.Fatalf("smtptest: %d of %d messages received after %v", got, n, timeout)
			return nil
		}
	}
}

// FailNext makes the next n deliveries fail at the end of DATA with "451 4.3.0", a transient
// failure the sender is expected to retry later; they are not recorded. It adds to failures
// already pending.
func (s *Server) FailNext(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext += n
}

// RejectNext makes the next n deliveries fail at the end of DATA with "550 5.7.1", a permanent
// refusal a sender must not retry; they are not recorded. FailNext's failures come first.
func (s *Server) RejectNext(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rejNext += n
}

var (
	errTransient = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "smtptest: transient failure (FailNext), try again later"}
	errRejected  = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "smtptest: message rejected (RejectNext)"}
)

// deliver records a transferred message, or fails it when told to.
func (s *Server) deliver(r Received) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts++
	switch {
	case s.failNext > 0:
		s.failNext--
		return errTransient
	case s.rejNext > 0:
		s.rejNext--
		return errRejected
	}
	s.received = append(s.received, r)
	close(s.changed)
	s.changed = make(chan struct{})
	return nil
}

// session is one connection's state; go-smtp calls it from that connection's goroutine only.
type session struct {
	s    *Server
	conn *smtp.Conn
	user string // logged in as; empty before AUTH
	from string
	to   []string
}

var _ smtp.AuthSession = (*session)(nil)

func (ss *session) AuthMechanisms() []string {
	if ss.s.username == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (ss *session) Auth(mech string) (sasl.Server, error) {
	if ss.s.username == "" || mech != sasl.Plain {
		return nil, smtp.ErrAuthUnknownMechanism
	}
	return sasl.NewPlainServer(func(identity, username, password string) error {
		if (identity != "" && identity != username) || username != ss.s.username || password != ss.s.password {
			return smtp.ErrAuthFailed
		}
		ss.user = username
		return nil
	}), nil
}

func (ss *session) Mail(from string, _ *smtp.MailOptions) error {
	if ss.s.username != "" && ss.user == "" {
		return smtp.ErrAuthRequired
	}
	ss.from = from
	return nil
}

func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	ss.to = append(ss.to, to)
	return nil
}

func (ss *session) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		// A line over the limit, or a broken connection: say why, like a real server would.
		if errors.Is(err, smtp.ErrTooLongLine) {
			return &smtp.SMTPError{Code: 500, EnhancedCode: smtp.EnhancedCode{5, 5, 2}, Message: "smtptest: line longer than 998 characters"}
		}
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "smtptest: reading message: " + err.Error()}
	}
	_, isTLS := ss.conn.TLSConnectionState()
	return ss.s.deliver(Received{From: ss.from, To: append([]string(nil), ss.to...), Data: data, Username: ss.user, TLS: isTLS})
}

func (ss *session) Reset() { ss.from, ss.to = "", nil }

func (ss *session) Logout() error { return nil }

// testLog passes the server's internal errors to the test log while the test runs: after it
// ends, t.Logf panics, and what a closing connection says then no longer matters.
type testLog struct {
	mu      sync.Mutex
	t       testing.TB
	stopped bool
}

func (l *testLog) Printf(format string, v ...any) { l.log(fmt.Sprintf(format, v...)) }
func (l *testLog) Println(v ...any)               { l.log(fmt.Sprintln(v...)) }

func (l *testLog) log(msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped {
		l.t.Logf("smtptest server: %s", msg)
	}
}

func (l *testLog) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
}

// selfSigned makes a certificate for the loopback names, valid for a day, and a pool that
// trusts it: what a test client needs and nothing a production client would ever trust.
func selfSigned() (tls.Certificate, *x509.CertPool, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("certificate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("certificate serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "smtptest"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("certificate: %w", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}, roots, nil
}
