// Package live serves the y-websocket protocol for the crdt service: rooms of connected Yjs
// clients, one per editor data, kept in step with the durable update log so that several
// replicas can serve the same document.
//
// A room loads its document from the log on first use and unloads after it has been empty for
// a while. A client's update is refused unless the connection may write, then stored in the
// log, then applied and relayed to the room: nobody sees an update the log does not hold.
// Every replica polls the log of its loaded rooms for updates other replicas stored and relays
// them to its own clients. Awareness (cursors, presence) is relayed among the clients of a
// replica and dropped with the connection that owned it.
package live

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/grpc/codes"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/wakeup"
	"github.com/collab/collab/internal/yjs"
)

// Log is the durable update log of the documents (the crdt service's store).
type Log interface {
	// Load returns a document's whole state as updates, and the position of the last update
	// it includes; nothing and a zero Cursor when the document has no data.
	Load(ctx context.Context, key string) (parts [][]byte, at Cursor, err error)
	// Append stores an update after the document's others, creating the document's data when
	// it has none (created), and returns the update's position. version is the incarnation
	// the writer holds ("" when it loaded no data): ErrGone when the data is no longer that
	// one (deleted, or deleted and made anew).
	Append(ctx context.Context, key, version string, update []byte) (at Cursor, created bool, err error)
	// Since returns the stored updates after at, in order. reset reports that the reader must
	// load the state again (updates after at were compacted away, or the data was made anew);
	// ErrGone that the data was deleted.
	Since(ctx context.Context, key string, at Cursor) (entries []Entry, reset bool, err error)
}

// Cursor is a position in a document's log: which incarnation of its data (a new one each
// time the data is created) and the sequence number in it.
type Cursor struct {
	Version string
	Seq     uint64
}

// ErrGone is Since's answer for a document whose data was deleted: the room's clients are
// disconnected and the room reloads.
var ErrGone = errors.New("the document's data was deleted")

// Entry is one stored update.
type Entry struct {
	Seq    uint64
	Update []byte
}

// Grant is what Authorize allows a connection: the room it joins and whether it may write.
type Grant struct {
	// Key names the document in the Log; connections with the same key share a room.
	Key      string
	CanWrite bool
	// Who: for logs and events.
	UserID string
	// ValidFor, when positive, ends the connection (as refused) when the credential expires:
	// a token is checked when the connection opens, and must not outlive itself. A duration,
	// not a time, so that the authorizer's clock decides.
	ValidFor time.Duration
	// Opaque to the hub; handed back in Changed.
	Info any
}

// DeniedError is an authorization refusal; its reason goes to the client in the protocol's
// permission-denied message.
type DeniedError struct{ Reason string }

func (e *DeniedError) Error() string { return e.Reason }

