package live

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/collab/collab/internal/yjs"
)

// fakeSocket is a connection's socket in memory: a frame written to it reaches its peer's
// document at once.
type fakeSocket struct {
	mu     sync.Mutex
	doc    *yjs.Doc // the peer's; nil: frames are dropped (a client that reads nothing useful)
	closed bool
	code   websocket.StatusCode
	err    error // a frame the peer could not apply
}

func (s *fakeSocket) Write(_ context.Context, _ websocket.MessageType, p []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("closed")
	}
	m, err := yjs.ReadMessage(p)
	if err != nil {
		s.err = fmt.Errorf("the server wrote a malformed frame: %w", err)
		return nil
	}
	if s.doc != nil && m.Type == yjs.MessageSync && m.Sync != yjs.SyncStep1 {
		if err := s.doc.Apply(m.Payload); err != nil {
			s.err = fmt.Errorf("the server sent an update the peer cannot apply: %w", err)
		}
	}
	return nil
}

func (s *fakeSocket) Close(code websocket.StatusCode, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed, s.code = true, code
	return nil
}

func (s *fakeSocket) CloseNow() error { return s.Close(websocket.StatusAbnormalClosure, "") }

// peer is a connection of the fuzzed room with its socket.
type peer struct {
	c    *conn
	sock *fakeSocket
}

// join connects a peer to the room of key as the grant says, as ServeHTTP does.
func joinPeer(t *testing.T, h *Hub, g Grant, doc *yjs.Doc) *peer {
	t.Helper()
	sock := &fakeSocket{doc: doc}
	c := &conn{ws: sock, hub: h, grant: g, done: make(chan struct{})}
	c.canWrite.Store(g.CanWrite)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	r, err := h.join(context.Background(), g.Key)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.add(c); err != nil {
		t.Fatal(err)
	}
	r.greet(c)
	c.askSync([]byte{0}) // the whole document, as a new client asks
	p := &peer{c: c, sock: sock}
	if doc != nil { // an honest client announces its client id as y-websocket's provider does
		state := yjs.AwarenessState{Client: doc.Client(), Clock: 1, State: []byte(`{"user":"` + g.UserID + `"}`)}
		if !p.send(t, yjs.AwarenessFrame([]yjs.AwarenessState{state})) {
			t.Fatal("an honest client's awareness was refused")
		}
	}
	return p
}

// leave ends a peer's connection as serve does when its reader stops.
func (p *peer) leave() {
	p.c.room.drop(p.c)
	p.c.close(websocket.StatusNormalClosure, "")
	<-p.c.done
	p.c.cancel()
	p.c.hub.leave(p.c.room)
}

func (p *peer) send(t *testing.T, frame []byte) bool {
	t.Helper()
	_, ok := p.c.room.handle(p.c.ctx, p.c, frame)
	return ok
}

