package live

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/collab/collab/internal/yjs"
)

// memLog is a Log in memory, shared by the hubs of a test as replicas share MongoDB.
type memLog struct {
	mu      sync.Mutex
	updates map[string][][]byte
	fail    bool
}

func (l *memLog) Load(_ context.Context, key string) ([][]byte, Cursor, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	us := l.updates[key]
	return append([][]byte(nil), us...), Cursor{Version: "v", Seq: uint64(len(us))}, nil
}

func (l *memLog) Append(_ context.Context, key, _ string, u []byte) (Cursor, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail {
		return Cursor{}, false, errors.New("log down")
	}
	if l.updates == nil {
		l.updates = map[string][][]byte{}
	}
	l.updates[key] = append(l.updates[key], append([]byte(nil), u...))
	return Cursor{Version: "v", Seq: uint64(len(l.updates[key]))}, false, nil
}

func (l *memLog) Since(_ context.Context, key string, at Cursor) ([]Entry, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Entry
	for i := at.Seq; i < uint64(len(l.updates[key])); i++ {
		out = append(out, Entry{Seq: i + 1, Update: l.updates[key][i]})
	}
	return out, false, nil
}

// tokens: "edit" writes (user u1), "view" reads (u2), "viewer-NAME" reads (user NAME), anything
// else is refused.
func authorize(_ context.Context, token, org, doc, editor string) (Grant, error) {
	switch token {
	case "edit":
		return Grant{Key: org + "/" + doc + "/" + editor, CanWrite: true, UserID: "u1"}, nil
	case "view":
		return Grant{Key: org + "/" + doc + "/" + editor, UserID: "u2"}, nil
	case "short":
		return Grant{Key: org + "/" + doc + "/" + editor, CanWrite: true, ValidFor: 150 * time.Millisecond}, nil
	}
	if user, ok := strings.CutPrefix(token, "viewer-"); ok {
		return Grant{Key: org + "/" + doc + "/" + editor, UserID: user}, nil
	}
	return Grant{}, &DeniedError{Reason: "Token is malformed."}
}

func newServer(t *testing.T, log Log, changed func(Grant, []byte)) (*Hub, string) {
	h := New(Config{Log: log, Authorize: authorize, Prefix: "/v2/crdt/sync/", Poll: 20 * time.Millisecond, Idle: 50 * time.Millisecond, EventEvery: 30 * time.Millisecond, Changed: changed})
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.Close() })
	return h, "ws" + strings.TrimPrefix(srv.URL, "http") + "/v2/crdt/sync/"
}

// client is a minimal y-websocket peer on a yjs.Doc.
type client struct {
	t   testing.TB
	ws  *websocket.Conn
	doc *yjs.Doc
	mu  sync.Mutex
	got chan yjs.Message
	// end is the read error that ended the connection, set before got closes.
	end error
}

func dial(t testing.TB, url, token string) *client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url+"?token="+token, nil)
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(64 << 20)
	c := &client{t: t, ws: ws, doc: yjs.NewDoc(), got: make(chan yjs.Message, 100)}
	t.Cleanup(func() { ws.CloseNow() })
	// As y-websocket's client: ask for what the server has.
	if err := ws.Write(ctx, websocket.MessageBinary, yjs.SyncFrame(yjs.SyncStep1, c.doc.StateVector())); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(c.got)
		for {
			_, b, err := ws.Read(context.Background())
			if err != nil {
				c.end = err
				return
			}
			m, err := yjs.ReadMessage(b)
			if err != nil {
				t.Errorf("server sent a malformed frame: %v", err)
				return
			}
			if m.Type == yjs.MessageSync {
				c.mu.Lock()
				if m.Sync == yjs.SyncStep1 {
					// As y-websocket's client: answer with what the server lacks.
					diff, err := c.doc.Encode(m.Payload)
					if err != nil {
						t.Errorf("server's state vector: %v", err)
					}
					_ = ws.Write(context.Background(), websocket.MessageBinary, yjs.SyncFrame(yjs.SyncStep2, diff))
				} else if err := c.doc.Apply(m.Payload); err != nil {
					t.Errorf("server's update: %v", err)
				}
				c.mu.Unlock()
			}
			c.got <- m
		}
	}()
	return c
}

