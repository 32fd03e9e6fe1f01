package live

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/collab/collab/internal/yjs"
)

// room is one document's connections on this replica.
type room struct {
	hub   *Hub
	key   string
	ready chan struct{}
	// loadErr is set before ready closes.
	loadErr error

	// refs and idleSince are guarded by hub.mu.
	refs      int
	idleSince time.Time

	mu    sync.Mutex
	doc   *yjs.Doc
	at    Cursor          // the log is applied up to here
	seq   uint64          // at.Seq
	seen  map[uint64]bool // sequence numbers after seq already applied (own appends)
	conns map[*conn]struct{}
	aware map[uint64]awareness
	// broken: the document holds an update the log refused; the room must not serve again.
	broken atomic.Bool
	// Pending change event: the grant of the last writer since the last event.
	dirty     bool
	lastGrant Grant
	lastEvent time.Time
}

// awareness is one Yjs client's presence state, owned by the connection that sent it.
type awareness struct {
	clock uint64
	state json.RawMessage
	owner *conn
}

// conn is one client connection.
type conn struct {
	ws    *websocket.Conn
	grant Grant
	// canWrite is the grant's CanWrite as of the last check: a recheck may change it.
	canWrite atomic.Bool
	// recheck asks the authorizer again, with the connection's token and ids (nil: never).
	recheck func(ctx context.Context) (Grant, error)
	// out feeds the connection's writer; closed (under mu) once, after which sends are dropped.
	out    chan []byte
	mu     sync.Mutex
	closed bool
	// The close code and reason, set with closed.
	code   websocket.StatusCode
	reason string
	// The Yjs client ids whose awareness this connection sent, with their last clock.
	clients map[uint64]uint64
}

func (r *room) load(ctx context.Context) error {
	// Bounded as the other log calls are: the room's lock is held meanwhile, and Close waits
	// for it.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	parts, at, err := r.hub.cfg.Log.Load(ctx, r.key)
	if err != nil {
		return err
	}
	seq := at.Seq
	r.at = at
	d := yjs.NewDoc()
	for _, p := range parts {
		if err := d.Apply(p); err != nil {
			return err
		}
	}
	r.doc, r.seq = d, seq
	return nil
}

// add registers a connection unless the room is full or must reload, or the hub is closing.
func (r *room) add(c *conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	// Close marks the hub before it closes each room's connections (under r.mu): a connection
	// added after that would stay open, so none is.
	if len(r.conns) >= r.hub.cfg.MaxConns || r.broken.Load() || r.hub.closing() {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

// send queues a frame for a connection; a client too slow to keep up is disconnected rather
// than buffered without bound. Frames for a closed connection are dropped.
func (c *conn) send(frame []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	select {
	case c.out <- frame:
	default:
		c.closeLocked(websocket.StatusTryAgainLater, "Too slow to keep up; reconnect.")
	}
}

func (c *conn) close(code websocket.StatusCode, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeLocked(code, reason)
}

// closeLocked stops the writer after what is queued, then closes the socket with the code.
func (c *conn) closeLocked(code websocket.StatusCode, reason string) {
	if c.closed {
		return
	}
	c.closed = true
	close(c.out)
	c.code, c.reason = code, reason
}

// serve runs a connection until it ends.
func (r *room) serve(c *conn) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		failed := false
		for f := range c.out {
			if failed {
				continue
			}
			wctx, cancel := context.WithTimeout(ctx, writeTimeout)
			err := c.ws.Write(wctx, websocket.MessageBinary, f)
			cancel()
			if err != nil {
				failed = true
				c.close(websocket.StatusGoingAway, "write failed")
			}
		}
		// The queue is closed: what was queued before the close went out (a refusal's reason
		// before its close code), now the close itself. This also ends the read loop.
		c.mu.Lock()
		code, reason := c.code, c.reason
		c.mu.Unlock()
		_ = c.ws.Close(code, reason)
	}()

	if c.grant.ValidFor > 0 {
		expiry := time.AfterFunc(c.grant.ValidFor, func() {
			c.send(yjs.PermissionDeniedFrame(msgExpired))
			c.close(statusDenied, msgExpired)
		})
		defer expiry.Stop()
	}
	if every := r.hub.cfg.Recheck; every > 0 && c.recheck != nil {
		go c.rechecking(ctx, every, r.hub.log)
	}
	r.mu.Lock()
	c.send(yjs.SyncFrame(yjs.SyncStep1, r.doc.StateVector()))
	if len(r.aware) > 0 {
		c.send(yjs.AwarenessFrame(r.awarenessStates()))
	}
	r.mu.Unlock()

	for {
		typ, frame, err := c.ws.Read(ctx)
		if err != nil {
			break
		}
		if typ != websocket.MessageBinary {
			continue
		}
		if !r.handle(ctx, c, frame) {
			break
		}
	}
	r.drop(c)
	c.close(websocket.StatusNormalClosure, "")
	<-writerDone
	r.hub.leave(r)
}

