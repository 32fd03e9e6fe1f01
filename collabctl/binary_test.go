package collabctl

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testCA makes a CA and a certificate it signs for 127.0.0.1, and writes the CA's PEM to a file.
func testCA(t *testing.T) (tls.Certificate, string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "collabctl test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: key}, file
}

// Over https, collabctl trusts the CA of --ca-file (COLLABCTL_CA_FILE) and refuses a server it
// cannot verify, saying how to fix it; an http URL to a TLS server is named as such.
func TestHTTPSWithCAFile(t *testing.T) {
	p := startProcess(t)
	cert, caFile := testCA(t)
	target, _ := url.Parse("http://" + p.HTTPAddr)
	front := httptest.NewUnstartedServer(httputil.NewSingleHostReverseProxy(target))
	front.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	front.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are expected
	front.StartTLS()
	defer front.Close()
	ctx := context.Background()
	env := devEnv(p)
	env["COLLABCTL_URL"] = front.URL

	if o := run(ctx, env, "", "keys", "list"); o.code != ExitFailed || !strings.Contains(o.stderr, "not signed by a trusted CA (give its CA with --ca-file)") {
		t.Fatalf("without the CA: %+v", o)
	}
	if o := run(ctx, env, "", "--ca-file", caFile, "keys", "list").ok(t); !strings.Contains(o.stdout, p.Dev.APIKey) {
		t.Fatalf("with --ca-file:\n%s", o.stdout)
	}
	env["COLLABCTL_CA_FILE"] = caFile
	run(ctx, env, "", "workspace", "get").ok(t)
	env["COLLABCTL_URL"] = strings.Replace(front.URL, "https://", "http://", 1)
	if o := run(ctx, env, "", "keys", "list"); o.code != ExitFailed || !strings.Contains(o.stderr, "not the API's JSON envelope") {
		t.Fatalf("http to a TLS server: %+v", o)
	}
	env["COLLABCTL_CA_FILE"] = filepath.Join(t.TempDir(), "none.pem")
	if o := run(ctx, env, "", "keys", "list"); o.code != ExitUsage || !strings.Contains(o.stderr, "--ca-file") {
		t.Fatalf("a missing CA file: %+v", o)
	}
}

// The built binary runs: cmd/collabctl passes arguments, environment and exit codes through,
// and SIGINT ends a tail cleanly.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "collabctl")
	build := exec.Command("go", "build", "-o", bin, "../cmd/collabctl")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	p := startProcess(t)
	var env []string
	for k, v := range devEnv(p) {
		env = append(env, k+"="+v)
	}
	cmd := exec.Command(bin, "-o", "json", "keys", "list")
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("collabctl keys list: %v", err)
	}
	var keys []map[string]any
	if err := json.Unmarshal(out, &keys); err != nil || len(keys) != 1 || keys[0]["id"] != p.Dev.APIKey {
		t.Fatalf("keys %s (%v)", out, err)
	}
	cmd = exec.Command(bin, "workspace", "settings", "--set", "nonsense=1")
	cmd.Env = env
	if err := cmd.Run(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != ExitUsage {
		t.Fatalf("a usage error: %v", err)
	}

	// The tail goes through a proxy that says when it has polled, so the signal comes after the
	// program set up its handling.
	target, _ := url.Parse("http://" + p.HTTPAddr)
	polled := make(chan struct{}, 1)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(r *http.Response) error {
		select {
		case polled <- struct{}{}:
		default:
		}
		return nil
	}
	front := httptest.NewServer(proxy)
	defer front.Close()
	tail := exec.Command(bin, "--url", front.URL, "webhooks", "attempts", "tail", "--endpoint", "ep_none", "--interval", "100ms")
	tail.Env = env
	stderr := &syncBuffer{}
	tail.Stderr = stderr
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- tail.Wait() }()
	select {
	case <-polled:
	case err := <-exited:
		t.Fatalf("tail ended by itself: %v: %s", err, stderr.String())
	}
	if err := tail.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Fatalf("tail after SIGINT: %v: %s", err, stderr.String())
	}
}