// Config is what a Hub needs.
type Config struct {
	Log Log
	// Authorize decides a connection from the path's ids and the token. A *DeniedError's
	// reason reaches the client; other errors are logged and the client is told the service
	// is unavailable.
	Authorize func(ctx context.Context, token, organizationID, documentID, editorID string) (Grant, error)
	// Changed is told, at most once per EventEvery per room, that clients changed the
	// document, with the state after the changes and the grant of the last writer.
	Changed func(g Grant, state []byte)
	Logger  *slog.Logger
	// Prefix is the route: /v2/crdt/sync/ followed by organizationId/documentId/editorId.
	Prefix string
	// Poll is how often a loaded room reads the log for other replicas' updates, and does its
	// periodic work (access checks, change events, unloading). With wake-ups and a safety
	// poll, the default is DefaultWakeTick: the room reads the log when woken, so its timer
	// only does the periodic work.
	Poll time.Duration
	// Wakeup, when set, carries wake-ups between replicas (wake.go): a replica that appends to
	// a room's log says so, and the replicas holding the room catch up at once. SafetyPoll is
	// then how often a room still reads the log in case a wake-up was lost (its finds are
	// counted: Wakeup.Missed); zero: every Poll, as without a bus.
	Wakeup     wakeup.Bus
	SafetyPoll time.Duration
	// Idle is how long an empty room stays loaded.
	Idle time.Duration
	// EventEvery spaces Changed calls of one room.
	EventEvery time.Duration
	// FlushEvery spaces the flushes of a room's clients' updates: those that arrive within it
	// are stored and relayed together (an update after a quiet moment goes at once).
	FlushEvery time.Duration
	// Recheck is how often a connection's token and role are checked again (Authorize), so
	// that a revoked access, a reset token or a role change reaches open connections; zero:
	// DefaultRecheck; negative: never.
	Recheck time.Duration

	// What clients may make the process hold and do: every bound is in bytes or in the
	// codec's steps of work, not in numbers of frames (docs/crdt.md, "Limits"). Zero fields
	// take the defaults below.

	// MaxFrame bounds one incoming frame; Limits what a client's update may do to a document
	// (yjs.Limits; the zero value bounds only its work).
	MaxFrame int64
	Limits   yjs.Limits
	// MaxConns bounds the connections of one room, MaxConnsPerUser those of one user (the
	// grant's UserID) in one room, MaxConnsTotal those of the process.
	MaxConns, MaxConnsPerUser, MaxConnsTotal int
	// MaxQueue bounds the bytes waiting to be written to one connection; MaxOutBytes those
	// waiting for all of them (frames shared by connections counted once); MaxUserOutBytes the
	// answers waiting for one user's connections to a room.
	MaxQueue, MaxOutBytes, MaxUserOutBytes int
	// MaxDocsBytes bounds the memory of the loaded documents (yjs.Doc.Size): past it, no
	// document loads (connections to documents not loaded are told to try again later).
	MaxDocsBytes int64
	// Awareness: one state's bytes, a connection's clients, a room's bytes of states.
	MaxAwarenessState, MaxClientsPerConn, MaxAwarenessRoom int
	// WorkRate is the work per second a user may make the server do in a room (applying
	// updates, answering, relaying), WorkBurst what may be spent at once; a connection in debt
	// is not read until it is paid, and is closed when the debt passes MaxDebt.
	WorkRate, WorkBurst float64
	MaxDebt             time.Duration
}

// Defaults of Config's zero fields.
const (
	DefaultPoll = 250 * time.Millisecond
	// DefaultWakeTick is the rooms' tick with wake-ups: a quarter of the timers' CPU of
	// DefaultPoll (10,000 idle rooms: docs/benchmarks.md, "Replicas that push").
	DefaultWakeTick   = time.Second
	DefaultIdle       = 30 * time.Second
	DefaultEventEvery = 5 * time.Second
	DefaultFlushEvery = 5 * time.Millisecond
	DefaultRecheck    = time.Minute
	// A frame holds at most one update of the largest state, and its header.
	DefaultMaxFrame          = 5<<20 + 64<<10
	DefaultMaxConns          = 1000
	DefaultMaxConnsPerUser   = 20
	DefaultMaxConnsTotal     = 20000
	DefaultMaxQueue          = 16 << 20
	DefaultMaxOutBytes       = 512 << 20
	DefaultMaxUserOutBytes   = 32 << 20
	DefaultMaxDocsBytes      = 2 << 30
	DefaultMaxAwarenessState = 8 << 10
	DefaultMaxClientsPerConn = 4
	DefaultMaxAwarenessRoom  = 1 << 20
	// A keystroke takes a few steps; a user's whole state sent once takes a step or two per
	// struct. A step is 25 to 110 ns: a million a second is at most a ninth of a core, and a
	// burst of 5 million (the largest document's whole state, twice) half a second.
	DefaultWorkRate  = 1e6
	DefaultWorkBurst = 5e6
	DefaultMaxDebt   = 30 * time.Second
	writeTimeout     = 10 * time.Second
)

// defaults sets a zero or negative field to its default.
func defaults[T int | int64 | float64 | time.Duration](f *T, d T) {
	if *f <= 0 {
		*f = d
	}
}

// Hub holds the rooms of one replica.
type Hub struct {
	cfg  Config
	log  *slog.Logger
	mu   sync.Mutex
	rms  map[string]*room
	done chan struct{}
	// wg counts the rooms whose last tick has not run.
	wg sync.WaitGroup
	// conns counts the WebSockets being served in a room (Conns).
	conns atomic.Int64
	// outBytes counts the frames waiting to be written (each once), docBytes the loaded
	// documents' memory (yjs.Doc.Size).
	outBytes, docBytes atomic.Int64
}

