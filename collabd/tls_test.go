package collabd

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"

	"github.com/collab/collab/gateway"
	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/testkit/tlstest"
	"github.com/collab/collab/services"
)

// lockedLog is a log output tests read while the process writes.
type lockedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedLog) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedLog) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startLogged is startProcess with the process's log (warnings and up) kept.
func startLogged(t *testing.T, extra ...string) (*Process, *lockedLog) {
	t.Helper()
	logs := &lockedLog{}
	return startWith(t, Deps{LogOutput: logs}, append([]string{"--log-level=warn"}, extra...)...), logs
}

// pollUntil polls cond until it holds, failing the test after a generous deadline: the
// files are looked at again at most every few seconds, so the change shows within that.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// servedSerial opens a new TLS connection to addr, trusting roots, and returns the serial
// number of the certificate served.
func servedSerial(t *testing.T, addr string, roots *x509.CertPool) string {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func caPool(ca *tlstest.CA) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// The HTTP listener serves the API over TLS 1.2+ with the certificate of --tls-*, and serves a
// replacement once the files change; a broken replacement keeps the one in use.
func TestHTTPSServesAndReloadsTheCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "http CA")
	first, second := ca.Issue(t, "first"), ca.Issue(t, "second")
	files := ca.Write(t, dir, "http", first)
	p, logs := startLogged(t, "--tls-cert-file="+files.Cert, "--tls-key-file="+files.Key)
	if p.HTTPURL() != "https://"+p.HTTPAddr {
		t.Fatalf("HTTP URL %q", p.HTTPURL())
	}
	var banner bytes.Buffer
	PrintBanner(&banner, p)
	if !strings.Contains(banner.String(), "HTTP API: https://"+p.HTTPAddr) || strings.Contains(banner.String(), "http://") {
		t.Fatalf("banner:\n%s", banner.String())
	}

	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: caPool(ca)}}}
	req, _ := http.NewRequest(http.MethodPost, p.HTTPURL()+"/v2/workspace/activityconfig/get", strings.NewReader(`{"data":{}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-service-api-key", p.Dev.APIKey)
	req.Header.Set("x-service-auth-token", p.Dev.AuthToken)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.TLS == nil || resp.TLS.PeerCertificates[0].SerialNumber.Cmp(first.Cert.SerialNumber) != 0 {
		t.Fatalf("HTTPS call: %d %s", resp.StatusCode, body)
	}
	// Plain HTTP on the TLS port gets no API.
	if resp, err := http.Post("http://"+p.HTTPAddr+"/v2/workspace/activityconfig/get", "application/json", strings.NewReader(`{"data":{}}`)); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP answered 200 on the TLS listener")
		}
	}
	// TLS 1.1 is refused.
	if c, err := tls.Dial("tcp", p.HTTPAddr, &tls.Config{RootCAs: caPool(ca), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}); err == nil { //nolint:gosec // G402: an old client on purpose, to be refused
		c.Close()
		t.Fatal("a TLS 1.1 handshake succeeded")
	}

	tlstest.Replace(t, files.Cert, second.CertPEM)
	tlstest.Replace(t, files.Key, second.KeyPEM)
	want := second.Cert.SerialNumber.String()
	pollUntil(t, "the replaced certificate served", func() bool { return servedSerial(t, p.HTTPAddr, caPool(ca)) == want })

	// A key that does not match the certificate: warned about, and the second pair stays.
	// (Handshakes are what look at the files.)
	tlstest.Replace(t, files.Key, first.KeyPEM)
	pollUntil(t, "a warning about the broken pair", func() bool {
		if got := servedSerial(t, p.HTTPAddr, caPool(ca)); got != want {
			t.Fatalf("served %s after a broken replacement, want %s", got, want)
		}
		return strings.Contains(logs.String(), "does not load")
	})
	if strings.Contains(logs.String(), "PRIVATE KEY") {
		t.Fatal("key material in the log")
	}
}

// A process does not start on TLS files that do not load.
func TestTLSFilesThatDoNotLoadStopTheStart(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "CA")
	files := ca.Write(t, dir, "a", ca.Issue(t, "a"))
	other := ca.Write(t, dir, "b", ca.Issue(t, "b"))
	for _, args := range [][]string{
		{"--tls-cert-file=" + files.Cert, "--tls-key-file=" + other.Key},
		{"--tls-cert-file=" + files.Cert, "--tls-key-file=" + dir + "/missing.key"},
		{"--grpc-tls-ca-file=" + files.Key, "--grpc-tls-cert-file=" + files.Cert, "--grpc-tls-key-file=" + files.Key},
	} {
		cfg, err := parse(t, nil, append([]string{"--http-addr=127.0.0.1:0", "--grpc-addr=127.0.0.1:0", "--log-level=error"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		if p, err := Start(context.Background(), cfg, Deps{LogOutput: io.Discard}); err == nil {
			_ = p.Shutdown(context.Background())
			t.Fatalf("%v: started", args)
		} else if !strings.Contains(err.Error(), "--") {
			t.Errorf("%v: the error names no flag: %v", args, err)
		}
	}
}

// mtlsFlags are a process's flags of mutual TLS with a certificate of ca.
func mtlsFlags(t *testing.T, ca *tlstest.CA, name string) []string {
	f := ca.Write(t, t.TempDir(), name, ca.Issue(t, name))
	return []string{"--grpc-tls-ca-file=" + f.CA, "--grpc-tls-cert-file=" + f.Cert, "--grpc-tls-key-file=" + f.Key}
}

// Split mode under mutual TLS without an internal token: the gateway and documents in one
// process, the other services in another, and calls that cross both ways (the gateway to users,
// users to documents' internal operations, documents to workspace's Authenticate) work. A peer
// of another CA, a client without a certificate and a plaintext one are refused at the
// handshake.
func TestMutualTLSSplitMode(t *testing.T) {
	ca := tlstest.NewCA(t, "deployment CA")
	front := unusedAddr(t)
	var rest []string
	for _, m := range services.All() {
		if m.Name != "documents" {
			rest = append(rest, m.Name)
		}
	}
	crdtHTTP := ca.Write(t, t.TempDir(), "crdt-http", ca.Issue(t, "crdt-http"))
	back, _ := startLogged(t, append(mtlsFlags(t, ca, "back"), "--services="+strings.Join(rest, ","), "--documents-addr="+front,
		"--tls-cert-file="+crdtHTTP.Cert, "--tls-key-file="+crdtHTTP.Key)...)
	args := append(mtlsFlags(t, ca, "front"), "--services=gateway,documents", "--grpc-addr="+front, "--crdt-http-addr=https://"+back.HTTPAddr)
	for _, s := range rest {
		args = append(args, "--"+s+"-addr="+back.GRPCAddr)
	}
	cfg, err := parse(t, nil, append([]string{"--http-addr=127.0.0.1:0", "--rate-limit=off", "--log-level=error"}, args...)...)
	if err != nil {
		t.Fatalf("split mode with mutual TLS and no internal token: %v", err)
	}
	gw, err := Start(context.Background(), cfg, Deps{Clock: clock.Real(), LogOutput: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Shutdown(context.Background()) })

	key := map[string]string{"x-service-api-key": back.Dev.APIKey, "x-service-auth-token": back.Dev.AuthToken}
	call := func(p *Process, path, data string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+p.HTTPAddr+path, strings.NewReader(`{"data":`+data+`}`))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range key {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := call(gw, "/v2/users/add", `{"organizationId":"o","createOrganization":true,"documentId":"d","createDocument":true,"users":[{"userId":"u1","name":"U","email":"u1@example.com"}]}`); code != http.StatusOK {
		t.Fatalf("users/add across processes: %d %s", code, body)
	}
	code, body := call(gw, "/v2/auth/permissions/get", `{"organizationId":"o","userIds":["u1"],"documentIds":["d"]}`)
	if code != http.StatusOK || !strings.Contains(body, `"accessRole":"editor"`) {
		t.Fatalf("permissions across processes: %d %s", code, body)
	}
	// documents (front) authenticated the caller with workspace (back): a document read.
	if code, body := call(gw, "/v2/organizations/get", `{"organizationIds":["o"]}`); code != http.StatusOK || !strings.Contains(body, `"o"`) {
		t.Fatalf("organizations/get: %d %s", code, body)
	}
	// Live sync is proxied to the crdt process's HTTPS listener, verified against the CA: the
	// answer is crdt's own (a refused token), not the proxy's 503.
	resp, err := http.Get("http://" + gw.HTTPAddr + "/v2/crdt/sync/o/d/e?token=nope")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusOK {
		t.Fatalf("live sync through the gateway: %d %s", resp.StatusCode, b)
	}

	// At the gRPC listener: a client of the CA gets through the handshake...
	good := mtlsCreds(t, ca, ca)
	if err := checkHealth(back.GRPCAddr, grpc.WithTransportCredentials(good)); err != nil {
		t.Fatalf("a client of the CA: %v", err)
	}
	// ...one of another CA (trusting the right one), one without a certificate, and plaintext
	// do not.
	stranger := tlstest.NewCA(t, "other CA")
	for name, opt := range map[string]grpc.DialOption{
		"another CA":     grpc.WithTransportCredentials(mtlsCreds(t, stranger, ca)),
		"no certificate": grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: caPool(ca)})),
		"plaintext":      grpc.WithTransportCredentials(insecure.NewCredentials()),
	} {
		err := checkHealth(back.GRPCAddr, opt)
		if status.Code(err) != codes.Unavailable {
			t.Errorf("%s: %v, want refused at the handshake (Unavailable)", name, err)
		}
	}

	// A whole process whose certificate is from another CA reaches nothing.
	lost := append(mtlsFlags(t, stranger, "lost"), "--services=gateway")
	for _, s := range services.All() {
		lost = append(lost, "--"+s.Name+"-addr="+back.GRPCAddr)
	}
	lostGW, _ := startLogged(t, lost...)
	if code, body := call(lostGW, "/v2/workspace/activityconfig/get", `{}`); code != http.StatusServiceUnavailable {
		t.Fatalf("a gateway of another CA: %d %s", code, body)
	}
}

func mtlsCreds(t *testing.T, issuer, trusted *tlstest.CA) credentials.TransportCredentials {
	l := issuer.Issue(t, "client")
	cert, err := tls.X509KeyPair(l.CertPEM, l.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return credentials.NewTLS(&tls.Config{RootCAs: caPool(trusted), Certificates: []tls.Certificate{cert}})
}

func checkHealth(addr string, opts ...grpc.DialOption) error {
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return err
	}
	defer conn.Close()
	return healthCheck(conn)
}

// healthCheck calls the health check once over conn.
func healthCheck(conn *grpc.ClientConn) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

// The gateway's connection to peers holds a verified certificate too, and carries public
// callers' requests: whatever headers a public caller sends, a call that came through the
// gateway is not internal. A probe route on a real gateway forwards an HTTP request to
// workspace's internal Authenticate as grpc-gateway's generated handlers do (the caller's
// headers through the gateway's header matcher): over the gateway's connection it is refused,
// over the internal connection of the same process (certificate and marker, no token) it passes.
func TestPublicCallersAreNotInternalUnderMutualTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "deployment CA")
	back, _ := startLogged(t, append(mtlsFlags(t, ca, "back"), "--services=workspace")...)
	args := append(mtlsFlags(t, ca, "front"), "--services=gateway", "--workspace-addr="+back.GRPCAddr)
	cfg, err := parse(t, nil, append(args, peerFlags("never-called:1", serviceNames("workspace")...)...)...)
	if err != nil {
		t.Fatal(err)
	}
	p := &Process{log: quiet()}
	if p.tls, err = loadTLS(cfg, p.log); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Shutdown(context.Background()) }()
	plain, internal, err := p.connect(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	const method = "/collab.workspace.v1.WorkspaceService/Authenticate"
	probe := func(path string, conn grpc.ClientConnInterface) gateway.Upstream {
		return gateway.Upstream{Name: "workspace", GRPCService: "collab.workspace.v1.WorkspaceService", Conn: conn,
			Register: func(_ context.Context, mux *runtime.ServeMux, conn grpc.ClientConnInterface) error {
				return mux.HandlePath(http.MethodPost, path, func(w http.ResponseWriter, r *http.Request, _ map[string]string) {
					ctx, err := runtime.AnnotateContext(r.Context(), mux, r, method)
					if err == nil {
						_, err = workspacev1.NewWorkspaceServiceClient(conn).Authenticate(ctx, &workspacev1.AuthenticateRequest{
							Credentials: &workspacev1.AuthenticateRequest_ApiKey{ApiKey: &workspacev1.ApiKeyCredentials{ApiKey: back.Dev.APIKey, AuthToken: back.Dev.AuthToken}},
						})
					}
					_, _ = io.WriteString(w, status.Code(err).String())
				})
			}}
	}
	g, err := gateway.New(context.Background(), []gateway.Upstream{probe("/probe/public", plain["workspace"]), probe("/probe/internal", internal["workspace"])}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	hostile := http.Header{
		"X-Collab-Internal-Peer":                 {"1"},
		"X-Collab-Internal-Token":                {"0123456789abcdef0123456789abcdef"},
		"Grpc-Metadata-X-Collab-Internal-Peer":   {"1"},
		"X-Service-Collab-Internal-Peer":         {"1"},
		"Content-Type":                           {"application/json"},
		"Grpc-Metadata-X-Collab-Internal-Token":  {"x"},
		"X-Forwarded-Client-Cert":                {"whatever"},
		"X-Service-X-Collab-Internal-Peer-Value": {"1"},
	}
	probeCall := func(path string) string {
		req, _ := http.NewRequest(http.MethodPost, path, strings.NewReader(`{"data":{}}`))
		req.Header = hostile.Clone()
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, req)
		return rec.Body.String()
	}
	if got := probeCall("/probe/public"); got != codes.PermissionDenied.String() {
		t.Fatalf("a public caller through the gateway's connection: %s, want PermissionDenied", got)
	}
	if got := probeCall("/probe/internal"); got != codes.OK.String() {
		t.Fatalf("the internal connection (the control): %s, want OK", got)
	}
}

func unusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// The gRPC listener's certificate and CA bundle are re-read too: a replaced certificate is
// served on new connections, and clients of a CA dropped from the bundle are refused.
func TestMutualTLSReloads(t *testing.T) {
	dir := t.TempDir()
	ca, next := tlstest.NewCA(t, "deployment CA"), tlstest.NewCA(t, "next CA")
	files := ca.Write(t, dir, "grpc", ca.Issue(t, "first"))
	p, _ := startLogged(t, "--grpc-tls-ca-file="+files.CA, "--grpc-tls-cert-file="+files.Cert, "--grpc-tls-key-file="+files.Key)
	client := ca.Issue(t, "client")
	cert, err := tls.X509KeyPair(client.CertPEM, client.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := caPool(ca)
	roots.AddCert(next.Cert)
	// handshake returns the serial served, or the error of a refused client (TLS 1.3 tells the
	// client on its first read; the gRPC server speaks first, its settings frame).
	handshake := func() (string, error) {
		c, err := tls.Dial("tcp", p.GRPCAddr, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}})
		if err != nil {
			return "", err
		}
		defer c.Close()
		if _, err := c.Read(make([]byte, 1)); err != nil {
			return "", err
		}
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
	}
	if _, err := handshake(); err != nil {
		t.Fatalf("a client of the CA: %v", err)
	}
	second := next.Issue(t, "second")
	tlstest.Replace(t, files.Cert, second.CertPEM)
	tlstest.Replace(t, files.Key, second.KeyPEM)
	pollUntil(t, "the replaced gRPC certificate served", func() bool {
		got, err := handshake()
		return err == nil && got == second.Cert.SerialNumber.String()
	})
	tlstest.Replace(t, files.CA, next.PEM)
	pollUntil(t, "a client of the dropped CA refused", func() bool {
		_, err := handshake()
		return err != nil
	})
}

// A connection opened before its client's CA was dropped from the bundle does not keep that
// trust: past --grpc-max-connection-age the server sends GOAWAY, the client reconnects, and
// the new handshake is refused. (Without the age limit the connection is served as long as
// it stays open.)
func TestMutualTLSOpenConnectionsAgeOut(t *testing.T) {
	dir := t.TempDir()
	ca, next := tlstest.NewCA(t, "deployment CA"), tlstest.NewCA(t, "next CA")
	files := ca.Write(t, dir, "grpc", ca.Issue(t, "server"))
	p, _ := startLogged(t, "--grpc-tls-ca-file="+files.CA, "--grpc-tls-cert-file="+files.Cert, "--grpc-tls-key-file="+files.Key,
		"--grpc-max-connection-age=1s")
	conn, err := grpc.NewClient(p.GRPCAddr, grpc.WithTransportCredentials(mtlsCreds(t, ca, ca)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	check := func() error { return healthCheck(conn) }
	if err := check(); err != nil {
		t.Fatalf("a client of the CA: %v", err)
	}
	// As in a rotation, the bundle first holds both CAs (the next CA's clients are accepted,
	// the open connection keeps working), then the first CA is dropped. The server keeps its
	// certificate.
	tlstest.Replace(t, files.CA, append(append([]byte{}, next.PEM...), ca.PEM...))
	pollUntil(t, "the next CA's client accepted", func() bool {
		return checkHealth(p.GRPCAddr, grpc.WithTransportCredentials(mtlsCreds(t, next, ca))) == nil
	})
	if err := check(); err != nil {
		t.Fatalf("the open connection, while its CA is in the bundle: %v", err)
	}
	tlstest.Replace(t, files.CA, next.PEM)
	pollUntil(t, "the open connection of a dropped CA's client cut", func() bool {
		return status.Code(check()) == codes.Unavailable
	})
	if err := checkHealth(p.GRPCAddr, grpc.WithTransportCredentials(mtlsCreds(t, next, ca))); err != nil {
		t.Fatalf("a client of the CA in the bundle: %v", err)
	}
}

// The connection age is 30 minutes unless set; 0 turns it off; below a second (connections
// would churn) or negative is refused, naming the flag.
func TestMaxConnectionAgeBounds(t *testing.T) {
	c, err := parse(t, nil)
	if err != nil || c.GRPCMaxConnectionAge != 30*time.Minute {
		t.Fatalf("default %v (%v)", c.GRPCMaxConnectionAge, err)
	}
	if c, err := parse(t, map[string]string{"COLLAB_GRPC_MAX_CONNECTION_AGE": "0s"}); err != nil || c.GRPCMaxConnectionAge != 0 {
		t.Fatalf("0s: %v (%v)", c.GRPCMaxConnectionAge, err)
	}
	for _, v := range []string{"-1s", "500ms"} {
		if _, err := parse(t, nil, "--grpc-max-connection-age="+v); err == nil || !strings.Contains(err.Error(), "--grpc-max-connection-age") {
			t.Errorf("%s: %v", v, err)
		}
	}
}
