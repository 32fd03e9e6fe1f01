package comments

import (
	"context"
	"encoding/json"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	commentsv1 "github.com/collab/collab/proto/collab/comments/v1"
	eventsv1 "github.com/collab/collab/proto/collab/events/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/ids"
	"github.com/collab/collab/internal/lifecycle"
)

// The domain events of the comments service (docs/comments.md, "Events"), one per change.
const (
	eventAnnotationAdd    = "comment_annotation.add"
	eventAnnotationUpdate = "comment_annotation.update"
	eventAnnotationDelete = "comment_annotation.delete"
	eventStatusChange     = "comment_annotation.status_change"
	eventPriorityChange   = "comment_annotation.priority_change"
	eventAssign           = "comment_annotation.assign"
	eventCommentAdd       = "comment.add"
	eventCommentUpdate    = "comment.update"
	eventCommentDelete    = "comment.delete"
	eventReactionAdd      = "comment.reaction_add"
	eventReactionDelete   = "comment.reaction_delete"
)

// publishes lists the events for the module (service.Module.Publishes).
var publishes = []string{eventAnnotationAdd, eventAnnotationUpdate, eventAnnotationDelete, eventStatusChange,
	eventPriorityChange, eventAssign, eventCommentAdd, eventCommentUpdate, eventCommentDelete, eventReactionAdd, eventReactionDelete}

// consumes are the lifecycle events the threads follow.
var consumes = []string{lifecycle.OrganizationDeleted, lifecycle.DocumentDeleted, lifecycle.DocumentMigrated, lifecycle.LocationDataDeleted}

// publishEdits publishes what an Update Comment Annotations item changed: a status change, a
// priority change, an assignment, and an update for the rest (context, location).
func (s *Server) publishEdits(ctx context.Context, c actor, before, after *Annotation) {
	who := c.who()
	if before.Status != after.Status {
		s.publish(ctx, c.Caller, who, eventStatusChange, after, nil, map[string]any{"from": before.Status.ID, "to": after.Status.ID})
	}
	if !samePtr(before.Priority, after.Priority) {
		s.publish(ctx, c.Caller, who, eventPriorityChange, after, nil, map[string]any{"previousPriority": jsonOrNil(priorityProto(before.Priority))})
	}
	if !samePtr(before.AssignedTo, after.AssignedTo) {
		s.publish(ctx, c.Caller, who, eventAssign, after, nil, map[string]any{"previousAssignee": jsonOrNil(userProto(before.AssignedTo))})
	}
	if before.Context != after.Context || !samePtr(before.Location, after.Location) {
		s.publish(ctx, c.Caller, who, eventAnnotationUpdate, after, nil, nil)
	}
}

// who is the acting end user, nil for a backend.
func (a actor) who() *User {
	if a.user == nil {
		return nil
	}
	return &a.user.User
}

// whoWrote is the actor of a comment's change: the end user, else (a backend) the comment's
// author.
func (a actor) whoWrote(cm *Comment) *User {
	if a.user != nil {
		return &a.user.User
	}
	return &cm.From
}

func priorityProto(p *Priority) *commentsv1.Priority {
	if p == nil {
		return nil
	}
	return &commentsv1.Priority{Id: p.ID, Name: p.Name}
}

// jsonOrNil is a message as a JSON value for an event's data, nil for a nil message.
func jsonOrNil[M interface {
	comparable
	proto.Message
}](m M) any {
	var zero M
	if m == zero {
		return nil
	}
	return jsonOf(m)
}

func samePtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// publish stores a domain event of the change in the outbox: activity records it, webhooks
// deliver it. The change is stored already: a failure to publish is logged, not answered (a
// retry of the request would not publish it either).
// who is the event's actionUser: the acting end user, else for a backend the comment's author
// (or the thread's, for a new thread), the reacting user for reactions; nil when none is known.
func (s *Server) publish(ctx context.Context, c authn.Caller, who *User, typ string, a *Annotation, cm *Comment, extra map[string]any) {
	data := map[string]any{"annotation": eventAnnotation(a, typ), "version": float64(a.Version)}
	if cm != nil {
		data["comment"] = jsonOf(commentProto(cm))
		data["commentId"] = float64(cm.ID)
	}
	for k, v := range extra {
		data[k] = v
	}
	st, err := structpb.NewStruct(data)
	if err != nil {
		s.log.ErrorContext(ctx, "comments event data", "annotation_id", a.ID, "error", err)
		return
	}
	e := &eventsv1.Event{
		Id: "cmt_" + ids.Random(24), Type: typ, WorkspaceId: c.WorkspaceID, ApiKey: a.APIKey,
		OrganizationId: a.OrganizationID, DocumentId: a.DocumentID, Timestamp: float64(s.now()),
		TargetEntityId: a.ID, Data: st, OrganizationGeneration: a.OrgGen, DocumentGeneration: a.DocGen,
	}
	if who != nil && who.UserID != "" {
		e.ActionUser = &eventsv1.ActionUser{UserId: who.UserID, Name: who.Name, Email: who.Email}
	}
	if _, err := s.events.PublishAsync(ctx, lifecycle.Domain(e)); err != nil {
		s.log.ErrorContext(ctx, typ+" not published", "annotation_id", a.ID, "error", err)
	}
	s.feed(ctx, typ, a, cm)
}

