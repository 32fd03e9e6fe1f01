package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/collab/collab/internal/testkit/yjstest"
)

// token generates a token for user with a role on document d of organization o (Generate
// Token v2 grants it first); role "" grants nothing.
func (s *system) syncToken(t *testing.T, k map[string]string, user, role string) string {
	t.Helper()
	body := map[string]any{"userId": user, "userProperties": map[string]any{"name": user, "email": user + "@example.com"}}
	if role != "" {
		body["permissions"] = map[string]any{"resources": []any{map[string]any{"type": "document", "id": "d", "organizationId": "o", "accessRole": role}}}
	}
	return s.call("/v2/auth/generate_token", k, body).data(t, "Token generated successfully.")["token"].(string)
}

func (s *system) syncURL() string {
	return "ws" + strings.TrimPrefix(s.base, "http") + "/v2/crdt/sync"
}

var contentRoot = []yjstest.Root{{Name: "content", Kind: "text"}}

// waitText waits until the client's text reads want.
func waitText(t *testing.T, c *yjstest.Client, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		v, err := c.View(ctx, contentRoot)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if v.JSON["content"] == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("client reads %q, want %q", v.JSON["content"], want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// restText reads the editor's text through Get CRDT Data.
func (s *system) restText(t *testing.T, k map[string]string) string {
	t.Helper()
	rows := s.crdtRows(t, k, map[string]any{"organizationId": "o", "documentId": "d", "editorId": "e"})
	row, ok := rows["e"]
	if !ok {
		return ""
	}
	return row["data"].(string)
}

func next(t *testing.T, c *yjstest.Client, event string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev, err := c.Next(ctx, event)
	if err != nil {
		t.Fatalf("waiting for %s: %v", event, err)
	}
	return ev
}

// Real y-websocket clients (yjs and y-websocket from npm) against the live sync route: an
// editor's client receives a REST change live, its own edits are stored and read back by Get
// CRDT Data, a viewer's client sees them and the editor's awareness but its own edits are not
// applied, and a bad token or a user without access gets permission-denied and a closed
// socket.
func TestCrdtLiveSyncWithYjsClients(t *testing.T) { onBothStores(t, testCrdtLiveSync) }

func testCrdtLiveSync(t *testing.T, s *system) {
	k := s.devKey()
	s.call("/v2/organizations/documents/add", k, map[string]any{"organizationId": "o", "createOrganization": true,
		"documents": []any{map[string]any{"documentId": "d", "documentName": "D"}}}).data(t, "")
	// Restricted: only users granted a role may read (a public document lets any token view).
	s.call("/v1/organizations/documents/access/update", k, map[string]any{"organizationId": "o", "documentIds": []string{"d"}, "accessType": "restricted"}).data(t, "")
	s.call("/v2/crdt/add", k, map[string]any{"organizationId": "o", "documentId": "d", "editorId": "e", "data": "hello", "type": "text"}).data(t, "CRDT data added successfully.")

	editor := yjstest.StartClient(t, s.syncURL(), "o/d/e", s.syncToken(t, k, "ed", "editor"))
	next(t, editor, "synced")
	waitText(t, editor, "hello")

	// A REST change reaches the connected client.
	statusOnly(t, s.call("/v2/crdt/update", k, map[string]any{"organizationId": "o", "documentId": "d", "editorId": "e", "data": "hello world", "type": "text"}), "CRDT data updated successfully.")
	waitText(t, editor, "hello world")

	// The client's edit is stored: Get CRDT Data reads it.
	if err := editor.Send(map[string]any{"cmd": "insertText", "root": "content", "index": 0, "text": ">> "}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.restText(t, k) != ">> hello world" {
		if time.Now().After(deadline) {
			t.Fatalf("Get CRDT Data reads %q after the client's edit", s.restText(t, k))
		}
		time.Sleep(20 * time.Millisecond)
	}

	// A viewer sees the editor's edits and awareness; its own edits are not applied.
	viewer := yjstest.StartClient(t, s.syncURL(), "o/d/e", s.syncToken(t, k, "vi", "viewer"))
	next(t, viewer, "synced")
	waitText(t, viewer, ">> hello world")
	if err := editor.Send(map[string]any{"cmd": "awareness", "state": map[string]any{"user": "ed", "cursor": 3}}); err != nil {
		t.Fatal(err)
	}
	for {
		ev := next(t, viewer, "awareness")
		b, _ := json.Marshal(ev["states"])
		if strings.Contains(string(b), `"user":"ed"`) {
			break
		}
	}
	if err := editor.Send(map[string]any{"cmd": "insertText", "root": "content", "index": 0, "text": "A"}); err != nil {
		t.Fatal(err)
	}
	waitText(t, viewer, "A>> hello world")
	if err := viewer.Send(map[string]any{"cmd": "insertText", "root": "content", "index": 0, "text": "VIEWER"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	waitText(t, editor, "A>> hello world")
	if got := s.restText(t, k); got != "A>> hello world" {
		t.Fatalf("a viewer's edit reached the data: %q", got)
	}
	// The editor leaves: its awareness is removed for the viewer.
	if err := editor.Close(); err != nil {
		t.Fatal(err)
	}
	for {
		ev := next(t, viewer, "awareness")
		b, _ := json.Marshal(ev["states"])
		if !strings.Contains(string(b), `"user":"ed"`) {
			break
		}
	}

	// Deleting the data closes its clients with 4410, which y-websocket does not retry: an
	// editor's client does not write its copy back.
	keeper := yjstest.StartClient(t, s.syncURL(), "o/d/e", s.syncToken(t, k, "ed", "editor"))
	next(t, keeper, "synced")
	s.call("/v2/crdt/delete", k, map[string]any{"organizationId": "o", "documentId": "d", "editorId": "e"}).data(t, "CRDT data deleted successfully.")
	for _, c := range []*yjstest.Client{keeper, viewer} {
		if closed := next(t, c, "close"); fmt.Sprint(closed["code"]) != "4410" {
			t.Fatalf("closed with %v after the deletion", closed)
		}
	}
	time.Sleep(500 * time.Millisecond)
	s.call("/v2/crdt/get", k, map[string]any{"organizationId": "o", "documentId": "d", "editorId": "e"}).fails(t, 404, "NOT_FOUND", "No CRDT data found for this editor ID.")

	// Refusals: a forged token, a user without access, a document that does not exist.
	forged := s.syncToken(t, k, "ed", "editor")
	forged = forged[:len(forged)-4] + "AAAA"
	for _, c := range []struct{ name, room, token, reason string }{
		{"forged token", "o/d/e", forged, "Token signature is invalid."},
		{"no access", "o/d/e", s.syncToken(t, k, "stranger", ""), "You do not have access to this document."},
		{"unknown document", "o/nope/e", s.syncToken(t, k, "ed", "editor"), "Document does not exist."},
		{"no token", "o/d/e", "", "A token is required: pass the JWT of Generate Token as the token query parameter."},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := yjstest.StartClient(t, s.syncURL(), c.room, c.token, yjstest.WithoutReconnect())
			ev := next(t, cl, "permission-denied")
			if ev["reason"] != c.reason {
				t.Fatalf("reason %q, want %q", ev["reason"], c.reason)
			}
			closed := next(t, cl, "close")
			if fmt.Sprint(closed["code"]) != "4403" {
				t.Fatalf("closed with %v", closed)
			}
		})
	}
}
