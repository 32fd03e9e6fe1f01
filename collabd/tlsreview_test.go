package collabd

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"

	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/service"
	"github.com/collab/collab/internal/testkit/tlstest"
	"github.com/collab/collab/internal/tlsfiles"
	"github.com/collab/collab/internal/yjs"
	"github.com/collab/collab/services"
)

// serveHTTPSLikeCollabd serves h over TLS as collabd's HTTP listener does (ServeTLS, which
// offers HTTP/2) with a certificate of ca for 127.0.0.1.
func serveHTTPSLikeCollabd(t *testing.T, ca *tlstest.CA, h http.Handler) *url.URL {
	t.Helper()
	f := ca.Write(t, t.TempDir(), "peer", ca.Issue(t, "peer"))
	pair, err := tlsfiles.LoadPair(f.Cert, f.Key, quiet())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h, TLSConfig: tlsfiles.Server(pair)}
	go func() { _ = hs.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = hs.Close() })
	return &url.URL{Scheme: "https", Host: ln.Addr().String()}
}

func echoSocket(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	typ, b, err := c.Read(r.Context())
	if err == nil {
		_ = c.Write(r.Context(), typ, append([]byte("echo "), b...))
	}
}

// Without mutual TLS, live sync is proxied to an https crdt process verified against the
// system's roots; that listener offers HTTP/2, which cannot carry the WebSocket upgrade: the
// proxy must still reach it over HTTP/1.1. (The test's CA stands in for the system's roots.)
func TestRouteProxyUpgradesOverHTTPSWithoutMutualTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "public CA")
	target := serveHTTPSLikeCollabd(t, ca, http.HandlerFunc(echoSocket))
	// The control: the peer offers HTTP/2 to a client that asks for it.
	h2 := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: caPool(ca)}, ForceAttemptHTTP2: true}}
	resp, err := h2.Get(target.String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("the peer answered over %s, want HTTP/2 offered", resp.Proto)
	}

	transport := proxyTransport(processTLS{})
	if transport.TLSClientConfig == nil {
		transport.TLSClientConfig = &tls.Config{}
	}
	transport.TLSClientConfig.RootCAs = caPool(ca)
	front := httptest.NewServer(routeProxy(syncModule, target, transport, quiet()))
	defer front.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(front.URL, "http")+"/v2/crdt/sync/o/d/e?token=t", nil)
	if err != nil {
		t.Fatalf("WebSocket through the proxy to an https peer: %v", err)
	}
	defer c.CloseNow()
	if err := c.Write(ctx, websocket.MessageBinary, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if _, b, err := c.Read(ctx); err != nil || string(b) != "echo hi" {
		t.Fatalf("read %q, %v", b, err)
	}
}

// httpsCall posts data to path of base with the development key, over client.
func httpsCall(t *testing.T, client *http.Client, base string, dev *service.DevCredentials, path, data string) (httpsAnswer, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(`{"data":`+data+`}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-service-api-key", dev.APIKey)
	req.Header.Set("x-service-auth-token", dev.AuthToken)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return httpsAnswer{StatusCode: resp.StatusCode, Proto: resp.Proto, ProtoMajor: resp.ProtoMajor}, string(b)
}

// httpsAnswer is what httpsCall returns of an answer (its body is read and closed).
type httpsAnswer struct {
	StatusCode int
	Proto      string
	ProtoMajor int
}

// wssSync opens live sync of o/d/e at base (https) with a token the API generated, over a
// client that trusts ca, and returns the first frame the server sends: a y-websocket sync
// message (type 0) once the room accepted the token.
func wssSync(t *testing.T, base string, api *http.Client, dev *service.DevCredentials, ca *tlstest.CA) []byte {
	t.Helper()
	if resp, body := httpsCall(t, api, base, dev, "/v2/organizations/documents/add", `{"organizationId":"o","createOrganization":true,"documents":[{"documentId":"d","documentName":"D"}]}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("documents/add: %d %s", resp.StatusCode, body)
	}
	resp, body := httpsCall(t, api, base, dev, "/v2/auth/generate_token", `{"userId":"u","userProperties":{"name":"u","email":"u@example.com"},"permissions":{"resources":[{"type":"document","id":"d","organizationId":"o","accessRole":"editor"}]}}`)
	var tok struct {
		Result struct{ Data struct{ Token string } }
	}
	if err := json.Unmarshal([]byte(body), &tok); err != nil || resp.StatusCode != http.StatusOK || tok.Result.Data.Token == "" {
		t.Fatalf("generate_token: %d %s", resp.StatusCode, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A WebSocket client over TLS as a browser's wss:// is: HTTP/1.1 with the upgrade.
	ws := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: caPool(ca)}}}
	wsURL := "wss" + strings.TrimPrefix(base, "https") + "/v2/crdt/sync/o/d/e"
	c, _, err := websocket.Dial(ctx, wsURL+"?token="+url.QueryEscape(tok.Result.Data.Token), &websocket.DialOptions{HTTPClient: ws})
	if err != nil {
		t.Fatalf("wss live sync: %v", err)
	}
	defer c.CloseNow()
	if err := c.Write(ctx, websocket.MessageBinary, yjs.SyncFrame(yjs.SyncStep1, yjs.NewDoc().StateVector())); err != nil {
		t.Fatal(err)
	}
	_, frame, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("wss live sync: no frame: %v", err)
	}
	m, err := yjs.ReadMessage(frame)
	if err != nil || m.Type != yjs.MessageSync {
		t.Fatalf("wss live sync: first frame %x (%v), want a sync message", frame, err)
	}
	c.Close(websocket.StatusNormalClosure, "")
	// The control: a refused token gets permission-denied (an auth message), then the close,
	// and no sync message.
	bad, _, err := websocket.Dial(ctx, wsURL+"?token=nope", &websocket.DialOptions{HTTPClient: ws})
	if err == nil {
		defer bad.CloseNow()
		for {
			_, b, err := bad.Read(ctx)
			if err != nil {
				break
			}
			if m, err := yjs.ReadMessage(b); err != nil || m.Type != yjs.MessageAuth {
				t.Fatalf("a refused token got %x (%v), want permission-denied only", b, err)
			}
		}
	}
	return frame
}

