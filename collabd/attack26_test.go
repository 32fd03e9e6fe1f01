package collabd

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/collab/collab/internal/testkit/tlstest"
)

// TestHTTP2RequestsPerAddressAreBounded: over HTTP/2 (TLS) one connection carries many requests
// at once, so the cap of connections per address (--http-max-conns-per-address) bounded an
// address's requests only for HTTP/1.1: one HTTP/2 connection held 250 requests whose bodies
// never came, each a handler for the 60 s read timeout (issue 20, attack pass 26). An address
// now has at most that many requests open at once whatever the protocol; past it a request is
// answered 429 at once.
func TestHTTP2RequestsPerAddressAreBounded(t *testing.T) {
	const perAddr, requests = 8, 100
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "http CA")
	files := ca.Write(t, dir, "http", ca.Issue(t, "server"))
	p, _ := startLogged(t, "--tls-cert-file="+files.Cert, "--tls-key-file="+files.Key, "--http-max-conns-per-address=8")
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: caPool(ca)}, ForceAttemptHTTP2: true}}
	t.Cleanup(client.CloseIdleConnections)
	// One connection, open before the requests (which would otherwise each dial one).
	warm, err := client.Get(p.HTTPURL() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	_ = warm.Body.Close()
	if warm.ProtoMajor != 2 {
		t.Fatalf("HTTP/%d, want HTTP/2", warm.ProtoMajor)
	}

	type answer struct {
		status  int
		message string
		proto   int
	}
	answers := make(chan answer, requests)
	var bodies []*io.PipeWriter
	var wg sync.WaitGroup
	for range requests {
		pr, pw := io.Pipe()
		bodies = append(bodies, pw)
		req, _ := http.NewRequest(http.MethodPost, p.HTTPURL()+"/v2/workspace/create", pr)
		req.Header.Set("Content-Type", "application/json")
		wg.Go(func() {
			resp, err := client.Do(req)
			if err != nil {
				answers <- answer{message: err.Error()}
				return
			}
			defer resp.Body.Close()
			var env struct {
				Error struct{ Status, Message string }
			}
			_ = json.NewDecoder(resp.Body).Decode(&env)
			answers <- answer{status: resp.StatusCode, message: env.Error.Status + " " + env.Error.Message, proto: resp.ProtoMajor}
		})
	}
	t.Cleanup(func() {
		for _, pw := range bodies {
			_ = pw.CloseWithError(io.ErrUnexpectedEOF)
		}
		wg.Wait()
	})
	// The requests past the cap are answered at once; those within it wait for their bodies.
	refused := 0
	timeout := time.After(10 * time.Second)
	for refused < requests-perAddr {
		select {
		case a := <-answers:
			if a.proto != 2 || a.status != http.StatusTooManyRequests || a.message != "RESOURCE_EXHAUSTED Your address has the most requests open at once it may (8); wait for some to end." {
				t.Fatalf("HTTP/%d %d %q", a.proto, a.status, a.message)
			}
			refused++
		case <-timeout:
			t.Fatalf("%d of %d requests answered; want %d refused at once", refused, requests, requests-perAddr)
		}
	}
}

// A request's address counts as the listener counts its connection: IPv4 by its address, IPv6
// by its /64.
func TestRemoteKey(t *testing.T) {
	for remote, want := range map[string]string{
		"192.0.2.7:1234":              "192.0.2.7",
		"[2001:db8:1:2:aaaa::1]:80":   "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::9]:443":  "2001:db8:1:2::/64",
		"[2001:db8:1:3::1]:80":        "2001:db8:1:3::/64",
		"not an address":              "not an address",
		"[::ffff:192.0.2.7]:1":        "[::ffff:192.0.2.7]",
		"[2001:db8:1:2:aaaa::1%eth0]": "2001:db8:1:2::/64",
	} {
		if got := remoteKey(remote); got != want {
			t.Errorf("%s counts as %q, want %q", remote, got, want)
		}
	}
}

