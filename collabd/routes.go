package collabd

import (
	"bufio"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/collab/collab/console"
	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/service"
)

// remoteRoutes are the HTTP routes of the modules this gateway process does not run
// (Config.RemoteRoutes): each prefix proxied to the module's processes at --<name>-http-addr,
// or, without that address, answered 503 (and a warning logged now, at start).
func remoteRoutes(cfg Config, t processTLS, log *slog.Logger) ([]service.Route, error) {
	var out []service.Route
	transport := proxyTransport(t)
	for _, m := range cfg.RemoteRoutes() {
		var h http.Handler
		if addr, ok := cfg.HTTPPeers[m.Name]; ok {
			target, err := url.Parse(addr)
			if err != nil {
				return nil, fmt.Errorf("--%s-http-addr: %w", m.Name, err)
			}
			if t.mutual() && target.Scheme != "https" {
				// Live sync's tokens and documents would cross the network that mutual TLS
				// protects for gRPC in the clear.
				log.Warn("the gateway proxies a service's routes over plain HTTP although gRPC between services uses mutual TLS: give the service's processes --tls-cert-file and --tls-key-file and an https:// address",
					"service", m.Name, "flag", "--"+m.Name+"-http-addr", "env", service.EnvName(m.Name+"-http-addr"), "target", target.String())
			}
			h = routeProxy(m, target, transport, log)
		} else {
			msg := fmt.Sprintf("%s (%s) runs in another process and --%s-http-addr is not set.", routesName(m), m.Name, m.Name)
			log.Warn("the gateway answers 503 on routes of a service it does not run: set its HTTP address",
				"service", m.Name, "routes", m.Routes, "flag", "--"+m.Name+"-http-addr", "env", service.EnvName(m.Name+"-http-addr"))
			h = unavailable(msg)
		}
		for _, p := range m.Routes {
			out = append(out, service.Route{Prefix: p, Handler: h})
		}
	}
	return out, nil
}

// proxyTransport is the transport of the proxy to services' routes. Straight to the service's
// processes: never through an HTTP_PROXY of the environment. An https peer is verified against
// the CA of mutual TLS, when there is one, otherwise against the system's roots. A WebSocket
// upgrade goes over HTTP/1.1 even to a peer that offers HTTP/2 (net/http dials such requests
// with HTTP/1.1 only; TestRouteProxyUpgradesOverHTTPSWithoutMutualTLS holds it to that).
func proxyTransport(t processTLS) *http.Transport {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.Proxy = nil
	t.httpsPeers(transport)
	return transport
}

// proxyWriteTimeout ends what the proxy sends a client (an answer, a stream, an upgraded
// connection) when the client takes none of it for this long
// (docs/operations.md, "HTTP listener"). A variable for tests.
var proxyWriteTimeout = 30 * time.Second

func routesName(m service.Module) string {
	if m.RoutesName != "" {
		return m.RoutesName
	}
	return "The HTTP routes"
}

// routeProxy forwards requests, WebSocket upgrades included, to the module's processes at
// target. The request keeps its path and query; X-Forwarded-For gains the caller's address
// after the hops it came with (an Ingress's), X-Forwarded-Host and -Proto say what the caller
// asked for. An upgraded connection is copied both ways on the hijacked connection, which the
// HTTP server's request timeouts no longer bind (hijacking clears its deadlines).
func routeProxy(m service.Module, target *url.URL, transport http.RoundTripper, log *slog.Logger) http.Handler {
	msg := fmt.Sprintf("%s (%s) is unreachable; try again.", routesName(m), m.Name)
	p := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Header["X-Forwarded-For"] = r.In.Header["X-Forwarded-For"]
			r.SetXForwarded()
		},
		Transport: transport,
		// Write each answer as it comes: an upgraded connection is copied both ways anyway.
		FlushInterval: -1,
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			log.Warn("proxy to a service's HTTP routes", "service", m.Name, "target", target.String(), "path", r.URL.Path, "err", err)
			apierr.WriteHTTP(w, http.StatusServiceUnavailable, codes.Unavailable, msg)
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.ServeHTTP(&deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w)}, r)
	})
}

// deadlineWriter gives each write to the client proxyWriteTimeout, on the answer and on the
// connection an upgrade hijacks: a client that takes nothing for that long ends what is
// proxied to it, where the write would otherwise wait for ever (the HTTP server has no write
// timeout, streams being long). Without it a client that never read held the proxy's request,
// its goroutines and both connections after the service had given up on it (issue 20, attack
// pass 26). The deadline is set only while a write or a flush waits: over HTTP/2 a deadline is
// a timer that resets the stream when it fires, writing or not, so one left set between writes
// cut a quiet stream whose client had read everything (review of attack pass 26).
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	w.arm()
	defer w.disarm()
	return w.ResponseWriter.Write(p)
}

// FlushError sends what is buffered under the deadline: over HTTP/1.1 a small write reaches
// the client's connection only here (the proxy flushes each write: FlushInterval -1).
func (w *deadlineWriter) FlushError() error {
	w.arm()
	defer w.disarm()
	if err := w.rc.Flush(); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	return nil
}

func (w *deadlineWriter) arm() { _ = w.rc.SetWriteDeadline(time.Now().Add(proxyWriteTimeout)) }

func (w *deadlineWriter) disarm() { _ = w.rc.SetWriteDeadline(time.Time{}) }

// Unwrap lets http.ResponseController reach the server's writer (Flush).
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Hijack hands the proxy the connection of an upgrade, each write of it under the deadline.
func (w *deadlineWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := w.rc.Hijack()
	if err != nil {
		return nil, nil, fmt.Errorf("hijack: %w", err)
	}
	return &deadlineConn{Conn: c}, brw, nil
}

// deadlineConn is a hijacked connection whose writes each get proxyWriteTimeout.
type deadlineConn struct{ net.Conn }

func (c *deadlineConn) Write(p []byte) (int, error) {
	_ = c.SetWriteDeadline(time.Now().Add(proxyWriteTimeout))
	return c.Conn.Write(p)
}

// unavailable answers every request with 503 in the error envelope.
func unavailable(msg string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		apierr.WriteHTTP(w, http.StatusServiceUnavailable, codes.Unavailable, msg)
	})
}

// consoleOptions is what the console offers: the development workspace as one click on the
// sign-in page when its tokens are the published ones (the banner prints them too), never
// tokens an operator chose.
func consoleOptions(dev *service.DevCredentials) console.Options {
	if dev == nil || !dev.Published {
		return console.Options{}
	}
	return console.Options{Dev: &console.DevWorkspace{WorkspaceID: dev.WorkspaceID,
		WorkspaceAuthToken: dev.WorkspaceToken, APIKey: dev.APIKey, AuthToken: dev.AuthToken}}
}