// New returns a hub serving cfg.Prefix.
func New(cfg Config) *Hub {
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
		if cfg.Wakeup != nil && cfg.SafetyPoll > 0 {
			cfg.Poll = DefaultWakeTick
		}
	}
	if cfg.Idle <= 0 {
		cfg.Idle = DefaultIdle
	}
	if cfg.EventEvery <= 0 {
		cfg.EventEvery = DefaultEventEvery
	}
	defaults(&cfg.FlushEvery, DefaultFlushEvery)
	defaults(&cfg.MaxFrame, DefaultMaxFrame)
	defaults(&cfg.MaxConns, DefaultMaxConns)
	defaults(&cfg.MaxConnsPerUser, DefaultMaxConnsPerUser)
	defaults(&cfg.MaxConnsTotal, DefaultMaxConnsTotal)
	defaults(&cfg.MaxQueue, DefaultMaxQueue)
	defaults(&cfg.MaxOutBytes, DefaultMaxOutBytes)
	defaults(&cfg.MaxUserOutBytes, DefaultMaxUserOutBytes)
	defaults(&cfg.MaxDocsBytes, DefaultMaxDocsBytes)
	defaults(&cfg.MaxAwarenessState, DefaultMaxAwarenessState)
	defaults(&cfg.MaxClientsPerConn, DefaultMaxClientsPerConn)
	defaults(&cfg.MaxAwarenessRoom, DefaultMaxAwarenessRoom)
	defaults(&cfg.WorkRate, DefaultWorkRate)
	defaults(&cfg.WorkBurst, DefaultWorkBurst)
	defaults(&cfg.MaxDebt, DefaultMaxDebt)
	if cfg.Recheck == 0 {
		cfg.Recheck = DefaultRecheck
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Hub{cfg: cfg, log: cfg.Logger, rms: map[string]*room{}, done: make(chan struct{})}
}

// Close unloads every room and closes every connection.
func (h *Hub) Close() {
	h.mu.Lock()
	select {
	case <-h.done:
	default:
		close(h.done)
	}
	rooms := make([]*room, 0, len(h.rms))
	for _, r := range h.rms {
		rooms = append(rooms, r)
	}
	h.mu.Unlock()
	for _, r := range rooms {
		r.closeAll(websocket.StatusServiceRestart, reasonStopping)
		// The room's last tick runs now rather than at its next: a timer stopped before it
		// fired runs no tick, and one that fired already is in its tick, which ends the room
		// (or re-arms once, and the next ends it).
		r.mu.Lock()
		t := r.timer
		r.mu.Unlock()
		if t != nil && t.Stop() {
			go r.tick()
		}
	}
	h.wg.Wait()
}

// reasonStopping is the close reason (with 1012, so clients reconnect) of connections that
// Close ends or that arrive while it runs.
const reasonStopping = "The server is stopping; reconnect."

// Refusals of a connection by a room (admission says what the client is told).
var (
	errClosing  = errors.New("the hub is closing")
	errFull     = errors.New("the room is full or must reload")
	errUserFull = errors.New("the user has too many connections to the room")
	errBusy     = errors.New("the loaded documents take all the memory they may")
)

// closing reports whether Close has begun.
func (h *Hub) closing() bool {
	select {
	case <-h.done:
		return true
	default:
		return false
	}
}

// Rooms is the number of loaded rooms.
func (h *Hub) Rooms() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.rms)
}

// Conns is the number of connected clients: WebSockets admitted to a room and not yet closed.
func (h *Hub) Conns() int { return int(h.conns.Load()) }

// Publish applies an update stored by someone else on this replica (a REST change) to the
// document's room, when it is loaded, and relays it to the room's clients; the other replicas
// are woken (Wake).
func (h *Hub) Publish(key string, at Cursor, update []byte) {
	h.mu.Lock()
	r := h.rms[key]
	h.mu.Unlock()
	if r != nil {
		r.applyStored(at, update)
	}
	h.Wake(key, at)
}

// Gone closes the loaded rooms whose keys match, their data deleted or moved: their clients
// are told so (close code 4410, which y-websocket's provider does not retry: reconnecting
// would write its copy of the deleted data back), and the rooms load again on their next
// connection.
func (h *Hub) Gone(match func(key string) bool) {
	h.mu.Lock()
	var rooms []*room
	for k, r := range h.rms {
		if match(k) {
			rooms = append(rooms, r)
		}
	}
	h.mu.Unlock()
	for _, r := range rooms {
		r.broken.Store(true)
		r.closeAll(statusGone, msgGone)
	}
}

