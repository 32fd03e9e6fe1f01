package comments

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	commentsv1 "github.com/collab/collab/proto/collab/comments/v1"
	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/lifecycle"
)

// movedDocs resolves documents as fakeDocs does, but "d2" to "d"'s generation: d was migrated
// to d2 (its generation goes with it).
type movedDocs struct{ fakeDocs }

func (m movedDocs) ResolveResources(ctx context.Context, in *documentsv1.ResolveResourcesRequest, opts ...grpc.CallOption) (*documentsv1.ResolveResourcesResponse, error) {
	out, err := m.fakeDocs.ResolveResources(ctx, in, opts...)
	if d := out.GetDocuments()["d2"]; d != nil {
		d.Generation = "dg-d"
	}
	return out, err
}

func event(id string, e *lifecyclev1.Event) *lifecyclev1.Event {
	e.Id, e.ApiKey, e.OrganizationId, e.OrganizationGeneration = id, "k1", "o", "g1"
	return e
}

func count(t *testing.T, s *Server, doc string) float64 {
	t.Helper()
	res, err := s.CountCommentAnnotations(k1, &commentsv1.CountCommentAnnotationsRequest{OrganizationId: "o", DocumentIds: []string{doc}})
	if err != nil {
		t.Fatal(err)
	}
	return res.GetData()[doc].GetTotal()
}

// Threads follow their document's migration (found under the new id), and go with their
// document's and organization's deletions, feeds included, on both stores.
func TestThreadsFollowTheLifecycle(t *testing.T) {
	stores(t, func(t *testing.T, newStore func(t *testing.T) Store) {
		st := newStore(t)
		s, err := New(st, movedDocs{}, newFakeAccess(), &events{}, []byte("0123456789abcdef0123456789abcdef"))
		if err != nil {
			t.Fatal(err)
		}
		add(t, s, "d", thread("a1", "x"))
		add(t, s, "e", thread("b1", "y"))
		ctx := context.Background()
		if err := s.HandleEvent(ctx, event("m", &lifecyclev1.Event{Type: lifecycle.DocumentMigrated,
			Payload: &lifecyclev1.Event_DocumentMigrated{DocumentMigrated: &lifecyclev1.DocumentMigrated{FromDocumentId: "d", ToDocumentId: "d2", Generation: "dg-d"}}})); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetComments(k1, &commentsv1.GetCommentsRequest{OrganizationId: "o", DocumentId: "d2", AnnotationId: "a1"})
		if err != nil || len(got.GetData()) != 1 {
			t.Fatalf("after the migration, under the new id: %v %v", got, err)
		}
		if n := count(t, s, "d2"); n != 1 {
			t.Fatalf("the migrated document counts %v threads", n)
		}
		if err := s.HandleEvent(ctx, event("dd", &lifecyclev1.Event{Type: lifecycle.DocumentDeleted,
			Payload: &lifecyclev1.Event_DocumentsDeleted{DocumentsDeleted: &lifecyclev1.DocumentsDeleted{DocumentIds: []string{"e"}, Generations: []string{"dg-e"}}}})); err != nil {
			t.Fatal(err)
		}
		_, err = s.GetComments(k1, &commentsv1.GetCommentsRequest{OrganizationId: "o", DocumentId: "e", AnnotationId: "b1"})
		wantCode(t, err, codes.NotFound, "a deleted document's thread")
		if cs, _, _, _ := st.Changes(ctx, Ref{APIKey: "k1", OrganizationID: "o", OrgGen: "g1", DocumentID: "e", DocGen: "dg-e"}, 0, 0); len(cs) != 0 {
			t.Fatalf("a deleted document's feed keeps %d changes", len(cs))
		}
		if n := count(t, s, "e"); n != 0 {
			t.Fatalf("a deleted document counts %v threads", n)
		}
		if err := s.HandleEvent(ctx, event("od", &lifecyclev1.Event{Type: lifecycle.OrganizationDeleted,
			Payload: &lifecyclev1.Event_OrganizationDeleted{OrganizationDeleted: &lifecyclev1.OrganizationDeleted{}}})); err != nil {
			t.Fatal(err)
		}
		if n := count(t, s, "d2"); n != 0 {
			t.Fatalf("after the organization's deletion: %v threads", n)
		}
	})
}
