package live

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
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

	mu  sync.Mutex
	doc *yjs.Doc
	// size is doc.Size() as the hub's docBytes counts it.
	size int
	at   Cursor          // the log is applied up to here
	seq  uint64          // at.Seq
	seen map[uint64]bool // sequence numbers after seq already applied (own appends)

	conns map[*conn]struct{}
	users map[string]*userBudget
	aware map[uint64]awareness
	// awareBytes counts the states in aware.
	awareBytes int
	// owners holds the Yjs client ids announced in awareness and the user whose connection
	// announced each first in the room's life (owners.go); ownedBy counts each user's.
	owners  map[uint64]string
	ownedBy map[string]int
	// claimsAfterPrune is len(owners) after the last pruneClaimsLocked.
	claimsAfterPrune int
	// batch holds clients' updates applied to doc and not yet stored and relayed, awareOut
	// the awareness entries not yet relayed (each client's latest); flushing: a flush is on
	// its way. Updates that arrive together go out together, stored once and relayed in one
	// frame.
	batch    []batched
	awareOut map[uint64]yjs.AwarenessState
	flushing bool
	// flushMu makes flushes one at a time; it is taken before mu.
	flushMu sync.Mutex
	// lastFlush is when the last flush began.
	lastFlush time.Time
	// closed: the room's last tick ran; nothing is batched any more.
	closed bool
	timer  *time.Timer

	// broken: the document holds an update the log refused; the room must not serve again.
	broken atomic.Bool

	// Following the log (wake.go): followMu makes catch-ups one at a time (it is taken before
	// flushMu); lastFollow (under mu) is when the last began; unsub ends the room's wake-up
	// subscription; woken is set while a wake-up's catch-up waits to run, wakeAt holds the
	// cursor the last wake-up announced (nil: unknown).
	followMu   sync.Mutex
	lastFollow time.Time
	unsub      func()
	woken      atomic.Bool
	wakeAt     atomic.Pointer[Cursor]
	// Pending change event: the grant of the last writer since the last event.
	dirty     bool
	lastGrant Grant
	lastEvent time.Time
}

// batched is a client's update applied to the room's document, waiting to be stored.
type batched struct {
	update []byte
	from   *conn
}

// awareness is one Yjs client's presence state, owned by the connection that sent it.
type awareness struct {
	clock uint64
	state json.RawMessage
	owner *conn
}

func newRoom(h *Hub, key string) *room {
	// The other maps are made when first written: most rooms never need them.
	return &room{hub: h, key: key, ready: make(chan struct{}), conns: map[*conn]struct{}{},
		users: map[string]*userBudget{}}
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
	d := yjs.NewDoc()
	for _, p := range parts {
		if err := d.Apply(p); err != nil {
			return err
		}
	}
	r.doc, r.at, r.seq = d, at, at.Seq
	r.recountLocked()
	return nil
}

// recountLocked brings the hub's count of loaded documents' memory up to date.
func (r *room) recountLocked() {
	n := r.doc.Size()
	r.hub.docBytes.Add(int64(n - r.size))
	r.size = n
}

// add registers a connection unless the room is full (for its user too) or must reload, or
// the hub is closing; the error says which.
func (r *room) add(c *conn) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	// Close marks the hub before it closes each room's connections (under r.mu): a connection
	// added after that would stay open, so none is.
	switch {
	case r.hub.closing() || r.closed:
		return errClosing
	case r.broken.Load() || len(r.conns) >= r.hub.cfg.MaxConns:
		return errFull
	}
	u := r.users[c.grant.UserID]
	if u == nil {
		u = &userBudget{tokens: r.hub.cfg.WorkBurst, last: time.Now()}
		r.users[c.grant.UserID] = u
	}
	if u.conns >= r.hub.cfg.MaxConnsPerUser {
		return errUserFull
	}
	u.conns++
	c.user, c.room = u, r
	r.conns[c] = struct{}{}
	return nil
}

// serve runs a connection until it ends, reading its frames from ws.
func (r *room) serve(c *conn, ws *websocket.Conn) {
	defer c.cancel()
	ctx := c.ctx
	if c.grant.ValidFor > 0 {
		expiry := time.AfterFunc(c.grant.ValidFor, func() { c.refuse(msgExpired) })
		defer expiry.Stop()
	}
	r.greet(c)
	for r.readOne(ctx, c, ws) {
	}
	r.drop(c)
	c.close(websocket.StatusNormalClosure, "")
	<-c.done
	r.hub.leave(r)
}

