package e2e

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/collab/collab/internal/testkit/yjstest"
)

// freeAddr returns a loopback address no one listens on now, for a process whose peers must
// know its address before it starts.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// The services and the gateway in four processes: workspace alone, the data services
// (documents, users, access) together, every other service together (today events, activity,
// notifications, memory, crdt, webhooks), the gateway alone. Every call crosses process
// boundaries over gRPC, and events travel between the processes: deletions from documents to
// users, access and activity, a published event from events to activity. Live sync reaches
// crdt through the gateway's URL, the one public entry point: the gateway proxies the
// WebSocket to the crdt process's HTTP listener (--crdt-http-addr).
func TestSplitProcesses(t *testing.T) {
	t.Parallel()
	ws := start(t, config(t, "--services=workspace", "--internal-token="+testInternalToken))
	if ws.proc.HTTPAddr != "" {
		t.Fatalf("workspace-only process serves HTTP at %s", ws.proc.HTTPAddr)
	}
	dataServices := []string{"documents", "users", "access"}
	feedServices := serviceNames(append([]string{"workspace"}, dataServices...)...)
	// events and activity call documents, and documents delivers its deletions to activity:
	// the second process's address is chosen before either starts.
	feedAddr := freeAddr(t)
	data := start(t, config(t, append([]string{"--services=" + strings.Join(dataServices, ","), "--workspace-addr=" + ws.proc.GRPCAddr, "--internal-token=" + testInternalToken},
		peerFlags(feedAddr, feedServices...)...)...))
	peers := append([]string{"--workspace-addr=" + ws.proc.GRPCAddr}, peerFlags(feedAddr, feedServices...)...)
	peers = append(peers, peerFlags(data.proc.GRPCAddr, dataServices...)...)
	feed := start(t, config(t, append([]string{"--services=" + strings.Join(feedServices, ","), "--grpc-addr=" + feedAddr, "--internal-token=" + testInternalToken,
		"--workspace-addr=" + ws.proc.GRPCAddr}, peerFlags(data.proc.GRPCAddr, dataServices...)...)...))
	if feed.proc.HTTPAddr == "" {
		t.Fatal("the process running crdt serves no HTTP: live sync needs its listener")
	}
	gw := start(t, config(t, append([]string{"--services=gateway", "--internal-token=" + testInternalToken, "--crdt-http-addr=" + feed.proc.HTTPAddr}, peers...)...))
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
	// Live sync through the gateway: a real y-websocket client connects to the gateway's URL,
	// receives a REST Add and Update live, and its edit is stored by the crdt process.
	editor := yjstest.StartClient(t, gw.syncURL(), "o/d/e", gw.syncToken(t, k, "ed", "editor"))
	next(t, editor, "synced")
	gw.call("/v2/crdt/add", k, map[string]any{"organizationId": "o", "documentId": "d", "editorId": "e", "data": "hello", "type": "text"}).data(t, "CRDT data added successfully.")
	waitText(t, editor, "hello")
	statusOnly(t, gw.call("/v2/crdt/update", k, map[string]any{"organizationId": "o", "documentId": "d", "editorId": "e", "data": "hello split", "type": "text"}), "CRDT data updated successfully.")
	waitText(t, editor, "hello split")
	if err := editor.Send(map[string]any{"cmd": "insertText", "root": "content", "index": 0, "text": ">> "}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the client's edit stored through the gateway", func() bool { return gw.restText(t, k) == ">> hello split" })
	if err := editor.Close(); err != nil {
		t.Fatal(err)
	}
	// The crdt process's own listener serves live sync and nothing else.
	feedHTTP := &system{t: t, proc: feed.proc, base: "http://" + feed.proc.HTTPAddr}
	feedHTTP.call("/v2/crdt/get", k, map[string]any{"organizationId": "o", "documentId": "d"}).fails(t, 404, "NOT_FOUND", "Not found: this process serves no gateway.")
	// An event (document.deleted) from documents reaches users and access.
	gw.call("/v2/organizations/documents/delete", k, map[string]any{"organizationId": "o", "documentIds": []string{"d"}}).data(t, "")
	if got := gw.call("/v1/users/get", k, map[string]any{"organizationId": "o", "documentId": "d"}).ok(t)["data"].([]any); len(got) != 0 {
		t.Fatalf("document contact list survived the deletion: %v", got)
	}
	// A published event crosses from events to activity in its process, and the organization's
	// deletion from documents removes the record.
	gw.call("/v2/workspace/activityconfig/update", k, map[string]any{"isEnabled": true}).data(t, "Activity config updated successfully.")
	gw.call("/v2/events/publish", k, map[string]any{"id": "e1", "type": "comment.add", "organizationId": "o"}).data(t, "Event published successfully.")
	logs := func() []any {
		return gw.call("/v2/activities/get", k, map[string]any{"organizationId": "o"}).ok(t)["data"].([]any)
	}
	if got := logs(); len(got) != 1 || got[0].(map[string]any)["id"] != "e1" {
		t.Fatalf("activity across processes: %v", got)
	}
	// An agent execution started in the memory process under the organization (whose
	// generation memory asks documents for) goes with the organization's deletion too.
	gw.call("/v2/agents/execution/start", k, map[string]any{"agentId": "a", "organizationId": "o"}).data(t, "Agent execution started successfully.")
	executions := func() []any {
		return gw.call("/v2/agents/execution/list", k, map[string]any{"organizationId": "o"}).ok(t)["items"].([]any)
	}
	if got := executions(); len(got) != 1 {
		t.Fatalf("agent executions across processes: %v", got)
	}
	gw.call("/v2/organizations/delete", k, map[string]any{"organizationIds": []string{"o"}}).data(t, "")
	gw.call("/v2/activities/get", k, map[string]any{"organizationId": "o"}).fails(t, 404, "NOT_FOUND", "Organization does not exist.")
	gw.call("/v2/organizations/add", k, map[string]any{"organizations": []any{map[string]any{"organizationId": "o", "organizationName": "O"}}}).data(t, "")
	if got := logs(); len(got) != 0 {
		t.Fatalf("activity outlived its organization: %v", got)
	}
	if got := executions(); len(got) != 0 {
		t.Fatalf("agent executions outlived their organization: %v", got)
	}
	// A notification fans out in its process, reading members from users in another.
	gw.call("/v2/users/add", k, map[string]any{"organizationId": "o2", "createOrganization": true, "users": users("u1", "u2", "u3")}).data(t, "")
	gw.call("/v2/notifications/add", k, map[string]any{"organizationId": "o2", "documentId": "d", "createDocument": true, "actionUser": map[string]any{"userId": "u1"},
		"displayHeadlineMessageTemplate": "hi", "displayBodyMessage": "b", "notifyUsers": []any{}}).data(t, "")
	inbox := func(user string) int {
		return len(gw.call("/v2/notifications/get", k, map[string]any{"organizationId": "o2", "userId": user}).ok(t)["data"].([]any))
	}
	eventually(t, "u2's inbox across processes", func() bool { return inbox("u2") == 1 })
	// Configs belong to members, asked of users in the other process (MembersAmong); a context
	// is matched by access there (MatchContexts), at the fan-out and when an inbox is read.
	set := gw.call("/v2/notifications/config/set", k, map[string]any{"organizationId": "o2", "documentIds": []string{"d"}, "userIds": []string{"u2", "stranger"},
		"config": map[string]any{"inbox": "ALL", "email": "NONE", "slack": "NONE"}}).data(t, "")
	if set["u2"].(map[string]any)["success"] != true || set["stranger"].(map[string]any)["success"] != false {
		t.Fatalf("config across processes: %v", set)
	}
	gw.call("/v2/auth/permissions/add", k, map[string]any{"user": map[string]any{"userId": "u2"}, "permissions": map[string]any{
		"resources": []any{map[string]any{"type": "organization", "id": "o2", "organizationId": "o2"}}, "context": map[string]any{"access": map[string]any{"team": "red"}}}}).data(t, "")
	gw.call("/v2/notifications/add", k, map[string]any{"organizationId": "o2", "documentId": "d", "actionUser": map[string]any{"userId": "u1"},
		"displayHeadlineMessageTemplate": "hi", "displayBodyMessage": "b", "notifyUsers": []any{}, "context": map[string]any{"access": map[string]any{"team": "red"}}}).data(t, "")
	eventually(t, "the context's notification across processes", func() bool { return inbox("u2") == 2 })
	if n := inbox("u3"); n != 1 {
		t.Fatalf("u3, without an access context, has %d notifications", n)
	}
	// The CRDT service asks documents in another process for the document.
	if got := gw.call("/v2/crdt/get", k, map[string]any{"organizationId": "o2", "documentId": "d"}).ok(t); got["message"] != "CRDT data retrieved successfully." || fmt.Sprint(got["data"]) != "[]" {
		t.Fatalf("CRDT data of a new document: %v", got)
	}
	gw.call("/v2/crdt/get", k, map[string]any{"organizationId": "o2", "documentId": "nope"}).fails(t, 404, "NOT_FOUND", "Document does not exist.")
	r := gw.do("GET", "/readyz", nil, nil)
	if r.status != 200 {
		t.Fatalf("readyz through peers: %d %s", r.status, r.raw)
	}
}

func TestSplitProcessesNotReadyWithoutPeer(t *testing.T) {
	t.Parallel()
	args := append([]string{"--services=gateway"}, peerFlags("127.0.0.1:1", serviceNames()...)...)
	gw := start(t, config(t, args...))
	r := gw.do("GET", "/readyz", nil, nil)
	if r.status != 503 || r.body["services"].(map[string]any)["workspace"] != "unreachable" {
		t.Fatalf("readyz with an unreachable peer: %d %s", r.status, r.raw)
	}
	gw.call("/v2/workspace/create", nil, map[string]any{"ownerEmail": "x@example.com"}).fails(t, 503, "UNAVAILABLE", "The service is unavailable. Try again later.")
}

// A gateway without crdt and without --crdt-http-addr answers live sync 503 in the error
// envelope, naming the flag, and says so in its log at start; with an address where nothing
// listens, 503 too.
func TestSplitGatewayWithoutCrdtHTTPAddr(t *testing.T) {
	t.Parallel()
	args := append([]string{"--services=gateway", "--log-level=warn"}, peerFlags("127.0.0.1:1", serviceNames()...)...)
	logged := &lockedBuffer{}
	gw := startLogging(t, config(t, args...), logged)
	if !strings.Contains(logged.String(), "--crdt-http-addr") {
		t.Errorf("no warning at start:\n%s", logged)
	}
	upgrade := map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
	gw.do("GET", "/v2/crdt/sync/o/d/e?token=t", upgrade, nil).fails(t, 503, "UNAVAILABLE", "Live sync (crdt) runs in another process and --crdt-http-addr is not set.")
	gw.do("GET", "/v2/crdt/sync/o/d/e", nil, nil).fails(t, 503, "UNAVAILABLE", "Live sync (crdt) runs in another process and --crdt-http-addr is not set.")

	down := start(t, config(t, append(args, "--crdt-http-addr="+freeAddr(t))...))
	down.do("GET", "/v2/crdt/sync/o/d/e?token=t", upgrade, nil).fails(t, 503, "UNAVAILABLE", "Live sync (crdt) is unreachable; try again.")
}

// A run with a data directory keeps its data, and the dev credentials, across restarts.
func TestDataDirPersists(t *testing.T) {
	t.Parallel()
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
