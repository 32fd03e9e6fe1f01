package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/collab/collab/internal/embedmongo"
	"github.com/collab/collab/internal/testkit/natstest"
	"github.com/collab/collab/internal/testkit/ssetest"
)

// streamTypes are the event types of the comments live stream, the ones a front end listens
// to (docs/comments.md, "Live stream" and "Events").
var streamTypes = []string{
	"comment_annotation.add", "comment_annotation.update", "comment_annotation.delete",
	"comment_annotation.status_change", "comment_annotation.priority_change", "comment_annotation.assign",
	"comment.add", "comment.update", "comment.delete", "comment.reaction_add", "comment.reaction_delete",
	"reset", "closed",
}

// streamURL is the live stream of a document with token in the query, as a browser's
// EventSource opens it.
func (s *system) streamURL(org, doc, token string) string {
	u := s.base + "/v2/commentannotations/stream/" + url.PathEscape(org) + "/" + url.PathEscape(doc)
	if token != "" {
		u += "?token=" + url.QueryEscape(token)
	}
	return u
}

// commentToken generates an end user's JWT with a role on each of docs of organization o.
func (s *system) commentToken(t *testing.T, k map[string]string, user, role string, docs ...string) string {
	t.Helper()
	var resources []any
	for _, d := range docs {
		resources = append(resources, map[string]any{"type": "document", "id": d, "organizationId": "o", "accessRole": role})
	}
	body := map[string]any{"userId": user, "userProperties": map[string]any{"name": "Name " + user, "email": user + "@example.com"},
		"permissions": map[string]any{"resources": resources}}
	return s.call("/v2/auth/generate_token", k, body).data(t, "Token generated successfully.")["token"].(string)
}

// restrictedDocs creates organization o with documents readable only by users granted a role.
func (s *system) restrictedDocs(t *testing.T, k map[string]string, docs ...string) {
	t.Helper()
	var list []any
	for _, d := range docs {
		list = append(list, map[string]any{"documentId": d, "documentName": d})
	}
	s.call("/v2/organizations/documents/add", k, map[string]any{"organizationId": "o", "createOrganization": true, "documents": list}).data(t, "")
	s.call("/v1/organizations/documents/access/update", k, map[string]any{"organizationId": "o", "documentIds": docs, "accessType": "restricted"}).data(t, "")
}

// change is one event of the live stream, decoded.
type change struct {
	id        int64
	typ       string
	annID     string
	commentID float64
	ann       map[string]any
	// comment is the changed comment, whole, for comment events.
	comment map[string]any
}

func decodeChange(t *testing.T, ev ssetest.Event) change {
	t.Helper()
	if ev.Kind != ssetest.KindMessage {
		t.Fatalf("got %+v, want an event a listener takes", ev)
	}
	id, err := strconv.ParseInt(ev.ID, 10, 64)
	if err != nil {
		t.Fatalf("event %+v: id %q is not a number", ev, ev.ID)
	}
	var d struct {
		Type         string         `json:"type"`
		AnnotationID string         `json:"annotationId"`
		Annotation   map[string]any `json:"annotation"`
		CommentID    float64        `json:"commentId"`
		Comment      map[string]any `json:"comment"`
	}
	if err := json.Unmarshal([]byte(ev.Data), &d); err != nil {
		t.Fatalf("event %+v: data is not JSON: %v", ev, err)
	}
	if d.Type != ev.Type || d.Annotation["annotationId"] != d.AnnotationID {
		t.Fatalf("event %+v: the data's type %q or annotation %v disagrees", ev, d.Type, d.Annotation["annotationId"])
	}
	if d.Comment != nil && d.Comment["commentId"] != d.CommentID {
		t.Fatalf("event %+v: the comment's id disagrees with commentId", ev)
	}
	return change{id: id, typ: d.Type, annID: d.AnnotationID, commentID: d.CommentID, ann: d.Annotation, comment: d.Comment}
}

