package live

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/collab/collab/internal/yjs"
)

// conn is one client connection: what it may do, what waits to be written to it, and its
// awareness clients. Frames are written by a goroutine that runs only while there is
// something to write, so an idle connection holds no goroutine but its reader.
type conn struct {
	ws    socket
	hub   *Hub
	room  *room
	grant Grant
	// canWrite is the grant's CanWrite as of the last check: a recheck may change it.
	canWrite atomic.Bool
	// recheck asks the authorizer again, with the connection's token and ids (nil: never);
	// nextCheck is when (Unix nanoseconds), checking that a check runs.
	recheck   func(ctx context.Context) (Grant, error)
	nextCheck atomic.Int64
	checking  atomic.Bool
	// ctx ends when the connection does (cancel, when it is closed).
	ctx    context.Context //nolint:containedctx // the connection's lifetime, for its checks and updates
	cancel context.CancelFunc
	// user is the grant's budget of work in its room (shared by the user's connections).
	user *userBudget

	mu sync.Mutex
	// queue holds the frames to write, queued their bytes.
	queue  []*frame
	queued int
	// answer: a sync step 1 waits for its answer, the difference from the state vector sv;
	// step 1s that come meanwhile replace it (one answer at a time, made when it is written).
	answer bool
	sv     []byte
	// peers: a query of awareness waits for its answer, made when it is written.
	peers   bool
	writing bool
	closed  bool
	// The close code and reason, set with closed.
	code   websocket.StatusCode
	reason string
	// writeFailed: the socket is gone; what is left is dropped.
	writeFailed bool
	// done is closed once the socket is closed.
	done chan struct{}

	// clients (guarded by the room's mu) are the Yjs client ids whose awareness this
	// connection sent, with their last clock.
	clients map[uint64]uint64
}

// socket is what a connection writes to and closes: its WebSocket (the room's fuzz target
// puts another in its place).
type socket interface {
	Write(ctx context.Context, typ websocket.MessageType, p []byte) error
	Close(code websocket.StatusCode, reason string) error
	CloseNow() error
}

// frame is an outgoing frame, shared by the connections it is queued to; the hub counts its
// bytes until the last of them has written or dropped it.
type frame struct {
	data []byte
	refs atomic.Int32
	hub  *Hub
	// user: an answer's, whose bytes count for it too until written.
	user *userBudget
}

// newFrame makes a frame for n connections.
func (h *Hub) newFrame(data []byte, n int) *frame {
	f := &frame{data: data, hub: h}
	f.refs.Store(int32(n)) //nolint:gosec // G115: n is a room's number of connections, at most MaxConns
	h.outBytes.Add(int64(len(data)))
	return f
}

func (f *frame) release() {
	if f.refs.Add(-1) == 0 {
		f.hub.outBytes.Add(-int64(len(f.data)))
		if f.user != nil {
			f.user.out.Add(-int64(len(f.data)))
		}
	}
}

// send queues a frame (one of its references is the connection's). A client too slow to keep
// up (behind, and its queue past MaxQueue or the process holding more than MaxOutBytes for its
// clients) is disconnected, to reconnect and sync afresh, rather than buffered without bound.
func (c *conn) send(f *frame) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		f.release()
		return
	}
	if c.queued > 0 && (c.queued+len(f.data) > c.hub.cfg.MaxQueue || c.hub.outBytes.Load() > int64(c.hub.cfg.MaxOutBytes)) {
		f.release()
		c.closeLocked(websocket.StatusTryAgainLater, msgTooSlow)
		return
	}
	c.queue = append(c.queue, f)
	c.queued += len(f.data)
	c.kickLocked()
}

// sendNew queues a frame made for this connection alone.
func (c *conn) sendNew(data []byte) { c.send(c.hub.newFrame(data, 1)) }

// askSync asks for the answer to a sync step 1: the room's difference from sv, made when the
// writer gets to it, so that a client repeating step 1 costs one answer at a time.
func (c *conn) askSync(sv []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.answer, c.sv = true, append(c.sv[:0], sv...)
	c.kickLocked()
}

// askPeers asks for the room's awareness states, made when the writer gets to it.
func (c *conn) askPeers() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.peers = true
		c.kickLocked()
	}
}

func (c *conn) kickLocked() {
	if !c.writing {
		c.writing = true
		go c.write()
	}
}

func (c *conn) close(code websocket.StatusCode, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeLocked(code, reason)
}

// closeLocked ends the connection after what is queued (a refusal's reason goes before its
// close code); answers not made yet are not, and work on its behalf stops (its context ends).
func (c *conn) closeLocked(code websocket.StatusCode, reason string) {
	if c.closed {
		return
	}
	if c.cancel != nil {
		c.cancel()
	}
	c.closed, c.answer, c.peers = true, false, false
	c.code, c.reason = code, reason
	c.kickLocked()
}

// write writes what waits, answers first, until nothing does; then it ends, closing the socket
// when the connection is closed.
func (c *conn) write() {
	for {
		c.mu.Lock()
		answer, sv, peers := c.answer, c.sv, c.peers
		c.answer, c.sv, c.peers = false, nil, false
		batch := c.queue
		c.queue = nil
		if !answer && !peers && len(batch) == 0 {
			c.writing = false
			closed, code, reason := c.closed, c.code, c.reason
			c.mu.Unlock()
			if closed {
				_ = c.ws.Close(code, reason)
				close(c.done)
			}
			return
		}
		c.mu.Unlock()
		var answers []*frame
		if answer {
			if f := c.room.answerSync(c, sv); f != nil {
				answers = append(answers, f)
			}
		}
		if peers {
			if f := c.room.answerPeers(c); f != nil {
				answers = append(answers, f)
			}
		}
		c.writeAll(answers, batch)
	}
}

