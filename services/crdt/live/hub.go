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
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

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
	// Poll is how often a loaded room reads the log for other replicas' updates.
	Poll time.Duration
	// Idle is how long an empty room stays loaded.
	Idle time.Duration
	// EventEvery spaces Changed calls of one room.
	EventEvery time.Duration
	// MaxFrame bounds one incoming frame; Limits what a client's update may do to a document
	// (yjs.Limits; the zero value bounds only its work).
	MaxFrame int64
	Limits   yjs.Limits
	// MaxConns bounds the connections of one room.
	MaxConns int
	// Recheck is how often a connection's token and role are checked again (Authorize), so
	// that a revoked access, a reset token or a role change reaches open connections; zero:
	// DefaultRecheck; negative: never.
	Recheck time.Duration
}

// Defaults of Config's zero fields.
const (
	DefaultPoll       = 250 * time.Millisecond
	DefaultIdle       = 30 * time.Second
	DefaultEventEvery = 5 * time.Second
	DefaultMaxFrame   = 8 << 20
	DefaultMaxConns   = 1000
	DefaultRecheck    = time.Minute
	writeQueue        = 512
	writeTimeout      = 10 * time.Second
)

// Hub holds the rooms of one replica.
type Hub struct {
	cfg  Config
	log  *slog.Logger
	mu   sync.Mutex
	rms  map[string]*room
	done chan struct{}
	wg   sync.WaitGroup
	// conns counts the WebSockets being served in a room (Conns).
	conns atomic.Int64
}

// New returns a hub serving cfg.Prefix.
func New(cfg Config) *Hub {
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Idle <= 0 {
		cfg.Idle = DefaultIdle
	}
	if cfg.EventEvery <= 0 {
		cfg.EventEvery = DefaultEventEvery
	}
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = DefaultMaxFrame
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
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
	}
	h.wg.Wait()
}

// reasonStopping is the close reason (with 1012, so clients reconnect) of connections that
// Close ends or that arrive while it runs.
const reasonStopping = "The server is stopping; reconnect."

// errClosing is join's refusal once Close has begun.
var errClosing = errors.New("the hub is closing")

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
// document's room, when it is loaded, and relays it to the room's clients.
func (h *Hub) Publish(key string, at Cursor, update []byte) {
	h.mu.Lock()
	r := h.rms[key]
	h.mu.Unlock()
	if r != nil {
		r.applyStored(at, update)
	}
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
		refuse(w, http.StatusNotFound, "NOT_FOUND", "Not found: live sync is at "+h.cfg.Prefix+"{organizationId}/{documentId}/{editorId}?token=...")
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
	c, err := websocket.Accept(w, req, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return // Accept answered the request.
	}
	c.SetReadLimit(h.cfg.MaxFrame)
	ctx, cancel := context.WithTimeout(req.Context(), 10*time.Second)
	g, err := h.cfg.Authorize(ctx, req.URL.Query().Get("token"), parts[0], parts[1], parts[2])
	cancel()
	if err != nil {
		reason := "The service is unavailable; try again."
		var denied *DeniedError
		if errors.As(err, &denied) {
			reason = denied.Reason
		} else {
			h.log.Warn("crdt sync: authorize", "err", err)
		}
		wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = c.Write(wctx, websocket.MessageBinary, yjs.PermissionDeniedFrame(reason))
		cancel()
		code := statusDenied
		if !errors.As(err, &denied) {
			code = websocket.StatusTryAgainLater
		}
		_ = c.Close(code, truncate(reason, 120))
		return
	}
	r, err := h.join(req.Context(), g.Key)
	if errors.Is(err, errClosing) {
		_ = c.Close(websocket.StatusServiceRestart, reasonStopping)
		return
	}
	if err != nil {
		h.log.Warn("crdt sync: load document", "err", err)
		_ = c.Close(websocket.StatusTryAgainLater, "The document could not be loaded; try again.")
		return
	}
	token, org, doc, editor := req.URL.Query().Get("token"), parts[0], parts[1], parts[2]
	cn := &conn{ws: c, grant: g, out: make(chan []byte, writeQueue), clients: map[uint64]uint64{},
		recheck: func(ctx context.Context) (Grant, error) { return h.cfg.Authorize(ctx, token, org, doc, editor) }}
	cn.canWrite.Store(g.CanWrite)
	if !r.add(cn) {
		h.leave(r)
		if h.closing() {
			_ = c.Close(websocket.StatusServiceRestart, reasonStopping)
			return
		}
		_ = c.Close(websocket.StatusTryAgainLater, "The document is full or reloading; reconnect.")
		return
	}
	h.conns.Add(1)
	defer h.conns.Add(-1)
	r.serve(cn)
}

// handshake answers a request that cannot become a WebSocket (RFC 6455 section 4.2.1) with
// the error envelope, and reports whether it can.
func handshake(w http.ResponseWriter, req *http.Request) bool {
	switch {
	case req.Method != http.MethodGet:
		w.Header().Set("Allow", http.MethodGet)
		refuse(w, http.StatusMethodNotAllowed, "UNIMPLEMENTED", "Method "+req.Method+" is not allowed here: live sync connects with GET and a WebSocket upgrade.")
	case !hasToken(req.Header, "Connection", "upgrade") || !hasToken(req.Header, "Upgrade", "websocket"):
		w.Header().Set("Upgrade", "websocket")
		w.Header().Set("Connection", "Upgrade")
		refuse(w, http.StatusUpgradeRequired, "FAILED_PRECONDITION", "Live sync is a WebSocket: connect with a WebSocket client (y-websocket's provider, for one).")
	case req.Header.Get("Sec-WebSocket-Version") != "13":
		w.Header().Set("Sec-WebSocket-Version", "13")
		refuse(w, http.StatusUpgradeRequired, "FAILED_PRECONDITION", "Live sync speaks WebSocket version 13.")
	case !validKey(req.Header.Get("Sec-WebSocket-Key")):
		refuse(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Sec-WebSocket-Key must be 16 bytes in base64.")
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

// refuse answers with the API's error envelope.
func refuse(w http.ResponseWriter, httpStatus int, status, message string) {
	body, _ := json.Marshal(map[string]map[string]string{"error": {"status": status, "message": message}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(httpStatus)
	_, _ = w.Write(body)
}

// Close codes in 4400–4499 tell y-websocket's provider not to reconnect (it would be refused
// again); 1013 (try again later) lets it.
const (
	statusDenied     websocket.StatusCode = 4403
	statusMalformed  websocket.StatusCode = 4400
	statusTooLarge   websocket.StatusCode = 4413
	statusGone       websocket.StatusCode = 4410
	statusLogFailure                      = websocket.StatusTryAgainLater
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
		if r == nil {
			r = &room{hub: h, key: key, ready: make(chan struct{}), conns: map[*conn]struct{}{}, aware: map[uint64]awareness{}, seen: map[uint64]bool{}}
			// Locked until loaded: a REST change or a Gone meanwhile waits for the document.
			r.mu.Lock()
			h.rms[key] = r
			r.refs++
			// The follower's place in h.wg is taken under h.mu, before Close can wait: an Add
			// racing with Wait could let Close return with the follower still starting.
			h.wg.Add(1)
			h.mu.Unlock()
			r.loadErr = r.load(ctx)
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
			go r.follow()
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