// nextChange waits for the client's next stream event, failing on anything but an event (an
// error, a reconnection, an event of an unknown type).
func nextChange(t *testing.T, c *ssetest.Client) change {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	ev, err := c.NextOf(ctx, ssetest.KindMessage, ssetest.KindUnlistened, ssetest.KindError, ssetest.KindRequest)
	if err != nil {
		t.Fatal(err)
	}
	return decodeChange(t, ev)
}

// nextOf waits for the client's next report of one of kinds.
func nextOf(t *testing.T, c *ssetest.Client, kinds ...string) ssetest.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	ev, err := c.NextOf(ctx, kinds...)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// openStream starts an EventSource on u and waits until its stream is open.
func openStream(t *testing.T, u string, opts ...ssetest.Option) *ssetest.Client {
	t.Helper()
	c := ssetest.Start(t, u, append([]ssetest.Option{ssetest.WithTypes(streamTypes...)}, opts...)...)
	if ev := nextOf(t, c, ssetest.KindOpen, ssetest.KindError); ev.Kind != ssetest.KindOpen {
		t.Fatalf("the stream did not open: %+v", ev)
	}
	return c
}

// expectChanges reads len(want) events and checks their types and threads, in order, with
// consecutive ids after `after` (the document's feed numbers its changes one by one); it
// returns them.
func expectChanges(t *testing.T, c *ssetest.Client, after int64, want ...[2]string) []change {
	t.Helper()
	var got []change
	for i, w := range want {
		ch := nextChange(t, c)
		if ch.typ != w[0] || ch.annID != w[1] {
			t.Fatalf("event %d: %s of %s, want %s of %s", i, ch.typ, ch.annID, w[0], w[1])
		}
		if after >= 0 && ch.id != after+int64(i)+1 {
			t.Fatalf("event %d (%s) has id %d, want %d: an event missed or repeated", i, ch.typ, ch.id, after+int64(i)+1)
		}
		got = append(got, ch)
	}
	return got
}

// comments are the comments an event carries whole, by id: a new thread's, in its
// annotation, and a comment event's changed comment (the annotation of other changes comes
// without its comments: docs/comments.md, "Live stream").
func (ch change) comments() map[float64]map[string]any {
	out := map[float64]map[string]any{}
	list, _ := ch.ann["comments"].([]any)
	if ch.comment != nil {
		list = append(list, ch.comment)
	}
	for _, c := range list {
		m := c.(map[string]any)
		id, _ := m["commentId"].(float64)
		out[id] = m
	}
	return out
}

// cutter is a TCP proxy in front of a server whose open connections a test can cut, as a
// network or a load balancer does.
type cutter struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  map[net.Conn]bool
}

func newCutter(t *testing.T, target string) *cutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutter{ln: ln, target: target, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns[in], p.conns[out] = true, true
			p.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
	return p
}

// cut closes every connection open through the proxy.
func (p *cutter) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

func reply(t *testing.T, s *system, k map[string]string, doc, ann string, texts ...string) {
	t.Helper()
	var data []any
	for _, x := range texts {
		data = append(data, map[string]any{"commentText": x, "from": map[string]any{"userId": "u1"}})
	}
	s.call("/v2/commentannotations/comments/add", k, map[string]any{"organizationId": "o", "documentId": doc, "annotationId": ann, "commentData": data}).
		data(t, "Comment(s) added successfully.")
}

func addThread(t *testing.T, s *system, k map[string]string, doc, ann, text string) {
	t.Helper()
	s.call("/v2/commentannotations/add", k, map[string]any{"organizationId": "o", "documentId": doc, "commentAnnotations": []any{map[string]any{
		"annotationId": ann, "from": map[string]any{"userId": "u1"}, "commentData": []any{map[string]any{"commentText": text, "from": map[string]any{"userId": "u1"}}}}}}).
		data(t, "Comment annotation(s) added successfully.")
}