// writeAll writes the answers, then the queued frames, and releases them. A write that takes
// longer than writeTimeout ends the connection: one timer for the batch, reset for each frame,
// closes the socket under it (a deadline per write cost a context and a timer each).
func (c *conn) writeAll(answers, queued []*frame) {
	n := 0
	for _, f := range queued {
		n += len(f.data)
	}
	c.mu.Lock()
	c.queued -= n
	failed := c.writeFailed
	c.mu.Unlock()
	stuck := time.AfterFunc(writeTimeout, func() { _ = c.ws.CloseNow() })
	defer stuck.Stop()
	for _, list := range [2][]*frame{answers, queued} {
		for _, f := range list {
			if !failed {
				stuck.Reset(writeTimeout)
				if err := c.ws.Write(context.Background(), websocket.MessageBinary, f.data); err != nil {
					failed = true
					c.mu.Lock()
					c.writeFailed = true
					c.closeLocked(websocket.StatusGoingAway, "write failed")
					c.mu.Unlock()
				}
			}
			f.release()
		}
	}
}

// readFrame reads one message of at most max bytes; a longer one is errFrameTooLarge, read no
// further (the connection ends). It waits without a context: closing the socket ends the wait
// (a context's deadline costs a timer per read).
func readFrame(ws *websocket.Conn, max int64) (websocket.MessageType, []byte, error) {
	typ, r, err := ws.Reader(context.Background())
	if err != nil {
		return 0, nil, err
	}
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return 0, nil, err
	}
	if int64(len(b)) > max {
		return 0, nil, errFrameTooLarge
	}
	return typ, b, nil
}

var errFrameTooLarge = errors.New("frame too large")

// userBudget is what a user's connections to a room may make the server do: work in the
// codec's steps (yjs.Applied.Work), answers and relays counted likewise, refilled at a
// steady rate (a token bucket). A connection in debt is not read until the debt is paid, so
// a client that asks too much is slowed and the others are not; one whose debt passes
// MaxDebt is closed (4429).
type userBudget struct {
	// out counts the bytes of answers made for the user's connections and not written yet.
	out    atomic.Int64
	mu     sync.Mutex
	tokens float64
	last   time.Time
	conns  int // the user's connections in the room, guarded by the room's mu
}

// paid reports whether the budget is out of debt.
func (u *userBudget) paid(cfg *Config) bool {
	_, over := u.charge(0, cfg)
	u.mu.Lock()
	defer u.mu.Unlock()
	return !over && u.tokens >= 0
}

// charge takes work from the budget and returns how long the connection must wait before it
// reads again, and whether its debt is past what it may owe.
func (u *userBudget) charge(work int, cfg *Config) (wait time.Duration, over bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := time.Now()
	u.tokens = min(cfg.WorkBurst, u.tokens+now.Sub(u.last).Seconds()*cfg.WorkRate)
	u.last = now
	u.tokens -= float64(work)
	if u.tokens >= 0 {
		return 0, false
	}
	debt := time.Duration(-u.tokens / cfg.WorkRate * float64(time.Second))
	return debt, debt > cfg.MaxDebt
}

// recheckDue starts a check of the connection's access when one is due: the room's ticks call
// it, so no goroutine waits between checks. Checks come every Recheck (±20%, so connections
// opened together do not all ask at once): a token reset, a revoked role or a deleted document
// ends the connection as a refusal at connect would (the reason, then 4403), and a changed role
// takes effect (an editor made viewer stops writing). When the authorizer cannot answer, the
// connection keeps what it was granted and is asked about again next period: a brief outage of
// the access service does not disconnect every editor.
func (c *conn) recheckDue(now time.Time, log *slog.Logger) {
	every := c.hub.cfg.Recheck
	if c.recheck == nil || every <= 0 || now.UnixNano() < c.nextCheck.Load() || !c.checking.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer c.checking.Store(false)
		actx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
		g, err := c.recheck(actx)
		cancel()
		c.nextCheck.Store(time.Now().Add(jitter(every)).UnixNano())
		var denied *DeniedError
		switch {
		case c.ctx.Err() != nil:
		case errors.As(err, &denied):
			c.refuse(denied.Reason)
		case err != nil:
			log.Warn("crdt sync: recheck of a connection's access failed; it keeps its grant until the next check", "err", err)
		case g.Key != c.grant.Key:
			// The same token and ids name another room: not possible today; refuse rather than
			// write to the wrong document.
			c.refuse(msgAccessChanged)
		default:
			c.canWrite.Store(g.CanWrite)
		}
	}()
}

// jitter is every ±20%.
func jitter(every time.Duration) time.Duration {
	return every - every/5 + rand.N(every*2/5+1) //nolint:gosec // G404: jitter spreading checks needs no unpredictability
}

// refuse ends the connection as a refusal: the protocol's permission-denied message with the
// reason, then 4403.
func (c *conn) refuse(reason string) {
	c.sendNew(yjs.PermissionDeniedFrame(reason))
	c.close(statusDenied, truncate(reason, 120))
}
