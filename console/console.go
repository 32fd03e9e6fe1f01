// Package console serves the web console (/console/) and the playground (/console/playground):
// static pages embedded in the binary, so that `go run ./cmd/collabd` needs no build step
// (docs/console.md). The pages call the public HTTP API like any client, with the API's own
// headers; the console holds no credentials and serves no data of its own but, on a local run,
// the development workspace's published credentials.
package console

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/collab/collab/internal/apierr"
)

// Prefix is where the console is served; Handler answers every path under it.
const Prefix = "/console/"

// static holds the pages, scripts, styles and the generated bundles (static/vendor, written by
// scripts/generate from console/bundle's committed lockfile).
//
//go:embed static
var static embed.FS

// DevWorkspace is what the sign-in page offers as one click: the development workspace's
// published credentials (the same the banner and the docs print).
type DevWorkspace struct {
	WorkspaceID        string `json:"workspaceId"`
	WorkspaceAuthToken string `json:"workspaceAuthToken"`
	APIKey             string `json:"apiKey"`
	AuthToken          string `json:"authToken"`
}

// Options says what the console offers beyond its pages.
type Options struct {
	// Dev is the development workspace's credentials when they are the published ones, nil
	// otherwise: credentials an operator chose are secrets and are never served.
	Dev *DevWorkspace
}

// ContentSecurityPolicy is sent with every answer: scripts, styles and connections of the
// console's own origin only (the API, live sync's WebSocket and the comments stream are on it),
// no inline script or style, no plugin, no framing.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// file is one embedded file ready to serve, and its gzip encoding when that is smaller (nil
// otherwise).
type file struct {
	body        []byte
	contentType string
	etag        string
	gz          []byte
	gzETag      string
}

// Handler serves the console under Prefix (and redirects /console to it).
func Handler(opts Options) (http.Handler, error) {
	files := map[string]file{}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := newFile(body, path.Ext(p))
		files[strings.TrimPrefix(p, "static/")] = f
		return err
	})
	if err != nil {
		return nil, err
	}
	config, err := json.Marshal(map[string]any{"devWorkspace": opts.Dev})
	if err != nil {
		return nil, err
	}
	if files["config.json"], err = newFile(config, ".json"); err != nil {
		return nil, err
	}
	// The pages: the console's index and the playground, each an address of its own.
	files[""] = files["index.html"]
	files["playground"] = files["playground.html"]
	return &handler{files: files}, nil
}

func newFile(body []byte, ext string) (file, error) {
	sum := sha256.Sum256(body)
	ct := mime.TypeByExtension(ext)
	if ext == ".js" || ext == ".mjs" {
		ct = "text/javascript; charset=utf-8" // whatever the system's MIME table says
	}
	if ct == "" {
		ct = "application/octet-stream"
	}
	tag := hex.EncodeToString(sum[:16])
	f := file{body: body, contentType: ct, etag: `"` + tag + `"`}
	// Compressed once, when the handler is made: the Yjs bundle is 103 KB and 32 KB gzipped,
	// and every page load revalidates it.
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		return f, fmt.Errorf("console: gzip: %w", err)
	}
	if _, err := zw.Write(body); err != nil {
		return f, fmt.Errorf("console: gzip: %w", err)
	}
	if err := zw.Close(); err != nil {
		return f, fmt.Errorf("console: gzip: %w", err)
	}
	if b.Len() < len(body) {
		f.gz, f.gzETag = b.Bytes(), `"`+tag+`-gzip"`
	}
	return f, nil
}

// acceptsGzip reports whether an Accept-Encoding header allows gzip (listed, or "*", with a
// weight above zero).
func acceptsGzip(header []string) bool {
	for _, h := range header {
		for part := range strings.SplitSeq(h, ",") {
			name, params, _ := strings.Cut(part, ";")
			name = strings.TrimSpace(name)
			if !strings.EqualFold(name, "gzip") && name != "*" {
				continue
			}
			q, hasQ := strings.CutPrefix(strings.TrimSpace(params), "q=")
			if !hasQ {
				return true
			}
			if w, err := strconv.ParseFloat(strings.TrimSpace(q), 64); err == nil && w > 0 {
				return true
			}
		}
	}
	return false
}

type handler struct {
	files map[string]file
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", ContentSecurityPolicy)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("Cross-Origin-Opener-Policy", "same-origin")
	hdr.Set("Cross-Origin-Resource-Policy", "same-origin")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		apierr.WriteHTTP(w, http.StatusMethodNotAllowed, codes.Unimplemented, "The console's pages are read with GET.")
		return
	}
	if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
		http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
		return
	}
	name, ok := strings.CutPrefix(r.URL.Path, Prefix)
	f, found := h.files[name]
	if !ok || !found || strings.HasSuffix(name, ".html") {
		apierr.WriteHTTP(w, http.StatusNotFound, codes.NotFound, "No such page of the console.")
		return
	}
	hdr.Set("Content-Type", f.contentType)
	// Revalidated on every load, so a new binary's pages are never mixed with an old one's.
	hdr.Set("Cache-Control", "no-cache")
	hdr.Add("Vary", "Accept-Encoding")
	body, etag := f.body, f.etag
	if f.gz != nil && acceptsGzip(r.Header.Values("Accept-Encoding")) {
		body, etag = f.gz, f.gzETag
		hdr.Set("Content-Encoding", "gzip")
	}
	hdr.Set("ETag", etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}
