package e2e

import (
	"testing"
)

// The services and the gateway in three processes: workspace alone, the data services
// together, the gateway alone. Every call crosses process boundaries over gRPC, and events
// travel between the data services and back.
func TestSplitProcesses(t *testing.T) {
	ws := start(t, config(t, "--services=workspace", "--internal-token="+testInternalToken))
	if ws.proc.HTTPAddr != "" {
		t.Fatalf("workspace-only process serves HTTP at %s", ws.proc.HTTPAddr)
	}
	data := start(t, config(t, "--services=documents,users,access", "--workspace-addr="+ws.proc.GRPCAddr, "--internal-token="+testInternalToken))
	peers := []string{"--workspace-addr=" + ws.proc.GRPCAddr}
	for _, s := range []string{"documents", "users", "access"} {
		peers = append(peers, "--"+s+"-addr="+data.proc.GRPCAddr)
	}
	gw := start(t, config(t, append([]string{"--services=gateway", "--internal-token=" + testInternalToken}, peers...)...))
	id, token := gw.newWorkspace("split@example.com")
	key, auth := gw.newKey(id, token)
	k := keyHeaders(key, auth)
	gw.call("/v2/workspace/domains/get", k, map[string]any{}).data(t, "Domains retrieved successfully.")
	gw.call("/v2/workspace/domains/get", keyHeaders(key, "wrong"), map[string]any{}).fails(t, 400, "INVALID_ARGUMENT", "Auth token not found.")
	gw.call("/v2/users/add", k, map[string]any{"organizationId": "o", "createOrganization": true, "documentId": "d", "createDocument": true, "users": users("u1")}).data(t, "")
	perms := gw.call("/v2/auth/permissions/get", k, map[string]any{"organizationId": "o", "userIds": []string{"u1"}, "documentIds": []string{"d"}}).data(t, "")
	if role := perms["u1"].(map[string]any)["documents"].(map[string]any)["d"].(map[string]any)["accessRole"]; role != "editor" {
		t.Fatalf("role across processes %v", role)
	}
	// An event (document.deleted) from documents reaches users and access.
	gw.call("/v2/organizations/documents/delete", k, map[string]any{"organizationId": "o", "documentIds": []string{"d"}}).data(t, "")
	if got := gw.call("/v1/users/get", k, map[string]any{"organizationId": "o", "documentId": "d"}).ok(t)["data"].([]any); len(got) != 0 {
		t.Fatalf("document contact list survived the deletion: %v", got)
	}
	r := gw.do("GET", "/readyz", nil, nil)
	if r.status != 200 {
		t.Fatalf("readyz through peers: %d %s", r.status, r.raw)
	}
}

func TestSplitProcessesNotReadyWithoutPeer(t *testing.T) {
	args := []string{"--services=gateway"}
	for _, s := range []string{"workspace", "documents", "users", "access"} {
		args = append(args, "--"+s+"-addr=127.0.0.1:1")
	}
	gw := start(t, config(t, args...))
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