// A real EventSource (the eventsource npm package) on the live stream through the gateway of
// one process, with an end user's JWT from Generate Token in the query: every change made over
// HTTP arrives, in order, with its feed number as id, its type and the annotation after it;
// cut by the network, EventSource reconnects by itself with Last-Event-ID and gets what was
// changed meanwhile, once; closed and opened again with lastEventId (or the JWT as
// Authorization: Bearer) it resumes after that event; a new stream starts after the newest
// change (docs/comments.md, "Live stream").
func TestCommentsStreamWithEventSource(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	k := s.devKey()
	s.restrictedDocs(t, k, "d")
	token := s.commentToken(t, k, "vi", "viewer", "d")

	// Through a proxy the test can cut.
	proxy := newCutter(t, s.proc.HTTPAddr)
	via := &system{t: t, base: "http://" + proxy.ln.Addr().String()}
	c := openStream(t, via.streamURL("o", "d", token))

	addThread(t, s, k, "d", "a1", "first")
	reply(t, s, k, "d", "a1", "second", "third")
	s.call("/v2/commentannotations/comments/reactions/add", k, map[string]any{"organizationId": "o", "documentId": "d", "annotationId": "a1",
		"commentId": 2, "emoji": "👍", "user": map[string]any{"userId": "u2"}}).data(t, "Reaction added successfully.")
	s.call("/v2/commentannotations/update", k, map[string]any{"organizationId": "o", "documentId": "d", "annotations": []any{map[string]any{
		"annotationId": "a1", "status": map[string]any{"id": "DONE", "name": "Done", "type": "terminal"}}}}).data(t, "Comment annotation(s) updated successfully.")
	first := nextChange(t, c)
	if first.typ != "comment_annotation.add" || first.annID != "a1" {
		t.Fatalf("first event %+v", first)
	}
	if cs := first.comments(); len(cs) != 1 || cs[1]["commentText"] != "first" {
		t.Fatalf("the added thread's comments %v", first.ann["comments"])
	}
	got := expectChanges(t, c, first.id, [2]string{"comment.add", "a1"}, [2]string{"comment.add", "a1"},
		[2]string{"comment.reaction_add", "a1"}, [2]string{"comment_annotation.status_change", "a1"})
	if got[0].commentID != 2 || got[1].commentID != 3 || got[1].comments()[3]["commentText"] != "third" {
		t.Fatalf("the replies' events: %+v %+v", got[0], got[1])
	}
	if r, _ := got[2].comments()[2]["reactions"].([]any); len(r) != 1 || got[2].commentID != 2 {
		t.Fatalf("the reaction's event: comment %v reactions %v", got[2].commentID, r)
	}
	if st := got[3].ann["status"].(map[string]any); st["id"] != "DONE" {
		t.Fatalf("the status change's annotation has status %v", st)
	}
	last := got[3].id

	// The network cuts the stream: EventSource reconnects after the retry the stream set
	// (2 s) with Last-Event-ID, and gets what changed meanwhile, once.
	proxy.cut()
	if ev := nextOf(t, c, ssetest.KindError, ssetest.KindMessage); ev.Kind != ssetest.KindError || ev.ReadyState != ssetest.Connecting {
		t.Fatalf("after the cut: %+v, want an error while reconnecting", ev)
	}
	reply(t, s, k, "d", "a1", "while away 1")
	reply(t, s, k, "d", "a1", "while away 2")
	if ev := nextOf(t, c, ssetest.KindRequest); ev.LastEventID == nil || *ev.LastEventID != strconv.FormatInt(last, 10) {
		t.Fatalf("the reconnection %+v, want Last-Event-ID %d", ev, last)
	}
	nextOf(t, c, ssetest.KindOpen)
	away := expectChanges(t, c, last, [2]string{"comment.add", "a1"}, [2]string{"comment.add", "a1"})
	if away[0].commentID != 4 || away[1].commentID != 5 {
		t.Fatalf("after the reconnection: comments %v, %v, want 4 and 5", away[0].commentID, away[1].commentID)
	}
	last = away[1].id
	// Live again after the reconnection.
	reply(t, s, k, "d", "a1", "live again")
	last = expectChanges(t, c, last, [2]string{"comment.add", "a1"})[0].id
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	// Changes while no client is open; a client that resumes explicitly after the last event
	// it saw gets them, once, then what comes live.
	addThread(t, s, k, "d", "a2", "second thread")
	reply(t, s, k, "d", "a1", "closed 1")
	resumed := openStream(t, s.streamURL("o", "d", token)+"&lastEventId="+strconv.FormatInt(last, 10))
	expectChanges(t, resumed, last, [2]string{"comment_annotation.add", "a2"}, [2]string{"comment.add", "a1"})
	s.call("/v2/commentannotations/delete", k, map[string]any{"organizationId": "o", "documentId": "d", "annotationIds": []any{"a2"}}).data(t, "")
	gone := expectChanges(t, resumed, last+2, [2]string{"comment_annotation.delete", "a2"})[0]
	if gone.ann["documentId"] != "d" || gone.ann["from"].(map[string]any)["userId"] != "u1" {
		t.Fatalf("the deletion's annotation (before it) %v", gone.ann)
	}

	// A new stream, with the JWT as Authorization: Bearer, starts after the newest change.
	fresh := openStream(t, s.streamURL("o", "d", ""), ssetest.WithHeader("Authorization", "Bearer "+token))
	reply(t, s, k, "d", "a1", "for the fresh one")
	if ch := nextChange(t, fresh); ch.id != gone.id+1 || ch.typ != "comment.add" || ch.commentID != 8 {
		t.Fatalf("the fresh stream's first event %+v, want comment 8 as %d", ch, gone.id+1)
	}
	expectChanges(t, resumed, gone.id, [2]string{"comment.add", "a1"})
}

