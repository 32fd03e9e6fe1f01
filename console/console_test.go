package console

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"strings"
	"testing"
)

// answer is what a handler answered: status, header and body.
type answer struct {
	StatusCode int
	Header     http.Header
	Body       io.Reader
}

func serve(t *testing.T, h http.Handler, method, target string, header http.Header) answer {
	t.Helper()
	r := httptest.NewRequest(method, target, nil)
	for k, v := range header {
		r.Header[k] = v
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return answer{StatusCode: w.Code, Header: w.Header(), Body: w.Body}
}

func newHandler(t *testing.T, opts Options) http.Handler {
	t.Helper()
	h, err := Handler(opts)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestPagesAndAssets: each page and every embedded file is served with its type, the security
// headers and a validator; a second load with the validator is 304.
func TestPagesAndAssets(t *testing.T) {
	h := newHandler(t, Options{})
	paths := []string{"/console/", "/console/playground"}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && path.Ext(p) != ".html" {
			paths = append(paths, "/console/"+strings.TrimPrefix(p, "static/"))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".txt": "text/plain; charset=utf-8"}
	for _, p := range paths {
		resp := serve(t, h, http.MethodGet, p, nil)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d", p, resp.StatusCode)
			continue
		}
		want := types[path.Ext(p)]
		if want == "" {
			want = "text/html; charset=utf-8"
		}
		if got := resp.Header.Get("Content-Type"); got != want {
			t.Errorf("%s: Content-Type %q, want %q", p, got, want)
		}
		checkSecurityHeaders(t, p, resp.Header)
		again := serve(t, h, http.MethodGet, p, http.Header{"If-None-Match": {resp.Header.Get("ETag")}})
		if again.StatusCode != http.StatusNotModified {
			t.Errorf("%s with its ETag: %d, want 304", p, again.StatusCode)
		}
	}
}

func checkSecurityHeaders(t *testing.T, p string, h http.Header) {
	t.Helper()
	csp := h.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "connect-src 'self'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("%s: CSP %q lacks %q", p, csp, want)
		}
	}
	if strings.Contains(csp, "unsafe") {
		t.Errorf("%s: CSP %q allows unsafe sources", p, csp)
	}
	if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "no-referrer" || h.Get("X-Frame-Options") != "DENY" {
		t.Errorf("%s: headers %v", p, h)
	}
	if h.Get("Set-Cookie") != "" {
		t.Errorf("%s sets a cookie", p)
	}
}

