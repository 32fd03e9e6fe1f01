package live

import (
	"context"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/collab/collab/internal/testkit/yjstest"
	"github.com/collab/collab/internal/yjs"
)

// editors authorizes "editor-NAME" as a writer named NAME.
func editors(_ context.Context, token, org, doc, editor string) (Grant, error) {
	if user, ok := strings.CutPrefix(token, "editor-"); ok {
		return Grant{Key: org + "/" + doc + "/" + editor, CanWrite: true, UserID: user}, nil
	}
	return Grant{}, &DeniedError{Reason: "Token is malformed."}
}

// editorsServer is a hub whose tokens are editors (editors) with cfg's limits, its log and its
// live-sync URL.
func editorsServer(t *testing.T, cfg Config) (*Hub, *memLog, string) {
	t.Helper()
	log := &memLog{}
	cfg.Log, cfg.Authorize, cfg.Prefix, cfg.Poll, cfg.Idle = log, editors, "/v2/crdt/sync/", 20*time.Millisecond, time.Minute
	h := New(cfg)
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.Close() })
	return h, log, "ws" + strings.TrimPrefix(srv.URL, "http") + "/v2/crdt/sync/"
}

// aliceWrites connects a real y-websocket client as alice, has it write "alice", and returns
// it with its view (its state vector names its client id).
func aliceWrites(t *testing.T, ctx context.Context, url string) (*yjstest.Client, yjstest.View) {
	t.Helper()
	alice := yjstest.StartClient(t, url, "o/d/e", "editor-alice")
	if _, err := alice.Next(ctx, "synced"); err != nil {
		t.Fatal(err)
	}
	if err := alice.Send(map[string]any{"cmd": "insertText", "root": "content", "index": 0, "text": "alice"}); err != nil {
		t.Fatal(err)
	}
	view, err := alice.View(ctx, []yjstest.Root{{Name: "content", Kind: "text"}})
	if err != nil {
		t.Fatal(err)
	}
	return alice, view
}

// storedText is the text of o/d/e as the log holds it.
func storedText(t *testing.T, ctx context.Context, log *memLog) string {
	t.Helper()
	parts, _, _ := log.Load(ctx, "o/d/e")
	d := yjs.NewDoc()
	for _, p := range parts {
		if err := d.Apply(p); err != nil {
			t.Fatal(err)
		}
	}
	return d.JSON("content", yjs.Text).(string)
}

// spoofOf is a frame that writes "alice, says mallory" under client's id at its next clock,
// made on the document the log holds.
func spoofOf(t *testing.T, ctx context.Context, log *memLog, client uint64) []byte {
	t.Helper()
	parts, _, _ := log.Load(ctx, "o/d/e")
	d := yjs.NewDocWithClient(client)
	for _, p := range parts {
		if err := d.Apply(p); err != nil {
			t.Fatal(err)
		}
	}
	u, err := d.Replace("content", yjs.Text, "alice, says mallory")
	if err != nil {
		t.Fatal(err)
	}
	return yjs.SyncFrame(yjs.SyncUpdate, u)
}

// refusedAsForeign waits for the server to close ws with 4403 and errForeignClient's reason.
func refusedAsForeign(t *testing.T, ws *websocket.Conn, what string) {
	t.Helper()
	if code, reason := closedWith(t, ws); code != statusDenied || reason != errForeignClient.Error() {
		t.Fatalf("%s: closed with %d %q, want %d %q", what, code, reason, statusDenied, errForeignClient)
	}
}

