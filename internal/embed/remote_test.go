package embed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const testKey = "sk-test-secret-0123456789"

// fakeServer speaks the shape of POST /v1/embeddings. Each request is handed to handle with
// its number (from 0); handle returns nil to answer with the embeddings of vectorOf.
type fakeServer struct {
	t        *testing.T
	srv      *httptest.Server
	requests atomic.Int32
	mu       sync.Mutex
	auth     []string
	models   []string
	handle   func(n int, w http.ResponseWriter, input []string) bool
	// answer makes the answer's data from the input (default: vectorOf, in order).
	answer func(input []string) []map[string]any
}

func vectorOf(text string, dim int) []float64 {
	v := make([]float64, dim)
	for i := range v {
		v[i] = float64(len(text)+1) + float64(i)
	}
	return v
}

func newFakeServer(t *testing.T) *fakeServer {
	f := &fakeServer{t: t}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(f.requests.Add(1)) - 1
		if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
			http.Error(w, "not found: "+r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		var req struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.auth = append(f.auth, r.Header.Get("Authorization"))
		f.models = append(f.models, req.Model)
		f.mu.Unlock()
		if f.handle != nil && f.handle(n, w, req.Input) {
			return
		}
		var data []map[string]any
		if f.answer != nil {
			data = f.answer(req.Input)
		} else {
			for i, text := range req.Input {
				data = append(data, map[string]any{"object": "embedding", "index": i, "embedding": vectorOf(text, 8)})
			}
		}
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": req.Model}); err != nil {
			t.Errorf("fake embeddings API: writing the answer: %v", err)
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeServer) embedder(t *testing.T, cfg RemoteConfig) *remote {
	t.Helper()
	if cfg.URL == "" {
		cfg.URL = f.srv.URL
	}
	if cfg.Model == "" {
		cfg.Model = "nomic-embed-text"
	}
	e, err := NewRemote(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := e.(*remote)
	r.backoff = 10 * time.Millisecond
	return r
}

func checkVectors(t *testing.T, texts []string, got [][]float32) {
	t.Helper()
	if len(got) != len(texts) {
		t.Fatalf("%d vectors for %d texts", len(got), len(texts))
	}
	for i, text := range texts {
		want, _ := normalized(vectorOf(text, 8))
		for c := range want {
			if math.Abs(float64(got[i][c]-want[c])) > 1e-6 {
				t.Fatalf("vector %d (%q) = %v, want %v", i, text, got[i], want)
			}
		}
	}
}

func wantUnavailable(t *testing.T, err error, contains string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("error does not wrap ErrUnavailable: %v", err)
	}
	if !strings.Contains(err.Error(), contains) {
		t.Errorf("error %q does not say %q", err, contains)
	}
	if strings.Contains(err.Error(), testKey) {
		t.Errorf("error shows the key: %v", err)
	}
}

func TestRemoteSuccess(t *testing.T) {
	f := newFakeServer(t)
	e := f.embedder(t, RemoteConfig{APIKey: testKey})
	if e.Name() != "openai:nomic-embed-text" || e.Dim() != 0 {
		t.Errorf("before a call: Name %q Dim %d", e.Name(), e.Dim())
	}
	texts := []string{"a", "bb", "the third text"}
	got, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	checkVectors(t, texts, got)
	if e.Dim() != 8 {
		t.Errorf("Dim after a call = %d, want 8", e.Dim())
	}
	if f.auth[0] != "Bearer "+testKey || f.models[0] != "nomic-embed-text" {
		t.Errorf("Authorization %q, model %q", f.auth[0], f.models[0])
	}
	if got, err := e.Embed(context.Background(), nil); err != nil || len(got) != 0 || f.requests.Load() != 1 {
		t.Errorf("Embed(nil) = %v, %v after %d requests", got, err, f.requests.Load())
	}
}

func TestRemoteNoKeyNoHeader(t *testing.T) {
	f := newFakeServer(t)
	e := f.embedder(t, RemoteConfig{})
	if _, err := e.Embed(context.Background(), []string{"x"}); err != nil {
		t.Fatal(err)
	}
	if f.auth[0] != "" {
		t.Errorf("Authorization %q without a key", f.auth[0])
	}
}

func TestRemoteURLForms(t *testing.T) {
	f := newFakeServer(t)
	for _, u := range []string{f.srv.URL, f.srv.URL + "/", f.srv.URL + "/v1", f.srv.URL + "/v1/"} {
		e := f.embedder(t, RemoteConfig{URL: u})
		if _, err := e.Embed(context.Background(), []string{"x"}); err != nil {
			t.Errorf("URL %q: %v", u, err)
		}
	}
	for _, cfg := range []RemoteConfig{
		{URL: "", Model: "m"}, {URL: "ftp://x", Model: "m"}, {URL: "http://", Model: "m"},
		{URL: "http://x?y=1", Model: "m"}, {URL: "http://x", Model: ""}, {URL: "http://x", Model: "m", Dim: -1},
	} {
		if _, err := NewRemote(cfg); err == nil {
			t.Errorf("NewRemote(%+v): no error", cfg)
		}
	}
	// Credentials in the URL are refused, and not repeated in the error.
	_, err := NewRemote(RemoteConfig{URL: "https://user:s3cret@embed.example.com/v1", Model: "m"})
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("URL with credentials: %v", err)
	}
}

