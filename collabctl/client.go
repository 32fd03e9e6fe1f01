package collabctl

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/collab/collab/gateway"
	"github.com/collab/collab/internal/authn"
)

// MaxResponse bounds what collabctl reads of one answer: the API's largest pages are far below
// it, and a wrong URL (a file server, say) must not fill the operator's memory.
const MaxResponse = 32 << 20

// maxRequest is the gateway's body limit: larger data would be refused anyway.
const maxRequest = gateway.MaxBodyBytes

// Credentials are the caller's: workspace ones for workspace operations, an API key and its
// auth token for key operations. They are sent only to the operations that need them.
type Credentials struct {
	WorkspaceID, WorkspaceToken string
	APIKey, AuthToken           string
}

// Auth is the credential class an operation needs (docs/api.md, "Authentication").
type Auth int

const (
	AuthNone Auth = iota
	AuthWorkspace
	AuthKey
)

func (a Auth) String() string {
	switch a {
	case AuthWorkspace:
		return "workspace"
	case AuthKey:
		return "key"
	}
	return "none"
}

// APIError is the API's error envelope: {"error": {"status", "message", "details"?}}.
type APIError struct {
	// GRPC is true when the error came over gRPC; HTTPStatus is then the one the gateway would
	// have answered.
	GRPC       bool
	HTTPStatus int
	Status     string
	Message    string
	Details    json.RawMessage
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s (HTTP %d): %s", e.Status, e.HTTPStatus, e.Message)
}

// Client calls the HTTP API: POST path with {"data": ...}, answering the result.
type Client struct {
	base  *url.URL
	http  *http.Client
	creds Credentials
}

// NewClient returns a client of the API at baseURL. caFile, when set, names the PEM
// certificates trusted for https instead of the system's.
func NewClient(baseURL string, creds Credentials, caFile string, timeout time.Duration) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, usagef("--url %s is not an http(s) URL such as http://127.0.0.1:8080", shownURL(baseURL))
	}
	if u.User != nil {
		return nil, usagef("--url must not carry credentials")
	}
	client, err := httpClient(caFile, timeout)
	if err != nil {
		return nil, err
	}
	return &Client{base: u, http: client, creds: creds}, nil
}

// shownURL is a URL given by the operator as an error message may quote it: without its user
// information, and not at all when it does not parse and may hold some.
func shownURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		if u.User != nil {
			// A user name alone can be a token (https://TOKEN@host), so all of it goes.
			u.User = url.User("xxxxx")
		}
		return strconv.Quote(u.String())
	}
	if strings.Contains(raw, "@") {
		return "(not shown: it may hold credentials)"
	}
	return strconv.Quote(raw)
}