func (c *client) send(frame []byte) {
	c.t.Helper()
	if err := c.ws.Write(context.Background(), websocket.MessageBinary, frame); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) edit(text string) {
	c.t.Helper()
	c.mu.Lock()
	u, err := c.doc.Replace("content", yjs.Text, text)
	c.mu.Unlock()
	if err != nil {
		c.t.Fatal(err)
	}
	c.send(yjs.SyncFrame(yjs.SyncUpdate, u))
}

func (c *client) text() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.doc.JSON("content", yjs.Text).(string)
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestEditsReachOtherReplicasAndPersist(t *testing.T) {
	log := &memLog{}
	var mu sync.Mutex
	var events []Grant
	_, url1 := newServer(t, log, func(g Grant, state []byte) {
		mu.Lock()
		events = append(events, g)
		mu.Unlock()
	})
	_, url2 := newServer(t, log, nil)
	a := dial(t, url1+"o/d/e", "edit")
	b := dial(t, url2+"o/d/e", "edit")
	a.edit("hello")
	eventually(t, "b sees a's edit", func() bool { return b.text() == "hello" })
	b.edit("hello world")
	eventually(t, "a sees b's edit", func() bool { return a.text() == "hello world" })
	parts, _, _ := log.Load(context.Background(), "o/d/e")
	d := yjs.NewDoc()
	for _, p := range parts {
		if err := d.Apply(p); err != nil {
			t.Fatalf("applying the log: %v", err)
		}
	}
	if g := d.JSON("content", yjs.Text); g != "hello world" {
		t.Fatalf("log holds %q", g)
	}
	eventually(t, "a change event", func() bool { mu.Lock(); defer mu.Unlock(); return len(events) > 0 })
	mu.Lock()
	first := events[0]
	mu.Unlock()
	if first.UserID != "u1" {
		t.Fatalf("event grant %+v", first)
	}
}

func TestViewerEditsAreNotApplied(t *testing.T) {
	log := &memLog{}
	_, url := newServer(t, log, nil)
	e := dial(t, url+"o/d/e", "edit")
	v := dial(t, url+"o/d/e", "view")
	e.edit("from editor")
	eventually(t, "viewer reads", func() bool { return v.text() == "from editor" })
	v.edit("from viewer")
	time.Sleep(100 * time.Millisecond)
	if g := e.text(); g != "from editor" {
		t.Fatalf("editor sees %q after a viewer's edit", g)
	}
	if n := log.count("o/d/e"); n != 1 {
		t.Fatalf("log has %d updates", n)
	}
}

