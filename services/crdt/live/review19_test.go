package live

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/collab/collab/internal/yjs"
)

// A user whose debt passed MaxDebt (its connection closed with 4429) owes it still: a new
// connection of the same user must not get a frame applied before the budget refills (its
// frames "are read only as the budget refills"), else reconnecting makes the budget moot: each
// connection's first frame is free, whatever it costs.
func TestReview19NewConnectionPaysTheUsersDebt(t *testing.T) {
	log := &memLog{}
	_, url := newServerWith(t, log, Config{WorkRate: 1000, WorkBurst: 1000, MaxDebt: time.Second})
	keep := dial(t, url+"o/d/e", "view") // the room stays loaded, and the user's budget with it
	flush(t, keep)
	// One frame of 4,000 one-character insertions in separate places: some 5,000 steps, four
	// seconds of the rate past the burst.
	merged := scattered(t, 4000)
	costly := rawDial(t, url+"o/d/e", "edit")
	if err := costly.Write(context.Background(), websocket.MessageBinary, yjs.SyncFrame(yjs.SyncUpdate, merged)); err != nil {
		t.Fatal(err)
	}
	if code, reason := closedWith(t, costly); code != statusTooMany {
		t.Fatalf("closed with %d %q, want %d", code, reason, statusTooMany)
	}
	// The costly frame was within what one update may cost, so it is applied; its flush comes
	// after the close, so wait for it (the log's count read before it raced the flush).
	eventually(t, "the costly frame to reach the other client", func() bool { return len([]rune(keep.text())) == 4000 })
	n := log.count("o/d/e")
	// The same user again, at once: another costly frame.
	again := rawDial(t, url+"o/d/e", "edit")
	d := yjs.NewDocWithClient(7)
	u, _ := d.Replace("content", yjs.Text, strings.Repeat("y", 100))
	if err := again.Write(context.Background(), websocket.MessageBinary, yjs.SyncFrame(yjs.SyncUpdate, u)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if got := log.count("o/d/e"); got != n {
		t.Fatalf("a user seconds in debt had a new connection's first frame applied at once (log %d -> %d entries)", n, got)
	}
}

// costlyFrame is a sync update of about 5 MiB built to take as much work as one update may:
// insertions of a high client, right to left among the 6,000 characters of client, each
// scanning those before it (quadratic), and for padding a struct the room has already (client
// pad's first, dropped unread: it costs nothing, and raised the budget when the budget was
// counted in bytes, 16 steps a byte: some 80 million steps).
func costlyFrame(client, pad uint64, padText string) []byte {
	const n = 20000
	var e []byte
	e = append(e, 2)
	e = append(e, conflictingStructs(client, n, 6000)...)
	e = append(e, 1)
	e = appendUint(e, pad)
	e = append(e, 0, 4, 1)
	e = appendUint(e, uint64(len("content")))
	e = append(e, "content"...)
	e = appendUint(e, uint64(len(padText)))
	e = append(e, padText...)
	e = append(e, 0)
	return yjs.SyncFrame(yjs.SyncUpdate, e)
}

// One client's frame must not hold the room up for its other clients (docs/crdt.md, "Limits":
// "A limit reached by one client is that client's ... the room, its document and its other
// clients go on"). When the budget of one update was 16 steps a byte, a 5 MiB frame could take
// some 80 million steps, seconds of CPU, all under the room's lock.
func TestReview19OneFrameDoesNotStallTheRoom(t *testing.T) {
	log := &memLog{}
	_, url := newServer(t, log, nil)
	a := dial(t, url+"o/d/e", "edit")
	b := dial(t, url+"o/d/e", "edit")
	padText := strings.Repeat("p", 5<<20-400_000)
	pd := yjs.NewDocWithClient(5)
	pad, _ := pd.Replace("other", yjs.Text, padText)
	a.send(yjs.SyncFrame(yjs.SyncUpdate, pad))
	a.edit(strings.Repeat("a", 6000))
	eventually(t, "b has the text", func() bool { return len(b.text()) == 6000 })
	a.mu.Lock()
	client := a.doc.Client()
	a.mu.Unlock()
	attacker := rawDial(t, url+"o/d/e", "edit")
	frame := costlyFrame(client, 5, padText)
	if err := attacker.Write(context.Background(), websocket.MessageBinary, frame); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the server is applying it
	start := time.Now()
	b.edit("after")
	for a.text() != "after" {
		if time.Since(start) > 30*time.Second {
			t.Fatal("b's edit never reached a")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("one client's %d-byte frame held the room up: b's edit took %v to reach a", len(frame), took)
	}
}

// The bytes waiting to be written to all connections are bounded (MaxOutBytes) for the
// process; one user's connections that ask for a large document and never read must not take
// all of it: else every other client of the process is refused its answer ("The server is
// busy") or disconnected as too slow, by one user (docs/crdt.md, "Limits": "A limit reached
// by one client is that client's").
func TestReview19OneUserDoesNotTakeTheProcessOutBytes(t *testing.T) {
	log := &memLog{}
	h, url := newServerWith(t, log, Config{MaxOutBytes: 64 << 20})
	big := strings.Repeat("lorem ipsum ", 330_000) // 3.9 MB
	w := dial(t, url+"o/d/e", "edit")
	w.edit(big)
	flush(t, w)
	// 20 connections of one viewer: each asks for the whole document three times (the
	// kernel's buffers take the first answer or two) and never reads.
	for range 20 {
		ws := rawDial(t, url+"o/d/e", "viewer-greedy")
		for range 3 {
			if err := ws.Write(context.Background(), websocket.MessageBinary, []byte{0, 0, 1, 0}); err != nil {
				t.Fatal(err)
			}
		}
	}
	time.Sleep(time.Second)
	t.Logf("%d MiB wait to be written", h.outBytes.Load()>>20)
	other := dial(t, url+"o/d/e", "viewer-other")
	deadline := time.Now().Add(5 * time.Second)
	for other.text() != big {
		if other.end != nil || time.Now().After(deadline) {
			t.Fatalf("another user did not get the document (%v): %d MiB wait to be written for the first user's connections", other.end, h.outBytes.Load()>>20)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Every frame read costs its user's budget (a step per KiB at least), text frames too: the
// server reads them whole (up to MaxFrame) before it drops them.
func TestReview19TextFramesAreCharged(t *testing.T) {
	log := &memLog{}
	_, url := newServerWith(t, log, Config{WorkRate: 1000, WorkBurst: 1000, MaxDebt: time.Minute})
	ws := rawDial(t, url+"o/d/e", "edit")
	junk := strings.Repeat("j", 100<<10)
	for range 100 { // 10,000 steps: ten seconds of the rate
		if err := ws.Write(context.Background(), websocket.MessageText, []byte(junk)); err != nil {
			t.Fatal(err)
		}
	}
	d := yjs.NewDocWithClient(7)
	u, _ := d.Replace("content", yjs.Text, "after the junk")
	if err := ws.Write(context.Background(), websocket.MessageBinary, yjs.SyncFrame(yjs.SyncUpdate, u)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if n := log.count("o/d/e"); n != 0 {
		t.Fatal("10 MB of text frames cost their user nothing: its update was applied at once")
	}
}

// A refused update's work is its user's too: an update refused as too costly took all the work
// it was allowed (seconds of CPU for the largest), and its connection's end must not wipe the
// slate (a new connection of the user would send another at once).
func TestReview19RefusedWorkIsCharged(t *testing.T) {
	log := &memLog{}
	_, url := newServerWith(t, log, Config{WorkRate: 1000, WorkBurst: 1000, MaxDebt: time.Hour})
	a := dial(t, url+"o/d/e", "view")
	flush(t, a)
	w := rawDial(t, url+"o/d/e", "edit")
	base := yjs.NewDocWithClient(5)
	u, _ := base.Replace("content", yjs.Text, strings.Repeat("a", 6000))
	if err := w.Write(context.Background(), websocket.MessageBinary, yjs.SyncFrame(yjs.SyncUpdate, u)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a has the text", func() bool { return len(a.text()) == 6000 })
	w.CloseNow()
	time.Sleep(50 * time.Millisecond)
	// Insertions of a higher client right to left at one place (as
	// TestRefusedUpdateEndsOnlyItsSender): past the work budget of one update.
	evil := rawDial(t, url+"o/d/e", "edit")
	if err := evil.Write(context.Background(), websocket.MessageBinary, yjs.SyncFrame(yjs.SyncUpdate, conflicting(5, 5000, 6000))); err != nil {
		t.Fatal(err)
	}
	if code, _ := closedWith(t, evil); code != statusMalformed {
		t.Fatalf("closed with %d, want %d", code, statusMalformed)
	}
	before := log.count("o/d/e")
	again := rawDial(t, url+"o/d/e", "edit")
	d := yjs.NewDocWithClient(7)
	small, _ := d.Replace("other", yjs.Text, "small")
	if err := again.Write(context.Background(), websocket.MessageBinary, yjs.SyncFrame(yjs.SyncUpdate, small)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if got := log.count("o/d/e"); got != before {
		t.Fatal("after an update refused as too costly (some 500,000 steps, 500 s of the rate), the user's next connection was served at once")
	}
}
