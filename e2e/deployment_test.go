package e2e

import (
	"testing"
)

// A service and the gateway in separate processes: the gateway reaches the workspace service
// only through its gRPC address.
func TestSplitProcesses(t *testing.T) {
	ws := start(t, config(t, "--services=workspace", "--internal-token=t0k"))
	if ws.proc.HTTPAddr != "" {
		t.Fatalf("workspace-only process serves HTTP at %s", ws.proc.HTTPAddr)
	}
	gw := start(t, config(t, "--services=gateway", "--workspace-addr="+ws.proc.GRPCAddr, "--internal-token=t0k"))
	id, token := gw.newWorkspace("split@example.com")
	key, auth := gw.newKey(id, token)
	gw.call("/v2/workspace/domains/get", keyHeaders(key, auth), map[string]any{}).data(t, "Domains retrieved successfully.")
	gw.call("/v2/workspace/domains/get", keyHeaders(key, "wrong"), map[string]any{}).fails(t, 400, "INVALID_ARGUMENT", "Auth token not found.")
	r := gw.do("GET", "/readyz", nil, nil)
	if r.status != 200 {
		t.Fatalf("readyz through a peer: %d %s", r.status, r.raw)
	}
}

func TestSplitProcessesNotReadyWithoutPeer(t *testing.T) {
	gw := start(t, config(t, "--services=gateway", "--workspace-addr=127.0.0.1:1"))
	r := gw.do("GET", "/readyz", nil, nil)
	if r.status != 503 || r.body["services"].(map[string]any)["workspace"] != "unreachable" {
		t.Fatalf("readyz with an unreachable peer: %d %s", r.status, r.raw)
	}
	gw.call("/v2/workspace/create", nil, map[string]any{"ownerEmail": "x@example.com"}).fails(t, 503, "UNAVAILABLE", "The service is unavailable. Try again later.")
}

// A run with a data directory keeps its data, and the dev credentials, across restarts.
func TestDataDirPersists(t *testing.T) {
	dir := t.TempDir()
	first := start(t, config(t, "--data-dir="+dir))
	id, token := first.newWorkspace("persist@example.com")
	key, auth := first.newKey(id, token)
	first.call("/v2/workspace/domains/update", keyHeaders(key, auth), map[string]any{"allowedDomains": []string{"kept.example.com"}}).data(t, "")
	if err := first.proc.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}

	second := start(t, config(t, "--data-dir="+dir))
	d := second.call("/v2/workspace/domains/get", keyHeaders(key, auth), map[string]any{}).data(t, "")
	if !equalStrings(d["allowedDomains"], "kept.example.com") {
		t.Fatalf("after restart: %v", d["allowedDomains"])
	}
	second.call("/v2/workspace/get", workspaceHeaders(id, token), map[string]any{}).data(t, "")
	second.call("/v2/workspace/get", second.devWorkspace(), map[string]any{}).data(t, "")
	second.call("/v2/workspace/domains/get", second.devKey(), map[string]any{}).data(t, "")
	second.call("/v2/workspace/create", nil, map[string]any{"ownerEmail": "persist@example.com"}).fails(t, 409, "ALREADY_EXISTS", "")
}