func TestRefusedTokenGetsPermissionDenied(t *testing.T) {
	_, url := newServer(t, &memLog{}, nil)
	c := dial(t, url+"o/d/e", "forged")
	select {
	case m, ok := <-c.got:
		if !ok || m.Type != yjs.MessageAuth {
			t.Fatalf("first message %+v (open %v), want auth", m, ok)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("no message")
	}
	if _, _, err := readUntilClose(c); websocket.CloseStatus(err) != statusDenied {
		t.Fatalf("close = %v", err)
	}
}

func TestAwarenessRelayedAndCleanedUp(t *testing.T) {
	_, url := newServer(t, &memLog{}, nil)
	a := dial(t, url+"o/d/e", "edit")
	b := dial(t, url+"o/d/e", "view")
	a.send(yjs.AwarenessFrame([]yjs.AwarenessState{{Client: 42, Clock: 1, State: []byte(`{"user":"a"}`)}}))
	waitAwareness(t, b, func(s yjs.AwarenessState) bool { return s.Client == 42 && !s.Gone() })
	a.ws.Close(websocket.StatusNormalClosure, "")
	waitAwareness(t, b, func(s yjs.AwarenessState) bool { return s.Client == 42 && s.Gone() })
}

func waitAwareness(t *testing.T, c *client, match func(yjs.AwarenessState) bool) {
	t.Helper()
	timeout := time.After(3 * time.Second)
	for {
		select {
		case m, ok := <-c.got:
			if !ok {
				t.Fatal("closed")
			}
			for _, s := range m.Awareness {
				if match(s) {
					return
				}
			}
		case <-timeout:
			t.Fatal("awareness not seen")
		}
	}
}

func TestMalformedFrameClosesAndLogFailureDisconnects(t *testing.T) {
	log := &memLog{}
	h, url := newServer(t, log, nil)
	c := dial(t, url+"o/d/e", "edit")
	c.send([]byte{0, 2, 5, 1, 2})
	if _, _, err := readUntilClose(c); websocket.CloseStatus(err) != statusMalformed {
		t.Fatalf("close = %v", err)
	}
	c2 := dial(t, url+"o/d/e", "edit")
	log.mu.Lock()
	log.fail = true
	log.mu.Unlock()
	c2.edit("lost")
	if _, _, err := readUntilClose(c2); websocket.CloseStatus(err) != websocket.StatusTryAgainLater {
		t.Fatalf("close = %v", err)
	}
	log.mu.Lock()
	log.fail = false
	log.mu.Unlock()
	// The room reloads from the log: the refused edit is nowhere.
	c3 := dial(t, url+"o/d/e", "edit")
	c3.edit("kept")
	eventually(t, "room reloaded", func() bool { return log.count("o/d/e") == 1 })
	eventually(t, "rooms unload when idle", func() bool {
		c3.ws.Close(websocket.StatusNormalClosure, "")
		return h.Rooms() == 0
	})
}

// readUntilClose waits for the server to end the connection and returns why.
func readUntilClose(c *client) (int, []byte, error) {
	timeout := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-c.got:
			if !ok {
				return 0, nil, c.end
			}
		case <-timeout:
			return 0, nil, errors.New("connection not closed")
		}
	}
}

func (l *memLog) count(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.updates[key])
}

// A connection ends, as refused, when its token expires.
func TestConnectionEndsWhenTheTokenExpires(t *testing.T) {
	_, url := newServer(t, &memLog{}, nil)
	c := dial(t, url+"o/d/e", "short")
	c.edit("before expiry")
	waitDenied(t, c, "the connection outlived its token")
}

// waitDenied reads c until it closes, failing unless the server sent the permission-denied
// message and closed with 4403.
func waitDenied(t *testing.T, c *client, outlived string) {
	t.Helper()
	sawDenied := false
	timeout := time.After(5 * time.Second)
	for done := false; !done; {
		select {
		case m, ok := <-c.got:
			if !ok {
				done = true
				break
			}
			if m.Type == yjs.MessageAuth {
				sawDenied = true
			}
		case <-timeout:
			t.Fatal(outlived)
		}
	}
	if !sawDenied || websocket.CloseStatus(c.end) != statusDenied {
		t.Fatalf("denied message %v, close %v", sawDenied, c.end)
	}
}

// Deleted data closes its room's connections with 4410, which y-websocket does not retry.
func TestGoneClosesWith4410(t *testing.T) {
	log := &memLog{}
	h, url := newServer(t, log, nil)
	c := dial(t, url+"o/d/e", "edit")
	c.edit("x")
	// The edit stored: c has joined the room (a room loaded while c was still joining would
	// refuse c as reloading rather than close it as gone).
	eventually(t, "c in the room, its edit stored", func() bool { return h.Rooms() == 1 && log.count("o/d/e") > 0 })
	h.Gone(func(k string) bool { return k == "o/d/e" })
	if _, _, err := readUntilClose(c); websocket.CloseStatus(err) != statusGone {
		t.Fatalf("close = %v", err)
	}
}

