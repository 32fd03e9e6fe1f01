package comments

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	commentsv1 "github.com/collab/collab/proto/collab/comments/v1"
	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/outbox"
	"github.com/collab/collab/internal/racetest"
	"github.com/collab/collab/internal/testkit/mongotest"
)

func TestMain(m *testing.M) { os.Exit(mongotest.Run(m)) }

type fakeDocs struct {
	documentsv1.DocumentsServiceClient
}

func (fakeDocs) ResolveResources(_ context.Context, in *documentsv1.ResolveResourcesRequest, _ ...grpc.CallOption) (*documentsv1.ResolveResourcesResponse, error) {
	out := &documentsv1.ResolveResourcesResponse{OrganizationExists: in.GetOrganizationId() == "o", OrganizationGeneration: "g1", Documents: map[string]*documentsv1.ResolvedResource{}}
	for _, d := range in.GetDocumentIds() {
		out.Documents[d] = &documentsv1.ResolvedResource{Exists: d != "ghost", Generation: "dg-" + d}
	}
	return out, nil
}

func (fakeDocs) EnsureResources(_ context.Context, in *documentsv1.EnsureResourcesRequest, _ ...grpc.CallOption) (*documentsv1.EnsureResourcesResponse, error) {
	return &documentsv1.EnsureResourcesResponse{OrganizationGeneration: "g1", DocumentGeneration: "dg-" + in.GetDocumentId()}, nil
}

// events records the types of the events published, in order.
type events struct {
	mu    sync.Mutex
	types []string
}

func (e *events) PublishAsync(_ context.Context, ev *lifecyclev1.Event) (*outbox.Record, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.types = append(e.types, ev.GetDomain().GetType())
	return &outbox.Record{}, nil
}

func (e *events) got() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.types)
}

var k1 = authn.WithCaller(context.Background(), authn.Caller{APIKey: "k1", WorkspaceID: "w"})