// The HTTPS listener serves the API over HTTP/2 and live sync as wss://: a real WebSocket
// client over TLS, in one process and through a gateway that proxies live sync to the crdt
// process's HTTPS listener under mutual TLS.
func TestHTTPSServesHTTP2AndWSS(t *testing.T) {
	ca := tlstest.NewCA(t, "deployment CA")
	httpFiles := func(name string) []string {
		f := ca.Write(t, t.TempDir(), name, ca.Issue(t, name))
		return []string{"--tls-cert-file=" + f.Cert, "--tls-key-file=" + f.Key}
	}
	one, _ := startLogged(t, httpFiles("one")...)
	h2 := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: caPool(ca)}, ForceAttemptHTTP2: true}}
	resp, body := httpsCall(t, h2, one.HTTPURL(), one.Dev, "/v2/workspace/activityconfig/get", `{}`)
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
		t.Fatalf("the API over %s: %d %s, want HTTP/2 and 200", resp.Proto, resp.StatusCode, body)
	}
	wssSync(t, one.HTTPURL(), h2, one.Dev, ca)

	// Split: every service in one process (its HTTP listener serves live sync over HTTPS), the
	// gateway alone in another, HTTPS in front and mutual TLS between them.
	var names []string
	for _, m := range services.All() {
		names = append(names, m.Name)
	}
	back, _ := startLogged(t, append(append(mtlsFlags(t, ca, "back"), httpFiles("back")...), "--services="+strings.Join(names, ","))...)
	args := append(append(mtlsFlags(t, ca, "front"), httpFiles("front")...), "--services=gateway", "--crdt-http-addr="+back.HTTPURL())
	for _, s := range names {
		args = append(args, "--"+s+"-addr="+back.GRPCAddr)
	}
	front, _ := startLogged(t, args...)
	wssSync(t, front.HTTPURL(), h2, back.Dev, ca)
}

// A peer's certificate is verified against the host name of the address dialled, not the
// address it resolves to: a dns:/// target (a Kubernetes headless service) reaches a peer whose
// certificate names only that DNS name, and an IP address target reaches it only when the
// certificate holds the IP.
func TestMutualTLSVerifiesThePeerByTheNameDialled(t *testing.T) {
	ca := tlstest.NewCA(t, "deployment CA")
	f := ca.Write(t, t.TempDir(), "workspace", ca.Issue(t, "workspace", "localhost"))
	back, _ := startLogged(t, "--services=workspace", "--grpc-tls-ca-file="+f.CA, "--grpc-tls-cert-file="+f.Cert, "--grpc-tls-key-file="+f.Key)
	_, port, _ := net.SplitHostPort(back.GRPCAddr)
	gatewayTo := func(addr string) int {
		args := append(mtlsFlags(t, ca, "front"), "--services=gateway", "--workspace-addr="+addr)
		for _, m := range services.All() {
			if m.Name != "workspace" {
				args = append(args, "--"+m.Name+"-addr="+back.GRPCAddr)
			}
		}
		front, _ := startLogged(t, args...)
		// A workspace operation: the gateway calls workspace at addr.
		resp, body := httpsCall(t, http.DefaultClient, front.HTTPURL(), back.Dev, "/v2/workspace/domains/get", `{}`)
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("%s: %d %s", addr, resp.StatusCode, body)
		}
		return resp.StatusCode
	}
	if code := gatewayTo("dns:///localhost:" + port); code != http.StatusOK {
		t.Fatalf("dns:///localhost to a certificate for localhost: %d", code)
	}
	if code := gatewayTo(back.GRPCAddr); code != http.StatusServiceUnavailable {
		t.Fatalf("127.0.0.1 to a certificate for localhost only: %d, want refused (503)", code)
	}
}