// A connection takes and relays awareness of its own clients only, and only so many.
func TestAwarenessOfOthersIsNotTaken(t *testing.T) {
	_, url := newServer(t, &memLog{}, nil)
	a := dial(t, url+"o/d/e", "edit")
	b := dial(t, url+"o/d/e", "edit")
	a.send(yjs.AwarenessFrame([]yjs.AwarenessState{{Client: 1, Clock: 1, State: []byte(`{"user":"a"}`)}}))
	waitAwareness(t, b, func(s yjs.AwarenessState) bool { return s.Client == 1 })
	// b tries to remove and to impersonate a's client: nothing is relayed to a.
	b.send(yjs.AwarenessFrame([]yjs.AwarenessState{{Client: 1, Clock: 5, State: []byte(`null`)}, {Client: 1, Clock: 6, State: []byte(`{"user":"mallory"}`)}}))
	// b floods fresh ids: at most DefaultMaxClientsPerConn are taken.
	var flood []yjs.AwarenessState
	for i := range 100 {
		flood = append(flood, yjs.AwarenessState{Client: uint64(1000 + i), Clock: 1, State: []byte(`{}`)})
	}
	b.send(yjs.AwarenessFrame(flood))
	seen := map[uint64]bool{}
	timeout := time.After(2 * time.Second)
	for len(seen) < DefaultMaxClientsPerConn {
		select {
		case m := <-a.got:
			for _, s := range m.Awareness {
				if s.Client == 1 {
					if string(s.State) != `{"user":"a"}` {
						t.Fatalf("another connection changed client 1's awareness: %s", s.State)
					}
					continue // a's own, echoed
				}
				seen[s.Client] = true
			}
		case <-timeout:
			t.Fatalf("saw %d of b's clients", len(seen))
		}
	}
	// Query awareness answers what the room holds: a's client and b.s first 4.
	a.send([]byte{yjs.MessageQueryAwareness})
	for {
		select {
		case m := <-a.got:
			if len(m.Awareness) == 0 {
				continue
			}
			if len(m.Awareness) != 1+DefaultMaxClientsPerConn {
				t.Fatalf("room holds %d awareness entries", len(m.Awareness))
			}
			return
		case <-time.After(2 * time.Second):
			t.Fatal("no answer to query awareness")
		}
	}
}

// Ids may hold a "/" (sent as %2F): the path is split before it is unescaped.
func TestEscapedIDs(t *testing.T) {
	log := &memLog{}
	_, url := newServer(t, log, nil)
	c := dial(t, url+"o/d%2Fsub/e", "edit")
	c.edit("x")
	eventually(t, "stored under the unescaped id", func() bool { return log.count("o/d/sub/e") == 1 })
}

// Conns counts the clients admitted to a room until their connections end.
func TestConnsCountsConnectedClients(t *testing.T) {
	h, url := newServer(t, &memLog{}, nil)
	a := dial(t, url+"o/d/e", "edit")
	b := dial(t, url+"o/d/f", "edit")
	a.edit("x")
	b.edit("y")
	eventually(t, "two clients", func() bool { return h.Conns() == 2 && h.Rooms() == 2 })
	a.ws.Close(websocket.StatusNormalClosure, "")
	eventually(t, "one client", func() bool { return h.Conns() == 1 })
	b.ws.Close(websocket.StatusNormalClosure, "")
	eventually(t, "no client", func() bool { return h.Conns() == 0 })
}