// TestRouteProxyEndsClientsThatDoNotRead: the gateway proxies a service's routes (the comments
// stream, live sync) to its processes; a client that never reads made the proxy's write to it
// block for ever (the HTTP server has no write timeout: streams are long), so the service's
// own rule (the stream ends a client that takes nothing for 10 s) ended only the service's side
// and the gateway held the request, its goroutines and both connections until the client went
// (issue 20, attack pass 26). The proxy now ends what it proxies to a client that takes nothing
// for proxyWriteTimeout, answers and upgraded connections alike.
func TestRouteProxyEndsClientsThatDoNotRead(t *testing.T) {
	defer func(d time.Duration) { proxyWriteTimeout = d }(proxyWriteTimeout)
	proxyWriteTimeout = 300 * time.Millisecond
	chunk := []byte("data: " + strings.Repeat("x", 16<<10) + "\n\n")
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// An endless stream, or an upgraded connection that only sends.
		if r.Header.Get("Upgrade") == "" {
			w.Header().Set("Content-Type", "text/event-stream")
			for {
				if _, err := w.Write(chunk); err != nil {
					return
				}
				if err := http.NewResponseController(w).Flush(); err != nil {
					return
				}
			}
		}
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		_ = brw.Flush()
		for {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(upstream.Close)
	target, _ := url.Parse(upstream.URL)
	for name, req := range map[string]string{
		"stream":   "GET /v2/crdt/sync/o/d HTTP/1.1\r\nHost: x\r\n\r\n",
		"upgraded": "GET /v2/crdt/sync/o/d HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			var open atomic.Int64
			proxy := routeProxy(syncModule, target, http.DefaultTransport, quiet())
			front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				open.Add(1)
				defer open.Add(-1)
				proxy.ServeHTTP(w, r)
			}))
			defer front.Close()
			c, err := net.Dial("tcp", front.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.(*net.TCPConn).SetReadBuffer(4 << 10)
			if _, err := io.WriteString(c, req); err != nil {
				t.Fatal(err)
			}
			// The client reads nothing: the proxy must give up on it.
			deadline := time.Now().Add(10 * time.Second)
			for time.Sleep(100 * time.Millisecond); open.Load() != 0; time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the proxy still serves a client that has read nothing for 10 s")
				}
			}
		})
	}
}

// TestRouteProxyKeepsQuietStreams: the proxy's write deadline must end a client that takes
// nothing, not a stream that is quiet. Over HTTP/2 a write deadline is a timer on the stream,
// which resets it when it fires whether or not a write is waiting, so a proxied stream whose
// service wrote nothing for proxyWriteTimeout was cut though its client read everything
// (review of attack pass 26: the comments stream lived only because its heartbeat, 25 s, comes
// before the 30 s; a resume whose store read took 5 s was cut). The deadline now runs only
// while a write waits, on both protocols; a client that takes nothing is still ended.
func TestRouteProxyKeepsQuietStreams(t *testing.T) {
	defer func(d time.Duration) { proxyWriteTimeout = d }(proxyWriteTimeout)
	proxyWriteTimeout = 200 * time.Millisecond
	const events = 4
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		if r.URL.Query().Get("quiet") == "" {
			// An endless stream of large events, for a client that reads none of it.
			chunk := []byte("data: " + strings.Repeat("x", 16<<10) + "\n\n")
			for {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}
		// A stream quieter than the deadline, which its client reads whole.
		for i := range events {
			if _, err := fmt.Fprintf(w, "data: %d\n\n", i); err != nil {
				return
			}
			_ = http.NewResponseController(w).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(2 * proxyWriteTimeout):
			}
		}
	}))
	t.Cleanup(upstream.Close)
	target, _ := url.Parse(upstream.URL)
	var open atomic.Int64
	proxy := routeProxy(syncModule, target, http.DefaultTransport, quiet())
	front := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		open.Add(1)
		defer open.Add(-1)
		proxy.ServeHTTP(w, r)
	}))
	front.EnableHTTP2 = true
	front.StartTLS()
	t.Cleanup(front.Close)
	h2 := front.Client()
	h1 := &http.Client{Transport: &http.Transport{TLSClientConfig: h2.Transport.(*http.Transport).TLSClientConfig.Clone()}}
	for name, client := range map[string]*http.Client{"HTTP/1.1": h1, "HTTP/2": h2} {
		t.Run(name, func(t *testing.T) {
			resp, err := client.Get(front.URL + "/v2/crdt/sync/o/d?quiet=1")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if want := map[bool]int{true: 2, false: 1}[name == "HTTP/2"]; resp.ProtoMajor != want {
				t.Fatalf("HTTP/%d, want %d", resp.ProtoMajor, want)
			}
			got, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("the quiet stream was cut after %q: %v", got, err)
			}
			if n := strings.Count(string(got), "data: "); n != events {
				t.Fatalf("%d events of %d: %q", n, events, got)
			}

			if name != "HTTP/2" {
				return // TestRouteProxyEndsClientsThatDoNotRead ends HTTP/1.1's
			}
			// A client that reads nothing is ended all the same (past its transport's window).
			resp, err = client.Get(front.URL + "/v2/crdt/sync/o/d")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			deadline := time.Now().Add(10 * time.Second)
			for time.Sleep(100 * time.Millisecond); open.Load() != 0; time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the proxy still serves a client that has read nothing for 10 s")
				}
			}
		})
	}
}