func TestRemoteReorderedIndices(t *testing.T) {
	f := newFakeServer(t)
	f.answer = func(input []string) []map[string]any {
		var data []map[string]any
		for i := len(input) - 1; i >= 0; i-- {
			data = append(data, map[string]any{"index": i, "embedding": vectorOf(input[i], 8)})
		}
		return data
	}
	e := f.embedder(t, RemoteConfig{})
	texts := []string{"one", "two two", "three three three"}
	got, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	checkVectors(t, texts, got)
}

func TestRemote500ThenSuccess(t *testing.T) {
	f := newFakeServer(t)
	f.handle = func(n int, w http.ResponseWriter, _ []string) bool {
		if n < 2 {
			http.Error(w, "overloaded", http.StatusInternalServerError+n) // 500, 501
			return true
		}
		return false
	}
	e := f.embedder(t, RemoteConfig{})
	texts := []string{"x"}
	got, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	checkVectors(t, texts, got)
	if f.requests.Load() != 3 {
		t.Errorf("%d requests, want 3", f.requests.Load())
	}
}

func TestRemoteRetriesExhausted(t *testing.T) {
	f := newFakeServer(t)
	f.handle = func(n int, w http.ResponseWriter, _ []string) bool {
		http.Error(w, "down "+testKey, http.StatusBadGateway)
		return true
	}
	e := f.embedder(t, RemoteConfig{APIKey: testKey, Retries: 3})
	_, err := e.Embed(context.Background(), []string{"x"})
	wantUnavailable(t, err, "HTTP 502: down [redacted]")
	if f.requests.Load() != 4 {
		t.Errorf("%d requests, want 4", f.requests.Load())
	}
	e = f.embedder(t, RemoteConfig{APIKey: testKey, Retries: -1})
	f.requests.Store(0)
	_, err = e.Embed(context.Background(), []string{"x"})
	wantUnavailable(t, err, "HTTP 502")
	if f.requests.Load() != 1 {
		t.Errorf("Retries -1: %d requests, want 1", f.requests.Load())
	}
}

func TestRemote4xxNotRetried(t *testing.T) {
	f := newFakeServer(t)
	f.handle = func(n int, w http.ResponseWriter, _ []string) bool {
		http.Error(w, `{"error":{"message":"Incorrect API key provided: `+testKey+`"}}`, http.StatusUnauthorized)
		return true
	}
	e := f.embedder(t, RemoteConfig{APIKey: testKey})
	_, err := e.Embed(context.Background(), []string{"x"})
	wantUnavailable(t, err, "HTTP 401")
	if f.requests.Load() != 1 {
		t.Errorf("%d requests, want 1", f.requests.Load())
	}
}

