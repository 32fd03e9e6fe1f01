package comments

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	commentsv1 "github.com/collab/collab/proto/collab/comments/v1"

	"github.com/collab/collab/internal/racetest"
)

// The first threads of a new document, added at once, are all kept: the document's count is
// created by the first of them, and the others' concurrent creation of it is not the document
// being full. It held on both stores (the embedded server serialises writes of one record;
// MongoDB may answer such an upsert with a duplicate key, which Insert takes for ErrFull:
// review of issue 24, reported).
func TestReview24ConcurrentFirstThreadsOfADocument(t *testing.T) {
	stores(t, func(t *testing.T, newStore func(t *testing.T) Store) {
		s, _ := newServer(t, newStore(t))
		const n = 8
		for round := range 3 {
			doc := fmt.Sprint("fresh", round)
			msgs := make([]string, n)
			racetest.N(n, func(i int) {
				id := fmt.Sprintf("r%dt%d", round, i)
				res, err := s.AddCommentAnnotations(k1, &commentsv1.AddCommentAnnotationsRequest{OrganizationId: "o", DocumentId: doc,
					CommentAnnotations: []*commentsv1.NewAnnotation{thread(id, "x")}})
				if err != nil {
					msgs[i] = err.Error()
				} else if r := res.GetData()[id]; !r.GetSuccess() {
					msgs[i] = r.GetMessage()
				}
			})
			for i, m := range msgs {
				if m != "" {
					t.Fatalf("%s: thread t%d refused: %q", doc, i, m)
				}
			}
		}
	})
}

// A thread an end user may not see (context.access) is not there for them in any operation:
// they cannot change it (an editor removing its context.access would then read it), comment
// on it, react, mark it read or delete it, and the refusals do not tell it exists (review of
// issue 24; docs/comments.md, "End users").
func TestReview24HiddenThreadsAreNotThereForWrites(t *testing.T) {
	s, ev := newServer(t, NewMemoryStore())
	guarded := thread("team-a", "for team a")
	guarded.Context = mustStruct(t, map[string]any{"access": map[string]any{"team": "a"}})
	add(t, s, "d", guarded)
	before := len(ev.got())
	const doc = "d"
	thread := func(ctx context.Context) *commentsv1.CommentAnnotation {
		res, err := s.GetCommentAnnotations(ctx, &commentsv1.GetCommentAnnotationsRequest{OrganizationId: "o", DocumentId: doc})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range res.GetData() {
			if a.GetAnnotationId() == "team-a" {
				return a
			}
		}
		return nil
	}
	itemMissing := func(t *testing.T, res *commentsv1.ItemResultsResponse, err error) {
		t.Helper()
		if err != nil || res.GetData()["team-a"].GetSuccess() || res.GetData()["team-a"].GetMessage() != msgItemMissing {
			t.Fatalf("%v, %v: want the item's %q", res, err, msgItemMissing)
		}
	}
	notFound := func(t *testing.T, err error) {
		t.Helper()
		wantCode(t, err, codes.NotFound, "a hidden thread")
	}
	ed2 := as("t:ed2") // an editor whose access context does not grant team a
	t.Run("update", func(t *testing.T) {
		res, err := s.UpdateCommentAnnotations(ed2, &commentsv1.UpdateCommentAnnotationsRequest{OrganizationId: "o", DocumentId: doc,
			Annotations: []*commentsv1.AnnotationUpdate{{AnnotationId: "team-a", Context: mustStruct(t, map[string]any{"note": "open"})}}})
		itemMissing(t, res, err)
	})
	t.Run("add comments", func(t *testing.T) {
		_, err := s.AddComments(ed2, &commentsv1.AddCommentsRequest{OrganizationId: "o", DocumentId: doc, AnnotationId: "team-a",
			CommentData: []*commentsv1.NewComment{{CommentText: "in a thread I cannot see"}}})
		notFound(t, err)
	})
	t.Run("react", func(t *testing.T) {
		_, err := s.AddReaction(ed2, &commentsv1.AddReactionRequest{OrganizationId: "o", DocumentId: doc, AnnotationId: "team-a", CommentId: 1, Emoji: "👍"})
		notFound(t, err)
	})
	t.Run("update comments", func(t *testing.T) {
		_, err := s.UpdateComments(ed2, &commentsv1.UpdateCommentsRequest{OrganizationId: "o", DocumentId: doc, AnnotationId: "team-a",
			CommentIds: []float64{1}, UpdatedData: &commentsv1.CommentChanges{CommentText: proto.String("x")}})
		notFound(t, err)
	})
	t.Run("delete comments", func(t *testing.T) {
		_, err := s.DeleteComments(as("t:ed2:admin"), &commentsv1.DeleteCommentsRequest{OrganizationId: "o", DocumentId: doc, AnnotationId: "team-a", CommentIds: []float64{1}})
		notFound(t, err)
	})
	t.Run("mark read", func(t *testing.T) {
		res, err := s.MarkRead(ed2, &commentsv1.MarkReadRequest{OrganizationId: "o", DocumentId: doc, AnnotationIds: []string{"team-a"}})
		itemMissing(t, res, err)
	})
	t.Run("delete", func(t *testing.T) {
		res, err := s.DeleteCommentAnnotations(ed2, &commentsv1.DeleteCommentAnnotationsRequest{OrganizationId: "o", DocumentId: doc, AnnotationIds: []string{"team-a"}})
		itemMissing(t, res, err)
	})
	if after := ev.got(); len(after) != before {
		t.Fatalf("writes to a hidden thread published %v", after[before:])
	}
	a := thread(k1)
	if a == nil || len(a.GetComments()) != 1 || len(a.GetComments()[0].GetReactions()) != 0 || a.GetContext().GetFields()["access"] == nil {
		t.Fatalf("the hidden thread changed: %v", a)
	}
	// A user it grants still writes to it.
	if _, err := s.AddComments(as("t:ed"), &commentsv1.AddCommentsRequest{OrganizationId: "o", DocumentId: doc, AnnotationId: "team-a",
		CommentData: []*commentsv1.NewComment{{CommentText: "from team a"}}}); err != nil {
		t.Fatal(err)
	}
}

