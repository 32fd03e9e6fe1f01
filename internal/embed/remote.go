package embed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// RemoteConfig configures NewRemote.
type RemoteConfig struct {
	// URL is the server's base URL, e.g. "https://api.openai.com" or
	// "http://localhost:11434"; a trailing "/v1" (and slash) is accepted and dropped, so
	// "https://api.openai.com/v1" means the same. Requests go to URL + "/v1/embeddings".
	URL string
	// Model is the model's name on the server, e.g. "text-embedding-3-small"; required.
	Model string
	// APIKey, when set, is sent as "Authorization: Bearer <key>". It is never logged, and it is
	// removed from the server's answers quoted in errors.
	APIKey string
	// Timeout bounds one Embed call, retries and their waits included (the caller's context
	// may end it sooner). 0 means 30 seconds.
	Timeout time.Duration
	// Retries is how many times a failed request is tried again (after 429, 5xx, a network
	// error or a timed-out attempt), with exponential backoff from 200 ms (or the server's
	// Retry-After), within Timeout. 0 means 2; negative means none.
	Retries int
	// Dim, when set, is the length the vectors must have. When 0, the first answer sets it:
	// Dim() is 0 until then.
	Dim int
	// HTTPClient sends the requests; nil means a client of its own.
	HTTPClient *http.Client
}

const (
	// MaxRemoteBatch is the most texts one Embed call of a remote model takes (OpenAI's limit
	// per request).
	MaxRemoteBatch = 2048
	// maxRemoteResponse bounds the answer read (64 MiB): 2048 vectors of 3072 numbers in JSON
	// fit.
	maxRemoteResponse = 64 << 20
	defaultTimeout    = 30 * time.Second
	defaultRetries    = 2
	firstBackoff      = 200 * time.Millisecond
	maxBackoff        = 5 * time.Second
)

type remote struct {
	endpoint    string
	model       string
	key         string
	timeout     time.Duration
	retries     int
	client      *http.Client
	dim         atomic.Int64
	maxResponse int64
	backoff     time.Duration
}

// NewRemote returns an Embedder that calls an OpenAI-compatible embeddings endpoint (OpenAI,
// Ollama, vLLM, ...): POST {URL}/v1/embeddings with {"model": Model, "input": texts}, reading
// data[i].embedding, put in order by data[i].index. Every vector is checked (one per text, all
// of Dim numbers) and L2-normalised. Every failure wraps ErrUnavailable. Its Name is
// "openai:" + Model. It is safe for concurrent use.
func NewRemote(cfg RemoteConfig) (Embedder, error) {
	if cfg.Model == "" {
		return nil, errors.New("embed: remote: no model")
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("embed: remote: the URL is not an http(s) URL")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("embed: remote: URL %q has a query or fragment", u.Redacted())
	}
	if u.User != nil {
		// Credentials go in the key setting (a secret); a URL is named in errors and logs.
		return nil, fmt.Errorf("embed: remote: URL %q holds credentials; give the key as the API key setting", u.Redacted())
	}
	base := strings.TrimRight(u.String(), "/")
	base = strings.TrimSuffix(base, "/v1")
	if cfg.Dim < 0 {
		return nil, fmt.Errorf("embed: remote: Dim %d", cfg.Dim)
	}
	r := &remote{
		endpoint:    base + "/v1/embeddings",
		model:       cfg.Model,
		key:         cfg.APIKey,
		timeout:     cfg.Timeout,
		retries:     cfg.Retries,
		client:      cfg.HTTPClient,
		maxResponse: maxRemoteResponse,
		backoff:     firstBackoff,
	}
	if r.timeout <= 0 {
		r.timeout = defaultTimeout
	}
	switch {
	case r.retries == 0:
		r.retries = defaultRetries
	case r.retries < 0:
		r.retries = 0
	}
	if r.client == nil {
		r.client = &http.Client{}
	}
	r.dim.Store(int64(cfg.Dim))
	return r, nil
}

func (r *remote) Name() string { return "openai:" + r.model }
func (r *remote) Dim() int     { return int(r.dim.Load()) }

// unavailable wraps ErrUnavailable with what happened.
func (r *remote) unavailable(format string, args ...any) error {
	return fmt.Errorf("%w: %s (%s): %s", ErrUnavailable, r.Name(), r.endpoint, fmt.Sprintf(format, args...))
}

// attemptError is a failed attempt, and whether another may succeed.
type attemptError struct {
	msg        string
	retry      bool
	retryAfter time.Duration // the server's Retry-After, 0 when none
}