func TestRemote429RetryAfter(t *testing.T) {
	f := newFakeServer(t)
	f.handle = func(n int, w http.ResponseWriter, _ []string) bool {
		if n == 0 {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return true
		}
		return false
	}
	e := f.embedder(t, RemoteConfig{})
	start := time.Now()
	texts := []string{"x", "y"}
	got, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	checkVectors(t, texts, got)
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Errorf("retried after %v, Retry-After was 1s", d)
	}
	// A Retry-After beyond the timeout gives up at once.
	f.requests.Store(0)
	e = f.embedder(t, RemoteConfig{Timeout: 300 * time.Millisecond})
	start = time.Now()
	_, err = e.Embed(context.Background(), texts)
	wantUnavailable(t, err, "HTTP 429")
	if d := time.Since(start); d > 250*time.Millisecond {
		t.Errorf("gave up after %v", d)
	}
}

func TestRemoteTimeout(t *testing.T) {
	f := newFakeServer(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	f.handle = func(n int, w http.ResponseWriter, _ []string) bool {
		select {
		case <-release:
		case <-time.After(5 * time.Second):
		}
		return true
	}
	e := f.embedder(t, RemoteConfig{Timeout: 200 * time.Millisecond})
	start := time.Now()
	_, err := e.Embed(context.Background(), []string{"x"})
	wantUnavailable(t, err, "deadline exceeded")
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("timed out after %v, Timeout was 200ms", d)
	}
	// The caller's context ends it too.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	e = f.embedder(t, RemoteConfig{Timeout: time.Minute})
	_, err = e.Embed(ctx, []string{"x"})
	wantUnavailable(t, err, "deadline exceeded")
}

func TestRemoteNetworkErrorRetried(t *testing.T) {
	f := newFakeServer(t)
	f.handle = func(n int, w http.ResponseWriter, _ []string) bool {
		if n == 0 {
			// Drop the connection without an answer.
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return true
		}
		return false
	}
	e := f.embedder(t, RemoteConfig{})
	if _, err := e.Embed(context.Background(), []string{"x"}); err != nil {
		t.Fatal(err)
	}
	// Nothing listening: retried, then unavailable.
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	e = f.embedder(t, RemoteConfig{URL: deadURL, APIKey: testKey})
	_, err := e.Embed(context.Background(), []string{"x"})
	wantUnavailable(t, err, "attempts: 3")
}

func TestRemoteBadAnswers(t *testing.T) {
	cases := []struct {
		name, body, want string
	}{
		{"malformed JSON", `{"data": [`, "not the embeddings JSON"},
		{"not an object", `[1, 2]`, "not the embeddings JSON"},
		{"wrong count", `{"data": [{"index": 0, "embedding": [1, 2]}]}`, "1 embeddings for 2 texts"},
		{"wrong dims", `{"data": [{"index": 0, "embedding": [1, 2]}, {"index": 1, "embedding": [1, 2, 3]}]}`, "embedding 1 has 3 dimensions, embedding 0 has 2"},
		{"repeated index", `{"data": [{"index": 0, "embedding": [1, 2]}, {"index": 0, "embedding": [1, 2]}]}`, "index 0 (out of range or repeated)"},
		{"index out of range", `{"data": [{"index": 0, "embedding": [1, 2]}, {"index": 2, "embedding": [1, 2]}]}`, "index 2"},
		{"empty vector", `{"data": [{"index": 0, "embedding": []}, {"index": 1, "embedding": [1]}]}`, "embedding 0 is empty"},
		{"zero vector", `{"data": [{"index": 0, "embedding": [0, 0]}, {"index": 1, "embedding": [1, 2]}]}`, "no direction"},
		{"strings", `{"data": [{"index": 0, "embedding": "AAAA"}, {"index": 1, "embedding": [1, 2]}]}`, "not the embeddings JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeServer(t)
			f.handle = func(n int, w http.ResponseWriter, _ []string) bool {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprint(w, c.body)
				return true
			}
			e := f.embedder(t, RemoteConfig{})
			_, err := e.Embed(context.Background(), []string{"a", "b"})
			wantUnavailable(t, err, c.want)
			if f.requests.Load() != 1 {
				t.Errorf("%d requests for a bad answer, want 1", f.requests.Load())
			}
		})
	}
}