// ServeHTTP upgrades a request for Prefix/organizationId/documentId/editorId?token=... to a
// y-websocket connection.
func (h *Hub) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	// Split the escaped path: an id may hold a "/", sent as %2F.
	rest, ok := strings.CutPrefix(req.URL.EscapedPath(), h.cfg.Prefix)
	parts := strings.Split(rest, "/")
	for i, p := range parts {
		u, err := url.PathUnescape(p)
		if err != nil {
			ok = false
		}
		parts[i] = u
	}
	if !ok || len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		apierr.WriteHTTP(w, http.StatusNotFound, codes.NotFound, "Not found: live sync is at "+h.cfg.Prefix+"{organizationId}/{documentId}/{editorId}?token=...")
		return
	}
	// What is not a WebSocket handshake gets the API's error envelope here; the WebSocket
	// library would answer it in plain text.
	if !handshake(w, req) {
		return
	}
	// The server's read and write timeouts are for requests: a sync connection lives on.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	// The token, not a cookie, authenticates: pages of any origin may connect (browsers send
	// no ambient credential a cross-site page could borrow).
	c, err := websocket.Accept(smallBuffers{w}, req, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return // Accept answered the request.
	}
	// The connection goes on in a goroutine of its own, and the HTTP server's lets go of the
	// request, its headers and its buffers: a connection that lives for hours holds only what
	// it needs (its own goroutine starts with a small stack).
	go h.connect(c, req.URL.Query().Get("token"), parts[0], parts[1], parts[2])
}

// smallBuffers hands the WebSocket library the connection with buffers of its own, 1 KiB
// each way, instead of the HTTP server's 4 KiB ones, which a connection would hold for its whole
// life: a frame larger than a buffer is read or written straight through (a second write
// system call for an outgoing one; most are small updates).
type smallBuffers struct{ http.ResponseWriter }

const connBuffer = 1 << 10

func (w smallBuffers) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("live sync: the response cannot be hijacked")
	}
	c, brw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	if err := brw.Writer.Flush(); err != nil {
		_ = c.Close()
		return nil, nil, fmt.Errorf("live sync: handshake: %w", err)
	}
	// What the client sent after its handshake is in the server's buffer: it goes into ours,
	// where the library looks for it (as buffered bytes, not behind the connection).
	early, _ := brw.Reader.Peek(brw.Reader.Buffered())
	r := bufio.NewReaderSize(io.MultiReader(bytes.NewReader(bytes.Clone(early)), c), max(connBuffer, len(early)))
	if _, err := r.Peek(len(early)); err != nil {
		_ = c.Close()
		return nil, nil, fmt.Errorf("live sync: handshake: %w", err)
	}
	return c, bufio.NewReadWriter(r, bufio.NewWriterSize(c, connBuffer)), nil
}