// refused opens an EventSource on u and checks that it gives up at once with the status, and
// that a plain GET of u gets the API's error envelope with it.
func refused(t *testing.T, s *system, u string, status int, code, message string) {
	t.Helper()
	c := ssetest.Start(t, u, ssetest.WithTypes(streamTypes...))
	ev := nextOf(t, c, ssetest.KindOpen, ssetest.KindError, ssetest.KindMessage)
	if ev.Kind != ssetest.KindError || ev.ReadyState != ssetest.Closed || ev.Code == nil || *ev.Code != status {
		t.Fatalf("%s: %+v, want EventSource to give up with %d", u, ev, status)
	}
	path := u[len(s.base):]
	s.do("GET", path, nil, nil).fails(t, status, code, message)
}

// The live stream refuses, before it opens and in the error envelope, a request without a
// token, a tampered token, a user with a role on another document only, an unknown document;
// EventSource gives up on each (a status other than 200 is final for it). An open stream whose
// API key's auth token is reset ends within the recheck (--comments-stream-recheck) with a
// closed event naming why, and EventSource's reconnection is then refused.
func TestCommentsStreamRefusals(t *testing.T) {
	t.Parallel()
	s := newSystem(t, "--comments-stream-recheck=10s")
	wsID, wsToken := s.newWorkspace("comments-stream@example.com")
	key, auth := s.newKey(wsID, wsToken)
	k := keyHeaders(key, auth)
	s.restrictedDocs(t, k, "d", "d2")
	ed := s.commentToken(t, k, "ed", "editor", "d")
	other := s.commentToken(t, k, "ot", "viewer", "d2")

	refused(t, s, s.streamURL("o", "d", ""), 403, "PERMISSION_DENIED", "A token is required: pass the JWT of Generate Token as the token query parameter.")
	refused(t, s, s.streamURL("o", "d", tampered(ed)), 403, "PERMISSION_DENIED", "")
	refused(t, s, s.streamURL("o", "d", other), 403, "PERMISSION_DENIED", "")
	refused(t, s, s.streamURL("o", "nope", ed), 404, "NOT_FOUND", "")
	refused(t, s, s.streamURL("o", "d", ed)+"&lastEventId=soon", 400, "INVALID_ARGUMENT", "Last-Event-ID must be the id of an event of this stream.")
	s.do("POST", "/v2/commentannotations/stream/o/d?token="+url.QueryEscape(ed), nil, nil).fails(t, 405, "UNIMPLEMENTED", "The live stream is opened with GET.")
	// The other document's viewer has its own stream.
	openStream(t, s.streamURL("o", "d2", other))

	c := openStream(t, s.streamURL("o", "d", ed))
	addThread(t, s, k, "d", "a1", "before the reset")
	nextChange(t, c)
	s.call("/v2/workspace/authtoken/reset", workspaceHeaders(wsID, wsToken), map[string]any{"apiKey": key}).data(t, "Auth token reset successfully.")
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	ev, err := c.NextOf(ctx, ssetest.KindMessage, ssetest.KindUnlistened)
	if err != nil {
		t.Fatal(err)
	}
	var closed struct{ Status, Message string }
	if ev.Type != "closed" || json.Unmarshal([]byte(ev.Data), &closed) != nil || closed.Status != "PERMISSION_DENIED" || closed.Message == "" {
		t.Fatalf("after the reset: %+v, want a closed event with PERMISSION_DENIED", ev)
	}
	if waited := time.Since(start); waited > 15*time.Second {
		t.Fatalf("the stream ended %v after the reset, want within the recheck of 10 s", waited)
	}
	t.Logf("ended %v after the reset: %s", time.Since(start).Round(time.Millisecond), closed.Message)
	// The server ended the stream: EventSource reconnects, and is refused for good.
	nextOf(t, c, ssetest.KindError)
	if ev := nextOf(t, c, ssetest.KindError, ssetest.KindOpen); ev.Kind != ssetest.KindError || ev.ReadyState != ssetest.Closed || ev.Code == nil || *ev.Code != 403 {
		t.Fatalf("the reconnection after the reset: %+v, want 403", ev)
	}
}