// What is not a WebSocket handshake is answered with the API's error envelope (JSON), not the
// WebSocket library's plain text, and a real client still connects.
func TestNonWebSocketRequestsGetTheEnvelope(t *testing.T) {
	_, wsURL := newServer(t, &memLog{}, nil)
	base := "http" + strings.TrimPrefix(wsURL, "ws")
	upgrade := http.Header{"Connection": {"keep-alive, Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}}
	for _, c := range []struct {
		name, method, path string
		header             http.Header
		code               int
		status             string
	}{
		{"a plain GET", http.MethodGet, "o/d/e?token=edit", nil, http.StatusUpgradeRequired, "FAILED_PRECONDITION"},
		{"a POST", http.MethodPost, "o/d/e?token=edit", nil, http.StatusMethodNotAllowed, "UNIMPLEMENTED"},
		{"an old WebSocket version", http.MethodGet, "o/d/e?token=edit", http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"8"}, "Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}}, http.StatusUpgradeRequired, "FAILED_PRECONDITION"},
		{"a bad key", http.MethodGet, "o/d/e?token=edit", http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {"short"}}, http.StatusBadRequest, "INVALID_ARGUMENT"},
		{"a path without an editor", http.MethodGet, "o/d?token=edit", upgrade, http.StatusNotFound, "NOT_FOUND"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(c.method, base+c.path, nil)
			for k, v := range c.header {
				req.Header[k] = v
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var env struct {
				Error struct{ Status, Message string } `json:"error"`
			}
			if resp.StatusCode != c.code || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("HTTP %d (%s), want %d application/json", resp.StatusCode, resp.Header.Get("Content-Type"), c.code)
			}
			if err := json.NewDecoder(resp.Body).Decode(&env); err != nil || env.Error.Status != c.status || env.Error.Message == "" {
				t.Fatalf("envelope %+v (%v), want status %s", env, err, c.status)
			}
		})
	}
	dial(t, wsURL+"o/d/e", "edit").ws.CloseNow()
}

// flush waits until the server has handled every frame c sent before: it answers a sync step 1
// after them, in order.
func flush(t *testing.T, c *client) {
	t.Helper()
	for drained := false; !drained; {
		select {
		case _, ok := <-c.got:
			if !ok {
				t.Fatal("connection closed")
			}
		default:
			drained = true
		}
	}
	c.mu.Lock()
	sv := c.doc.StateVector()
	c.mu.Unlock()
	c.send(yjs.SyncFrame(yjs.SyncStep1, sv))
	timeout := time.After(5 * time.Second)
	for {
		select {
		case m, ok := <-c.got:
			if !ok {
				t.Fatal("connection closed")
			}
			if m.Type == yjs.MessageSync && m.Sync == yjs.SyncStep2 {
				return
			}
		case <-timeout:
			t.Fatal("no answer to sync step 1")
		}
	}
}

// Open connections follow access changes: the authorizer is asked again every Recheck; an
// editor made viewer stops writing, an authorizer that cannot answer changes nothing, a viewer
// made editor writes again, and a refusal ends the connection as at connect (the reason, 4403).
func TestRecheckFollowsAccessChanges(t *testing.T) {
	log := &memLog{}
	var role atomic.Value
	role.Store("edit")
	var calls atomic.Int64
	h := New(Config{Log: log, Prefix: "/v2/crdt/sync/", Poll: 20 * time.Millisecond, Idle: 50 * time.Millisecond, EventEvery: 30 * time.Millisecond,
		Recheck: 20 * time.Millisecond,
		Authorize: func(_ context.Context, _, org, doc, editor string) (Grant, error) {
			calls.Add(1)
			key := org + "/" + doc + "/" + editor
			switch role.Load().(string) {
			case "edit":
				return Grant{Key: key, CanWrite: true}, nil
			case "view":
				return Grant{Key: key}, nil
			case "down":
				return Grant{}, errors.New("access service unavailable")
			}
			return Grant{}, &DeniedError{Reason: "You do not have access to this document."}
		}})
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.Close() })
	c := dial(t, "ws"+strings.TrimPrefix(srv.URL, "http")+"/v2/crdt/sync/o/d/e", "t")
	// Two more calls: the one that began after the change has finished, and its answer holds.
	rechecked := func(what string) {
		t.Helper()
		n := calls.Load()
		eventually(t, what, func() bool { return calls.Load() >= n+2 })
	}

	c.edit("one")
	eventually(t, "the editor's edit stored", func() bool { return log.count("o/d/e") == 1 })
	role.Store("view")
	rechecked("a recheck as viewer")
	c.edit("two")
	flush(t, c)
	if n := log.count("o/d/e"); n != 1 {
		t.Fatalf("%d updates stored: the edit of an editor made viewer was applied", n)
	}
	role.Store("down")
	rechecked("rechecks while the authorizer is down")
	role.Store("edit")
	rechecked("a recheck as editor again")
	c.edit("three")
	eventually(t, "the edit of a viewer made editor stored", func() bool { return log.count("o/d/e") == 2 })

	role.Store("denied")
	waitDenied(t, c, "the connection outlived its access")
}