// Under mutual TLS, a verified certificate with the marker is the internal credential only
// where the operator gave no --internal-token: with a token, the token stays required, so the
// gateway process's certificate (a gateway needs no token) calls no internal operation.
func TestAnOperatorsTokenStaysRequiredUnderMutualTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "deployment CA")
	const token = "3b9d0c7e5a1f48e2b6d4c8a0f2e19b7d"
	// The gateway's certificate, used as the gateway process would, plus the marker.
	internalCall := func(p *Process, kv ...string) codes.Code {
		conn, err := grpc.NewClient(p.GRPCAddr, grpc.WithTransportCredentials(mtlsCreds(t, ca, ca)))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), kv...), 10*time.Second)
		defer cancel()
		_, err = workspacev1.NewWorkspaceServiceClient(conn).Authenticate(ctx, &workspacev1.AuthenticateRequest{
			Credentials: &workspacev1.AuthenticateRequest_ApiKey{ApiKey: &workspacev1.ApiKeyCredentials{ApiKey: p.Dev.APIKey, AuthToken: p.Dev.AuthToken}},
		})
		return status.Code(err)
	}
	withToken, _ := startLogged(t, append(mtlsFlags(t, ca, "ws"), "--services=workspace", "--internal-token="+token)...)
	if got := internalCall(withToken, authn.HeaderInternalPeer, "1"); got != codes.PermissionDenied {
		t.Errorf("certificate and marker where a token is set: %v, want PermissionDenied", got)
	}
	if got := internalCall(withToken, authn.HeaderInternalToken, token); got != codes.OK {
		t.Errorf("the token: %v, want OK", got)
	}
	without, _ := startLogged(t, append(mtlsFlags(t, ca, "ws2"), "--services=workspace")...)
	if got := internalCall(without, authn.HeaderInternalPeer, "1"); got != codes.OK {
		t.Errorf("certificate and marker without a token: %v, want OK", got)
	}
	if got := internalCall(without); got != codes.PermissionDenied {
		t.Errorf("certificate alone: %v, want PermissionDenied", got)
	}

	// Services split across processes with the token and mutual TLS still call each other.
	var rest []string
	for _, m := range services.All() {
		if m.Name != "users" {
			rest = append(rest, m.Name)
		}
	}
	frontAddr := unusedAddr(t)
	back, _ := startLogged(t, append(mtlsFlags(t, ca, "back"), "--services="+strings.Join(rest, ","), "--users-addr="+frontAddr, "--internal-token="+token)...)
	args := append(mtlsFlags(t, ca, "front"), "--services=gateway,users", "--grpc-addr="+frontAddr, "--internal-token="+token)
	for _, s := range rest {
		args = append(args, "--"+s+"-addr="+back.GRPCAddr)
	}
	front, _ := startLogged(t, args...)
	if resp, body := httpsCall(t, http.DefaultClient, front.HTTPURL(), back.Dev, "/v2/users/add", `{"organizationId":"o","createOrganization":true,"users":[{"userId":"u1","name":"U","email":"u1@example.com"}]}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("users/add across processes with token and mutual TLS: %d %s", resp.StatusCode, body)
	}
}

// A gateway with mutual TLS warns at start when it proxies live sync over plain HTTP, and not
// when the address is https.
func TestPlainLiveSyncProxyWarnedUnderMutualTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "deployment CA")
	cfg, err := parse(t, nil, mtlsFlags(t, ca, "gw")...)
	if err != nil {
		t.Fatal(err)
	}
	pt, err := loadTLS(cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	for addr, warned := range map[string]bool{"http://crdt:8080": true, "https://crdt:8443": false} {
		var logs lockedLog
		c := Config{Modules: []service.Module{{Name: "workspace"}, syncModule}, Services: []string{Gateway}, HTTPPeers: map[string]string{"crdt": addr}}
		if _, err := remoteRoutes(c, pt, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(logs.String(), "over plain HTTP") && strings.Contains(logs.String(), "--crdt-http-addr"); got != warned {
			t.Errorf("%s: warned %v, want %v:\n%s", addr, got, warned, logs.String())
		}
	}
	// Without mutual TLS, plain HTTP is the operator's plain choice: no warning.
	var logs lockedLog
	c := Config{Modules: []service.Module{syncModule}, Services: []string{Gateway}, HTTPPeers: map[string]string{"crdt": "http://crdt:8080"}}
	if _, err := remoteRoutes(c, processTLS{}, slog.New(slog.NewTextHandler(&logs, nil))); err != nil || strings.Contains(logs.String(), "plain HTTP") {
		t.Errorf("without mutual TLS: %v\n%s", err, logs.String())
	}
}