func (r *remote) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return [][]float32{}, nil
	}
	if len(texts) > MaxRemoteBatch {
		return nil, r.unavailable("%d texts in one call, at most %d", len(texts), MaxRemoteBatch)
	}
	body, err := json.Marshal(struct {
		Model string   `json:"model"`
		Input []string `json:"input"`
	}{r.model, texts})
	if err != nil {
		return nil, r.unavailable("encoding the request: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	var last *attemptError
	for attempt := 0; ; attempt++ {
		// Each attempt gets its share of the time left, so a hanging first attempt leaves
		// room to try again; the last gets all that remains.
		actx, acancel := ctx, context.CancelFunc(func() {})
		if deadline, ok := ctx.Deadline(); ok && attempt < r.retries {
			share := time.Until(deadline) / time.Duration(r.retries-attempt+1)
			actx, acancel = context.WithTimeout(ctx, share)
		}
		vecs, aerr := r.attempt(actx, body, len(texts))
		acancel()
		if aerr == nil {
			return vecs, nil
		}
		last = aerr
		if !aerr.retry || attempt >= r.retries {
			break
		}
		wait := aerr.retryAfter
		if wait == 0 {
			wait = min(r.backoff<<attempt, maxBackoff)
			// Jitter: half to all of it.
			wait = wait/2 + rand.N(wait/2+1) //nolint:gosec // G404: jitter spreading retries needs no unpredictability
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			return nil, r.unavailable("%s; no time left to try again in %v (attempt %d)", last.msg, wait, attempt+1)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, r.unavailable("%s; then %v (attempt %d)", last.msg, ctx.Err(), attempt+1)
		case <-t.C:
		}
	}
	return nil, r.unavailable("%s (attempts: %d)", last.msg, r.retries+1)
}

// attempt sends one request.
func (r *remote) attempt(ctx context.Context, body []byte, n int) ([][]float32, *attemptError) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, &attemptError{msg: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if r.key != "" {
		req.Header.Set("Authorization", "Bearer "+r.key)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		// Network errors and timed-out attempts may pass; the url.Error names the endpoint,
		// never the headers.
		return nil, &attemptError{msg: r.redact(err.Error()), retry: true}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, r.maxResponse+1))
	if err != nil {
		return nil, &attemptError{msg: "reading the answer: " + r.redact(err.Error()), retry: true}
	}
	if int64(len(raw)) > r.maxResponse {
		return nil, &attemptError{msg: fmt.Sprintf("the answer is over %d bytes", r.maxResponse)}
	}
	if resp.StatusCode != http.StatusOK {
		msg := fmt.Sprintf("HTTP %d: %s", resp.StatusCode, r.redact(snippet(raw)))
		retry := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500
		return nil, &attemptError{msg: msg, retry: retry, retryAfter: retryAfter(resp.Header.Get("Retry-After"))}
	}
	var answer struct {
		Data []struct {
			Index     *int      `json:"index"`
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil {
		return nil, &attemptError{msg: fmt.Sprintf("the answer is not the embeddings JSON: %v", err)}
	}
	if len(answer.Data) != n {
		return nil, &attemptError{msg: fmt.Sprintf("%d embeddings for %d texts", len(answer.Data), n)}
	}
	out := make([][]float32, n)
	for i, d := range answer.Data {
		idx := i
		if d.Index != nil {
			idx = *d.Index
		}
		if idx < 0 || idx >= n || out[idx] != nil {
			return nil, &attemptError{msg: fmt.Sprintf("embedding %d has index %d (out of range or repeated)", i, idx)}
		}
		if len(d.Embedding) == 0 {
			return nil, &attemptError{msg: fmt.Sprintf("embedding %d is empty", idx)}
		}
		v, ok := normalized(d.Embedding)
		if !ok {
			return nil, &attemptError{msg: fmt.Sprintf("embedding %d has no direction (zero or not finite)", idx)}
		}
		out[idx] = v
	}
	dim := len(out[0])
	for i, v := range out {
		if len(v) != dim {
			return nil, &attemptError{msg: fmt.Sprintf("embedding %d has %d dimensions, embedding 0 has %d", i, len(v), dim)}
		}
	}
	if !r.dim.CompareAndSwap(0, int64(dim)) {
		if want := r.dim.Load(); int64(dim) != want {
			return nil, &attemptError{msg: fmt.Sprintf("embeddings of %d dimensions, want %d", dim, want)}
		}
	}
	return out, nil
}

// normalized returns v / |v| in float32, false when v is zero or not finite.
func normalized(v []float64) ([]float32, bool) {
	var sum float64
	for _, x := range v {
		sum += x * x
	}
	if sum == 0 || math.IsInf(sum, 0) || math.IsNaN(sum) {
		return nil, false
	}
	inv := 1 / math.Sqrt(sum)
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x * inv)
	}
	return out, true
}

// redact removes the API key from a message quoting the server or the transport.
func (r *remote) redact(s string) string {
	if r.key == "" {
		return s
	}
	return strings.ReplaceAll(s, r.key, "[redacted]")
}

// snippet is the start of an error answer, on one line.
func snippet(b []byte) string {
	const n = 200
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "") + "..."
	}
	if s == "" {
		s = "(empty body)"
	}
	return s
}

// retryAfter reads a Retry-After header: seconds or an HTTP date; 0 when absent or invalid.
func retryAfter(h string) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(h)); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(min(s, 3600)) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil {
		if d := time.Until(t); d > 0 {
			return min(d, time.Hour)
		}
	}
	return 0
}