// connect authorizes a WebSocket connection, admits it to its room and serves it until it
// ends.
func (h *Hub) connect(c *websocket.Conn, token, org, doc, editor string) {
	// readFrame refuses what is past MaxFrame with 4413; the library's own limit (which closes
	// with 1009, and y-websocket reconnects to send it again) is just past ours.
	c.SetReadLimit(h.cfg.MaxFrame + 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	g, err := h.cfg.Authorize(ctx, token, org, doc, editor)
	cancel()
	if err != nil {
		h.refuseConn(c, err)
		return
	}
	cn := &conn{ws: c, hub: h, grant: g, done: make(chan struct{}),
		recheck: func(ctx context.Context) (Grant, error) { return h.cfg.Authorize(ctx, token, org, doc, editor) }}
	cn.canWrite.Store(g.CanWrite)
	cn.ctx, cn.cancel = context.WithCancel(context.Background())
	if every := h.cfg.Recheck; every > 0 {
		cn.nextCheck.Store(time.Now().Add(jitter(every)).UnixNano())
	}
	if h.conns.Add(1) > int64(h.cfg.MaxConnsTotal) {
		h.conns.Add(-1)
		cn.cancel()
		_ = c.Close(websocket.StatusTryAgainLater, msgBusy)
		return
	}
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	r, err := h.join(ctx, g.Key)
	cancel()
	if err == nil {
		if err = r.add(cn); err != nil {
			h.leave(r)
		}
	}
	if err != nil {
		h.conns.Add(-1)
		cn.cancel()
		code, reason := admission(err)
		if code == websocket.StatusTryAgainLater && !errors.Is(err, errBusy) && !errors.Is(err, errFull) {
			h.log.Warn("crdt sync: load document", "err", err)
		}
		_ = c.Close(code, reason)
		return
	}
	// Served by a goroutine of its own: this one's stack grew for the authorizer's calls, and
	// a reader waiting for frames for hours needs little.
	go func() {
		defer h.conns.Add(-1)
		r.serve(cn, c)
	}()
}

// refuseConn ends a connection the authorizer refused (the protocol's permission-denied message
// with the reason, then 4403) or could not decide on (1013: try again).
func (h *Hub) refuseConn(c *websocket.Conn, err error) {
	reason := "The service is unavailable; try again."
	code := websocket.StatusTryAgainLater
	var denied *DeniedError
	if errors.As(err, &denied) {
		reason, code = denied.Reason, statusDenied
	} else {
		h.log.Warn("crdt sync: authorize", "err", err)
	}
	wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = c.Write(wctx, websocket.MessageBinary, yjs.PermissionDeniedFrame(reason))
	cancel()
	_ = c.Close(code, truncate(reason, 120))
}

// admission is the close code and reason of a connection refused a room.
func admission(err error) (websocket.StatusCode, string) {
	switch {
	case errors.Is(err, errClosing):
		return websocket.StatusServiceRestart, reasonStopping
	case errors.Is(err, errUserFull):
		return statusTooMany, msgUserFull
	case errors.Is(err, errFull):
		return websocket.StatusTryAgainLater, "The document is full or reloading; reconnect."
	case errors.Is(err, errBusy):
		return websocket.StatusTryAgainLater, msgBusy
	}
	return websocket.StatusTryAgainLater, "The document could not be loaded; try again."
}

// handshake answers a request that cannot become a WebSocket (RFC 6455 section 4.2.1) with
// the error envelope, and reports whether it can.
func handshake(w http.ResponseWriter, req *http.Request) bool {
	switch {
	case req.Method != http.MethodGet:
		w.Header().Set("Allow", http.MethodGet)
		apierr.WriteHTTP(w, http.StatusMethodNotAllowed, codes.Unimplemented, "Method "+req.Method+" is not allowed here: live sync connects with GET and a WebSocket upgrade.")
	case !hasToken(req.Header, "Connection", "upgrade") || !hasToken(req.Header, "Upgrade", "websocket"):
		w.Header().Set("Upgrade", "websocket")
		w.Header().Set("Connection", "Upgrade")
		apierr.WriteHTTP(w, http.StatusUpgradeRequired, codes.FailedPrecondition, "Live sync is a WebSocket: connect with a WebSocket client (y-websocket's provider, for one).")
	case req.Header.Get("Sec-WebSocket-Version") != "13":
		w.Header().Set("Sec-WebSocket-Version", "13")
		apierr.WriteHTTP(w, http.StatusUpgradeRequired, codes.FailedPrecondition, "Live sync speaks WebSocket version 13.")
	case !validKey(req.Header.Get("Sec-WebSocket-Key")):
		apierr.WriteHTTP(w, http.StatusBadRequest, codes.InvalidArgument, "Sec-WebSocket-Key must be 16 bytes in base64.")
	default:
		return true
	}
	return false
}

// hasToken reports whether a comma-separated header holds token, case-insensitively.
func hasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

func validKey(k string) bool {
	b, err := base64.StdEncoding.DecodeString(k)
	return err == nil && len(b) == 16
}

// Close codes in 4400–4499 tell y-websocket's provider not to reconnect (it would be refused
// again); 1013 (try again later) lets it.
const (
	statusDenied     websocket.StatusCode = 4403
	statusMalformed  websocket.StatusCode = 4400
	statusTooLarge   websocket.StatusCode = 4413
	statusGone       websocket.StatusCode = 4410
	statusTooMany    websocket.StatusCode = 4429
	statusLogFailure                      = websocket.StatusTryAgainLater
)

// Reasons of closes for limits (docs/crdt.md, "Limits").
const (
	msgFrameTooLarge = "Message larger than the limit (5 MiB)."
	msgUserFull      = "Too many connections of this user to this document; close one first."
	msgTooMuchWork   = "Too many changes too fast; slow down."
	msgTooSlow       = "Too slow to keep up; reconnect."
	msgBusy          = "The server is busy; try again later."
	msgReloading     = "The document is reloading; reconnect."
)

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// join returns the key's room, loading it, and holds a reference to it.
func (h *Hub) join(ctx context.Context, key string) (*room, error) {
	for {
		h.mu.Lock()
		if h.closing() {
			// Checked under h.mu, where Close marks the hub: a room made after Close collected
			// the rooms would keep connections (and a follower Close does not wait for) open.
			h.mu.Unlock()
			return nil, errClosing
		}
		r := h.rms[key]
		if r != nil && r.broken.Load() {
			delete(h.rms, key)
			r = nil
		}
		if r == nil && h.docBytes.Load() > h.cfg.MaxDocsBytes {
			h.mu.Unlock()
			return nil, errBusy
		}
		if r == nil {
			r = newRoom(h, key)
			// Locked until loaded: a REST change or a Gone meanwhile waits for the document.
			r.mu.Lock()
			h.rms[key] = r
			r.refs++
			// The room's place in h.wg is taken under h.mu, before Close can wait: an Add
			// racing with Wait could let Close return with the room still starting.
			h.wg.Add(1)
			h.mu.Unlock()
			r.loadErr = r.load(ctx)
			if r.loadErr == nil {
				r.lastFollow = time.Now()
				r.subscribe()
				r.timer = time.AfterFunc(h.cfg.Poll, r.tick)
			}
			r.mu.Unlock()
			close(r.ready)
			if r.loadErr != nil {
				h.wg.Done()
				h.mu.Lock()
				r.refs--
				h.forgetLocked(r)
				h.mu.Unlock()
				return nil, r.loadErr
			}
			return r, nil
		}
		r.refs++
		h.mu.Unlock()
		<-r.ready
		if r.loadErr == nil {
			return r, nil
		}
		h.mu.Lock()
		r.refs--
		h.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		default:
		}
	}
}