// Connections that arrive while the hub closes are ended too: Close marks the hub before it
// closes the rooms, a room is not made nor a connection admitted after that, and a
// follower's place in the wait group is taken before Close waits (an Add racing with Wait,
// which the race detector reported). After Close, a new connection is told to reconnect.
func TestCloseEndsConnectionsThatArriveMeanwhile(t *testing.T) {
	h, url := newServer(t, &memLog{}, nil)
	// ends reads ws until it closes and reports the close code, or fails the test when it
	// is still open at the deadline.
	deadline, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ends := func(ws *websocket.Conn) websocket.StatusCode {
		ctx := deadline
		for {
			if _, _, err := ws.Read(ctx); err != nil {
				if ctx.Err() != nil {
					t.Error("a connection stayed open after Close")
				}
				return websocket.CloseStatus(err)
			}
		}
	}
	var (
		mu    sync.Mutex
		conns []*websocket.Conn
		stop  = make(chan struct{})
		wg    sync.WaitGroup
	)
	for i := range 6 {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				ws, _, err := websocket.Dial(ctx, url+"o/d"+strconv.Itoa(i)+"-"+strconv.Itoa(n)+"/e?token=edit", nil)
				cancel()
				if err != nil {
					continue
				}
				mu.Lock()
				conns = append(conns, ws)
				mu.Unlock()
			}
		})
	}
	time.Sleep(100 * time.Millisecond) // some connect before Close, some while it runs
	h.Close()
	close(stop)
	wg.Wait()
	if len(conns) == 0 {
		t.Fatal("no connection was made")
	}
	var reads sync.WaitGroup
	for _, ws := range conns {
		reads.Go(func() {
			defer ws.CloseNow()
			if code := ends(ws); code != websocket.StatusServiceRestart {
				t.Errorf("closed with %d, want %d", code, websocket.StatusServiceRestart)
			}
		})
	}
	reads.Wait()
	ctx, cancelDial := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelDial()
	ws, _, err := websocket.Dial(ctx, url+"o/after/e?token=edit", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if code := ends(ws); code != websocket.StatusServiceRestart {
		t.Errorf("a connection after Close: %d, want %d", code, websocket.StatusServiceRestart)
	}
	// Each handler returns once its connection's teardown is done, a little after the client
	// saw the close.
	for h.Conns() != 0 {
		if deadline.Err() != nil {
			t.Fatalf("after Close: %d connections still served", h.Conns())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A panic of the codec on a client's update ends that room, not the process: its connections
// close to reconnect (1013), the half-applied document is dropped, and the next connection
// gets a room loaded again from the log, which lacks the update.
func TestCodecPanicReloadsTheRoom(t *testing.T) {
	log := &memLog{}
	_, url := newServer(t, log, nil)
	c := dial(t, url+"o/d/e", "edit")
	c.edit("kept")
	eventually(t, "the first edit stored", func() bool { return log.count("o/d/e") == 1 })
	other := dial(t, url+"o/d/e", "edit")
	var panics applyFunc = func(d *yjs.Doc, ctx context.Context, u []byte, lim yjs.Limits) (yjs.Applied, error) {
		if _, err := d.Replace("content", yjs.Text, "half applied"); err != nil {
			t.Error(err)
		}
		panic("a codec bug")
	}
	applyHook.Store(&panics)
	t.Cleanup(func() { applyHook.Store(nil) })
	c.edit("panics")
	for _, x := range []*client{c, other} {
		if _, _, err := readUntilClose(x); websocket.CloseStatus(err) != websocket.StatusTryAgainLater {
			t.Fatalf("close = %v", err)
		}
	}
	applyHook.Store(nil)
	again := dial(t, url+"o/d/e", "edit")
	again.edit("after")
	eventually(t, "the reloaded room stores again", func() bool { return log.count("o/d/e") == 2 })
}