func TestRemoteDimChecked(t *testing.T) {
	f := newFakeServer(t)
	e := f.embedder(t, RemoteConfig{Dim: 4})
	if e.Dim() != 4 {
		t.Errorf("Dim %d, want the configured 4", e.Dim())
	}
	_, err := e.Embed(context.Background(), []string{"x"})
	wantUnavailable(t, err, "embeddings of 8 dimensions, want 4")
	// Learned from the first answer, then held.
	e = f.embedder(t, RemoteConfig{})
	if _, err := e.Embed(context.Background(), []string{"x"}); err != nil {
		t.Fatal(err)
	}
	f.answer = func(input []string) []map[string]any {
		return []map[string]any{{"index": 0, "embedding": vectorOf("x", 16)}}
	}
	_, err = e.Embed(context.Background(), []string{"x"})
	wantUnavailable(t, err, "embeddings of 16 dimensions, want 8")
}

func TestRemoteResponseBounded(t *testing.T) {
	f := newFakeServer(t)
	f.handle = func(n int, w http.ResponseWriter, _ []string) bool {
		fmt.Fprint(w, `{"data": [{"index": 0, "embedding": [`+strings.Repeat("1, ", 1000)+`1]}]}`)
		return true
	}
	e := f.embedder(t, RemoteConfig{})
	e.maxResponse = 1000
	_, err := e.Embed(context.Background(), []string{"x"})
	wantUnavailable(t, err, "over 1000 bytes")
}

func TestRemoteBatchBound(t *testing.T) {
	f := newFakeServer(t)
	e := f.embedder(t, RemoteConfig{})
	_, err := e.Embed(context.Background(), make([]string, MaxRemoteBatch+1))
	wantUnavailable(t, err, "at most 2048")
	if f.requests.Load() != 0 {
		t.Errorf("%d requests", f.requests.Load())
	}
}

func TestRetryAfter(t *testing.T) {
	for h, want := range map[string]time.Duration{
		"": 0, "0": 0, "-3": 0, "2": 2 * time.Second, " 5 ": 5 * time.Second, "soon": 0,
		"99999": time.Hour,
		time.Now().Add(-time.Minute).UTC().Format(http.TimeFormat): 0,
	} {
		if got := retryAfter(h); got != want {
			t.Errorf("retryAfter(%q) = %v, want %v", h, got, want)
		}
	}
	if got := retryAfter(time.Now().Add(10 * time.Second).UTC().Format(http.TimeFormat)); got < 8*time.Second || got > 10*time.Second {
		t.Errorf("retryAfter(date in 10s) = %v", got)
	}
}

// An attempt that hangs gets only its share of the timeout, so a retry still fits.
func TestRemoteHangingAttemptIsRetried(t *testing.T) {
	f := newFakeServer(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	f.handle = func(n int, w http.ResponseWriter, _ []string) bool {
		if n > 0 {
			return false // answer normally
		}
		select {
		case <-release:
		case <-time.After(5 * time.Second):
		}
		return true
	}
	e := f.embedder(t, RemoteConfig{Timeout: 3 * time.Second, Retries: 2})
	if _, err := e.Embed(context.Background(), []string{"x"}); err != nil {
		t.Fatalf("a hanging first attempt was not retried: %v", err)
	}
	if n := f.requests.Load(); n != 2 {
		t.Fatalf("%d requests", n)
	}
}