// leave drops a reference; the room unloads once it has had none for Idle.
func (h *Hub) leave(r *room) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r.refs--
	if r.refs == 0 {
		r.idleSince = time.Now()
	}
}

// unloadIfIdle removes the room when it has been unreferenced for Idle.
func (h *Hub) unloadIfIdle(r *room) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.refs > 0 || time.Since(r.idleSince) < h.cfg.Idle {
		return false
	}
	h.forgetLocked(r)
	return true
}

// forget removes the room from the hub, unless a newer room took its key.
func (h *Hub) forget(r *room) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.forgetLocked(r)
}

func (h *Hub) forgetLocked(r *room) {
	if h.rms[r.key] == r {
		delete(h.rms, r.key)
	}
}

// msgGone closes the connections of data that was deleted (or moved to another document id);
// 4410 keeps y-websocket's provider from reconnecting and writing its copy back.
const msgGone = "The CRDT data was deleted or moved."

// msgExpired ends a connection whose token expired.
const msgExpired = "Token has expired."

// msgAccessChanged ends a connection whose access no longer names its room.
const msgAccessChanged = "Access to this document changed; reconnect."

// Refusals of a client's update or awareness; the message is the close reason.
var (
	errTooLarge          = errors.New("The document would exceed its size limit.")
	errMalformed         = errors.New("Malformed update.")
	errTooComplex        = errors.New("The update is too costly to integrate.")
	errGone              = errors.New(msgGone)
	errLogFailure        = errors.New("The update could not be stored; reconnect.")
	errApplyFailure      = errors.New("The update could not be applied; reconnect.")
	errAwarenessTooLarge = errors.New("Awareness state larger than the limit (8 KiB).")
	errForeignClient     = errors.New("The update writes as another user's client.")
)

func closeCode(err error) websocket.StatusCode {
	switch {
	case errors.Is(err, errTooLarge):
		return statusTooLarge
	case errors.Is(err, errMalformed), errors.Is(err, errTooComplex):
		return statusMalformed
	case errors.Is(err, errGone):
		return statusGone
	case errors.Is(err, errForeignClient):
		return statusDenied
	}
	return statusLogFailure
}