// rechecking asks the authorizer again every period (±20%, so connections opened together do
// not all ask at once) until ctx ends: a token reset, a revoked role or a deleted document ends
// the connection as a refusal at connect would (the reason, then 4403), and a changed role
// takes effect (an editor made viewer stops writing). When the authorizer cannot answer, the
// connection keeps what it was granted and is asked about again next period: a brief outage of
// the access service does not disconnect every editor.
func (c *conn) rechecking(ctx context.Context, every time.Duration, log *slog.Logger) {
	for {
		t := time.NewTimer(every - every/5 + rand.N(every*2/5+1)) //nolint:gosec // G404: jitter spreading checks needs no unpredictability
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		g, err := c.recheck(actx)
		cancel()
		var denied *DeniedError
		switch {
		case ctx.Err() != nil:
			return
		case errors.As(err, &denied):
			c.send(yjs.PermissionDeniedFrame(denied.Reason))
			c.close(statusDenied, truncate(denied.Reason, 120))
			return
		case err != nil:
			log.Warn("crdt sync: recheck of a connection's access failed; it keeps its grant until the next check", "err", err)
		case g.Key != c.grant.Key:
			// The same token and ids name another room: not possible today; refuse rather than
			// write to the wrong document.
			c.send(yjs.PermissionDeniedFrame(msgAccessChanged))
			c.close(statusDenied, msgAccessChanged)
			return
		default:
			c.canWrite.Store(g.CanWrite)
		}
	}
}

// handle acts on one frame; false ends the connection.
func (r *room) handle(ctx context.Context, c *conn, frame []byte) bool {
	m, err := yjs.ReadMessage(frame)
	if err != nil {
		c.close(statusMalformed, "Malformed message.")
		return false
	}
	switch m.Type {
	case yjs.MessageSync:
		switch m.Sync {
		case yjs.SyncStep1:
			r.mu.Lock()
			diff, err := r.doc.Encode(m.Payload)
			r.mu.Unlock()
			if err != nil {
				c.close(statusMalformed, "Malformed state vector.")
				return false
			}
			c.send(yjs.SyncFrame(yjs.SyncStep2, diff))
		case yjs.SyncStep2, yjs.SyncUpdate:
			if !c.canWrite.Load() {
				// A viewer's edits are not applied; y-websocket offers no refusal message
				// for them, so they are dropped and the client stays read-only in effect.
				return true
			}
			if err := r.write(ctx, c, m.Payload); err != nil {
				c.close(closeCode(err), err.Error())
				return false
			}
		}
	case yjs.MessageAwareness:
		r.mu.Lock()
		// Only entries of this connection's own clients are taken and relayed: a connection
		// may not remove or impersonate another's presence, nor grow the room's map without
		// bound.
		var accepted []yjs.AwarenessState
		for _, a := range m.Awareness {
			cur, known := r.aware[a.Client]
			if known && cur.owner != c {
				continue // another connection's client
			}
			if known && a.Clock < cur.clock {
				continue
			}
			if a.Gone() {
				if known {
					delete(r.aware, a.Client)
					delete(c.clients, a.Client)
					accepted = append(accepted, a)
				}
				continue
			}
			if !known && (len(c.clients) >= maxClientsPerConn || len(r.aware) >= maxAwarenessPerRoom) {
				continue
			}
			r.aware[a.Client] = awareness{clock: a.Clock, state: a.State, owner: c}
			c.clients[a.Client] = a.Clock
			accepted = append(accepted, a)
		}
		if len(accepted) > 0 {
			r.broadcastLocked(yjs.AwarenessFrame(accepted), nil)
		}
		r.mu.Unlock()
	case yjs.MessageQueryAwareness:
		r.mu.Lock()
		states := r.awarenessStates()
		r.mu.Unlock()
		if len(states) > 0 {
			c.send(yjs.AwarenessFrame(states))
		}
	}
	return true
}