// A generated commentId is never past 2^53-1, the largest a JSON number holds exactly: after a
// comment given that id, a comment without one is refused instead of getting an id that no
// operation accepts (and that a JSON client reads as another comment's) (review of issue 24).
func TestReview24GeneratedCommentIDsStayExact(t *testing.T) {
	stores(t, func(t *testing.T, newStore func(t *testing.T) Store) {
		s, _ := newServer(t, newStore(t))
		top := &commentsv1.NewComment{CommentId: maxCommentID, CommentText: "top", From: user("u")}
		next := &commentsv1.NewComment{CommentText: "next", From: user("u")}
		_, err := s.AddCommentAnnotations(k1, &commentsv1.AddCommentAnnotationsRequest{OrganizationId: "o", DocumentId: "d",
			CommentAnnotations: []*commentsv1.NewAnnotation{{AnnotationId: "a0", From: user("u"), CommentData: []*commentsv1.NewComment{top, next}}}})
		wantCode(t, err, codes.InvalidArgument, "a new thread's comment after the largest id")

		add(t, s, "d", &commentsv1.NewAnnotation{AnnotationId: "a1", From: user("u"), CommentData: []*commentsv1.NewComment{top}})
		res, err := s.AddComments(k1, &commentsv1.AddCommentsRequest{OrganizationId: "o", DocumentId: "d", AnnotationId: "a1",
			CommentData: []*commentsv1.NewComment{next}})
		wantCode(t, err, codes.FailedPrecondition, fmt.Sprintf("a comment after the largest id (answered %v)", res.GetData()))
		got, err := s.GetComments(k1, &commentsv1.GetCommentsRequest{OrganizationId: "o", DocumentId: "d", AnnotationId: "a1"})
		if err != nil || len(got.GetData()) != 1 {
			t.Fatalf("%v, %v: want the one comment", got, err)
		}
		// Ids the caller gives still go in.
		if _, err := s.AddComments(k1, &commentsv1.AddCommentsRequest{OrganizationId: "o", DocumentId: "d", AnnotationId: "a1",
			CommentData: []*commentsv1.NewComment{{CommentId: 7, CommentText: "seven", From: user("u")}}}); err != nil {
			t.Fatal(err)
		}
	})
}

