package live

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/collab/collab/internal/yjs"
)

// The tests here hold live sync to its limits (docs/crdt.md, "Limits") against clients that
// try to make the server hold or do more than they may. None runs in parallel: some measure
// the heap.

// newServerWith is newServer with the limits of cfg (its other fields as newServer's).
func newServerWith(t *testing.T, log Log, cfg Config) (*Hub, string) {
	cfg.Log, cfg.Authorize, cfg.Prefix = log, authorize, "/v2/crdt/sync/"
	cfg.Poll, cfg.Idle, cfg.EventEvery = 20*time.Millisecond, 50*time.Millisecond, 30*time.Millisecond
	h := New(cfg)
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.Close() })
	return h, "ws" + strings.TrimPrefix(srv.URL, "http") + "/v2/crdt/sync/"
}

// rawDial connects a socket that sends what the test writes and reads nothing unless asked.
func rawDial(t *testing.T, url, token string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url+"?token="+token, nil)
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(64 << 20)
	t.Cleanup(func() { ws.CloseNow() })
	return ws
}

// closedWith reads ws until the server closes it and returns the code and reason.
func closedWith(t *testing.T, ws *websocket.Conn) (websocket.StatusCode, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		if _, _, err := ws.Read(ctx); err != nil {
			if ctx.Err() != nil {
				t.Fatal("the connection stayed open")
			}
			var ce websocket.CloseError
			if errors.As(err, &ce) {
				return ce.Code, ce.Reason
			}
			return -1, err.Error()
		}
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// A client that asks for the whole document again and again (a 4-byte sync step 1, an empty
// state vector) and never reads gets one answer at a time: the answers are made when they can
// be written, not queued. Nobody else notices.
func TestRepeatedStepOnesCoalesce(t *testing.T) {
	log := &memLog{}
	h, url := newServer(t, log, nil)
	big := strings.Repeat("lorem ipsum ", 330_000) // 3.9 MB
	w := dial(t, url+"o/d/e", "edit")
	w.edit(big)
	reader := dial(t, url+"o/d/e", "view")
	eventually(t, "the reader has the text", func() bool { return reader.text() == big })
	before := heapInUse()
	var attackers []*websocket.Conn
	for range 3 {
		ws := rawDial(t, url+"o/d/e", "view")
		attackers = append(attackers, ws)
		for range 500 {
			if err := ws.Write(context.Background(), websocket.MessageBinary, []byte{0, 0, 1, 0}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The server has read all of them once a later step 1 of the reader is answered.
	time.Sleep(300 * time.Millisecond)
	w.edit(big + "!")
	eventually(t, "an edit reaches the reader meanwhile", func() bool { return reader.text() == big+"!" })
	after := heapInUse()
	held := h.outBytes.Load()
	t.Logf("heap %d MiB -> %d MiB, %d MiB waiting to be written", before>>20, after>>20, held>>20)
	// Each attacker holds at most the answer being written and one more (3 x 2 x 4 MB); a queue
	// of 500 answers was 2 GB each.
	if held > 3*2*5<<20 {
		t.Fatalf("%d bytes wait to be written", held)
	}
	if after > before+128<<20 {
		t.Fatalf("the heap grew from %d MiB to %d MiB", before>>20, after>>20)
	}
	for _, ws := range attackers {
		ws.CloseNow()
	}
}

// Awareness states are small JSON: one past MaxAwarenessState closes its connection with
// 4413, and a room holds at most MaxAwarenessRoom bytes of them, so a joiner's first frame
// stays small whatever the others sent.
func TestAwarenessIsBounded(t *testing.T) {
	_, url := newServerWith(t, &memLog{}, Config{MaxAwarenessRoom: 64 << 10})
	big := rawDial(t, url+"o/d/e", "view")
	state := []byte(`{"x":"` + strings.Repeat("a", 9<<10) + `"}`)
	if err := big.Write(context.Background(), websocket.MessageBinary, yjs.AwarenessFrame([]yjs.AwarenessState{{Client: 7, Clock: 1, State: state}})); err != nil {
		t.Fatal(err)
	}
	if code, _ := closedWith(t, big); code != statusTooLarge {
		t.Fatalf("closed with %d, want %d", code, statusTooLarge)
	}
	// 40 connections of 4 clients with 7 KiB each: 1.1 MiB offered, 64 KiB kept.
	seven := []byte(`{"x":"` + strings.Repeat("b", 7<<10) + `"}`)
	for i := range 40 {
		ws := rawDial(t, url+"o/d/e", "viewer-"+strconv.Itoa(i))
		var states []yjs.AwarenessState
		for k := range 4 {
			states = append(states, yjs.AwarenessState{Client: uint64(100 + 4*i + k), Clock: 1, State: seven})
		}
		if err := ws.Write(context.Background(), websocket.MessageBinary, yjs.AwarenessFrame(states)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	joiner := dial(t, url+"o/d/e", "view")
	timeout := time.After(5 * time.Second)
	for {
		select {
		case m := <-joiner.got:
			if m.Type != yjs.MessageAwareness {
				continue
			}
			n := 0
			for _, s := range m.Awareness {
				n += len(s.State)
			}
			if n > 64<<10 || len(m.Awareness) < 5 {
				t.Fatalf("the joiner got %d states of %d bytes", len(m.Awareness), n)
			}
			return
		case <-timeout:
			t.Fatal("no awareness for the joiner")
		}
	}
}

// One user may hold MaxConnsPerUser connections to a room; the next is refused with 4429 and
// other users still connect.
func TestConnectionsPerUserAreBounded(t *testing.T) {
	_, url := newServerWith(t, &memLog{}, Config{MaxConnsPerUser: 5})
	for range 5 {
		flush(t, dial(t, url+"o/d/e", "edit")) // admitted and served before the next
	}
	extra := rawDial(t, url+"o/d/e", "edit")
	if code, reason := closedWith(t, extra); code != statusTooMany {
		t.Fatalf("closed with %d %q, want %d", code, reason, statusTooMany)
	}
	other := dial(t, url+"o/d/e", "view")
	flush(t, other)
	// Another room of the same user is another count.
	flush(t, dial(t, url+"o/d/e2", "edit"))
}

// An update whose document would pass the encoded limit is refused with 4413, leaves the
// document as it was, and the other clients stay connected and keep editing.
func TestUpdatePastTheSizeLimitIsRefused(t *testing.T) {
	log := &memLog{}
	_, url := newServerWith(t, log, Config{Limits: yjs.Limits{MaxEncoded: 1 << 20}})
	a := dial(t, url+"o/d/e", "edit")
	b := dial(t, url+"o/d/e", "edit")
	a.edit("small")
	eventually(t, "b has a's edit", func() bool { return b.text() == "small" })
	huge := rawDial(t, url+"o/d/e", "edit")
	d := yjs.NewDocWithClient(99)
	u, _ := d.Replace("content", yjs.Text, strings.Repeat("x", 2<<20))
	if err := huge.Write(context.Background(), websocket.MessageBinary, yjs.SyncFrame(yjs.SyncUpdate, u)); err != nil {
		t.Fatal(err)
	}
	if code, _ := closedWith(t, huge); code != statusTooLarge {
		t.Fatalf("closed with %d, want %d", code, statusTooLarge)
	}
	b.edit("small, then more")
	eventually(t, "a has b's edit", func() bool { return a.text() == "small, then more" })
	if n := log.count("o/d/e"); n != 2 {
		t.Fatalf("the log holds %d updates", n)
	}
}

// A frame past MaxFrame is refused with 4413 (not the library's 1009, on which y-websocket
// reconnects and sends it again).
func TestFramePastTheLimitIsRefused(t *testing.T) {
	_, url := newServerWith(t, &memLog{}, Config{MaxFrame: 1 << 10})
	ws := rawDial(t, url+"o/d/e", "edit")
	if err := ws.Write(context.Background(), websocket.MessageBinary, yjs.SyncFrame(yjs.SyncUpdate, make([]byte, 2<<10))); err != nil {
		t.Fatal(err)
	}
	if code, _ := closedWith(t, ws); code != statusTooLarge {
		t.Fatalf("closed with %d, want %d", code, statusTooLarge)
	}
}

// A refused update (too costly) ends only its sender's connection: the room keeps its
// document (the refusal changed nothing), and the others are not disconnected.
func TestRefusedUpdateEndsOnlyItsSender(t *testing.T) {
	log := &memLog{}
	_, url := newServer(t, log, nil)
	a := dial(t, url+"o/d/e", "edit")
	a.edit(strings.Repeat("a", 6000))
	b := dial(t, url+"o/d/e", "edit")
	eventually(t, "b has the text", func() bool { return len(b.text()) == 6000 })
	a.mu.Lock()
	client := a.doc.Client()
	a.mu.Unlock()
	evil := rawDial(t, url+"o/d/e", "edit")
	if err := evil.Write(context.Background(), websocket.MessageBinary, yjs.SyncFrame(yjs.SyncUpdate, conflicting(client, 5000, 6000))); err != nil {
		t.Fatal(err)
	}
	if code, _ := closedWith(t, evil); code != statusMalformed {
		t.Fatalf("closed with %d, want %d", code, statusMalformed)
	}
	b.edit("after")
	eventually(t, "a has b's edit", func() bool { return a.text() == "after" })
	if b.end != nil || a.end != nil {
		t.Fatalf("an honest client was disconnected: %v %v", a.end, b.end)
	}
}

// conflicting is the structs of an update (a header for one client, clock 0, and the structs;
// no delete set): n one-character insertions by a client above every uint32 id, each right
// after a character of client of, right to left (clocks n-1 down to 0, modulo span): each
// insertion scans all those before it, quadratic conflict resolution (in yjs too).
func conflictingStructs(of uint64, n, span int) []byte {
	var e []byte
	e = appendUint(e, uint64(n))
	e = appendUint(e, 1<<40)
	e = append(e, 0) // clock
	for k := 0; k < n; k++ {
		e = append(e, 0x80|4) // a string with an origin
		e = appendUint(e, of)
		e = appendUint(e, uint64((n-1-k)%span))
		e = append(e, 1, 'x')
	}
	return e
}

// conflicting is conflictingStructs as a whole update.
func conflicting(of uint64, n, span int) []byte {
	return append(append([]byte{1}, conflictingStructs(of, n, span)...), 0)
}

// scattered is one update of n one-character insertions a client made, each at the start of
// the text: n structs in n places, thousands of steps of work.
func scattered(t *testing.T, n int) []byte {
	t.Helper()
	c := yjs.NewDocWithClient(6)
	parts := make([][]byte, 0, n)
	text := ""
	for i := range n {
		text = string(rune('a'+i%26)) + text
		u, _ := c.Replace("content", yjs.Text, text)
		parts = append(parts, u)
	}
	merged, err := yjs.Merge(parts...)
	if err != nil {
		t.Fatal(err)
	}
	return merged
}

func appendUint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// A client that does not read while others edit is disconnected (1013, to reconnect and sync
// afresh) once MaxQueue bytes wait for it (past what the sockets' buffers took), and nobody
// else notices.
func TestSlowClientIsDisconnected(t *testing.T) {
	_, url := newServerWith(t, &memLog{}, Config{MaxQueue: 1 << 20})
	w := dial(t, url+"o/d/e", "edit")
	r := dial(t, url+"o/d/e", "view")
	go func() {
		for range r.got { // the reader reads everything
		}
	}()
	slow := rawDial(t, url+"o/d/e", "viewer-slow")
	d := yjs.NewDocWithClient(11)
	chunk := strings.Repeat("z", 32<<10)
	for i := range 600 {
		// Appends of 32 KiB by a client of its own (Replace would diff the whole text), each
		// once the reader has the one before: the reader never falls behind.
		u, err := d.Replace("content"+strconv.Itoa(i), yjs.Text, chunk)
		if err != nil {
			t.Fatal(err)
		}
		w.send(yjs.SyncFrame(yjs.SyncUpdate, u))
		want := d.StateVector()
		eventually(t, "the reader has update "+strconv.Itoa(i), func() bool {
			r.mu.Lock()
			defer r.mu.Unlock()
			return string(r.doc.StateVector()) == string(want)
		})
	}
	if code, reason := closedWith(t, slow); code != websocket.StatusTryAgainLater || reason != msgTooSlow {
		t.Fatalf("closed with %d %q", code, reason)
	}
	if r.end != nil {
		t.Fatalf("the reader was disconnected: %v", r.end)
	}
}

// A user who makes the server work faster than WorkRate is slowed: its frames are read only
// as its budget refills, so what it gets applied stays within the rate (another user's are
// not slowed). One frame whose work alone passes MaxDebt closes its connection with 4429.
func TestWorkBeyondTheBudgetIsSlowedThenRefused(t *testing.T) {
	log := &memLog{}
	_, url := newServerWith(t, log, Config{WorkRate: 2000, WorkBurst: 2000, MaxDebt: time.Second})
	honest := dial(t, url+"o/d/e2", "edit")
	flood := rawDial(t, url+"o/d/e", "edit")
	d := yjs.NewDocWithClient(5)
	go func() {
		for i := 0; ; i++ {
			u, _ := d.Replace("content", yjs.Text, strings.Repeat("w", 1+i))
			if flood.Write(context.Background(), websocket.MessageBinary, yjs.SyncFrame(yjs.SyncUpdate, u)) != nil {
				return
			}
		}
	}()
	time.Sleep(time.Second)
	// Each update takes about 4 steps and its frame one: within a second, the burst and the
	// rate allow about 800 of them, the flood offered tens of thousands.
	if n := log.count("o/d/e"); n > 1200 || n == 0 {
		t.Fatalf("%d updates of the flood applied in a second", n)
	}
	t.Logf("%d updates of the flood applied in a second", log.count("o/d/e"))
	honest.edit("not slowed")
	flush(t, honest)
	flood.CloseNow()
	// One frame of 4,000 one-character insertions in separate places: some 5,000 steps, more
	// than a second of the rate.
	costly := rawDial(t, url+"o/d/e3", "edit")
	if err := costly.Write(context.Background(), websocket.MessageBinary, yjs.SyncFrame(yjs.SyncUpdate, scattered(t, 4000))); err != nil {
		t.Fatal(err)
	}
	if code, reason := closedWith(t, costly); code != statusTooMany {
		t.Fatalf("closed with %d %q, want %d", code, reason, statusTooMany)
	}
}

// Updates that arrive together are stored and relayed together: one log entry and one frame
// for a burst, as long as the log is busy with the one before.
func TestUpdatesArrivingTogetherAreCoalesced(t *testing.T) {
	log := &slowLog{memLog: memLog{}, delay: 30 * time.Millisecond}
	_, url := newServer(t, log, nil)
	w := dial(t, url+"o/d/e", "edit")
	r := dial(t, url+"o/d/e", "view")
	flush(t, r)
	text := ""
	for i := range 100 {
		text += string(rune('a' + i%26))
		w.edit(text)
	}
	frames := 0
	timeout := time.After(10 * time.Second)
	for r.text() != text {
		select {
		case m := <-r.got:
			if m.Type == yjs.MessageSync && m.Sync == yjs.SyncUpdate {
				frames++
			}
		case <-timeout:
			t.Fatalf("the reader has %q", r.text())
		}
	}
	if frames > 20 || log.count("o/d/e") > 20 {
		t.Fatalf("100 updates took %d frames and %d log entries", frames, log.count("o/d/e"))
	}
	t.Logf("100 updates: %d frames, %d log entries", frames, log.count("o/d/e"))
}

// slowLog is a memLog whose appends take a while, as a remote database's do.
type slowLog struct {
	memLog
	delay time.Duration
}

func (l *slowLog) Append(ctx context.Context, key, v string, u []byte) (Cursor, bool, error) {
	time.Sleep(l.delay)
	return l.memLog.Append(ctx, key, v, u)
}

// A client may send its first frames with its handshake, before the answer: they are in the
// HTTP server's buffer when the connection is taken over, and must not be lost with it (the
// connection gets buffers of its own, smallBuffers).
func TestFramesSentWithTheHandshakeAreRead(t *testing.T) {
	_, url := newServer(t, &memLog{}, nil)
	addr := strings.TrimPrefix(strings.SplitN(url, "/v2/", 2)[0], "ws://")
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	req := "GET /v2/crdt/sync/o/d/e?token=edit HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	// A masked binary frame: sync step 1 with an empty state vector.
	payload := []byte{0, 0, 1, 0}
	mask := []byte{1, 2, 3, 4}
	frame := []byte{0x82, 0x80 | byte(len(payload))}
	frame = append(frame, mask...)
	for i, b := range payload {
		frame = append(frame, b^mask[i%4])
	}
	if _, err := nc.Write(append([]byte(req), frame...)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(nc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close() // a 101's body is empty: the connection goes on in br
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %v", resp.Status)
	}
	// The server's own step 1, then its answer to ours (step 2).
	for range 3 {
		var h [2]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			t.Fatal(err)
		}
		p := make([]byte, h[1]&0x7f)
		if _, err := io.ReadFull(br, p); err != nil {
			t.Fatal(err)
		}
		if len(p) >= 2 && p[0] == yjs.MessageSync && p[1] == yjs.SyncStep2 {
			return
		}
	}
	t.Fatal("the frame sent with the handshake got no answer")
}