// Awareness bounds: a browser tab is one Yjs client, so a connection rarely has more than
// one; a room's map is bounded too, whatever the connections.
const (
	maxClientsPerConn   = 16
	maxAwarenessPerRoom = 10000
)

// msgGone closes the connections of data that was deleted (or moved to another document id);
// 4410 keeps y-websocket's provider from reconnecting and writing its copy back.
const msgGone = "The CRDT data was deleted or moved."

// msgExpired ends a connection whose token expired.
const msgExpired = "Token has expired."

// msgAccessChanged ends a connection whose access no longer names its room.
const msgAccessChanged = "Access to this document changed; reconnect."

var (
	errTooLarge   = errors.New("The document would exceed its size limit.")
	errMalformed  = errors.New("Malformed update.")
	errTooComplex = errors.New("The update is too costly to integrate.")
	errGone       = errors.New(msgGone)
	errLogFailure = errors.New("The update could not be stored; reconnect.")
)

func closeCode(err error) websocket.StatusCode {
	switch {
	case errors.Is(err, errTooLarge):
		return statusTooLarge
	case errors.Is(err, errMalformed), errors.Is(err, errTooComplex):
		return statusMalformed
	case errors.Is(err, errGone):
		return statusGone
	}
	return statusLogFailure
}

// write applies a client's update, stores it, then relays it to the others. The room's lock
// is held throughout, so updates enter the log in the order they are relayed. An update that
// changes nothing (a client's echo of what it was sent) costs no write. When the log refuses
// the write, the document holds an update nobody else will see: the room's clients are
// disconnected and the room reloads from the log.
func (r *room) write(ctx context.Context, from *conn, update []byte) (err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.broken.Load() {
		return errLogFailure
	}
	defer func() {
		// A codec bug must not leave the room serving a document the log does not hold.
		if p := recover(); p != nil {
			r.hub.log.Error("crdt sync: update panicked", "panic", p)
			r.breakLocked(from)
			err = errMalformed
		}
	}()
	// Clients' updates are untrusted: each may cost and take only so much, and a refused one
	// leaves the document as it was.
	applied, err := r.doc.ApplyUntrusted(ctx, update, r.hub.cfg.Limits)
	switch {
	case errors.Is(err, yjs.ErrTooLarge):
		return errTooLarge
	case errors.Is(err, yjs.ErrTooComplex):
		return errTooComplex
	case err != nil:
		return errMalformed
	case !applied.Changed:
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	at, created, err := r.hub.cfg.Log.Append(wctx, r.key, r.at.Version, update)
	cancel()
	if errors.Is(err, ErrGone) {
		r.broken.Store(true)
		for c := range r.conns {
			c.close(statusGone, msgGone)
		}
		return errGone
	}
	if err != nil {
		r.hub.log.Warn("crdt sync: append", "err", err)
		r.breakLocked(from)
		return errLogFailure
	}
	switch {
	case created:
		// This update made the data: the log starts here.
		r.at, r.seq = at, at.Seq
		clear(r.seen)
	case at.Version == r.at.Version:
		r.markSeen(at.Seq)
	}
	// Otherwise the data was made anew by someone else: the next catch-up loads it.
	r.broadcastLocked(yjs.SyncFrame(yjs.SyncUpdate, update), from)
	r.dirty, r.lastGrant = true, from.grant
	return nil
}

// breakLocked marks the room's document as out of step with the log: the other connections
// are closed to reconnect (to a room loaded again), the sender's by its caller with the reason.
func (r *room) breakLocked(from *conn) {
	r.broken.Store(true)
	for c := range r.conns {
		if c != from {
			c.close(websocket.StatusTryAgainLater, "The document is reloading; reconnect.")
		}
	}
}

// markSeen records an applied sequence number; seq advances over a contiguous run.
func (r *room) markSeen(seq uint64) {
	if seq <= r.seq {
		return
	}
	r.seen[seq] = true
	for r.seen[r.seq+1] {
		delete(r.seen, r.seq+1)
		r.seq++
	}
}

// applyStored applies an update stored elsewhere on this replica, or found in the log, and
// relays it. An update of another incarnation of the data, or the one that created it (seq
// 0), is applied whatever the room has seen: applying twice changes nothing.
func (r *room) applyStored(at Cursor, update []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	same := at.Version == r.at.Version && at.Seq > 0
	if r.doc == nil || (same && (at.Seq <= r.seq || r.seen[at.Seq])) {
		return
	}
	changed, err := r.doc.ApplyChanged(update)
	if same {
		r.markSeen(at.Seq)
	}
	if err != nil || !changed {
		return
	}
	r.broadcastLocked(yjs.SyncFrame(yjs.SyncUpdate, update), nil)
}

func (r *room) broadcastLocked(frame []byte, except *conn) {
	for c := range r.conns {
		if c != except {
			c.send(frame)
		}
	}
}

func (r *room) awarenessStates() []yjs.AwarenessState {
	out := make([]yjs.AwarenessState, 0, len(r.aware))
	for id, a := range r.aware {
		out = append(out, yjs.AwarenessState{Client: id, Clock: a.clock, State: a.state})
	}
	return out
}

// drop removes a connection and tells the others its clients are gone.
func (r *room) drop(c *conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.conns, c)
	var gone []yjs.AwarenessState
	for id, clock := range c.clients {
		if a, ok := r.aware[id]; ok && a.owner == c {
			delete(r.aware, id)
			gone = append(gone, yjs.AwarenessState{Client: id, Clock: clock + 1, State: json.RawMessage("null")})
		}
	}
	if len(gone) > 0 {
		r.broadcastLocked(yjs.AwarenessFrame(gone), nil)
	}
}