// settle waits until every connection has written what waits for it.
func settle(t *testing.T, r *room, peers ...*peer) {
	t.Helper()
	r.flush()
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range peers {
		for {
			p.c.mu.Lock()
			busy := p.c.writing || len(p.c.queue) > 0
			p.c.mu.Unlock()
			if !busy {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("a connection's writer does not finish")
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// FuzzRoom drives one room with two honest editors, a viewer and a hostile editor that sends
// whatever the input says (raw frames, real updates cut and altered, awareness of any size,
// state vectors, floods of step 1s), interleaved with the honest edits, and holds the room to
// its promises: the hostile connection's refusals change nothing in the document, the budgets
// hold (the document's encoded size, the bytes waiting to be written), and once everything is
// written the honest clients, the room and the log read the same text.
func FuzzRoom(f *testing.F) {
	d := yjs.NewDocWithClient(77)
	u1, _ := d.Replace("content", yjs.Text, "hello world")
	u2, _ := d.Replace("content", yjs.Text, "hello there, world")
	f.Add([]byte("\x00hi\x01yo\x02"+string(yjs.SyncFrame(yjs.SyncUpdate, u1))+"\x00more"), u2)
	f.Add([]byte("\x03\x05\x04\x06\x07\x00a"), u1)
	f.Add([]byte("\x02"+string(yjs.SyncFrame(yjs.SyncStep1, []byte{0}))+"\x05\x05\x05\x01b"), u2)
	f.Add([]byte("\x04\xff\x04\x10\x00x"), u1)
	f.Fuzz(func(t *testing.T, script, seed []byte) {
		log := &memLog{}
		h := New(Config{Log: log, Authorize: authorize, Prefix: "/", Poll: time.Hour, Idle: time.Hour,
			Limits: yjs.Limits{MaxEncoded: 16 << 10, MaxSize: 1 << 20}, MaxQueue: 64 << 10,
			MaxAwarenessState: 256, MaxAwarenessRoom: 1 << 10, WorkRate: 1e12, WorkBurst: 1e12})
		defer h.Close()
		key := "o/d/e"
		docA, docB, docV := yjs.NewDocWithClient(1), yjs.NewDocWithClient(2), yjs.NewDocWithClient(3)
		a := joinPeer(t, h, Grant{Key: key, CanWrite: true, UserID: "a"}, docA)
		b := joinPeer(t, h, Grant{Key: key, CanWrite: true, UserID: "b"}, docB)
		v := joinPeer(t, h, Grant{Key: key, UserID: "v"}, docV)
		hostile := joinPeer(t, h, Grant{Key: key, CanWrite: true, UserID: "h"}, nil)
		r := a.c.room
		edit := func(p *peer, doc *yjs.Doc, text string) {
			p.sock.mu.Lock()
			cur := doc.JSON("content", yjs.Text).(string)
			u, err := doc.Replace("content", yjs.Text, cur[:len(cur)/2]+text+cur[len(cur)/2:])
			p.sock.mu.Unlock()
			if err == nil && len(u) > 0 {
				p.send(t, yjs.SyncFrame(yjs.SyncUpdate, u))
			}
		}
		for len(script) > 0 {
			op := script[0]
			n := min(len(script)-1, int(op>>3)+1)
			arg := script[1 : 1+n]
			script = script[1+n:]
			switch op % 8 {
			case 0:
				edit(a, docA, strings.ToValidUTF8(string(arg), "?"))
			case 1:
				edit(b, docB, strings.ToValidUTF8(string(arg), "?"))
			case 2, 3:
				frame := append([]byte(nil), arg...)
				if op%8 == 3 { // a real update, cut and altered
					frame = yjs.SyncFrame(yjs.SyncUpdate, alter(seed, arg))
				}
				r.mu.Lock()
				before, _ := r.doc.Encode(nil)
				r.mu.Unlock()
				if !hostile.send(t, frame) {
					r.mu.Lock()
					after, _ := r.doc.Encode(nil)
					r.mu.Unlock()
					if string(before) != string(after) {
						t.Fatal("a refused frame changed the room's document")
					}
					hostile.leave()
					hostile = joinPeer(t, h, Grant{Key: key, CanWrite: true, UserID: "h"}, nil)
				}
			case 4:
				size := int(op) * len(arg) * 3
				state := `{"p":"` + strings.Repeat("x", size) + `"}`
				hostile.send(t, yjs.AwarenessFrame([]yjs.AwarenessState{{Client: uint64(len(arg)), Clock: uint64(op), State: []byte(state)}}))
			case 5:
				for range 20 {
					hostile.send(t, yjs.SyncFrame(yjs.SyncStep1, []byte{0}))
				}
			case 6:
				v.send(t, yjs.SyncFrame(yjs.SyncUpdate, alter(seed, arg)))
			case 7:
				hostile.send(t, []byte{yjs.MessageQueryAwareness})
			}
			if out := h.outBytes.Load(); out > 3*int64(h.cfg.MaxQueue)+64<<10 {
				t.Fatalf("%d bytes wait to be written", out)
			}
		}
		settle(t, r, a, b, v, hostile)
		r.mu.Lock()
		want := r.doc.JSON("content", yjs.Text)
		size := r.doc.EncodedSize()
		r.mu.Unlock()
		if size > 16<<10 {
			t.Fatalf("the room's document encodes to %d bytes, past its limit", size)
		}
		for name, p := range map[string]*peer{"a": a, "b": b, "viewer": v} {
			p.sock.mu.Lock()
			// An empty update, as any next one from elsewhere: a deletion of clocks the
			// client had not written yet waits in its document, and applies (in yjs too)
			// when an update from elsewhere arrives, not when it writes them. Not the room's
			// state: that would bring whatever the relays failed to.
			if err := p.sock.doc.Apply([]byte{0, 0}); err != nil {
				t.Fatal(err)
			}
			got, err, closed := p.sock.doc.JSON("content", yjs.Text), p.sock.err, p.sock.closed
			p.sock.mu.Unlock()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if closed {
				continue // its own edit passed a limit: it reconnects and syncs afresh
			}
			if got != want {
				t.Fatalf("%s reads %q, the room %q", name, got, want)
			}
		}
		parts, _, _ := log.Load(context.Background(), key)
		stored := yjs.NewDoc()
		for _, p := range parts {
			if err := stored.Apply(p); err != nil {
				t.Fatalf("the log holds an update that does not apply: %v", err)
			}
		}
		if got := stored.JSON("content", yjs.Text); got != want {
			t.Fatalf("the log reads %q, the room %q", got, want)
		}
		for _, p := range []*peer{a, b, v, hostile} {
			p.leave()
		}
		if out := h.outBytes.Load(); out != 0 {
			t.Fatalf("%d bytes still counted as waiting once every connection ended", out)
		}
	})
}

// alter takes a real update, cuts it where arg says and changes a byte of it.
func alter(update, arg []byte) []byte {
	u := append([]byte(nil), update...)
	if len(arg) > 0 && len(u) > 0 {
		u = u[:1+int(arg[0])%len(u)]
	}
	if len(arg) > 2 && len(u) > 0 {
		u[int(arg[1])%len(u)] ^= arg[2]
	}
	return u
}