// The live stream in a split deployment on one MongoDB-wire server (the embedded FerretDB) and
// one wake-up engine (NATS): a gateway process that does not run comments proxies the stream
// to the first comments replica (--comments-http-addr), and a second replica, behind a gateway
// of its own, serves the same documents. A change made through either replica reaches the
// streams of both: the one opened through the first gateway and one opened on the second
// replica's own listener, with the same feed numbers. The safety poll is ten minutes, so only
// the wake-ups deliver within the test's deadlines (docs/comments.md, "Live stream").
func TestCommentsStreamAcrossReplicas(t *testing.T) {
	t.Parallel()
	db, err := embedmongo.Start(filepath.Join(t.TempDir(), "db"), embedmongo.QuietLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Stop)
	engine := natstest.Server(t, natstest.Options{})
	shared := []string{"--mongo-uri=" + db.URI(), "--internal-token=" + testInternalToken,
		"--wakeup-url=" + engine.ClientURL(), "--wakeup-safety-poll=10m"}

	// The first replica's addresses are the gateway's peers before it starts.
	c1GRPC, c1HTTP := freeAddr(t), freeAddr(t)
	main := realClockSystem(t, append(shared, "--dev-workspace=true", "--services=gateway,"+strings.Join(serviceNames("comments"), ","),
		"--comments-addr="+c1GRPC, "--comments-http-addr="+c1HTTP)...)
	peers := append(slices.Clone(shared), peerFlags(main.proc.GRPCAddr, serviceNames("comments")...)...)
	replica1 := realClockSystem(t, append(peers, "--services=comments", "--grpc-addr="+c1GRPC, "--http-addr="+c1HTTP)...)
	replica2 := realClockSystem(t, append(peers, "--services=comments")...)
	gw2 := realClockSystem(t, append(slices.Clone(shared), append(peerFlags(main.proc.GRPCAddr, serviceNames("comments")...),
		"--services=gateway", "--comments-addr="+replica2.proc.GRPCAddr, "--comments-http-addr="+replica2.proc.HTTPAddr)...)...)

	k := main.devKey()
	main.restrictedDocs(t, k, "d")
	token := main.commentToken(t, k, "vi", "viewer", "d")
	viaGateway := openStream(t, main.streamURL("o", "d", token))
	onReplica2 := openStream(t, replica2.streamURL("o", "d", token))
	if replica1.proc.HTTPAddr != c1HTTP {
		t.Fatalf("the first replica listens at %s, not at %s", replica1.proc.HTTPAddr, c1HTTP)
	}
	time.Sleep(200 * time.Millisecond) // the rooms' subscriptions reach the engine

	start := time.Now()
	addThread(t, main, k, "d", "a1", "through the first replica")
	a := expectChanges(t, viaGateway, -1, [2]string{"comment_annotation.add", "a1"})[0]
	b := expectChanges(t, onReplica2, -1, [2]string{"comment_annotation.add", "a1"})[0]
	t.Logf("first replica to both streams: %v", time.Since(start))
	if a.id != b.id {
		t.Fatalf("the streams number the change %d and %d", a.id, b.id)
	}
	start = time.Now()
	reply(t, gw2, k, "d", "a1", "through the second replica")
	got := expectChanges(t, viaGateway, a.id, [2]string{"comment.add", "a1"})[0]
	expectChanges(t, onReplica2, a.id, [2]string{"comment.add", "a1"})
	t.Logf("second replica to both streams: %v", time.Since(start))
	if got.commentID != 2 || got.comments()[2]["commentText"] != "through the second replica" {
		t.Fatalf("the second replica's change as the first's stream got it: %+v", got)
	}
	// Both replicas' writes are in the one store: Get through either gateway reads both.
	for _, s := range []*system{main, gw2} {
		cs := s.call("/v2/commentannotations/comments/get", k, map[string]any{"organizationId": "o", "documentId": "d", "annotationId": "a1"}).ok(t)["data"].([]any)
		if len(cs) != 2 {
			t.Fatalf("%s reads %d comments", s.base, len(cs))
		}
	}
}