// greet sends a new connection the room's state vector (sync step 1: the client answers with
// what the room lacks) and the room's awareness.
func (r *room) greet(c *conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c.sendNew(yjs.SyncFrame(yjs.SyncStep1, r.doc.StateVector()))
	if len(r.aware) > 0 {
		c.sendNew(yjs.AwarenessFrame(r.awarenessStates()))
	}
}

// readOne waits while the user's budget is in debt, then reads and handles one frame; false
// ends the connection. The debt is the user's, not the connection's: a new connection's first
// frame waits for it too (else reconnecting would make every first frame free).
func (r *room) readOne(ctx context.Context, c *conn, ws *websocket.Conn) bool {
	wait, over := c.user.charge(0, &r.hub.cfg)
	if over {
		c.close(statusTooMany, msgTooMuchWork)
		return false
	}
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-c.done:
			return false
		}
	}
	typ, frame, err := readFrame(ws, r.hub.cfg.MaxFrame)
	if errors.Is(err, errFrameTooLarge) {
		c.close(statusTooLarge, msgFrameTooLarge)
		return false
	}
	if err != nil {
		return false
	}
	work, ok := 0, true
	if typ == websocket.MessageBinary { // a text frame is not the protocol's: dropped, once read
		work, ok = r.handle(ctx, c, frame)
	}
	// Charged whatever came of it: a refused update took the work it was allowed, and the
	// user's next connection owes it.
	if _, over := c.user.charge(1+len(frame)/1024+work, &r.hub.cfg); over && ok {
		c.close(statusTooMany, msgTooMuchWork)
		return false
	}
	return ok
}

// handle acts on one frame and returns the work it took; false ends the connection.
func (r *room) handle(ctx context.Context, c *conn, frame []byte) (int, bool) {
	m, err := yjs.ReadMessage(frame)
	if err != nil {
		c.close(statusMalformed, "Malformed message.")
		return 0, false
	}
	switch m.Type {
	case yjs.MessageSync:
		switch m.Sync {
		case yjs.SyncStep1:
			if !yjs.ValidStateVector(m.Payload) {
				c.close(statusMalformed, "Malformed state vector.")
				return 0, false
			}
			c.askSync(m.Payload)
		case yjs.SyncStep2, yjs.SyncUpdate:
			if !c.canWrite.Load() {
				// A viewer's edits are not applied; y-websocket offers no refusal message
				// for them, so they are dropped and the client stays read-only in effect.
				return 0, true
			}
			var work int
			var err error
			onOwnStack(func() { work, err = r.write(ctx, c, m.Payload) })
			if err != nil {
				// The work is charged before the close goes out (readOne charges the frame's
				// bytes after): a client that sees its update refused and connects again must
				// find the debt already there, as TestReview19RefusedWorkIsCharged found under load.
				c.user.charge(work, &r.hub.cfg)
				c.close(closeCode(err), err.Error())
				return 0, false
			}
			return work, true
		}
	case yjs.MessageAwareness:
		n, err := r.awareness(c, m.Awareness)
		if err != nil {
			c.close(statusTooLarge, err.Error())
			return 0, false
		}
		// Relaying costs a write to each connection.
		return n * (len(m.Payload)/256 + 16), true
	case yjs.MessageQueryAwareness:
		c.askPeers()
	}
	return 0, true
}

