package collabd

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/collab/collab/internal/service"
	"github.com/collab/collab/internal/testkit/tlstest"
	"github.com/collab/collab/internal/tlsfiles"
)

var syncModule = service.Module{Name: "crdt", Routes: []string{"/v2/crdt/sync/"}, RoutesName: "Live sync"}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// The proxy carries a WebSocket both ways, with the path and query it came with, and adds the
// caller's address to the X-Forwarded-For chain it came with.
func TestRouteProxyCarriesWebSockets(t *testing.T) {
	seen := make(chan *http.Request, 1)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			typ, b, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if err := c.Write(r.Context(), typ, append([]byte("echo "), b...)); err != nil {
				return
			}
		}
	}))
	defer upstream.Close()
	target, _ := url.Parse(upstream.URL)
	// The front server has short timeouts, as collabd's has for requests: the socket outlives
	// them.
	front := httptest.NewUnstartedServer(routeProxy(syncModule, target, http.DefaultTransport, quiet()))
	front.Config.ReadTimeout, front.Config.WriteTimeout = 300*time.Millisecond, 300*time.Millisecond
	front.Start()
	defer front.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(front.URL, "http")+"/v2/crdt/sync/o/d/e?token=t", &websocket.DialOptions{
		HTTPHeader: http.Header{"X-Forwarded-For": {"203.0.113.9"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	r := <-seen
	if r.URL.Path != "/v2/crdt/sync/o/d/e" || r.URL.Query().Get("token") != "t" {
		t.Errorf("upstream got %s", r.URL)
	}
	if got := r.Header.Get("X-Forwarded-For"); got != "203.0.113.9, 127.0.0.1" {
		t.Errorf("X-Forwarded-For %q", got)
	}
	if r.Header.Get("X-Forwarded-Proto") != "http" || r.Header.Get("X-Forwarded-Host") == "" {
		t.Errorf("X-Forwarded-Proto %q, -Host %q", r.Header.Get("X-Forwarded-Proto"), r.Header.Get("X-Forwarded-Host"))
	}
	for i, msg := range []string{"one", "two"} {
		if i > 0 {
			time.Sleep(500 * time.Millisecond) // past the front server's timeouts
		}
		if err := c.Write(ctx, websocket.MessageBinary, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		_, b, err := c.Read(ctx)
		if err != nil || string(b) != "echo "+msg {
			t.Fatalf("read %q, %v", b, err)
		}
	}
	c.Close(websocket.StatusNormalClosure, "")
}

func errorEnvelope(t *testing.T, h http.Handler, path string) (int, map[string]string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	var body map[string]map[string]string
	if rec.Header().Get("Content-Type") != "application/json" {
		t.Errorf("content type %q", rec.Header().Get("Content-Type"))
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || len(body) != 1 {
		t.Fatalf("not an error envelope: %s", rec.Body)
	}
	return rec.Code, body["error"]
}

// Without an address the routes answer 503 in the error envelope; with one that does not
// answer, too.
func TestRemoteRoutesUnavailable(t *testing.T) {
	cfg := Config{Modules: []service.Module{{Name: "workspace"}, syncModule}, Services: []string{Gateway}}
	routes, err := remoteRoutes(cfg, processTLS{}, quiet())
	if err != nil || len(routes) != 1 || routes[0].Prefix != "/v2/crdt/sync/" {
		t.Fatalf("routes %v, %v", routes, err)
	}
	code, e := errorEnvelope(t, routes[0].Handler, "/v2/crdt/sync/o/d/e")
	if code != 503 || e["status"] != "UNAVAILABLE" || e["message"] != "Live sync (crdt) runs in another process and --crdt-http-addr is not set." {
		t.Errorf("%d %v", code, e)
	}

	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	cfg.HTTPPeers = map[string]string{"crdt": down.URL}
	if routes, err = remoteRoutes(cfg, processTLS{}, quiet()); err != nil {
		t.Fatal(err)
	}
	code, e = errorEnvelope(t, routes[0].Handler, "/v2/crdt/sync/o/d/e")
	if code != 503 || e["status"] != "UNAVAILABLE" || e["message"] != "Live sync (crdt) is unreachable; try again." {
		t.Errorf("%d %v", code, e)
	}

	// A process without the gateway, or with crdt, proxies nothing.
	for _, s := range [][]string{{"workspace"}, {Gateway, "crdt"}} {
		cfg.Services = s
		if routes, _ := remoteRoutes(cfg, processTLS{}, quiet()); len(routes) != 0 {
			t.Errorf("%v: routes %v", s, routes)
		}
	}
}

// With mutual TLS on, the proxy reaches an https peer verified against the deployment's CA, and
// a WebSocket upgrade goes through (over HTTP/1.1); a peer whose certificate another CA signed
// is refused with the proxy's 503.
func TestRouteProxyToHTTPSPeers(t *testing.T) {
	dir := t.TempDir()
	ca, other := tlstest.NewCA(t, "deployment CA"), tlstest.NewCA(t, "other CA")
	own := ca.Write(t, dir, "gateway", ca.Issue(t, "gateway"))
	cfg, err := parse(t, nil, "--grpc-tls-ca-file="+own.CA, "--grpc-tls-cert-file="+own.Cert, "--grpc-tls-key-file="+own.Key)
	if err != nil {
		t.Fatal(err)
	}
	pt, err := loadTLS(cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	transport := &http.Transport{}
	pt.httpsPeers(transport)

	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		typ, b, err := c.Read(r.Context())
		if err == nil {
			_ = c.Write(r.Context(), typ, append([]byte("echo "), b...))
		}
	})
	upstream := func(issuer *tlstest.CA) *url.URL {
		f := issuer.Write(t, t.TempDir(), "crdt", issuer.Issue(t, "crdt"))
		pair, err := tlsfiles.LoadPair(f.Cert, f.Key, quiet())
		if err != nil {
			t.Fatal(err)
		}
		ln, err := tls.Listen("tcp", "127.0.0.1:0", tlsfiles.Server(pair))
		if err != nil {
			t.Fatal(err)
		}
		hs := &http.Server{Handler: echo}
		go func() { _ = hs.Serve(ln) }()
		t.Cleanup(func() { _ = hs.Close() })
		return &url.URL{Scheme: "https", Host: ln.Addr().String()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	front := httptest.NewServer(routeProxy(syncModule, upstream(ca), transport, quiet()))
	defer front.Close()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(front.URL, "http")+"/v2/crdt/sync/o/d/e?token=t", nil)
	if err != nil {
		t.Fatalf("WebSocket to an https peer of the CA: %v", err)
	}
	defer c.CloseNow()
	if err := c.Write(ctx, websocket.MessageBinary, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if _, b, err := c.Read(ctx); err != nil || string(b) != "echo hi" {
		t.Fatalf("read %q, %v", b, err)
	}

	code, e := errorEnvelope(t, routeProxy(syncModule, upstream(other), transport, quiet()), "/v2/crdt/sync/o/d/e")
	if code != http.StatusServiceUnavailable || e["status"] != "UNAVAILABLE" {
		t.Fatalf("a peer of another CA: %d %v", code, e)
	}
}
