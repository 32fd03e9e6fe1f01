package collabd

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/testkit/natstest"
	"github.com/collab/collab/internal/testkit/tlstest"
)

// --wakeup-tls-ca-file reaches the bus: with the CA that signed the engine's certificate the
// process connects over TLS (/readyz plain ready, the engine's connection encrypted); with
// another CA it does not (/readyz says the engine is unreachable); a CA file that cannot be read
// stops the start, naming the file.
func TestWakeupTLSCAFile(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "wake-ups CA")
	f := ca.Write(t, dir, "nats", ca.Issue(t, "nats"))
	other := tlstest.NewCA(t, "another CA")
	wrong := other.Write(t, dir, "other", other.Issue(t, "other"))
	s := natstest.Server(t, natstest.Options{TLSCert: f.Cert, TLSKey: f.Key})
	url := "--wakeup-url=" + s.ClientURL() // tls://127.0.0.1:port

	readyz := func(p *Process, want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			code, body := get(t, "http://"+p.MetricsAddr+"/readyz")
			if code == http.StatusOK && strings.Contains(body, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("/readyz: %d %s, want 200 with %q", code, body, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	good := startProcess(t, "--metrics-addr=127.0.0.1:0", url, "--wakeup-tls-ca-file="+f.CA)
	readyz(good, `{"status":"ready"}`)
	cz, err := s.Connz(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cz.Conns) != 1 || cz.Conns[0].TLSVersion == "" {
		t.Fatalf("the engine's connections: %+v", cz.Conns)
	}
	bad := startProcess(t, "--metrics-addr=127.0.0.1:0", url, "--wakeup-tls-ca-file="+wrong.CA)
	readyz(bad, "wake-up engine (--wakeup-url) is unreachable")

	missing := filepath.Join(dir, "missing.pem")
	cfg, err := parse(t, nil, "--http-addr=127.0.0.1:0", "--grpc-addr=127.0.0.1:0", url, "--wakeup-tls-ca-file="+missing)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Start(context.Background(), cfg, Deps{Clock: clock.Real(), LogOutput: io.Discard})
	if err == nil {
		_ = p.Shutdown(context.Background())
		t.Fatal("started with a CA file that does not exist")
	}
	if !strings.Contains(err.Error(), missing) {
		t.Fatalf("the error does not name the file: %v", err)
	}
}