// A reaction and a deleted comment are changes of the thread: it is unread again by those who
// had read it (docs/comments.md, "Annotations": "again after any change of it").
func TestReview24EveryChangeMakesAThreadUnread(t *testing.T) {
	stores(t, func(t *testing.T, newStore func(t *testing.T) Store) {
		s, _ := newServer(t, newStore(t))
		add(t, s, "d", thread("a1", "one", "two"))
		unread := func() float64 {
			res, err := s.CountCommentAnnotations(k1, &commentsv1.CountCommentAnnotationsRequest{OrganizationId: "o", DocumentIds: []string{"d"}, UserId: "reader"})
			if err != nil {
				t.Fatal(err)
			}
			return res.GetData()["d"].GetUnread()
		}
		read := func() {
			if _, err := s.MarkRead(k1, &commentsv1.MarkReadRequest{OrganizationId: "o", DocumentId: "d", UserId: "reader", AnnotationIds: []string{"a1"}}); err != nil {
				t.Fatal(err)
			}
			if n := unread(); n != 0 {
				t.Fatalf("unread %v after Mark Read", n)
			}
		}
		changes := []struct {
			name string
			do   func() error
		}{
			{"a reaction", func() error {
				_, err := s.AddReaction(k1, &commentsv1.AddReactionRequest{OrganizationId: "o", DocumentId: "d", AnnotationId: "a1", CommentId: 1, Emoji: "👍", User: user("fan")})
				return err
			}},
			{"a reaction removed", func() error {
				_, err := s.DeleteReaction(k1, &commentsv1.DeleteReactionRequest{OrganizationId: "o", DocumentId: "d", AnnotationId: "a1", CommentId: 1, Emoji: "👍", User: user("fan")})
				return err
			}},
			{"a comment deleted", func() error {
				_, err := s.DeleteComments(k1, &commentsv1.DeleteCommentsRequest{OrganizationId: "o", DocumentId: "d", AnnotationId: "a1", CommentIds: []float64{2}})
				return err
			}},
		}
		for _, c := range changes {
			read()
			if err := c.do(); err != nil {
				t.Fatal(err)
			}
			if n := unread(); n != 1 {
				t.Fatalf("after %s the thread is unread by %v threads, want 1", c.name, n)
			}
		}
	})
}

// gatedWriter is a streaming ResponseWriter whose first write waits for the test (a client
// slow to take the stream's first bytes).
type gatedWriter struct {
	hdr     http.Header
	entered chan struct{}
	gate    chan struct{}
	once    sync.Once
	mu      sync.Mutex
	out     strings.Builder
}

func (w *gatedWriter) Header() http.Header { return w.hdr }
func (w *gatedWriter) WriteHeader(int)     {}
func (w *gatedWriter) Flush()              {}
func (w *gatedWriter) Write(b []byte) (int, error) {
	w.once.Do(func() { close(w.entered); <-w.gate })
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.out.Write(b)
}

func (w *gatedWriter) text() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.out.String()
}

// A change that the document's room reads while a new stream is still writing its first
// bytes does not wedge the stream: it sends the change and ends with its client (the stream
// blocked on its own wake-up channel for ever before, holding its slot of the user's 16 and
// keeping its room polling) (review of issue 24).
func TestReview24StreamWokenWhileOpening(t *testing.T) {
	s, _ := newServer(t, NewMemoryStore())
	s.bus, s.poll = nil, 5*time.Millisecond
	hub := newStreamHub(s)
	t.Cleanup(hub.Close)
	add(t, s, "d", thread("a1", "first"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &gatedWriter{hdr: http.Header{}, entered: make(chan struct{}), gate: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		hub.ServeHTTP(w, httptest.NewRequest(http.MethodGet, StreamPrefix+"o/d?token=t:vi", nil).WithContext(ctx))
	}()
	<-w.entered // the stream joined its room and writes its first bytes
	reply(t, s, "while the stream opens")
	time.Sleep(100 * time.Millisecond) // the room reads the change and signals the stream
	close(w.gate)
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(w.text(), "event: comment.add") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end when its client went")
	}
	if !strings.Contains(w.text(), "event: comment.add") {
		t.Fatalf("the change was not sent: %q", w.text())
	}
	hub.mu.Lock()
	defer hub.mu.Unlock()
	if hub.total != 0 {
		t.Fatalf("%d streams still counted", hub.total)
	}
}

// A client resuming at the feed's newest change on a process whose room has not read it yet
// (the room reads at a wake-up or the poll; a reconnect often reaches another replica) is not
// told to reset, and gets no change twice (review of issue 24).
func TestReview24StreamResumedAheadOfItsRoom(t *testing.T) {
	s, _ := newServer(t, NewMemoryStore())
	s.bus, s.poll = nil, time.Hour // the room reads only when the test signals it
	hub := newStreamHub(s)
	srv := httptest.NewServer(hub)
	t.Cleanup(func() { hub.Close(); srv.Close() })
	url := srv.URL + StreamPrefix
	add(t, s, "d", thread("a1", "first")) // change 1
	first, _ := openStream(t, url, "t:vi", "")
	reply(t, s, "second") // change 2, which the room does not know yet
	second, code := openStream(t, url, "t:ed", "2")
	if code != http.StatusOK {
		t.Fatalf("resume: %d", code)
	}
	reply(t, s, "third") // change 3
	hub.rooms.mu.Lock()
	for _, room := range hub.rooms.byFeed {
		room.signal()
	}
	hub.rooms.mu.Unlock()
	if ev := second.next(t); ev.event != "comment.add" || ev.id != "3" {
		t.Fatalf("the resumed stream got %+v first, want change 3", ev)
	}
	for _, want := range []string{"2", "3"} {
		if ev := first.next(t); ev.id != want {
			t.Fatalf("the first stream got %+v, want change %s", ev, want)
		}
	}
}
