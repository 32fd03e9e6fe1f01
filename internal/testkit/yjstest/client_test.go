package yjstest

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"
)

// startRefServer starts e2e/yjs/refserver.mjs (the reference y-websocket server) for the test
// and returns its ws:// base URL.
func startRefServer(t *testing.T) string {
	t.Helper()
	env, err := prepare()
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan []byte, 1)
	p, err := startProc(env, func(line []byte) {
		select {
		case first <- line:
		default:
		}
	}, "refserver.mjs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.stop(5 * time.Second) })
	var hello struct {
		Port int `json:"port"`
	}
	select {
	case line := <-first:
		if err := json.Unmarshal(line, &hello); err != nil || hello.Port == 0 {
			t.Fatalf("refserver.mjs said %q (%v)", line, err)
		}
	case <-p.exited:
		t.Fatalf("refserver.mjs exited%s", p.exitInfo())
	case <-time.After(30 * time.Second):
		t.Fatalf("refserver.mjs did not say its port within 30 s; stderr:\n%s", p.stderr)
	}
	return "ws://127.0.0.1:" + strconv.Itoa(hello.Port) + "/v2/crdt/sync"
}

func next(t *testing.T, ctx context.Context, c *Client, name string) map[string]any {
	t.Helper()
	ev, err := c.Next(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func send(t *testing.T, c *Client, cmd map[string]any) {
	t.Helper()
	if err := c.Send(cmd); err != nil {
		t.Fatal(err)
	}
}

// waitAwareness waits for an awareness event of c in which client holds state["user"] == user.
func waitAwareness(t *testing.T, ctx context.Context, c *Client, user string) map[string]any {
	t.Helper()
	for {
		ev := next(t, ctx, c, "awareness")
		states, _ := ev["states"].(map[string]any)
		for _, s := range states {
			if m, ok := s.(map[string]any); ok && m["user"] == user {
				return states
			}
		}
	}
}

// TestClientWithReferenceServer: two clients in one room of the reference y-websocket server
// see each other's edits and awareness, and agree on the document.
func TestClientWithReferenceServer(t *testing.T) {
	url := startRefServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	a := StartClient(t, url, "org/doc/editor", "token-a")
	b := StartClient(t, url, "org/doc/editor", "token-b")
	other := StartClient(t, url, "org/other/editor", "token-c") // another room sees nothing
	for _, c := range []*Client{a, b, other} {
		if ev := next(t, ctx, c, "status"); ev["status"] != "connected" {
			t.Fatalf("first status event %v, want connected", ev)
		}
		next(t, ctx, c, "synced")
	}

	send(t, a, map[string]any{"cmd": "awareness", "state": map[string]any{"user": "alice", "cursor": 3}})
	send(t, b, map[string]any{"cmd": "awareness", "state": map[string]any{"user": "bob"}})
	waitAwareness(t, ctx, b, "alice")
	waitAwareness(t, ctx, a, "bob")

	send(t, a, map[string]any{"cmd": "insertText", "root": "content", "index": 0, "text": "hello"})
	if ev := next(t, ctx, a, "update"); ev["origin"] != "local" {
		t.Fatalf("a's update event %v, want origin local", ev)
	}
	if ev := next(t, ctx, b, "update"); ev["origin"] != "remote" {
		t.Fatalf("b's update event %v, want origin remote", ev)
	}
	send(t, b, map[string]any{"cmd": "insertText", "root": "content", "index": 5, "text": " world", "attributes": map[string]any{"bold": true}})
	send(t, b, map[string]any{"cmd": "setMap", "root": "meta", "key": "bin", "value": map[string]any{"$bytes": "AAEC"}})
	next(t, ctx, a, "update")
	next(t, ctx, a, "update")

	roots := []Root{{"content", "text"}, {"meta", "map"}}
	va, err := a.View(ctx, roots)
	if err != nil {
		t.Fatal(err)
	}
	vb, err := b.View(ctx, roots)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "a's view against b's", va, vb)
	if va.JSON["content"] != "hello world" {
		t.Fatalf("a's text is %q, want \"hello world\"", va.JSON["content"])
	}
	if ok, d := ViewEqual(View{JSON: map[string]any{"m": va.JSON["meta"]}},
		View{JSON: map[string]any{"m": map[string]any{"bin": []byte{0, 1, 2}}}}); !ok {
		t.Fatalf("the map: %s", d)
	}
	delta, _ := va.Delta["content"].([]any)
	if len(delta) != 2 {
		t.Fatalf("a's delta is %v, want hello and a bold world", va.Delta["content"])
	}
	vo, err := other.View(ctx, roots)
	if err != nil {
		t.Fatal(err)
	}
	if vo.JSON["content"] != "" || len(vo.StateVector) != 0 {
		t.Fatalf("the other room's doc is %v", vo)
	}

	// A bad command is an error event, and the client goes on.
	send(t, a, map[string]any{"cmd": "fly"})
	if ev := next(t, ctx, a, "error"); ev["error"] == nil {
		t.Fatalf("error event %v", ev)
	}

	// When b leaves, a sees it go from the awareness states, and b reports its close.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, ctx, b, "close"); ev["local"] != true {
		t.Fatalf("b's close event %v, want a local close", ev)
	}
	for {
		states, _ := next(t, ctx, a, "awareness")["states"].(map[string]any)
		bobThere := false
		for _, s := range states {
			if m, ok := s.(map[string]any); ok && m["user"] == "bob" {
				bobThere = true
			}
		}
		if !bobThere {
			break
		}
	}
}

// TestClientRefused: a permission-denied auth message and a refused upgrade are reported, with
// each close.
func TestClientRefused(t *testing.T) {
	url := startRefServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	denied := StartClient(t, url, "org/doc/editor", "deny")
	if ev := next(t, ctx, denied, "permission-denied"); ev["reason"] == "" {
		t.Fatalf("permission-denied event %v, want a reason", ev)
	}
	ev := next(t, ctx, denied, "close")
	if code, _ := ev["code"].(json.Number); code != "4403" || ev["reason"] != "forbidden" || ev["local"] != false {
		t.Fatalf("close event %v, want code 4403, reason forbidden", ev)
	}
	// 4403 is in y-websocket's 4400-4499 range: it stops reconnecting.
	if ev := next(t, ctx, denied, "closed"); ev["code"] != json.Number("4403") {
		t.Fatalf("closed event %v", ev)
	}

	rejected := StartClient(t, url, "org/doc/editor", "reject", WithoutReconnect())
	if ev := next(t, ctx, rejected, "connection-error"); ev["message"] != "Unexpected server response: 401" {
		t.Fatalf("connection-error event %v", ev)
	}
	if ev := next(t, ctx, rejected, "close"); ev["code"] != json.Number("1006") {
		t.Fatalf("close event %v, want code 1006", ev)
	}
	next(t, ctx, rejected, "closed")
	for _, e := range rejected.Events() {
		if e["event"] == "status" && e["status"] == "connected" {
			t.Fatalf("a rejected client reported connected: %v", rejected.Events())
		}
	}
}
