package collabd

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"sync"
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
