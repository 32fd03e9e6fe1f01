// Package console serves the web console (/console/) and the playground (/console/playground):
// static pages embedded in the binary, so that `go run ./cmd/collabd` needs no build step
// (docs/console.md). The pages call the public HTTP API like any client, with the API's own
// headers; the console holds no credentials and serves no data of its own but, on a local run,
// the development workspace's published credentials.
package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"mime"
	"net/http"
	"path"
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

// file is one embedded file ready to serve.
type file struct {
	body        []byte
	contentType string
	etag        string
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
		files[strings.TrimPrefix(p, "static/")] = newFile(body, path.Ext(p))
		return nil
	})
	if err != nil {
		return nil, err
	}
	config, err := json.Marshal(map[string]any{"devWorkspace": opts.Dev})
	if err != nil {
		return nil, err
	}
	files["config.json"] = newFile(config, ".json")
	// The pages: the console's index and the playground, each an address of its own.
	files[""] = files["index.html"]
	files["playground"] = files["playground.html"]
	return &handler{files: files}, nil
}

func newFile(body []byte, ext string) file {
	sum := sha256.Sum256(body)
	ct := mime.TypeByExtension(ext)
	if ext == ".js" || ext == ".mjs" {
		ct = "text/javascript; charset=utf-8" // whatever the system's MIME table says
	}
	if ct == "" {
		ct = "application/octet-stream"
	}
	return file{body: body, contentType: ct, etag: `"` + hex.EncodeToString(sum[:16]) + `"`}
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
	hdr.Set("ETag", f.etag)
	// Revalidated on every load, so a new binary's pages are never mixed with an old one's.
	hdr.Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
}
