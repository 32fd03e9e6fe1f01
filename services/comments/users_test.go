package comments

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
	commentsv1 "github.com/collab/collab/proto/collab/comments/v1"

	"github.com/collab/collab/internal/authn"
)

// fakeAccess verifies tokens "t:<user>" (and "t:<user>:admin", "t:<user>:org=<org>"), gives
// each user the role in roles, and grants context fields in contexts.
type fakeAccess struct {
	accessv1.AccessServiceClient
	roles    map[string]string
	contexts map[string]map[string]string
}

func newFakeAccess() *fakeAccess {
	return &fakeAccess{roles: map[string]string{"ed": "editor", "ed2": "editor", "vi": "viewer", "boss": "viewer"},
		contexts: map[string]map[string]string{"ed": {"team": "a"}}}
}

func (f *fakeAccess) VerifyToken(_ context.Context, in *accessv1.VerifyTokenRequest, _ ...grpc.CallOption) (*accessv1.VerifyTokenResponse, error) {
	parts := strings.Split(in.GetToken(), ":")
	if len(parts) < 2 || parts[0] != "t" {
		return nil, status.Error(codes.Unauthenticated, "Token signature is invalid.")
	}
	out := &accessv1.VerifyTokenResponse{UserId: parts[1], ApiKey: "k1", WorkspaceId: "w", OrganizationId: "o", Name: "Name " + parts[1]}
	for _, p := range parts[2:] {
		switch {
		case p == "admin":
			out.IsAdmin = true
		case strings.HasPrefix(p, "org="):
			out.OrganizationId = strings.TrimPrefix(p, "org=")
		}
	}
	return out, nil
}

func (f *fakeAccess) FilterReaders(_ context.Context, in *accessv1.FilterReadersRequest, _ ...grpc.CallOption) (*accessv1.FilterReadersResponse, error) {
	out := &accessv1.FilterReadersResponse{Roles: map[string]string{}}
	for _, u := range in.GetUserIds() {
		r := f.roles[u]
		if strings.HasPrefix(u, "reader") {
			r = "viewer" // the benchmark's many readers
		}
		if r != "" {
			out.UserIds = append(out.UserIds, u)
			out.Roles[u] = r
		}
	}
	return out, nil
}

func (f *fakeAccess) MatchContexts(_ context.Context, in *accessv1.MatchContextsRequest, _ ...grpc.CallOption) (*accessv1.MatchContextsResponse, error) {
	out := &accessv1.MatchContextsResponse{}
	for _, u := range in.GetUserIds() {
		m := &accessv1.ContextMatch{UserId: u}
		for i, c := range in.GetContexts() {
			ok := true
			for k, v := range c.GetFields() {
				ok = ok && f.contexts[u][k] == v.GetStringValue()
			}
			if ok {
				m.Contexts = append(m.Contexts, int32(i))
			}
		}
		if len(m.Contexts) > 0 {
			out.Matches = append(out.Matches, m)
		}
	}
	return out, nil
}

func as(token string) context.Context { return authn.WithUserToken(context.Background(), token) }

func wantDenied(t *testing.T, err error, message string) {
	t.Helper()
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(status.Convert(err).Message(), message) {
		t.Fatalf("%v, want PERMISSION_DENIED %q", err, message)
	}
}