// TestRefusals: what is not a page gets the API's envelope, a method other than GET/HEAD 405.
func TestRefusals(t *testing.T) {
	h := newHandler(t, Options{})
	cases := []struct {
		method, target string
		status         int
		code           string
	}{
		{http.MethodGet, "/console/nope.js", 404, "NOT_FOUND"},
		{http.MethodGet, "/console/index.html", 404, "NOT_FOUND"},
		{http.MethodGet, "/console/playground.html", 404, "NOT_FOUND"},
		{http.MethodGet, "/console/../openapi.json", 404, "NOT_FOUND"},
		{http.MethodGet, "/console/js/../../console.go", 404, "NOT_FOUND"},
		{http.MethodPost, "/console/", 405, "UNIMPLEMENTED"},
		{http.MethodDelete, "/console/js/app.js", 405, "UNIMPLEMENTED"},
	}
	for _, c := range cases {
		resp := serve(t, h, c.method, c.target, nil)
		var env struct {
			Error struct{ Status, Message string }
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != c.status || json.Unmarshal(body, &env) != nil || env.Error.Status != c.code || env.Error.Message == "" {
			t.Errorf("%s %s: %d %s", c.method, c.target, resp.StatusCode, body)
		}
		checkSecurityHeaders(t, c.target, resp.Header)
	}
	resp := serve(t, h, http.MethodGet, "/console", nil)
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/console/" {
		t.Errorf("/console: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// TestConfigServesOnlyWhatItIsGiven: the development workspace's credentials reach the page
// only when the process gives them (the published ones); otherwise devWorkspace is null.
func TestConfigServesOnlyWhatItIsGiven(t *testing.T) {
	read := func(opts Options) map[string]any {
		resp := serve(t, newHandler(t, opts), http.MethodGet, "/console/config.json", nil)
		var cfg map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&cfg); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	if cfg := read(Options{}); cfg["devWorkspace"] != nil {
		t.Errorf("without a development workspace: %v", cfg)
	}
	dev := &DevWorkspace{WorkspaceID: "w", WorkspaceAuthToken: "wt", APIKey: "k", AuthToken: "at"}
	got, _ := read(Options{Dev: dev})["devWorkspace"].(map[string]any)
	if got["workspaceId"] != "w" || got["workspaceAuthToken"] != "wt" || got["apiKey"] != "k" || got["authToken"] != "at" {
		t.Errorf("with one: %v", got)
	}
}

// TestPagesHaveNoInlineCode: the pages hold no inline script, style or event handler, which the
// policy would block anyway: a page that relied on one would break in the browser.
func TestPagesHaveNoInlineCode(t *testing.T) {
	inline := []*regexp.Regexp{
		regexp.MustCompile(`(?i)<script(\s[^>]*)?>\s*[^<\s]`),               // a script with a body
		regexp.MustCompile(`(?i)<script(?:\s(?:type="module"|defer))*\s*>`), // a script without src
		regexp.MustCompile(`(?i)<style`),
		regexp.MustCompile(`(?i)\sstyle=`),
		regexp.MustCompile(`(?i)\son[a-z]+=`),
		regexp.MustCompile(`(?i)javascript:`),
		regexp.MustCompile(`(?i)(src|href)="(https?:)?//`), // another origin
	}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path.Ext(p) != ".html" {
			return err
		}
		body, _ := static.ReadFile(p)
		for _, re := range inline {
			if loc := re.FindIndex(body); loc != nil {
				t.Errorf("%s: %q", p, body[loc[0]:min(loc[1]+20, len(body))])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The checks see what they look for.
	for _, bad := range []string{`<script>alert(1)</script>`, `<script type="module">`, `<p style="x">`, `<a onclick="x">`, `<script src="https://cdn.example/x.js">`} {
		found := false
		for _, re := range inline {
			found = found || re.MatchString(bad)
		}
		if !found {
			t.Errorf("not caught: %s", bad)
		}
	}
}

// TestGzip: a client that accepts gzip gets the smaller encoding of each text file, which
// decodes to the same bytes, with a validator of its own (a cache never answers one encoding's
// validator with the other's body) and Vary; one that does not, or refuses it with q=0, gets
// the bytes as they are.
func TestGzip(t *testing.T) {
	h := newHandler(t, Options{})
	const p = "/console/vendor/yjs.js"
	plain := serve(t, h, http.MethodGet, p, nil)
	plainBody, err := io.ReadAll(plain.Body)
	if err != nil || plain.StatusCode != http.StatusOK || plain.Header.Get("Content-Encoding") != "" {
		t.Fatalf("without Accept-Encoding: %d %q %v", plain.StatusCode, plain.Header.Get("Content-Encoding"), err)
	}
	for _, accept := range []string{"gzip", "br, gzip;q=0.5", "deflate, GZIP", "*"} {
		resp := serve(t, h, http.MethodGet, p, http.Header{"Accept-Encoding": {accept}})
		if resp.Header.Get("Content-Encoding") != "gzip" || !strings.Contains(resp.Header.Get("Vary"), "Accept-Encoding") {
			t.Fatalf("%q: Content-Encoding %q, Vary %q", accept, resp.Header.Get("Content-Encoding"), resp.Header.Get("Vary"))
		}
		zipped, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if len(zipped) > len(plainBody)/2 {
			t.Fatalf("%q: %d bytes gzipped of %d", accept, len(zipped), len(plainBody))
		}
		zr, err := gzip.NewReader(bytes.NewReader(zipped))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(zr)
		if err != nil || !bytes.Equal(got, plainBody) {
			t.Fatalf("%q: the gzip body does not decode to the file (%v)", accept, err)
		}
		tag := resp.Header.Get("ETag")
		if tag == "" || tag == plain.Header.Get("ETag") {
			t.Fatalf("%q: ETag %q, the plain one %q", accept, tag, plain.Header.Get("ETag"))
		}
		again := serve(t, h, http.MethodGet, p, http.Header{"Accept-Encoding": {accept}, "If-None-Match": {tag}})
		if again.StatusCode != http.StatusNotModified {
			t.Fatalf("%q with its ETag: %d, want 304", accept, again.StatusCode)
		}
	}
	for _, accept := range []string{"gzip;q=0", "br", "identity", "gzip; q=0.000"} {
		resp := serve(t, h, http.MethodGet, p, http.Header{"Accept-Encoding": {accept}})
		if resp.Header.Get("Content-Encoding") != "" || resp.Header.Get("ETag") != plain.Header.Get("ETag") {
			t.Fatalf("%q: Content-Encoding %q", accept, resp.Header.Get("Content-Encoding"))
		}
	}
}
