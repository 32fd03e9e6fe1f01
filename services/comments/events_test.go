package comments

import (
	"context"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	commentsv1 "github.com/collab/collab/proto/collab/comments/v1"
	eventsv1 "github.com/collab/collab/proto/collab/events/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/outbox"
)

// kept keeps the domain events published.
type kept struct {
	mu     sync.Mutex
	events []*eventsv1.Event
}

func (k *kept) PublishAsync(_ context.Context, e *lifecyclev1.Event) (*outbox.Record, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.events = append(k.events, proto.Clone(e.GetDomain()).(*eventsv1.Event))
	return &outbox.Record{}, nil
}

// comment.update carries the comment as it was before the edit (data.previousComment), beside
// the comment after it: notifications find the new mentions in the difference.
func TestCommentUpdateCarriesThePreviousComment(t *testing.T) {
	ev := &kept{}
	s, err := New(NewMemoryStore(), fakeDocs{}, newFakeAccess(), ev, []byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	a := thread("a1", "hello")
	a.CommentData[0].TaggedUserContacts = []*commentsv1.Mention{{UserId: "u1"}}
	add(t, s, "d", a)
	mentions, err := structpb.NewList([]any{map[string]any{"userId": "u1"}, map[string]any{"userId": "u2"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateComments(k1, &commentsv1.UpdateCommentsRequest{OrganizationId: "o", DocumentId: "d", AnnotationId: "a1", CommentIds: []float64{1},
		UpdatedData: &commentsv1.CommentChanges{CommentText: proto.String("hello, u2"), TaggedUserContacts: mentions}}); err != nil {
		t.Fatal(err)
	}
	e := ev.events[len(ev.events)-1]
	prev := e.GetData().GetFields()["previousComment"].GetStructValue().GetFields()
	now := e.GetData().GetFields()["comment"].GetStructValue().GetFields()
	if e.GetType() != eventCommentUpdate || prev["commentText"].GetStringValue() != "hello" || len(prev["taggedUserContacts"].GetListValue().GetValues()) != 1 ||
		now["commentText"].GetStringValue() != "hello, u2" || len(now["taggedUserContacts"].GetListValue().GetValues()) != 2 {
		t.Fatalf("comment.update data %v", e.GetData())
	}
}

// A reaction's event names the reacting user as actionUser, an end user's change names that
// user, and priority and assignee changes carry the earlier value (data.previousPriority,
// data.previousAssignee; null when there was none).
func TestEventsNameTheirActor(t *testing.T) {
	ev := &kept{}
	s, err := New(NewMemoryStore(), fakeDocs{}, newFakeAccess(), ev, []byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	a := thread("a1", "hello")
	a.Priority = &commentsv1.Priority{Id: "P2", Name: "Low"}
	add(t, s, "d", a)
	if _, err := s.AddReaction(k1, &commentsv1.AddReactionRequest{OrganizationId: "o", DocumentId: "d", AnnotationId: "a1", CommentId: 1, Emoji: "ok", User: user("fan")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateCommentAnnotations(as("t:ed"), &commentsv1.UpdateCommentAnnotationsRequest{OrganizationId: "o", DocumentId: "d",
		Annotations: []*commentsv1.AnnotationUpdate{{AnnotationId: "a1", Priority: &commentsv1.Priority{Id: "P1"}, AssignedTo: user("u9")}}}); err != nil {
		t.Fatal(err)
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	byType := map[string]*eventsv1.Event{}
	for _, e := range ev.events {
		byType[e.GetType()] = e
	}
	if u := byType[eventReactionAdd].GetActionUser().GetUserId(); u != "fan" {
		t.Fatalf("the reaction's actionUser %q, want the reacting user", u)
	}
	p := byType[eventPriorityChange]
	if p.GetActionUser().GetUserId() != "ed" || p.GetData().GetFields()["previousPriority"].GetStructValue().GetFields()["id"].GetStringValue() != "P2" {
		t.Fatalf("priority change: actor %v, data %v", p.GetActionUser(), p.GetData())
	}
	if _, null := byType[eventAssign].GetData().GetFields()["previousAssignee"].GetKind().(*structpb.Value_NullValue); !null {
		t.Fatalf("assign's previousAssignee %v, want null", byType[eventAssign].GetData().GetFields()["previousAssignee"])
	}
}
