package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/collab/collab/internal/yjs"
)

// keepBytes is how much of a server's frame a client here holds: the rest is read and
// discarded, so the test process never holds the giant frames a broken server sends.
const keepBytes = 1 << 20

// frame is one message read from the server: its first bytes (at most keepBytes) and its size.
type frame struct {
	head []byte
	size int64
}

// readFrame reads one message, keeping its start and discarding the rest.
func readFrame(ctx context.Context, ws *websocket.Conn) (frame, error) {
	_, r, err := ws.Reader(ctx)
	if err != nil {
		return frame{}, err
	}
	head, err := io.ReadAll(io.LimitReader(r, keepBytes))
	if err != nil {
		return frame{}, err
	}
	rest, err := io.Copy(io.Discard, r)
	if err != nil {
		return frame{}, err
	}
	return frame{head: head, size: int64(len(head)) + rest}, nil
}

// whole is the frame's message when readFrame kept all of it.
func (f frame) whole() (yjs.Message, bool) {
	if f.size != int64(len(f.head)) {
		return yjs.Message{}, false
	}
	m, err := yjs.ReadMessage(f.head)
	return m, err == nil
}

// dialRaw opens a WebSocket without a size limit on what it reads (readFrame bounds what is
// kept).
func dialRaw(ctx context.Context, url string) (*websocket.Conn, error) {
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	ws.SetReadLimit(-1)
	return ws, nil
}

// closeWatch reads a socket in the background, discarding what it gets, to learn how the
// server ends it: an attacker that reads only to see its close code.
type closeWatch struct {
	ws      *websocket.Conn
	closing atomic.Bool // close was called
	done    chan struct{}
	// Set before done closes: why reading ended, and whether it was our side's doing (ctx
	// ended: the scenario is over or the watchdog stopped it; or close was called).
	err  error
	ours bool
}

func watchClose(ctx context.Context, ws *websocket.Conn) *closeWatch {
	w := &closeWatch{ws: ws, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			if _, err := readFrame(ctx, ws); err != nil {
				w.err, w.ours = err, ctx.Err() != nil || w.closing.Load()
				return
			}
		}
	}()
	return w
}

// close closes the socket from our side: the watch then reads as open if the server had not
// ended it.
func (w *closeWatch) close() {
	w.closing.Store(true)
	w.ws.CloseNow()
}

// wait waits up to d for the server to end the socket; it reports whether it did.
func (w *closeWatch) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.done:
		return true
	default:
	}
	select {
	case <-w.done:
		return true
	case <-t.C:
		return false
	}
}

// await waits up to d for the server to end the socket and says how it stands then: what
// the attacker saw, kept apart from the end a watchdog's kill gives it later.
func (w *closeWatch) await(d time.Duration) string {
	w.wait(d)
	return w.String()
}

// ended reports whether the server (or the network) ended the socket.
func (w *closeWatch) ended() bool { return w.wait(0) && !w.ours }

// code is the close code the server sent; -1 while open or when it ended without one.
func (w *closeWatch) code() websocket.StatusCode {
	if !w.ended() {
		return -1
	}
	return websocket.CloseStatus(w.err)
}

// String says how the socket stands: open, closed with a code and reason, or lost.
func (w *closeWatch) String() string {
	if !w.ended() {
		return "open"
	}
	var ce websocket.CloseError
	if errors.As(w.err, &ce) {
		return fmt.Sprintf("closed %d %q", ce.Code, ce.Reason)
	}
	return fmt.Sprintf("lost (%v)", w.err)
}

// honestPeer is a well-behaved y-websocket client: it sends step 1, answers the server's step
// 1, reads every frame as it comes and makes small edits to a root of its own ("honest"). It
// applies only updates of up to honestApplyMax: its job is to show whether the server still
// serves honest clients promptly, its own root's edits are small and depend on nothing else,
// and integrating the attacker's pieces would load the machine the server runs on.
type honestPeer struct {
	ws      *websocket.Conn
	synced  chan struct{} // closed when the answer to its step 1 arrived
	changed chan struct{} // signalled after each applied update
	ended   chan struct{} // closed when reading stopped

	mu     sync.Mutex
	doc    *yjs.Doc
	endErr error
}

// honestRoot is the root the honest clients edit; honestApplyMax bounds the updates they
// apply.
const (
	honestRoot     = "honest"
	honestApplyMax = 64 << 10
)

func dialHonest(ctx context.Context, url string) (*honestPeer, error) {
	ws, err := dialRaw(ctx, url)
	if err != nil {
		return nil, err
	}
	p := &honestPeer{ws: ws, doc: yjs.NewDoc(), synced: make(chan struct{}), changed: make(chan struct{}, 1), ended: make(chan struct{})}
	if err := ws.Write(ctx, websocket.MessageBinary, yjs.SyncFrame(yjs.SyncStep1, p.doc.StateVector())); err != nil {
		ws.CloseNow()
		return nil, fmt.Errorf("honest client: send step 1: %w", err)
	}
	go p.read()
	return p, nil
}

func (p *honestPeer) read() {
	defer close(p.ended)
	var once sync.Once
	for {
		f, err := readFrame(context.Background(), p.ws)
		if err != nil {
			p.mu.Lock()
			p.endErr = err
			p.mu.Unlock()
			return
		}
		if len(f.head) < 2 || f.head[0] != yjs.MessageSync {
			continue
		}
		switch f.head[1] {
		case yjs.SyncStep1:
			if m, ok := f.whole(); ok {
				p.mu.Lock()
				diff, err := p.doc.Encode(m.Payload)
				p.mu.Unlock()
				if err == nil {
					_ = p.ws.Write(context.Background(), websocket.MessageBinary, yjs.SyncFrame(yjs.SyncStep2, diff))
				}
			}
		case yjs.SyncStep2:
			once.Do(func() { close(p.synced) })
		case yjs.SyncUpdate:
			if m, ok := f.whole(); ok && f.size <= honestApplyMax {
				p.mu.Lock()
				_ = p.doc.Apply(m.Payload)
				p.mu.Unlock()
				select {
				case p.changed <- struct{}{}:
				default:
				}
			}
		}
	}
}

// alive is nil while the connection is open, else why it ended.
func (p *honestPeer) alive() error {
	select {
	case <-p.ended:
		p.mu.Lock()
		defer p.mu.Unlock()
		return fmt.Errorf("disconnected (%w)", p.endErr)
	default:
		return nil
	}
}

// edit makes the peer's root hold text and sends the update.
func (p *honestPeer) edit(ctx context.Context, text string) error {
	p.mu.Lock()
	u, err := p.doc.Replace(honestRoot, yjs.Text, text)
	p.mu.Unlock()
	if err != nil {
		return fmt.Errorf("honest edit: %w", err)
	}
	if err := p.ws.Write(ctx, websocket.MessageBinary, yjs.SyncFrame(yjs.SyncUpdate, u)); err != nil {
		return fmt.Errorf("honest edit: send: %w", err)
	}
	return nil
}

// waitText waits until the peer's root reads want.
func (p *honestPeer) waitText(ctx context.Context, want string) error {
	for {
		p.mu.Lock()
		got, _ := p.doc.JSON(honestRoot, yjs.Text).(string)
		p.mu.Unlock()
		if got == want {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the other client reads %q, want %q: %w", got, want, context.Cause(ctx))
		case <-p.ended:
			return p.alive()
		case <-p.changed:
		}
	}
}

func (p *honestPeer) close() { p.ws.CloseNow() }