// End users act as their token's user, with their role on the document (docs/comments.md,
// "End users"): a viewer comments but does not change a thread's status; nobody edits another's
// comment; an admin deletes any; a token of another organization, a bad token or a user without
// access is refused, and nothing changes.
func TestEndUsers(t *testing.T) {
	s, ev := newServer(t, NewMemoryStore())
	// A viewer starts a thread; from is the token's user whatever was sent (here nothing).
	res, err := s.AddCommentAnnotations(as("t:vi"), &commentsv1.AddCommentAnnotationsRequest{OrganizationId: "o", DocumentId: "d",
		CommentAnnotations: []*commentsv1.NewAnnotation{{AnnotationId: "a1", CommentData: []*commentsv1.NewComment{{CommentText: "from a viewer"}}}}})
	if err != nil || !res.GetData()["a1"].GetSuccess() {
		t.Fatal(res, err)
	}
	got, _ := s.GetComments(as("t:ed"), &commentsv1.GetCommentsRequest{OrganizationId: "o", DocumentId: "d", AnnotationId: "a1"})
	if f := got.GetData()[0].GetFrom(); f.GetUserId() != "vi" || f.GetName() != "Name vi" {
		t.Fatalf("from %v, want the token's user", f)
	}
	before := len(ev.got())
	refusals := []struct {
		name, msg string
		call      func() error
	}{
		{"a viewer changes the status", msgNeedsEditor, func() error {
			_, err := s.UpdateCommentAnnotations(as("t:vi"), &commentsv1.UpdateCommentAnnotationsRequest{OrganizationId: "o", DocumentId: "d",
				Annotations: []*commentsv1.AnnotationUpdate{{AnnotationId: "a1", Status: &commentsv1.Status{Id: "DONE", Type: "terminal"}}}})
			return err
		}},
		{"an editor edits another's comment", msgNotYours, func() error {
			_, err := s.UpdateComments(as("t:ed"), &commentsv1.UpdateCommentsRequest{OrganizationId: "o", DocumentId: "d", AnnotationId: "a1",
				CommentIds: []float64{1}, UpdatedData: &commentsv1.CommentChanges{CommentText: proto.String("hijacked")}})
			return err
		}},
		{"an editor deletes another's thread", msgNotYourThread, func() error {
			_, err := s.DeleteCommentAnnotations(as("t:ed"), &commentsv1.DeleteCommentAnnotationsRequest{OrganizationId: "o", DocumentId: "d", AnnotationIds: []string{"a1"}})
			return err
		}},
		{"a comment as someone else", msgNotYou, func() error {
			_, err := s.AddComments(as("t:ed"), &commentsv1.AddCommentsRequest{OrganizationId: "o", DocumentId: "d", AnnotationId: "a1",
				CommentData: []*commentsv1.NewComment{{CommentText: "x", From: user("vi")}}})
			return err
		}},
		{"an end user creates a document", msgNoCreate, func() error {
			_, err := s.AddCommentAnnotations(as("t:ed"), &commentsv1.AddCommentAnnotationsRequest{OrganizationId: "o", DocumentId: "new", CreateDocument: true,
				CommentAnnotations: []*commentsv1.NewAnnotation{thread("a9", "x")}})
			return err
		}},
		{"a token of another organization", msgOtherOrg, func() error {
			_, err := s.GetCommentAnnotations(as("t:ed:org=p"), &commentsv1.GetCommentAnnotationsRequest{OrganizationId: "o", DocumentId: "d"})
			return err
		}},
		{"a forged token", "Token signature is invalid.", func() error {
			_, err := s.GetCommentAnnotations(as("forged"), &commentsv1.GetCommentAnnotationsRequest{OrganizationId: "o", DocumentId: "d"})
			return err
		}},
		{"a user without access", msgNoAccess, func() error {
			_, err := s.GetCommentAnnotations(as("t:stranger"), &commentsv1.GetCommentAnnotationsRequest{OrganizationId: "o", DocumentId: "d"})
			return err
		}},
		{"marking read for someone else", msgNotYou, func() error {
			_, err := s.MarkRead(as("t:ed"), &commentsv1.MarkReadRequest{OrganizationId: "o", DocumentId: "d", UserId: "vi", AnnotationIds: []string{"a1"}})
			return err
		}},
	}
	for _, r := range refusals {
		t.Run(r.name, func(t *testing.T) { wantDenied(t, r.call(), r.msg) })
	}
	if after := ev.got(); len(after) != before {
		t.Fatalf("refusals published %v", after[before:])
	}
	got, _ = s.GetComments(k1, &commentsv1.GetCommentsRequest{OrganizationId: "o", DocumentId: "d", AnnotationId: "a1"})
	if len(got.GetData()) != 1 || got.GetData()[0].GetCommentText() != "from a viewer" {
		t.Fatalf("a refusal changed the thread: %v", got.GetData())
	}
	// The author edits their comment; an editor changes the status; an admin deletes any.
	if _, err := s.UpdateComments(as("t:vi"), &commentsv1.UpdateCommentsRequest{OrganizationId: "o", DocumentId: "d", AnnotationId: "a1",
		CommentIds: []float64{1}, UpdatedData: &commentsv1.CommentChanges{CommentText: proto.String("edited by its author")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateCommentAnnotations(as("t:ed"), &commentsv1.UpdateCommentAnnotationsRequest{OrganizationId: "o", DocumentId: "d",
		Annotations: []*commentsv1.AnnotationUpdate{{AnnotationId: "a1", Status: &commentsv1.Status{Id: "DONE", Type: "terminal"}}}}); err != nil {
		t.Fatal(err)
	}
	list, _ := s.GetCommentAnnotations(k1, &commentsv1.GetCommentAnnotationsRequest{OrganizationId: "o", DocumentId: "d"})
	if by := list.GetData()[0].GetResolvedByUserId().GetValue(); by != "ed" {
		t.Fatalf("resolved by %q, want the editor who resolved it", by)
	}
	if _, err := s.DeleteCommentAnnotations(as("t:boss:admin"), &commentsv1.DeleteCommentAnnotationsRequest{OrganizationId: "o", DocumentId: "d", AnnotationIds: []string{"a1"}}); err != nil {
		t.Fatal(err)
	}
}

// A thread whose context.access the end user's access context does not grant is not shown to
// them; backends see every thread.
func TestContextAccessHidesThreads(t *testing.T) {
	s, _ := newServer(t, NewMemoryStore())
	guarded := thread("team-a", "for team a")
	guarded.Context = mustStruct(t, map[string]any{"access": map[string]any{"team": "a"}})
	add(t, s, "d", guarded, thread("open", "for all"))
	ids := func(ctx context.Context) []string {
		res, err := s.GetCommentAnnotations(ctx, &commentsv1.GetCommentAnnotationsRequest{OrganizationId: "o", DocumentId: "d", Order: "asc"})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, a := range res.GetData() {
			out = append(out, a.GetAnnotationId())
		}
		return out
	}
	if got := ids(as("t:ed")); len(got) != 2 {
		t.Fatalf("a user of team a sees %v", got)
	}
	if got := ids(as("t:ed2")); len(got) != 1 || got[0] != "open" {
		t.Fatalf("a user of no team sees %v", got)
	}
	if got := ids(k1); len(got) != 2 {
		t.Fatalf("a backend sees %v", got)
	}
	_, err := s.GetComments(as("t:ed2"), &commentsv1.GetCommentsRequest{OrganizationId: "o", DocumentId: "d", AnnotationId: "team-a"})
	wantCode(t, err, codes.NotFound, "a hidden thread's comments")
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
