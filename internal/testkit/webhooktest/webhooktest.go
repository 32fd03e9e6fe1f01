// Package webhooktest gives tests a real webhook receiver: e2e/webhookreceiver, a Node.js
// process that verifies every delivery with the official standardwebhooks npm package,
// unchanged, so a test of the webhook delivery engine passes only if a real Standard Webhooks
// consumer accepts what the engine sends. It records every delivery (verified or not, with the
// library's error), decodes and decrypts payloads, and answers as the test configures each
// endpoint: statuses in turn, Retry-After, delays, or never (a dead endpoint).
//
// The receiver needs Node.js (18 or newer) and npm in PATH; without them Start fails the test
// (CI has both). The first Start in a test binary installs the receiver's pinned dependencies
// with `npm ci` when node_modules lacks them (a fresh clone), under a file lock so parallel test
// binaries install once; this is the only place that installs them (scripts/test relies on it).
//
// It is a normal package so that any package's tests and the e2e tests can use it.
package webhooktest

import (
	"bytes"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Receiver is one running receiver process, stopped when the test that started it ends. Its
// methods are safe for concurrent use; those taking a testing.TB fail that test on error, so
// call them from the test's goroutine.
type Receiver struct {
	base   string // http://127.0.0.1:port
	client *http.Client
	stderr *syncBuffer
	exited chan struct{} // closed when the process has exited
}

// Delivery is one request the receiver got on a path, in the receiver's words
// (e2e/webhookreceiver/receiver.mjs).
type Delivery struct {
	Seq       int64  `json:"seq"`       // arrival order across the whole receiver, from 1
	ID        string `json:"id"`        // the webhook-id header
	Timestamp int64  `json:"timestamp"` // the webhook-timestamp header, unix seconds (0 if not a number)
	Method    string `json:"method"`
	URL       string `json:"url"` // path and query string as requested
	// Headers holds webhook-id, webhook-timestamp, webhook-signature and content-type ("" when
	// absent).
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"` // the raw body
	// Verified says standardwebhooks' Webhook.verify accepted the delivery with one of the
	// path's secrets; otherwise VerifyError is the library's message ("No matching signature
	// found", "Message timestamp too old", "Missing required headers", ...; distinct messages
	// of several secrets joined by "; "), or "unknown path" for a path never configured.
	Verified    bool   `json:"verified"`
	VerifyError string `json:"verifyError"`
	// Payload is the verified body as JSON after decoding: the decoded encodedPayload, or the
	// decrypted encryptedData (with the path's private key); the body itself otherwise. JSON
	// null when not verified or when decoding failed (PayloadError says why).
	Payload      json.RawMessage `json:"payload"`
	PayloadError string          `json:"payloadError"`
	// AnsweredStatus is the status the receiver answers (after any delay); 0 for a hang.
	AnsweredStatus int   `json:"answeredStatus"`
	ReceivedAtMs   int64 `json:"receivedAtMs"` // unix milliseconds
	// AnsweredAtMs is when the answer was written (unix milliseconds); 0 until then, and for
	// good after a hang or when the client left first.
	AnsweredAtMs int64 `json:"answeredAtMs"`
	// ClientClosed says the sender closed the connection before getting its answer (it gave up
	// on a hang or a delay).
	ClientClosed bool `json:"clientClosed"`
}

// ReceivedAt is ReceivedAtMs as a time.
func (d Delivery) ReceivedAt() time.Time { return time.UnixMilli(d.ReceivedAtMs) }

// Response is how the receiver answers one delivery to a path.
type Response struct {
	Status     int           // HTTP status; 0 means 200
	RetryAfter string        // the Retry-After header ("5", or an HTTP date); "" sends none
	Delay      time.Duration // wait this long before answering
	Hang       bool          // never answer (a dead endpoint); the others are ignored
	Body       string        // the response body, as text/plain
}

// Option adds to an endpoint's configuration (Configure).
type Option func(*endpointConfig)

type endpointConfig struct {
	Path          string         `json:"path"`
	Secrets       []string       `json:"secrets"`
	PrivateKeyPEM string         `json:"privateKeyPem,omitempty"`
	Responses     []wireResponse `json:"responses,omitempty"`
	err           error
}

type wireResponse struct {
	Status     int     `json:"status,omitempty"`
	RetryAfter string  `json:"retryAfter,omitempty"`
	DelayMs    float64 `json:"delayMs,omitempty"`
	Hang       bool    `json:"hang,omitempty"`
	Body       string  `json:"body,omitempty"`
}

// WithResponses sets the answers to the path's successive deliveries, in order; the last one
// repeats. Without it every delivery gets 200.
func WithResponses(responses ...Response) Option {
	return func(c *endpointConfig) {
		for _, r := range responses {
			c.Responses = append(c.Responses, wireResponse{
				Status:     r.Status,
				RetryAfter: r.RetryAfter,
				DelayMs:    float64(r.Delay) / float64(time.Millisecond),
				Hang:       r.Hang,
				Body:       r.Body,
			})
		}
	}
}

// WithPrivateKeyPEM sets the PEM private key (PKCS#8 or PKCS#1) that decrypts the path's
// encrypted payloads.
func WithPrivateKeyPEM(pemText string) Option {
	return func(c *endpointConfig) { c.PrivateKeyPEM = pemText }
}

// WithPrivateKey is WithPrivateKeyPEM for an RSA key.
func WithPrivateKey(key *rsa.PrivateKey) Option {
	return func(c *endpointConfig) {
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			c.err = err
			return
		}
		c.PrivateKeyPEM = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	}
}