// tlsConfig trusts the certificates of caFile, or the system's when it is empty.
func tlsConfig(caFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile) //nolint:gosec // G304: the file the user named with --ca-file
		if err != nil {
			return nil, usagef("--ca-file: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usagef("--ca-file %s holds no PEM certificate", caFile)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

func httpClient(caFile string, timeout time.Duration) (*http.Client, error) {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	cfg, err := tlsConfig(caFile)
	if err != nil {
		return nil, err
	}
	transport.TLSClientConfig = cfg
	return &http.Client{
		Transport: transport,
		Timeout:   timeout,
		// A redirect would carry the x-service-* credentials to wherever it points: refuse.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
}

// URL is the address of path under the base URL.
func (c *Client) URL(path string) string {
	u := *c.base
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	return u.String()
}

// Call posts data (a JSON object; nil for {}) to path with the credentials auth asks for and
// returns the envelope's result. API refusals are *APIError.
func (c *Client) Call(ctx context.Context, path string, auth Auth, data json.RawMessage) (json.RawMessage, error) {
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	headers, err := c.headers(auth)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(map[string]json.RawMessage{"data": data})
	if err != nil {
		return nil, usagef("the data is not valid JSON: %v", err)
	}
	if len(body) > maxRequest {
		return nil, usagef("the data is %d bytes; the API takes at most %d", len(body), maxRequest)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL(path), bytes.NewReader(body))
	if err != nil {
		return nil, usagef("operation path %q: %v", path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, connectionError(c.base, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponse+1))
	if err != nil {
		return nil, connectionError(c.base, err)
	}
	if len(raw) > MaxResponse {
		return nil, fmt.Errorf("the answer of %s is larger than %d MiB; not read", path, MaxResponse>>20)
	}
	var env struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Status  string          `json:"status"`
			Message string          `json:"message"`
			Details json.RawMessage `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &env); err != nil || (env.Error == nil && env.Result == nil) {
		// Go's HTTPS servers, collabd's among them, answer plain HTTP with this 400.
		if c.base.Scheme == "http" && resp.StatusCode == http.StatusBadRequest && bytes.Contains(raw, []byte("HTTP request to an HTTPS server")) {
			return nil, fmt.Errorf("%s serves HTTPS: use an https:// --url (and --ca-file for its CA)", c.base.Host)
		}
		return nil, unexpected(resp, path)
	}
	if env.Error != nil {
		return nil, &APIError{HTTPStatus: resp.StatusCode, Status: env.Error.Status, Message: env.Error.Message, Details: env.Error.Details}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, unexpected(resp, path)
	}
	return env.Result, nil
}

func (c *Client) headers(auth Auth) (map[string]string, error) {
	switch auth {
	case AuthWorkspace:
		if c.creds.WorkspaceID == "" || c.creds.WorkspaceToken == "" {
			return nil, usagef("this operation needs workspace credentials: set %s and %s (or --workspace-id, --workspace-token)", EnvName("workspace-id"), EnvName("workspace-token"))
		}
		return map[string]string{authn.HeaderWorkspaceID: c.creds.WorkspaceID, authn.HeaderWorkspaceToken: c.creds.WorkspaceToken}, nil
	case AuthKey:
		if c.creds.APIKey == "" || c.creds.AuthToken == "" {
			return nil, usagef("this operation needs an API key and its auth token: set %s and %s (or --api-key, --auth-token)", EnvName("api-key"), EnvName("auth-token"))
		}
		return map[string]string{authn.HeaderAPIKey: c.creds.APIKey, authn.HeaderAuthToken: c.creds.AuthToken}, nil
	}
	return nil, nil
}

// unexpected describes an answer that is not the API's envelope (a proxy's error page, another
// server) without echoing its body, which may be anything.
func unexpected(resp *http.Response, path string) error {
	if loc := resp.Header.Get("Location"); resp.StatusCode >= 300 && resp.StatusCode < 400 && loc != "" {
		return fmt.Errorf("%s answered HTTP %d, a redirect to %s, which collabctl does not follow: is --url right?", path, resp.StatusCode, loc)
	}
	ct := resp.Header.Get("Content-Type")
	if ct == "" {
		ct = "no content type"
	}
	return fmt.Errorf("%s answered HTTP %d (%s), not the API's JSON envelope: is --url the collab gateway?", path, resp.StatusCode, ct)
}

// connectionError words a transport failure for the operator: what failed and what to check.
func connectionError(base *url.URL, err error) error {
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var certInvalid x509.CertificateInvalidError
	var recordHeader tls.RecordHeaderError
	var netErr net.Error
	switch {
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("interrupted: %w", err)
	case errors.As(err, &unknownCA):
		return fmt.Errorf("%s: the server's certificate is not signed by a trusted CA (give its CA with --ca-file): %w", base.Host, err)
	case errors.As(err, &hostname):
		return fmt.Errorf("%s: the server's certificate is not valid for this host name: %w", base.Host, err)
	case errors.As(err, &certInvalid):
		return fmt.Errorf("%s: the server's certificate is not valid: %w", base.Host, err)
	case errors.As(err, &recordHeader),
		// net/http replaces the record error with this text, unwrapped, when the answer is HTTP.
		strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return fmt.Errorf("%s does not speak TLS: use an http:// --url: %w", base.Host, err)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("cannot reach collab at %s: connection refused (is collabd running there? set --url or %s): %w", base.Redacted(), EnvName("url"), err)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return fmt.Errorf("no answer from %s in time (--timeout): %w", base.Host, err)
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return fmt.Errorf("cannot resolve %s: %w", base.Hostname(), err)
	}
	return fmt.Errorf("calling %s: %w", base.Redacted(), err)
}