// Concurrent writers on one thread over HTTP (comments and reactions at once): the stream's
// real EventSource gets one event per change, numbered one by one, each reply's comment once,
// and the thread Get reads afterwards holds every comment and reaction (docs/comments.md,
// "Live stream").
func TestCommentsStreamUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	k := s.devKey()
	s.restrictedDocs(t, k, "d")
	c := openStream(t, s.streamURL("o", "d", s.commentToken(t, k, "vi", "viewer", "d")))
	addThread(t, s, k, "d", "a1", "first")
	first := nextChange(t, c)
	const writers = 16
	var calls []func() error
	for i := range writers {
		calls = append(calls, func() error {
			path, data := "/v2/commentannotations/comments/add", map[string]any{"organizationId": "o", "documentId": "d", "annotationId": "a1",
				"commentData": []any{map[string]any{"commentText": fmt.Sprint("reply ", i), "from": map[string]any{"userId": fmt.Sprint("u", i)}}}}
			if i%2 == 1 {
				path, data = "/v2/commentannotations/comments/reactions/add", map[string]any{"organizationId": "o", "documentId": "d", "annotationId": "a1",
					"commentId": 1, "emoji": "👍", "user": map[string]any{"userId": fmt.Sprint("u", i)}}
			}
			code, body, err := s.concurrentCall(path, k, data)
			if err == nil && code != 200 {
				err = fmt.Errorf("%s: %d %v", path, code, body)
			}
			return err
		})
	}
	together(t, calls...)
	// The client dials connections for concurrent calls that it may not use; the server's
	// shutdown waits 5 s for a connection that never sent a request (net/http's rule for
	// StateNew), unless the client closes them first.
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	replies, reactions := map[string]int{}, 0
	for i := range writers {
		ch := nextChange(t, c)
		if ch.id != first.id+int64(i)+1 {
			t.Fatalf("event %d has id %d, want %d", i, ch.id, first.id+int64(i)+1)
		}
		switch ch.typ {
		case "comment.add":
			replies[fmt.Sprint(ch.comment["commentText"])]++
		case "comment.reaction_add":
			reactions++
		default:
			t.Fatalf("event %d: %s", i, ch.typ)
		}
	}
	if len(replies) != writers/2 || reactions != writers/2 {
		t.Fatalf("the stream carried replies %v and %d reactions, want %d of each once", replies, reactions, writers/2)
	}
	for text, n := range replies {
		if n != 1 {
			t.Fatalf("%q came %d times", text, n)
		}
	}
	got := commentsOf(t, s, k, "d", "a1")
	rs, _ := got["first"]["reactions"].([]any)
	if len(got) != 1+writers/2 || len(rs) != 1 || len(rs[0].(map[string]any)["userIds"].([]any)) != writers/2 {
		t.Fatalf("Get reads %d comments and reactions %v", len(got), rs)
	}
}