// A writer cannot write under another user's client id: a real y-websocket client announces its
// id in awareness when it connects, and an update of another user that adds structs under it
// (at the clocks the client writes next, which would make the room and every peer drop the
// client's next edit as already held) is refused with 4403 and changes nothing, during the
// client's connection and after it; the client's own edits all arrive. The same user's other
// connection (another tab) may, and the other user's own edits go through.
func TestAnotherUsersClientIDIsNotWritten(t *testing.T) {
	_, log, url := editorsServer(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()

	alice, view := aliceWrites(t, ctx, url)
	if len(view.StateVector) != 1 {
		t.Fatalf("alice's state vector %v", view.StateVector)
	}
	var client uint64
	for id := range view.StateVector {
		client, _ = strconv.ParseUint(id, 10, 64)
	}
	stored := func() string { return storedText(t, ctx, log) }
	eventually(t, "alice's edit stored", func() bool { return stored() == "alice" })

	// mallory writes under alice's id at alice's next clock: refused, nothing stored.
	spoof := func() []byte { return spoofOf(t, ctx, log, client) }
	refused := func(name string) {
		t.Helper()
		ws := rawDial(t, url+"o/d/e", "editor-mallory")
		if err := ws.Write(ctx, websocket.MessageBinary, spoof()); err != nil {
			t.Fatal(err)
		}
		refusedAsForeign(t, ws, name)
	}
	refused("while alice is connected")
	if err := alice.Send(map[string]any{"cmd": "insertText", "root": "content", "index": 5, "text": " again"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "alice's second edit stored", func() bool { return stored() == "alice again" })

	// mallory's own edits go through.
	mallory := dial(t, url+"o/d/e", "editor-mallory")
	eventually(t, "mallory has the text", func() bool { return mallory.text() == "alice again" })
	mallory.edit("alice again, mallory")
	eventually(t, "mallory's edit stored", func() bool { return stored() == "alice again, mallory" })

	// Once alice left, her id stays hers for the room's life (her provider reconnects with it).
	if err := alice.Close(); err != nil {
		t.Fatal(err)
	}
	refused("after alice left")
	if got := stored(); got != "alice again, mallory" {
		t.Fatalf("stored %q", got)
	}
	// Nor may mallory take over her presence: the room holds mallory's own id only.
	mallory.send(yjs.AwarenessFrame([]yjs.AwarenessState{{Client: client, Clock: 9, State: []byte(`{"user":"alice"}`)},
		{Client: 4242, Clock: 1, State: []byte(`{"user":"mallory"}`)}}))
	mallory.send([]byte{yjs.MessageQueryAwareness})
	for m := range mallory.got { // the answer to the query: the first frame holding 4242
		if !slices.ContainsFunc(m.Awareness, func(s yjs.AwarenessState) bool { return s.Client == 4242 }) {
			continue
		}
		if len(m.Awareness) != 1 {
			t.Fatalf("the room's awareness is %+v, want mallory's client 4242 alone", m.Awareness)
		}
		break
	}

	// Another connection of alice's (a second tab carrying the first's edits) may.
	tab := rawDial(t, url+"o/d/e", "editor-alice")
	if err := tab.Write(ctx, websocket.MessageBinary, spoof()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "alice's other tab's edit stored", func() bool { return stored() == "alice, says mallory" })
}

// A writer cannot delete another user's client's next edits before they are written: a
// deleted range at clocks the room does not hold would wait in the room (and in every peer it
// is relayed to) and delete the client's edits as they arrive, whoever sent it gone long
// since. Refused with 4403; the real y-websocket client's next edit is stored and reaches a
// peer whole. Deleting the text the client wrote stays an ordinary edit.
func TestAnotherUsersNextClocksAreNotDeleted(t *testing.T) {
	_, log, url := editorsServer(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()

	alice, view := aliceWrites(t, ctx, url)
	var client, clock uint64
	for id, c := range view.StateVector {
		client, _ = strconv.ParseUint(id, 10, 64)
		clock = c
	}
	stored := func() string { return storedText(t, ctx, log) }
	eventually(t, "alice's edit stored", func() bool { return stored() == "alice" })
	peer := dial(t, url+"o/d/e", "editor-bob")
	eventually(t, "bob has the text", func() bool { return peer.text() == "alice" })

	// mallory deletes alice's next million clocks: refused, nothing stored or relayed.
	ws := rawDial(t, url+"o/d/e", "editor-mallory")
	var pre []byte
	pre = appendUint(append(pre, 0, 1), client) // no structs; one client's deletions
	pre = appendUint(appendUint(appendUint(pre, 1), clock), 1<<20)
	if err := ws.Write(ctx, websocket.MessageBinary, yjs.SyncFrame(yjs.SyncUpdate, pre)); err != nil {
		t.Fatal(err)
	}
	if err := alice.Send(map[string]any{"cmd": "insertText", "root": "content", "index": 5, "text": " again"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "alice's second edit stored", func() bool { return stored() == "alice again" })
	eventually(t, "bob has alice's second edit", func() bool { return peer.text() == "alice again" })
	refusedAsForeign(t, ws, "deleting alice's next clocks")

	// bob deletes alice's text: an edit like any other.
	peer.edit("again")
	eventually(t, "bob's deletion stored", func() bool { return stored() == "again" })
}

// A client id is claimed when announced even when the room's presence is full and its state is
// not kept: else a writer who fills the room's presence (its own states, up to the room's
// bytes) leaves every client announced after it unclaimed, and writes under their ids.
func TestClientIDIsClaimedWhenPresenceIsFull(t *testing.T) {
	_, log, url := editorsServer(t, Config{MaxAwarenessRoom: 8 << 10})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	mallory := dial(t, url+"o/d/e", "editor-mallory")
	full := []byte(`{"x":"` + strings.Repeat("m", 8<<10-8) + `"}`)
	mallory.send(yjs.AwarenessFrame([]yjs.AwarenessState{{Client: 4242, Clock: 1, State: full}}))
	alice := dial(t, url+"o/d/e", "editor-alice")
	waitAwareness(t, alice, func(s yjs.AwarenessState) bool { return s.Client == 4242 })
	client := alice.doc.Client()
	alice.send(yjs.AwarenessFrame([]yjs.AwarenessState{{Client: client, Clock: 1, State: []byte(`{"user":"alice"}`)}}))
	alice.edit("alice")
	eventually(t, "alice's edit stored", func() bool { return log.count("o/d/e") == 1 })

	ws := rawDial(t, url+"o/d/e", "editor-mallory")
	if err := ws.Write(ctx, websocket.MessageBinary, spoofOf(t, ctx, log, client)); err != nil {
		t.Fatal(err)
	}
	refusedAsForeign(t, ws, "mallory under alice's id")
	alice.edit("alice again")
	eventually(t, "alice's second edit reaches mallory's other connection", func() bool { return mallory.text() == "alice again" })
}

// A room's claims stay bounded over its life: every page load of every reader is a new id
// (each user up to maxOwnedPerUser), and a room that never goes idle would hold them all. The
// ids of users gone from the room that hold nothing in the document are forgotten once the
// claims pass claimsKept; an id that wrote stays its user's after the user left.
func TestClaimsOfGoneReadersAreForgotten(t *testing.T) {
	h, log, url := editorsServer(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	alice := dial(t, url+"o/d/e", "editor-alice")
	client := alice.doc.Client()
	alice.send(yjs.AwarenessFrame([]yjs.AwarenessState{{Client: client, Clock: 1, State: []byte(`{"user":"alice"}`)}}))
	alice.edit("alice")
	eventually(t, "alice's edit stored", func() bool { return log.count("o/d/e") == 1 })
	alice.ws.Close(websocket.StatusNormalClosure, "")

	readers := 2*claimsKept/maxOwnedPerUser + 2
	for i := range readers {
		ws := rawDial(t, url+"o/d/e", "editor-r"+strconv.Itoa(i))
		states := make([]yjs.AwarenessState, maxOwnedPerUser)
		for k := range states {
			states[k] = yjs.AwarenessState{Client: uint64(1<<33 + i*maxOwnedPerUser + k), Clock: 1, State: []byte(`{}`)}
		}
		if err := ws.Write(ctx, websocket.MessageBinary, yjs.AwarenessFrame(states)); err != nil {
			t.Fatal(err)
		}
		if err := ws.Close(websocket.StatusNormalClosure, ""); err != nil {
			t.Fatal(err)
		}
	}
	h.mu.Lock()
	r := h.rms["o/d/e"]
	h.mu.Unlock()
	claims := func() int {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.owners)
	}
	eventually(t, "the readers' claims forgotten", func() bool { return h.Conns() == 0 && claims() <= claimsKept })

	// alice's id, which wrote, is still hers.
	ws := rawDial(t, url+"o/d/e", "editor-mallory")
	if err := ws.Write(ctx, websocket.MessageBinary, spoofOf(t, ctx, log, client)); err != nil {
		t.Fatal(err)
	}
	refusedAsForeign(t, ws, "mallory under alice's id")
}