// closeAll closes every connection of the room with the code.
func (r *room) closeAll(code websocket.StatusCode, reason string) {
	r.mu.Lock()
	conns := make([]*conn, 0, len(r.conns))
	for c := range r.conns {
		conns = append(conns, c)
	}
	r.mu.Unlock()
	for _, c := range conns {
		c.close(code, reason)
	}
}

// follow polls the log for updates other replicas stored, emits change events, and unloads
// the room when it has been idle.
func (r *room) follow() {
	defer r.hub.wg.Done()
	t := time.NewTicker(r.hub.cfg.Poll)
	defer t.Stop()
	for {
		select {
		case <-r.hub.done:
			r.flushEvent(true)
			return
		case <-t.C:
		}
		if r.broken.Load() {
			r.hub.forget(r)
			r.flushEvent(true)
			return
		}
		r.catchUp()
		r.flushEvent(false)
		if r.hub.unloadIfIdle(r) {
			r.flushEvent(true)
			return
		}
	}
}

func (r *room) catchUp() {
	r.mu.Lock()
	at := Cursor{Version: r.at.Version, Seq: r.seq}
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	entries, reset, err := r.hub.cfg.Log.Since(ctx, r.key, at)
	if errors.Is(err, ErrGone) {
		r.broken.Store(true)
		r.closeAll(statusGone, msgGone)
		return
	}
	if err != nil {
		r.hub.log.Warn("crdt sync: follow the log", "err", err)
		return
	}
	if reset {
		parts, at, err := r.hub.cfg.Log.Load(ctx, r.key)
		if err != nil {
			r.hub.log.Warn("crdt sync: reload", "err", err)
			return
		}
		r.mu.Lock()
		sv := r.doc.StateVector()
		changed := false
		for _, p := range parts {
			if c, err := r.doc.ApplyChanged(p); err == nil && c {
				changed = true
			}
		}
		if changed {
			if diff, err := r.doc.Encode(sv); err == nil {
				r.broadcastLocked(yjs.SyncFrame(yjs.SyncUpdate, diff), nil)
			}
		}
		// The log restarted (new data) or moved past a compaction: follow it from here.
		r.at, r.seq = at, at.Seq
		clear(r.seen)
		r.mu.Unlock()
		return
	}
	for _, e := range entries {
		r.applyStored(Cursor{Version: at.Version, Seq: e.Seq}, e.Update)
	}
}

// flushEvent tells Changed about client edits, at most once per EventEvery (now: at once).
func (r *room) flushEvent(now bool) {
	if r.hub.cfg.Changed == nil {
		return
	}
	r.mu.Lock()
	if !r.dirty || (!now && time.Since(r.lastEvent) < r.hub.cfg.EventEvery) {
		r.mu.Unlock()
		return
	}
	r.dirty = false
	r.lastEvent = time.Now()
	g := r.lastGrant
	state, _ := r.doc.Encode(nil)
	r.mu.Unlock()
	r.hub.cfg.Changed(g, state)
}
