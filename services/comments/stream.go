package comments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/authn"
)

// StreamPrefix is the route of the live stream: StreamPrefix + organizationId/documentId.
const StreamPrefix = "/v2/commentannotations/stream/"

// DefaultStreamRecheck is how often an open stream asks again whether its token and role
// hold (--comments-stream-recheck).
const DefaultStreamRecheck = time.Minute

// Limits of the live stream (docs/comments.md, "Live stream").
const (
	// MaxStreams and MaxStreamsPerUser bound the streams one process holds open, in all and
	// of one user (API key and user id).
	MaxStreams        = 10_000
	MaxStreamsPerUser = 16
	// heartbeat keeps proxies from closing a quiet stream.
	heartbeat = 25 * time.Second
	// writeTimeout ends a stream whose client does not take an event in time.
	writeTimeout = 10 * time.Second
	// catchUpBatch is how many changes a stream that fell behind its room reads at a time.
	catchUpBatch = 256
)

var errClosing = errors.New("comments: the process is stopping")

// streamHub serves the live streams of this process.
type streamHub struct {
	s     *Server
	rooms rooms
	mu    sync.Mutex
	total int
	users map[string]int // apiKey\x00userId -> open streams
}

func newStreamHub(s *Server) *streamHub {
	return &streamHub{s: s, rooms: rooms{s: s, byFeed: map[feedKey]*feedRoom{}}, users: map[string]int{}}
}

// Close ends every stream (the process is stopping).
func (h *streamHub) Close() { h.rooms.close() }

// take counts a new stream of the user, or refuses it past the limits.
func (h *streamHub) take(user string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.total >= MaxStreams:
		return apierr.ResourceExhausted("This process holds the most live streams it may (%d); try again later.", MaxStreams)
	case h.users[user] >= MaxStreamsPerUser:
		return apierr.ResourceExhausted("You have the most live streams open you may (%d).", MaxStreamsPerUser)
	}
	h.total++
	h.users[user]++
	return nil
}

func (h *streamHub) release(user string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.total--
	if h.users[user]--; h.users[user] <= 0 {
		delete(h.users, user)
	}
}

// ServeHTTP opens a live stream of a document's comment changes as Server-Sent Events:
// GET StreamPrefix/organizationId/documentId?token=<JWT> (or Authorization: Bearer), resumed
// after Last-Event-ID (docs/comments.md, "Live stream"). Refusals before the stream opens are
// the API's error envelope.
func (h *streamHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeStreamError(w, apierr.New(codes.Unimplemented, "The live stream is opened with GET."))
		return
	}
	org, doc, err := streamPath(r.URL.EscapedPath())
	if err != nil {
		writeStreamError(w, err)
		return
	}
	token := r.URL.Query().Get("token")
	if token == "" {
		token = authn.BearerToken(r.Header.Get("Authorization"))
	}
	if token == "" {
		writeStreamError(w, apierr.PermissionDenied("A token is required: pass the JWT of Generate Token as the token query parameter."))
		return
	}
	after, err := lastEventID(r)
	if err != nil {
		writeStreamError(w, err)
		return
	}
	ctx := authn.WithUserToken(r.Context(), token)
	a, err := h.s.actorFor(ctx, org, doc)
	if err != nil {
		writeStreamError(w, err)
		return
	}
	ref, err := h.s.ref(ctx, a.APIKey, org, doc)
	if err != nil {
		writeStreamError(w, err)
		return
	}
	user := a.APIKey + "\x00" + a.id()
	if err := h.take(user); err != nil {
		writeStreamError(w, err)
		return
	}
	defer h.release(user)
	st := &stream{h: h, w: w, rc: http.NewResponseController(w), actor: a, ref: ref, ctx: ctx, visible: map[string]bool{}}
	st.serve(after)
}

// streamPath reads organizationId/documentId from an escaped path (an id may hold "/", sent
// as %2F).
func streamPath(escaped string) (org, doc string, err error) {
	rest, _ := strings.CutPrefix(escaped, StreamPrefix)
	parts := strings.Split(rest, "/")
	if len(parts) != 2 {
		return "", "", apierr.NotFound("The live stream's path is %sorganizationId/documentId.", StreamPrefix)
	}
	ids := make([]string, 2)
	for i, p := range parts {
		if ids[i], err = url.PathUnescape(p); err != nil {
			return "", "", apierr.InvalidArgument("The path is not validly escaped.")
		}
	}
	if err := checkDocument(ids[0], ids[1]); err != nil {
		return "", "", err
	}
	return ids[0], ids[1], nil
}

// lastEventID is where a resumed stream starts: after the Last-Event-ID header's change (or
// the lastEventId query parameter's, for clients that cannot set headers); -1 for a new stream.
func lastEventID(r *http.Request) (int64, error) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("lastEventId")
	}
	if v == "" {
		return -1, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, apierr.InvalidArgument("Last-Event-ID must be the id of an event of this stream.")
	}
	return n, nil
}

func writeStreamError(w http.ResponseWriter, err error) {
	var e *apierr.Error
	if !errors.As(err, &e) {
		e = apierr.New(codes.Unavailable, "The service is unavailable. Try again later.")
	}
	apierr.WriteHTTP(w, streamStatus(e.Code), e.Code, e.Message)
}

// streamStatus is the HTTP status of a refusal of the stream, as the gateway answers the
// operations (docs/api.md, "HTTP status of each status"); a request that is not a GET is 405.
func streamStatus(c codes.Code) int {
	if c == codes.Unimplemented {
		return http.StatusMethodNotAllowed
	}
	return runtime.HTTPStatusFromCode(c)
}