// onOwnStack runs f on a goroutine of its own and waits for it. Applying an update goes deep
// into the codec, and a goroutine's stack keeps the size it grew to: run on the connection's
// reader, it would leave every idle connection holding 8 KiB of stack instead of 4.
func onOwnStack(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

// write applies a client's update to the room's document and batches it to be stored and
// relayed (flush), and returns the work it took. An update that changes nothing (a client's
// echo of what it was sent) costs no write. A refused one leaves the document as it was.
func (r *room) write(ctx context.Context, from *conn, update []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.broken.Load() || r.closed {
		return 0, errLogFailure
	}
	// Clients' updates are untrusted: each may cost and take only so much, and write only
	// under client ids no other user holds.
	lim := r.hub.cfg.Limits
	lim.MayWrite = r.mayWriteLocked(from.grant.UserID)
	applied, err := r.applyLocked(ctx, update, lim)
	switch {
	case errors.Is(err, errApplyFailure):
		return applied.Work, err
	case errors.Is(err, yjs.ErrForeignClient):
		return applied.Work, errForeignClient
	case errors.Is(err, yjs.ErrTooLarge):
		return applied.Work, errTooLarge
	case errors.Is(err, yjs.ErrTooComplex):
		return applied.Work, errTooComplex
	case err != nil && ctx.Err() != nil:
		return applied.Work, ctx.Err()
	case err != nil:
		return applied.Work, errMalformed
	case !applied.Changed:
		return applied.Work, nil
	}
	r.recountLocked()
	r.batch = append(r.batch, batched{update: update, from: from})
	r.scheduleFlushLocked()
	return applied.Work, nil
}

// applyFunc applies a client's update to a document: the codec's ApplyUntrusted.
type applyFunc func(d *yjs.Doc, ctx context.Context, update []byte, lim yjs.Limits) (yjs.Applied, error)

// applyHook replaces the codec in tests (nil: the codec); atomic, for rooms read it on other
// goroutines than the test's.
var applyHook atomic.Pointer[applyFunc]

// applyLocked applies a client's update to the room's document. A panic of the codec on it (a
// bug: the fuzz targets look for them) ends the room, not the process: the document may be
// half changed, so the room's connections are closed to reconnect to a room loaded again from
// the log, and the sender is told the update could not be applied.
func (r *room) applyLocked(ctx context.Context, update []byte, lim yjs.Limits) (applied yjs.Applied, err error) {
	defer func() {
		if p := recover(); p != nil {
			r.hub.log.Error("crdt sync: the codec panicked on a client's update; the room reloads from the log",
				"room", r.key, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			r.breakLocked()
			applied, err = yjs.Applied{}, errApplyFailure
		}
	}()
	if h := applyHook.Load(); h != nil {
		return (*h)(r.doc, ctx, update, lim)
	}
	return r.doc.ApplyUntrusted(ctx, update, lim)
}

// scheduleFlushLocked makes sure a flush is on its way: at once when the room has not flushed
// for FlushEvery, else FlushEvery after the last flush began. A lone edit goes out at once;
// while clients type fast, what arrives within FlushEvery goes out together, so each reader
// gets one frame per FlushEvery instead of one per edit (a frame costs a write to every
// reader: most of the server's work at 800 edits a second to 100 readers).
func (r *room) scheduleFlushLocked() {
	if r.flushing {
		return
	}
	r.flushing = true
	if wait := r.hub.cfg.FlushEvery - time.Since(r.lastFlush); wait > 0 {
		time.AfterFunc(wait, r.flushes)
		return
	}
	go r.flushes()
}

// flushes flushes until nothing waits, at most once per FlushEvery.
func (r *room) flushes() {
	for {
		r.flush()
		r.mu.Lock()
		if (len(r.batch) == 0 && len(r.awareOut) == 0) || r.closed {
			r.flushing = false
			r.mu.Unlock()
			return
		}
		wait := r.hub.cfg.FlushEvery - time.Since(r.lastFlush)
		r.mu.Unlock()
		time.Sleep(wait)
	}
}

// flush stores the batched updates in the log, then relays them to the room's other clients in
// one frame (merged), then relays the awareness entries that changed. Flushes of a room run one
// at a time (flushMu), so the log's order is the relay order and nobody is sent an update the
// log does not hold; the room's lock is let go while the log writes, so its latency holds no
// client up (what they send meanwhile goes with the next flush).
func (r *room) flush() {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	r.mu.Lock()
	r.lastFlush = time.Now()
	batch := r.batch
	r.batch = nil
	r.mu.Unlock()
	if len(batch) > 0 {
		r.store(batch, false)
	}
	r.mu.Lock()
	r.relayAwarenessLocked()
	r.mu.Unlock()
}

// flushHeld is flush for a caller that holds flushMu and the room's lock (the room's end).
func (r *room) flushHeld() {
	if batch := r.batch; len(batch) > 0 {
		r.batch = nil
		r.store(batch, true)
	}
	r.relayAwarenessLocked()
}

func (r *room) relayAwarenessLocked() {
	if len(r.awareOut) == 0 || r.broken.Load() {
		return
	}
	states := make([]yjs.AwarenessState, 0, len(r.awareOut))
	for _, s := range r.awareOut {
		states = append(states, s)
	}
	r.awareOut = nil // made again at the next change: most rooms' presence rarely changes
	slices.SortFunc(states, func(a, b yjs.AwarenessState) int { return cmp.Compare(a.Client, b.Client) })
	r.broadcastLocked(yjs.AwarenessFrame(states), nil)
}

// mergeAtMost is the batch size merged into one update; beyond it (a large paste) each update
// goes on its own, as merging re-encodes them all.
const mergeAtMost = 1 << 20

// store appends a batch to the log, merged, and relays it. The caller holds the room's lock
// when held; else it is taken for what touches the room, and the log writes without it.
func (r *room) store(batch []batched, held bool) {
	size := 0
	updates := make([][]byte, 0, len(batch))
	for _, b := range batch {
		size += len(b.update)
		updates = append(updates, b.update)
	}
	if len(batch) > 1 && size <= mergeAtMost {
		if merged, err := yjs.Merge(updates...); err == nil {
			updates = [][]byte{merged}
		}
	}
	from := batch[0].from
	for _, b := range batch {
		if b.from != from {
			from = nil // several senders: each gets the others' updates, and its own again
		}
	}
	lock, unlock := r.mu.Lock, r.mu.Unlock
	if held {
		lock, unlock = func() {}, func() {}
	}
	for _, u := range updates {
		lock()
		version := r.at.Version
		unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		at, created, err := r.hub.cfg.Log.Append(ctx, r.key, version, u)
		cancel()
		lock()
		ok := r.appendedLocked(at, created, err)
		if ok {
			r.hub.Wake(r.key, at)
			r.broadcastLocked(yjs.SyncFrame(yjs.SyncUpdate, u), from)
			r.dirty, r.lastGrant = true, batch[len(batch)-1].from.grant
		}
		unlock()
		if !ok {
			return
		}
	}
}

// appendedLocked takes in the log's answer to an append; false when the log refused it (the
// room's connections are closed).
func (r *room) appendedLocked(at Cursor, created bool, err error) bool {
	if errors.Is(err, ErrGone) {
		r.broken.Store(true)
		for c := range r.conns {
			c.close(statusGone, msgGone)
		}
		return false
	}
	if err != nil {
		r.hub.log.Warn("crdt sync: append", "err", err)
		r.breakLocked()
		return false
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
	return true
}

// breakLocked marks the room's document as out of step with the log: its connections are
// closed to reconnect (to a room loaded again).
func (r *room) breakLocked() {
	r.broken.Store(true)
	for c := range r.conns {
		c.close(websocket.StatusTryAgainLater, msgReloading)
	}
}

// answerSync makes the answer to a connection's sync step 1: what the room's document has
// that the state vector lacks, after storing what is batched (the log holds whatever a client
// is sent). Its cost goes to the user's budget. Nil when there is nothing to send.
func (r *room) answerSync(c *conn, sv []byte) *frame {
	// What is batched is stored first (the store writing without the room's lock): the answer
	// holds what the log holds, and at most the updates of the few milliseconds since, which
	// are being stored.
	r.flush()
	r.mu.Lock()
	if r.broken.Load() {
		r.mu.Unlock()
		return nil
	}
	diff, err := r.doc.Encode(sv)
	r.mu.Unlock()
	if err != nil {
		c.close(statusMalformed, "Malformed state vector.")
		return nil
	}
	// Encoding costs about a step per 16 bytes; the reader pays it before its next frame.
	c.user.charge(len(diff)/16, &r.hub.cfg)
	return r.answerFrame(c, yjs.SyncFrame(yjs.SyncStep2, diff))
}

// answerFrame makes an answer's frame, unless the bytes waiting for the connection's user (its
// answers not written yet) or for the whole process would pass their bounds (MaxUserOutBytes,
// MaxOutBytes): then the connection is closed (1013, to come back later). A user whose
// connections ask and do not read holds its own share, not the process's.
func (r *room) answerFrame(c *conn, data []byte) *frame {
	n := int64(len(data))
	if c.user.out.Add(n) > int64(r.hub.cfg.MaxUserOutBytes) || r.hub.outBytes.Load()+n > int64(r.hub.cfg.MaxOutBytes) {
		c.user.out.Add(-n)
		c.close(websocket.StatusTryAgainLater, msgBusy)
		return nil
	}
	f := r.hub.newFrame(data, 1)
	f.user = c.user
	return f
}

// answerPeers makes the answer to a query of awareness: the room's states (at most
// MaxAwarenessRoom bytes of them).
func (r *room) answerPeers(c *conn) *frame {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.aware) == 0 {
		return nil
	}
	c.user.charge(r.awareBytes/256+len(r.aware), &r.hub.cfg)
	return r.answerFrame(c, yjs.AwarenessFrame(r.awarenessStates()))
}

// awareness takes a connection's awareness entries and relays those it may set, and returns
// how many it relays. Only entries of the connection's own clients are taken: a connection may
// not remove or impersonate another's presence. A state over MaxAwarenessState bytes is an
// error (the connection ends); entries past the connection's MaxClientsPerConn clients or the
// room's MaxAwarenessRoom bytes are dropped.
func (r *room) awareness(c *conn, states []yjs.AwarenessState) (int, error) {
	for _, a := range states {
		if len(a.State) > r.hub.cfg.MaxAwarenessState {
			return 0, errAwarenessTooLarge
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, a := range states {
		cur, known := r.aware[a.Client]
		if (known && cur.owner != c) || (known && a.Clock < cur.clock) {
			continue
		}
		if a.Gone() {
			if known {
				r.forgetAwareLocked(c, a.Client, a.Clock)
				n++
			}
			continue
		}
		// Claimed whether or not its presence is kept: a room whose presence is full (a
		// writer's own states may fill it) must still hold the ids announced in it.
		if !r.claimLocked(c.grant.UserID, a.Client) {
			continue // another user's client id: its presence is not taken over
		}
		grow := len(a.State) - len(cur.state)
		if (!known && len(c.clients) >= r.hub.cfg.MaxClientsPerConn) || r.awareBytes+grow > r.hub.cfg.MaxAwarenessRoom {
			continue
		}
		if r.aware == nil {
			r.aware = map[uint64]awareness{}
		}
		if c.clients == nil {
			c.clients = map[uint64]uint64{}
		}
		r.aware[a.Client] = awareness{clock: a.Clock, state: a.State, owner: c}
		r.awareBytes += grow
		c.clients[a.Client] = a.Clock
		r.relayAwareLocked(a)
		n++
	}
	if n > 0 {
		r.scheduleFlushLocked()
	}
	return n, nil
}

// forgetAwareLocked removes a client's awareness and relays that it is gone.
func (r *room) forgetAwareLocked(c *conn, client, clock uint64) {
	r.awareBytes -= len(r.aware[client].state)
	delete(r.aware, client)
	delete(c.clients, client)
	r.relayAwareLocked(yjs.AwarenessState{Client: client, Clock: clock, State: json.RawMessage("null")})
}

// relayAwareLocked makes an awareness entry go out with the next flush.
func (r *room) relayAwareLocked(a yjs.AwarenessState) {
	if r.awareOut == nil {
		r.awareOut = map[uint64]yjs.AwarenessState{}
	}
	r.awareOut[a.Client] = a
}

// markSeen records an applied sequence number; seq advances over a contiguous run.
func (r *room) markSeen(seq uint64) {
	if seq <= r.seq {
		return
	}
	if r.seen == nil {
		r.seen = map[uint64]bool{}
	}
	r.seen[seq] = true
	for r.seen[r.seq+1] {
		delete(r.seen, r.seq+1)
		r.seq++
	}
}

// applyStored applies an update stored elsewhere on this replica, or found in the log, and
// relays it, and reports whether the room had not applied it yet. An update of another
// incarnation of the data, or the one that created it (seq 0), is applied whatever the room
// has seen: applying twice changes nothing.
func (r *room) applyStored(at Cursor, update []byte) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	same := at.Version == r.at.Version && at.Seq > 0
	if r.doc == nil || (same && (at.Seq <= r.seq || r.seen[at.Seq])) {
		return false
	}
	changed, err := r.doc.ApplyChanged(update)
	if same {
		r.markSeen(at.Seq)
	}
	if err != nil || !changed {
		return same
	}
	r.recountLocked()
	r.broadcastLocked(yjs.SyncFrame(yjs.SyncUpdate, update), nil)
	return true
}

// broadcastLocked queues one frame, shared, to every connection but except.
func (r *room) broadcastLocked(data []byte, except *conn) {
	n := len(r.conns)
	if except != nil {
		if _, ok := r.conns[except]; ok {
			n--
		}
	}
	if n == 0 {
		return
	}
	f := r.hub.newFrame(data, n)
	for c := range r.conns {
		if c != except {
			c.send(f)
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
	c.user.conns--
	for id, clock := range c.clients {
		if a, ok := r.aware[id]; ok && a.owner == c {
			r.forgetAwareLocked(c, id, clock+1)
		}
	}
	if len(r.awareOut) > 0 {
		r.scheduleFlushLocked()
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

// tick is the room's periodic work, on a timer (no goroutine waits between ticks): it follows
// the log for updates other replicas stored, starts the access checks that are due, emits
// change events, and unloads the room when it has been idle. The last tick ends the room.
func (r *room) tick() {
	h := r.hub
	switch {
	case h.closing():
		r.finish()
		return
	case r.broken.Load():
		h.forget(r)
		r.finish()
		return
	}
	now := time.Now()
	if r.safetyPollDue(now) && r.catchUp() > 0 && h.cfg.Wakeup != nil && h.cfg.SafetyPoll > 0 {
		// Entries no wake-up announced: one was lost (or is a moment late).
		h.cfg.Wakeup.Missed()
	}
	r.flushEvent(false)
	r.mu.Lock()
	for c := range r.conns {
		c.recheckDue(now, h.log)
	}
	r.pruneUsersLocked()
	r.pruneClaimsLocked()
	r.mu.Unlock()
	if h.unloadIfIdle(r) {
		r.finish()
		return
	}
	r.mu.Lock()
	r.timer.Reset(h.cfg.Poll)
	r.mu.Unlock()
}

// pruneUsersLocked forgets the budgets of users with no connection whose debt is paid: a
// reconnecting client keeps its debt, and the map does not grow with every user ever seen.
func (r *room) pruneUsersLocked() {
	if len(r.users) <= len(r.conns)+64 {
		return
	}
	for id, u := range r.users {
		if u.conns == 0 && u.paid(&r.hub.cfg) {
			delete(r.users, id)
		}
	}
}

// finish ends the room: what is batched is stored, the last change event goes, the hub's
// counts forget it.
func (r *room) finish() {
	if r.unsub != nil {
		r.unsub()
	}
	r.followMu.Lock()
	defer r.followMu.Unlock()
	r.flushMu.Lock()
	r.mu.Lock()
	r.closed = true
	r.flushHeld()
	r.hub.docBytes.Add(-int64(r.size))
	r.size = 0
	r.mu.Unlock()
	r.flushMu.Unlock()
	r.flushEvent(true)
	r.hub.wg.Done()
}

// catchUp reads the log after what the room holds and applies what it finds, one catch-up at
// a time; it returns how many entries were new to the room.
func (r *room) catchUp() int {
	r.followMu.Lock()
	defer r.followMu.Unlock()
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return 0
	}
	r.lastFollow = time.Now()
	at := Cursor{Version: r.at.Version, Seq: r.seq}
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	entries, reset, err := r.hub.cfg.Log.Since(ctx, r.key, at)
	if errors.Is(err, ErrGone) {
		r.broken.Store(true)
		r.closeAll(statusGone, msgGone)
		return 0
	}
	if err != nil {
		r.hub.log.Warn("crdt sync: follow the log", "err", err)
		return 0
	}
	if reset {
		// Not counted: a reload follows deletions and compactions, which lifecycle events
		// (not wake-ups) announce.
		r.reload(ctx)
		return 0
	}
	found := 0
	for _, e := range entries {
		if r.applyStored(Cursor{Version: at.Version, Seq: e.Seq}, e.Update) {
			found++
		}
	}
	return found
}

// reload loads the state again when the log restarted (new data) or moved past a compaction,
// relays what the room lacked, and follows the log from there.
func (r *room) reload(ctx context.Context) {
	parts, at, err := r.hub.cfg.Log.Load(ctx, r.key)
	if err != nil {
		r.hub.log.Warn("crdt sync: reload", "err", err)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	sv := r.doc.StateVector()
	changed := false
	for _, p := range parts {
		if c, err := r.doc.ApplyChanged(p); err == nil && c {
			changed = true
		}
	}
	if changed {
		r.recountLocked()
		if diff, err := r.doc.Encode(sv); err == nil {
			r.broadcastLocked(yjs.SyncFrame(yjs.SyncUpdate, diff), nil)
		}
	}
	r.at, r.seq = at, at.Seq
	clear(r.seen)
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