// Start starts a receiver for the test and stops it when the test ends. It fails the test when
// Node.js or npm is missing, when the dependencies cannot be installed, or when the receiver
// does not start.
func Start(t testing.TB) *Receiver {
	t.Helper()
	env, err := prepare()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(env.Node, "receiver.mjs", "--exit-on-stdin-close")
	cmd.Dir = env.Dir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatalf("webhooktest: %v", err)
	}
	stdout := &firstLine{line: make(chan string, 1)}
	stderr := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("webhooktest: starting %s receiver.mjs in %s: %v", env.Node, env.Dir, err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	stop := func() {
		_ = stdin.Close() // the receiver exits when its stdin ends
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}

	var port int
	select {
	case line := <-stdout.line:
		var hello struct {
			Port int `json:"port"`
		}
		if err := json.Unmarshal([]byte(line), &hello); err != nil || hello.Port == 0 {
			stop()
			t.Fatalf("webhooktest: receiver's first line %q is not {\"port\": N}; stderr:\n%s", line, stderr)
		}
		port = hello.Port
	case <-exited:
		t.Fatalf("webhooktest: receiver exited before listening (%v); stderr:\n%s", waitErr, stderr)
	case <-time.After(30 * time.Second):
		stop()
		t.Fatalf("webhooktest: receiver did not print its port within 30s; stderr:\n%s", stderr)
	}

	r := &Receiver{
		base:   "http://127.0.0.1:" + strconv.Itoa(port),
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{}},
		stderr: stderr,
		exited: exited,
	}
	t.Cleanup(func() {
		r.client.CloseIdleConnections()
		stop()
		if t.Failed() && stderr.Len() > 0 {
			t.Logf("webhooktest: receiver's stderr:\n%s", stderr)
		}
	})
	return r
}

// URL is the address of path on the receiver ("/hooks/a" → "http://127.0.0.1:N/hooks/a"): the
// endpoint URL to give the sender. A query string may follow the path; Configure and Received
// take the path alone.
func (r *Receiver) URL(path string) string {
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	return r.base + path
}

// Configure makes path a webhook endpoint verifying with secrets ("whsec_..."; a delivery
// verifies when any of them accepts it). It replaces the path's earlier configuration and
// restarts its responses, keeping what it received.
func (r *Receiver) Configure(t testing.TB, path string, secrets []string, opts ...Option) {
	t.Helper()
	c := endpointConfig{Path: path, Secrets: secrets}
	if c.Secrets == nil {
		c.Secrets = []string{}
	}
	for _, o := range opts {
		o(&c)
	}
	if c.err != nil {
		t.Fatalf("webhooktest: Configure %s: %v", path, c.err)
	}
	r.call(t, http.MethodPost, "/_control/endpoint", c, nil)
}

// Received returns every delivery to path so far, in arrival order.
func (r *Receiver) Received(t testing.TB, path string) []Delivery {
	t.Helper()
	var out struct {
		Deliveries []Delivery `json:"deliveries"`
	}
	r.call(t, http.MethodGet, "/_control/received?path="+url.QueryEscape(path), nil, &out)
	return out.Deliveries
}

// WaitFor waits until path has received at least n deliveries and returns them all (perhaps
// more than n); it fails the test, saying what did arrive, when timeout passes first.
func (r *Receiver) WaitFor(t testing.TB, path string, n int, timeout time.Duration) []Delivery {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := r.Received(t, path)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, d := range got {
				fmt.Fprintf(&b, "\n  #%d id=%q verified=%v %s answered=%d", d.Seq, d.ID, d.Verified, d.VerifyError, d.AnsweredStatus)
			}
			t.Fatalf("webhooktest: %s received %d deliveries within %v, want %d:%s", path, len(got), timeout, n, b.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Reset forgets every endpoint and every delivery.
func (r *Receiver) Reset(t testing.TB) {
	t.Helper()
	r.call(t, http.MethodPost, "/_control/reset", struct{}{}, nil)
}

// Sign returns what standardwebhooks' new Webhook(secret).sign(msgID, timestamp, body) gives
// ("v1,<base64>"), to check another signer against the reference implementation.
func (r *Receiver) Sign(t testing.TB, secret, msgID string, timestamp int64, body string) string {
	t.Helper()
	in := map[string]any{"secret": secret, "id": msgID, "timestamp": timestamp, "body": body}
	var out struct {
		Signature string `json:"signature"`
	}
	r.call(t, http.MethodPost, "/_control/sign", in, &out)
	return out.Signature
}

func (r *Receiver) call(t testing.TB, method, path string, in, out any) {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatalf("webhooktest: %v", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, r.base+path, body)
	if err != nil {
		t.Fatalf("webhooktest: %v", err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.client.Do(req)
	if err != nil {
		select {
		case <-r.exited:
			t.Fatalf("webhooktest: %s %s: %v; the receiver has exited; stderr:\n%s", method, path, err, r.stderr)
		default:
		}
		t.Fatalf("webhooktest: %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("webhooktest: %s %s: reading the answer: %v", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("webhooktest: %s %s: %s: %s", method, path, resp.Status, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("webhooktest: %s %s: %v in %s", method, path, err, b)
		}
	}
}

// firstLine is the receiver's stdout: it passes on the first line and discards the rest.
type firstLine struct {
	mu   sync.Mutex
	buf  []byte
	sent bool
	line chan string
}

func (f *firstLine) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sent {
		return len(p), nil
	}
	f.buf = append(f.buf, p...)
	if i := bytes.IndexByte(f.buf, '\n'); i >= 0 {
		f.line <- string(f.buf[:i])
		f.sent, f.buf = true, nil
	}
	return len(p), nil
}

// syncBuffer is the receiver's stderr.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Len()
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}