// previousComment is the extra data of comment.update: the comment before the edit, in which
// notifications find the mentions that are new and activity the text's change
// (docs/comments.md, "Notifications and activity").
func previousComment(c *Comment) map[string]any {
	if c == nil {
		return nil
	}
	return map[string]any{"previousComment": jsonOf(commentProto(c))}
}

// eventAnnotation is the annotation as events and the live stream carry it
// (docs/comments.md, "Events"): whole for a new thread; for every other change its fields
// and its comments by id and author only (the changed comment comes whole beside it), so that
// an event's size does not grow with its thread (a reaction to a thread of 1 MiB would weigh
// 1 MiB in every webhook delivery and stream).
func eventAnnotation(a *Annotation, typ string) any {
	p := annotationProto(a)
	if typ != eventAnnotationAdd {
		for i, c := range p.GetComments() {
			p.Comments[i] = &commentsv1.Comment{CommentId: c.GetCommentId(), From: c.GetFrom(), CreatedAt: c.GetCreatedAt(), LastUpdated: c.GetLastUpdated()}
		}
	}
	return jsonOf(p)
}

// jsonOf is a message as a JSON value for an event's data.
func jsonOf(m proto.Message) any {
	b, err := protojson.Marshal(m)
	if err != nil {
		return nil
	}
	var v any
	_ = json.Unmarshal(b, &v)
	return v
}

// HandleEvent applies the lifecycle events to the threads (lifecycle.Dispatch): the
// organization's and document's deletions and migrations by generation, and Delete Data by
// Location. Idempotent.
func (s *Server) HandleEvent(ctx context.Context, e *lifecyclev1.Event) error {
	h := lifecycle.MarkedHandlers(s.store)
	h.LocationDataDeleted = s.locationDataDeleted
	_, err := lifecycle.Dispatch(ctx, e, h)
	return err
}

func (s *Server) locationDataDeleted(ctx context.Context, sc lifecycle.Scope, l lifecycle.Location) error {
	gone, err := s.store.DeleteAtLocation(ctx, sc.APIKey, sc.OrganizationID, l.DocumentID, Location{ID: l.ID, Name: l.Name})
	if err != nil {
		return err
	}
	c := authn.Caller{APIKey: sc.APIKey}
	for _, a := range gone {
		s.publish(ctx, c, nil, eventAnnotationDelete, a, nil, nil)
	}
	return nil
}

// annotationProto is the API's form of an annotation.
func annotationProto(a *Annotation) *commentsv1.CommentAnnotation {
	p := &commentsv1.CommentAnnotation{
		AnnotationId: a.ID, OrganizationId: a.OrganizationID, DocumentId: a.DocumentID,
		From: userProto(&a.From), Status: &commentsv1.Status{Id: a.Status.ID, Name: a.Status.Name, Type: a.Status.Type},
		AssignedTo: userProto(a.AssignedTo), CreatedAt: float64(a.CreatedAt), LastUpdated: float64(a.LastUpdated),
		Comments: make([]*commentsv1.Comment, len(a.Comments)),
	}
	if a.Location != nil {
		p.Location = &commentsv1.Location{Id: a.Location.ID, LocationName: a.Location.Name}
	}
	if a.Priority != nil {
		p.Priority = &commentsv1.Priority{Id: a.Priority.ID, Name: a.Priority.Name}
	}
	if a.ResolvedBy != "" {
		p.ResolvedByUserId = wrapperspb.String(a.ResolvedBy)
	}
	if a.Context != "" {
		p.Context = &structpb.Struct{}
		if err := protojson.Unmarshal([]byte(a.Context), p.Context); err != nil {
			p.Context = nil
		}
	}
	for i := range a.Comments {
		p.Comments[i] = commentProto(&a.Comments[i])
	}
	return p
}

func userProto(u *User) *commentsv1.User {
	if u == nil {
		return nil
	}
	return &commentsv1.User{UserId: u.UserID, Name: u.Name, Email: u.Email}
}

func commentProto(c *Comment) *commentsv1.Comment {
	p := &commentsv1.Comment{CommentId: float64(c.ID), CommentText: c.Text, CommentHtml: c.HTML, From: userProto(&c.From),
		CreatedAt: float64(c.CreatedAt), LastUpdated: float64(c.LastUpdated)}
	for _, m := range c.Mentions {
		p.TaggedUserContacts = append(p.TaggedUserContacts, &commentsv1.Mention{UserId: m.UserID, Contact: userProto(&m.Contact), Text: m.Text})
	}
	for _, r := range c.Reactions {
		p.Reactions = append(p.Reactions, &commentsv1.Reaction{Emoji: r.Emoji, UserIds: r.UserIDs})
	}
	return p
}