func newServer(t testing.TB, store Store) (*Server, *events) {
	t.Helper()
	ev := &events{}
	s, err := New(store, fakeDocs{}, newFakeAccess(), ev, []byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	return s, ev
}

// stores runs f on the memory store and on the embedded MongoDB-wire server.
func stores(t *testing.T, f func(t *testing.T, newStore func(t *testing.T) Store)) {
	t.Run("memory", func(t *testing.T) { f(t, func(*testing.T) Store { return NewMemoryStore() }) })
	t.Run("mongo", func(t *testing.T) {
		f(t, func(t *testing.T) Store {
			s, err := NewMongoStore(context.Background(), mongotest.Connect(t).Database("comments"))
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
	})
}

func user(id string) *commentsv1.User { return &commentsv1.User{UserId: id, Name: "N " + id} }

func thread(id string, texts ...string) *commentsv1.NewAnnotation {
	a := &commentsv1.NewAnnotation{AnnotationId: id, From: user("author")}
	for _, tx := range texts {
		a.CommentData = append(a.CommentData, &commentsv1.NewComment{CommentText: tx, From: user("author")})
	}
	return a
}

func add(t *testing.T, s *Server, doc string, as ...*commentsv1.NewAnnotation) *commentsv1.ItemResultsResponse {
	t.Helper()
	res, err := s.AddCommentAnnotations(k1, &commentsv1.AddCommentAnnotationsRequest{OrganizationId: "o", DocumentId: doc, CommentAnnotations: as})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func wantCode(t *testing.T, err error, code codes.Code, what string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("%s: %v, want %v", what, err, code)
	}
}

// Concurrent comments on one thread are all kept, each with its own id, and concurrent
// reactions of distinct users are each counted once, also when every user reacts twice at
// once: every change is a compare-and-swap of the thread (docs/comments.md, "Storage").
func TestConcurrentChangesOfOneThread(t *testing.T) {
	stores(t, func(t *testing.T, newStore func(t *testing.T) Store) {
		s, _ := newServer(t, newStore(t))
		add(t, s, "d", thread("a1", "first"))
		const n = 12
		ids := make([]float64, n)
		racetest.N(n, func(i int) {
			res, err := s.AddComments(k1, &commentsv1.AddCommentsRequest{OrganizationId: "o", DocumentId: "d", AnnotationId: "a1",
				CommentData: []*commentsv1.NewComment{{CommentText: fmt.Sprint("c", i), From: user(fmt.Sprint("u", i))}}})
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = res.GetData()[0]
		})
		got, err := s.GetComments(k1, &commentsv1.GetCommentsRequest{OrganizationId: "o", DocumentId: "d", AnnotationId: "a1"})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.GetData()) != n+1 {
			t.Fatalf("%d comments kept, want %d", len(got.GetData()), n+1)
		}
		seen := map[float64]bool{}
		for _, c := range got.GetData() {
			if seen[c.GetCommentId()] {
				t.Fatalf("comment id %v given twice", c.GetCommentId())
			}
			seen[c.GetCommentId()] = true
		}
		for _, id := range ids {
			if !seen[id] {
				t.Fatalf("answered id %v is not in the thread", id)
			}
		}
		racetest.N(2*n, func(i int) {
			_, err := s.AddReaction(k1, &commentsv1.AddReactionRequest{OrganizationId: "o", DocumentId: "d", AnnotationId: "a1",
				CommentId: 1, Emoji: "👍", User: user(fmt.Sprint("r", i%n))})
			if err != nil {
				t.Error(err)
			}
		})
		got, _ = s.GetComments(k1, &commentsv1.GetCommentsRequest{OrganizationId: "o", DocumentId: "d", AnnotationId: "a1", CommentIds: []float64{1}})
		rs := got.GetData()[0].GetReactions()
		if len(rs) != 1 || len(rs[0].GetUserIds()) != n {
			t.Fatalf("reactions %v, want one emoji with %d users", rs, n)
		}
	})
}

// The per-document limit holds under concurrent adds: of 20 threads added at once to a
// document with room for 5, exactly 5 are kept.
func TestThreadLimitUnderConcurrentInserts(t *testing.T) {
	stores(t, func(t *testing.T, newStore func(t *testing.T) Store) {
		st := newStore(t)
		r := Ref{APIKey: "k1", OrganizationID: "o", OrgGen: "g1", DocumentID: "d", DocGen: "dg-d"}
		var mu sync.Mutex
		kept, full := 0, 0
		racetest.N(20, func(i int) {
			err := st.Insert(context.Background(), &Annotation{Ref: r, ID: fmt.Sprint("t", i), Version: 1, Comments: []Comment{{ID: 1}}}, 5)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				kept++
			case errors.Is(err, ErrFull):
				full++
			default:
				t.Error(err)
			}
		})
		total, _, err := st.Count(context.Background(), []Ref{r}, nil, "")
		if kept != 5 || full != 15 || err != nil || total[0] != 5 {
			t.Fatalf("kept %d, refused %d, counted %v (%v); want 5, 15, 5", kept, full, total, err)
		}
		// A deleted thread gives its place back.
		got, _ := st.Get(context.Background(), r, []string{"t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9", "t10", "t11", "t12", "t13", "t14", "t15", "t16", "t17", "t18", "t19"})
		for _, a := range got {
			if err := st.Delete(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			break
		}
		if err := st.Insert(context.Background(), &Annotation{Ref: r, ID: "again", Version: 1}, 5); err != nil {
			t.Fatalf("after a deletion: %v", err)
		}
	})
}

// Pages in lastUpdated order see every thread once, in both orders, and a token works only
// with the filters it was issued for.
func TestPaging(t *testing.T) {
	stores(t, func(t *testing.T, newStore func(t *testing.T) Store) {
		s, _ := newServer(t, newStore(t))
		for i := range 25 {
			add(t, s, "d", thread(fmt.Sprintf("a%02d", i), "x"))
		}
		for _, order := range []string{"asc", "desc"} {
			var seen []string
			tok := ""
			for range 10 {
				res, err := s.GetCommentAnnotations(k1, &commentsv1.GetCommentAnnotationsRequest{OrganizationId: "o", DocumentId: "d", PageSize: proto.Int32(10), PageToken: tok, Order: order})
				if err != nil {
					t.Fatal(err)
				}
				for _, a := range res.GetData() {
					seen = append(seen, a.GetAnnotationId())
				}
				if res.PageToken == nil {
					break
				}
				tok = res.GetPageToken()
				_, err = s.GetCommentAnnotations(k1, &commentsv1.GetCommentAnnotationsRequest{OrganizationId: "o", DocumentId: "d", PageSize: proto.Int32(10), PageToken: tok, Order: order, StatusIds: []string{"OPEN"}})
				wantCode(t, err, codes.InvalidArgument, "a token with other filters")
			}
			sorted := slices.Clone(seen)
			slices.Sort(sorted)
			if len(seen) != 25 || len(slices.Compact(sorted)) != 25 {
				t.Fatalf("%s: saw %d (%v), want each of 25 once", order, len(seen), seen)
			}
		}
	})
}

// Each change publishes its event; a reaction that changes nothing publishes none.
func TestEveryChangePublishesItsEvent(t *testing.T) {
	s, ev := newServer(t, NewMemoryStore())
	add(t, s, "d", thread("a1", "hello"))
	ctx, doc := k1, func() (string, string, string) { return "o", "d", "a1" }
	o, d, a := doc()
	if _, err := s.AddComments(ctx, &commentsv1.AddCommentsRequest{OrganizationId: o, DocumentId: d, AnnotationId: a, CommentData: []*commentsv1.NewComment{{CommentText: "reply", From: user("u2")}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateComments(ctx, &commentsv1.UpdateCommentsRequest{OrganizationId: o, DocumentId: d, AnnotationId: a, CommentIds: []float64{2}, UpdatedData: &commentsv1.CommentChanges{CommentText: proto.String("edited")}}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second changes nothing
		if _, err := s.AddReaction(ctx, &commentsv1.AddReactionRequest{OrganizationId: o, DocumentId: d, AnnotationId: a, CommentId: 2, Emoji: "tada", User: user("u3")}); err != nil {
			t.Fatal(err)
		}
	}
	up := &commentsv1.AnnotationUpdate{AnnotationId: a, Status: &commentsv1.Status{Id: "DONE", Type: "terminal"}, Priority: &commentsv1.Priority{Id: "P1"}, AssignedTo: user("u4")}
	res, err := s.UpdateCommentAnnotations(ctx, &commentsv1.UpdateCommentAnnotationsRequest{OrganizationId: o, DocumentId: d, Annotations: []*commentsv1.AnnotationUpdate{up}})
	if err != nil || !res.GetData()[a].GetSuccess() {
		t.Fatal(res, err)
	}
	clear := &commentsv1.AnnotationUpdate{AnnotationId: a, NullFields: []string{"priority", "assigned_to"}}
	if _, err := s.UpdateCommentAnnotations(ctx, &commentsv1.UpdateCommentAnnotationsRequest{OrganizationId: o, DocumentId: d, Annotations: []*commentsv1.AnnotationUpdate{clear}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteComments(ctx, &commentsv1.DeleteCommentsRequest{OrganizationId: o, DocumentId: d, AnnotationId: a, CommentIds: []float64{2}}); err != nil {
		t.Fatal(err)
	}
	_, err = s.DeleteComments(ctx, &commentsv1.DeleteCommentsRequest{OrganizationId: o, DocumentId: d, AnnotationId: a, CommentIds: []float64{1}})
	wantCode(t, err, codes.FailedPrecondition, "deleting a thread's last comment")
	if _, err := s.DeleteCommentAnnotations(ctx, &commentsv1.DeleteCommentAnnotationsRequest{OrganizationId: o, DocumentId: d, AnnotationIds: []string{a}}); err != nil {
		t.Fatal(err)
	}
	want := []string{eventAnnotationAdd, eventCommentAdd, eventCommentUpdate, eventReactionAdd, eventStatusChange, eventPriorityChange, eventAssign,
		eventPriorityChange, eventAssign, eventCommentDelete, eventAnnotationDelete}
	if got := ev.got(); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}

// Unread counts follow Mark Read, and a change makes a thread unread again.
func TestCountsAndUnread(t *testing.T) {
	stores(t, func(t *testing.T, newStore func(t *testing.T) Store) {
		s, _ := newServer(t, newStore(t))
		add(t, s, "d", thread("a1", "x"), thread("a2", "y"), thread("a3", "z"))
		count := func() (float64, float64) {
			res, err := s.CountCommentAnnotations(k1, &commentsv1.CountCommentAnnotationsRequest{OrganizationId: "o", DocumentIds: []string{"d", "e"}, UserId: "u1"})
			if err != nil {
				t.Fatal(err)
			}
			if e := res.GetData()["e"]; e.GetTotal() != 0 || e.GetUnread() != 0 {
				t.Fatalf("an empty document counts %v", e)
			}
			return res.GetData()["d"].GetTotal(), res.GetData()["d"].GetUnread()
		}
		if total, unread := count(); total != 3 || unread != 3 {
			t.Fatalf("total %v unread %v, want 3 3", total, unread)
		}
		res, err := s.MarkRead(k1, &commentsv1.MarkReadRequest{OrganizationId: "o", DocumentId: "d", UserId: "u1", AnnotationIds: []string{"a1", "a2", "nope"}})
		if err != nil || !res.GetData()["a1"].GetSuccess() || res.GetData()["nope"].GetSuccess() {
			t.Fatal(res, err)
		}
		if total, unread := count(); total != 3 || unread != 1 {
			t.Fatalf("after marking two read: total %v unread %v, want 3 1", total, unread)
		}
		if _, err := s.AddComments(k1, &commentsv1.AddCommentsRequest{OrganizationId: "o", DocumentId: "d", AnnotationId: "a1", CommentData: []*commentsv1.NewComment{{CommentText: "new", From: user("u2")}}}); err != nil {
			t.Fatal(err)
		}
		if _, unread := count(); unread != 2 {
			t.Fatalf("after a reply: unread %v, want 2", unread)
		}
	})
}

// Bad input is refused with INVALID_ARGUMENT and nothing is written.
func TestRefusals(t *testing.T) {
	s, ev := newServer(t, NewMemoryStore())
	for name, a := range map[string]*commentsv1.NewAnnotation{
		"no comment":      {From: user("u")},
		"no author":       {CommentData: []*commentsv1.NewComment{{CommentText: "x", From: user("u")}}},
		"bad id":          {AnnotationId: "a b", From: user("u"), CommentData: []*commentsv1.NewComment{{CommentText: "x", From: user("u")}}},
		"empty comment":   {From: user("u"), CommentData: []*commentsv1.NewComment{{From: user("u")}}},
		"fraction id":     {From: user("u"), CommentData: []*commentsv1.NewComment{{CommentId: 1.5, CommentText: "x", From: user("u")}}},
		"bad status type": {From: user("u"), Status: &commentsv1.Status{Id: "S", Type: "closed"}, CommentData: []*commentsv1.NewComment{{CommentText: "x", From: user("u")}}},
		"control in name": {From: &commentsv1.User{UserId: "u", Name: "a\nb"}, CommentData: []*commentsv1.NewComment{{CommentText: "x", From: user("u")}}},
	} {
		_, err := s.AddCommentAnnotations(k1, &commentsv1.AddCommentAnnotationsRequest{OrganizationId: "o", DocumentId: "d", CommentAnnotations: []*commentsv1.NewAnnotation{a}})
		wantCode(t, err, codes.InvalidArgument, name)
	}
	_, err := s.GetCommentAnnotations(k1, &commentsv1.GetCommentAnnotationsRequest{OrganizationId: "o", DocumentId: "ghost"})
	wantCode(t, err, codes.NotFound, "an unknown document")
	_, err = s.GetCommentAnnotations(k1, &commentsv1.GetCommentAnnotationsRequest{OrganizationId: "x", DocumentId: "d"})
	wantCode(t, err, codes.NotFound, "an unknown organization")
	if got := ev.got(); len(got) != 0 {
		t.Fatalf("refusals published %v", got)
	}
}

// Delete Data by Location deletes the threads at the location, by id or by name, and
// publishes their deletions.
func TestDeleteDataByLocation(t *testing.T) {
	stores(t, func(t *testing.T, newStore func(t *testing.T) Store) {
		s, ev := newServer(t, newStore(t))
		at := func(id, locID, locName string) *commentsv1.NewAnnotation {
			a := thread(id, "x")
			a.Location = &commentsv1.Location{Id: locID, LocationName: locName}
			return a
		}
		add(t, s, "d", at("a1", "L1", ""), at("a2", "L2", ""), at("a3", "", "Named"), thread("a4", "x"))
		for _, p := range []*lifecyclev1.LocationDataDeleted{{DocumentId: "d", LocationId: "L1"}, {LocationName: "Named"}} {
			e := &lifecyclev1.Event{Id: "e", ApiKey: "k1", OrganizationId: "o", OrganizationGeneration: "g1",
				Payload: &lifecyclev1.Event_LocationDataDeleted{LocationDataDeleted: p}}
			if err := s.HandleEvent(context.Background(), e); err != nil {
				t.Fatal(err)
			}
		}
		res, err := s.GetCommentAnnotations(k1, &commentsv1.GetCommentAnnotationsRequest{OrganizationId: "o", DocumentId: "d", Order: "asc"})
		if err != nil {
			t.Fatal(err)
		}
		var left []string
		for _, a := range res.GetData() {
			left = append(left, a.GetAnnotationId())
		}
		slices.Sort(left)
		if !slices.Equal(left, []string{"a2", "a4"}) {
			t.Fatalf("left %v, want a2 a4", left)
		}
		if n := len(slices.DeleteFunc(ev.got(), func(e string) bool { return e != eventAnnotationDelete })); n != 2 {
			t.Fatalf("%d deletions published, want 2", n)
		}
	})
}

// commentHtml is stored sanitised on every write (docs/comments.md, "Content safety"), and
// HTML that is not UTF-8 is refused with the field's path.
func TestHTMLIsSanitisedOnWrite(t *testing.T) {
	s, _ := newServer(t, NewMemoryStore())
	a := thread("a1")
	a.CommentData = []*commentsv1.NewComment{{CommentHtml: `<img src=x onerror=alert(1)><b onclick="x()">ok</b><a href="javascript:alert(1)">link</a>`, From: user("u")}}
	add(t, s, "d", a)
	html := func() string {
		got, err := s.GetComments(k1, &commentsv1.GetCommentsRequest{OrganizationId: "o", DocumentId: "d", AnnotationId: "a1"})
		if err != nil {
			t.Fatal(err)
		}
		return got.GetData()[0].GetCommentHtml()
	}
	if got := html(); got != "<b>ok</b>link" {
		t.Fatalf("stored %q", got)
	}
	if _, err := s.UpdateComments(k1, &commentsv1.UpdateCommentsRequest{OrganizationId: "o", DocumentId: "d", AnnotationId: "a1", CommentIds: []float64{1},
		UpdatedData: &commentsv1.CommentChanges{CommentHtml: proto.String(`<script>alert(1)</script><i>fine</i>`)}}); err != nil {
		t.Fatal(err)
	}
	if got := html(); got != "<i>fine</i>" {
		t.Fatalf("updated to %q", got)
	}
	_, err := s.AddComments(k1, &commentsv1.AddCommentsRequest{OrganizationId: "o", DocumentId: "d", AnnotationId: "a1",
		CommentData: []*commentsv1.NewComment{{CommentHtml: "\xff<b>x</b>", From: user("u")}}})
	wantCode(t, err, codes.InvalidArgument, "HTML that is not UTF-8")
	if !strings.Contains(err.Error(), "commentData[0].commentHtml must be valid UTF-8.") {
		t.Fatalf("message %v", err)
	}
	// HTML that sanitises to nothing, without text, is an empty comment.
	_, err = s.AddComments(k1, &commentsv1.AddCommentsRequest{OrganizationId: "o", DocumentId: "d", AnnotationId: "a1",
		CommentData: []*commentsv1.NewComment{{CommentHtml: "<script>alert(1)</script>", From: user("u")}}})
	wantCode(t, err, codes.InvalidArgument, "HTML that sanitises to nothing")
}
