package collabd

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/collab/collab/internal/grpcserver"
	"github.com/collab/collab/internal/testkit/tlstest"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The metrics listener answers probes that need neither the API's port nor the gRPC port: a
// process whose gRPC listener takes only clients with a certificate (mutual TLS, which a
// kubelet's gRPC probe has not) is still probed, and /readyz runs its services' checks.
func TestMetricsListenerServesProbes(t *testing.T) {
	ca := tlstest.NewCA(t, "deployment CA")
	args := append(mtlsFlags(t, ca, "localhost"), "--metrics-addr=127.0.0.1:0", "--services=workspace,documents")
	p := startProcess(t, append(args, peerFlags("127.0.0.1:1", serviceNames("workspace", "documents")...)...)...)
	for path, want := range map[string]string{"/healthz": `{"status":"alive"}`, "/readyz": `{"status":"ready"}`} {
		if code, body := get(t, "http://"+p.MetricsAddr+path); code != http.StatusOK || body != want {
			t.Errorf("%s: %d %s, want 200 %s", path, code, body, want)
		}
	}

	// A failing check (a store that does not answer) makes /readyz 503, /healthz stays 200.
	h := grpcserver.NewHealth()
	h.Add("collab.documents.v1.DocumentsService", func(context.Context) error { return errors.New("store down") })
	mux := http.NewServeMux()
	for _, r := range probes(h, nil) {
		mux.Handle(r.Pattern, r.Handler)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	if code, body := get(t, srv.URL+"/readyz"); code != http.StatusServiceUnavailable || body != `{"status":"not ready"}` {
		t.Errorf("/readyz with a failing store: %d %s", code, body)
	}
	if code, _ := get(t, srv.URL+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz with a failing store: %d", code)
	}
	// A process without services (a gateway) has no /readyz there: its own is on the API's port.
	if n := len(probes(nil, nil)); n != 1 {
		t.Errorf("probes of a process without services: %d", n)
	}
}