// stream is one open live stream.
type stream struct {
	h     *streamHub
	w     http.ResponseWriter
	rc    *http.ResponseController
	actor actor
	ref   Ref
	ctx   context.Context
	// visible caches whether the user may see threads of a context.access (its JSON).
	visible map[string]bool
}

// serve writes the stream until the client goes, the process stops, or the user's access ends.
func (st *stream) serve(after int64) {
	sub := make(chan struct{}, 1)
	room, newest, err := st.h.rooms.join(st.ctx, st.ref, sub)
	if err != nil {
		writeStreamError(st.w, err)
		return
	}
	defer st.h.rooms.leave(room, sub)
	// The server's read deadline (--http read timeout) would end a long stream.
	_ = st.rc.SetReadDeadline(time.Time{})
	hdr := st.w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Accel-Buffering", "no")
	st.w.WriteHeader(http.StatusOK)
	pos := after
	if pos < 0 {
		pos = newest
	}
	if !st.write(fmt.Sprintf("retry: 2000\n: stream of %s\n\n", st.ref.DocumentID)) {
		return
	}
	if pos > newest {
		// Ahead of the room, which reads the feed at a wake-up or the poll: the store tells
		// whether the feed gave that id (a client resuming on another replica often is).
		_, _, stored, err := st.h.s.store.Changes(st.ctx, st.ref, pos, 1)
		if err != nil {
			st.fail(err)
			return
		}
		if pos > stored {
			// An id this feed never gave (the document was deleted and made anew since, or
			// the client made it up): the client reads the threads again and goes on from here.
			if !st.reset(newest) {
				return
			}
			pos = newest
		}
	}
	beat, recheck := time.NewTicker(heartbeat), time.NewTicker(st.h.s.recheck)
	defer beat.Stop()
	defer recheck.Stop()
	// Send what is newer than pos at once. The room may have signalled sub already (it joined
	// before the first bytes were written): a blocking send would then wait for ever.
	select {
	case sub <- struct{}{}:
	default:
	}
	for {
		select {
		case <-st.ctx.Done():
			return
		case <-room.stop:
			return
		case <-beat.C:
			if !st.write(": keep-alive\n\n") {
				return
			}
		case <-recheck.C:
			if _, err := st.h.s.actorFor(st.ctx, st.ref.OrganizationID, st.ref.DocumentID); err != nil {
				st.fail(err)
				return
			}
			clear(st.visible) // access contexts may have changed too: ask again
		case <-sub:
			var ok bool
			if pos, ok = st.send(room, pos); !ok {
				return
			}
		}
	}
}

// send writes the changes after pos and returns the new position; false ends the stream.
func (st *stream) send(room *feedRoom, pos int64) (int64, bool) {
	for {
		cs, ok := room.since(pos)
		if !ok {
			var oldest, newest int64
			var err error
			cs, oldest, newest, err = st.h.s.store.Changes(st.ctx, st.ref, pos, catchUpBatch)
			if err != nil {
				st.fail(err)
				return pos, false
			}
			if oldest > pos+1 {
				// The window moved past the client's position: it reads the threads again.
				return newest, st.reset(newest)
			}
		}
		if len(cs) == 0 {
			return pos, true
		}
		for _, c := range cs {
			if st.shows(c) && !st.write(fmt.Sprintf("id: %d\nevent: %s\ndata: %s\n\n", c.Seq, c.Type, c.Data)) {
				return pos, false
			}
			pos = c.Seq
		}
	}
}

// reset tells the client to read the threads again: its position is not in the feed. The
// stream goes on after newest.
func (st *stream) reset(newest int64) bool {
	return st.write(fmt.Sprintf("id: %d\nevent: reset\ndata: {\"reason\":\"Your position is not in the stream's window (the last %d changes): read the annotations again.\"}\n\n", newest, FeedWindow))
}

// shows reports whether the stream's user may see the change's thread (context.access).
func (st *stream) shows(c Change) bool {
	if c.Access == "" || st.actor.user == nil {
		return true
	}
	if v, ok := st.visible[c.Access]; ok {
		return v
	}
	var acc structpb.Struct
	ok := protojson.Unmarshal([]byte(c.Access), &acc) == nil
	if ok {
		res, err := st.h.s.access.MatchContexts(st.ctx, &accessv1.MatchContextsRequest{ApiKey: st.actor.APIKey, OrganizationId: st.ref.OrganizationID,
			OrganizationGeneration: st.ref.OrgGen, UserIds: []string{st.actor.id()}, Contexts: []*structpb.Struct{&acc}})
		ok = err == nil && len(res.GetMatches()) > 0
		if err != nil {
			return false // not cached: asked again for the next change
		}
	}
	if len(st.visible) >= 256 {
		clear(st.visible)
	}
	st.visible[c.Access] = ok
	return ok
}

// write sends one piece of the stream within writeTimeout. What it writes is
// text/event-stream, never HTML: the events' data is JSON written by the service (its HTML
// sanitised on write, docs/comments.md, "Content safety").
func (st *stream) write(s string) bool {
	_ = st.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := st.w.Write([]byte(s)); err != nil {
		return false
	}
	return st.rc.Flush() == nil
}

// fail ends the stream with a closed event naming why (a refusal's message, or that the
// service could not go on).
func (st *stream) fail(err error) {
	var e *apierr.Error
	if !errors.As(err, &e) {
		st.h.s.log.Warn("comments stream", "err", err)
		e = apierr.New(codes.Unavailable, "The service is unavailable. Try again later.")
	}
	b, _ := json.Marshal(map[string]string{"status": apierr.StatusName(e.Code), "message": e.Message})
	st.write("event: closed\ndata: " + string(b) + "\n\n")
}
