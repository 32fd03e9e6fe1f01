package activity

import (
	"slices"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	eventsv1 "github.com/collab/collab/proto/collab/events/v1"
)

// featureOf names the feature and action an event type is recorded and triggered under
// (docs/api.md, "Activity logs": Triggers): the type's two parts, except for the comments
// service's types, filed under comment and reaction (docs/comments.md): comment_annotation.<a>
// is feature comment, action annotation_<a>, and comment.reaction_<a> is feature reaction,
// action <a> (so reaction.add of a product and comment.reaction_add share the trigger add). ok
// is false for a type of no activity feature.
func featureOf(typ string) (feature, action string, ok bool) {
	feature, action, ok = strings.Cut(typ, ".")
	if !ok {
		return "", "", false
	}
	switch {
	case feature == "comment_annotation":
		feature, action = "comment", "annotation_"+action
	case feature == "comment" && strings.HasPrefix(action, "reaction_"):
		feature, action = "reaction", strings.TrimPrefix(action, "reaction_")
	}
	return feature, action, slices.Contains(featureTypes, feature)
}

// wording is how a record reads: with the acting user (%s: the variable that names them) and
// without one (a backend's call acts as no user).
type wording struct{ actor, neutral string }

// commentView reads the data of an event of the comments service (docs/comments.md,
// "Events"): data.annotation as the API shows it, data.comment and data.commentId for comment
// events, data.from and data.to of a status change, data.emoji and data.userId of a reaction,
// data.previousComment of an edit.
type commentView struct {
	typ        string
	data       map[string]*structpb.Value
	annotation *structpb.Struct
}

func (v commentView) field(name string) *structpb.Value { return v.annotation.GetFields()[name] }

// label is a status's or priority's name, else its id; "" when it is not set.
func label(s *structpb.Struct) string {
	if n := s.GetFields()["name"].GetStringValue(); n != "" {
		return n
	}
	return s.GetFields()["id"].GetStringValue()
}

// wording is how a record of the event reads, false for a type without one.
func (v commentView) wording() (wording, bool) {
	switch v.typ {
	case "comment_annotation.add":
		return wording{"%s started a thread", "A thread was started"}, true
	case "comment_annotation.update":
		return wording{"%s updated a thread", "A thread was updated"}, true
	case "comment_annotation.delete":
		return wording{"%s deleted a thread", "A thread was deleted"}, true
	case "comment_annotation.status_change":
		if v.field("status").GetStructValue().GetFields()["type"].GetStringValue() == "terminal" {
			return wording{"%s resolved a thread", "A thread was resolved"}, true
		}
		return wording{"%s set a thread's status to {{status}}", "A thread's status was set to {{status}}"}, true
	case "comment_annotation.priority_change":
		if v.field("priority").GetStructValue() == nil {
			return wording{"%s cleared a thread's priority", "A thread's priority was cleared"}, true
		}
		return wording{"%s set a thread's priority to {{priority}}", "A thread's priority was set to {{priority}}"}, true
	case "comment_annotation.assign":
		if v.field("assignedTo").GetStructValue() == nil {
			return wording{"%s unassigned a thread", "A thread was unassigned"}, true
		}
		return wording{"%s assigned a thread to {{assignee}}", "A thread was assigned to {{assignee}}"}, true
	case "comment.add":
		return wording{"%s commented on a thread", "A comment was added to a thread"}, true
	case "comment.update":
		return wording{"%s edited a comment", "A comment was edited"}, true
	case "comment.delete":
		return wording{"%s deleted a comment", "A comment was deleted"}, true
	case "comment.reaction_add":
		return wording{"%s reacted {{emoji}}", "Someone reacted {{emoji}}"}, true
	case "comment.reaction_delete":
		return wording{"%s removed the reaction {{emoji}}", "A reaction {{emoji}} was removed"}, true
	}
	return wording{}, false
}

// actor is who did it: the event's acting user; for a reaction the reacting user (data.userId,
// with the event's name and email when it names the same user); for a new thread without one,
// its author, who started it.
func (v commentView) actor(e *eventsv1.Event) User {
	u := userOf(e.GetActionUser())
	switch {
	case strings.HasPrefix(v.typ, "comment.reaction_"):
		if id := v.data["userId"].GetStringValue(); id != "" && id != u.UserID {
			u = User{UserID: id}
		}
	case v.typ == "comment_annotation.add" && u == User{}:
		f := v.field("from").GetStructValue().GetFields()
		u = User{UserID: f["userId"].GetStringValue(), Name: f["name"].GetStringValue(), Email: f["email"].GetStringValue()}
	}
	return u
}

// commentDisplay fills the record of an event of the comments service (its data holds the
// annotation) so that it reads well: the acting user, a template naming what happened, the
// template data it names, the changes of a status, priority, assignee or comment text, and
// the comment (or thread) as entity with its thread as target. It reports false, touching
// nothing, for any other event: a product's own comment.add keeps the default display.
func commentDisplay(e *eventsv1.Event, r *Record) bool {
	v := commentView{typ: e.GetType(), data: e.GetData().GetFields()}
	v.annotation = v.data["annotation"].GetStructValue()
	if v.field("annotationId").GetStringValue() == "" {
		return false
	}
	w, ok := v.wording()
	if !ok {
		return false
	}
	r.ActionUser = v.actor(e)
	switch u := r.ActionUser; {
	case u.Name != "":
		r.DisplayMessageTemplate = strings.Replace(w.actor, "%s", "{{actionUser.name}}", 1)
	case u.Email != "":
		r.DisplayMessageTemplate = strings.Replace(w.actor, "%s", "{{actionUser.email}}", 1)
	case u.UserID != "":
		r.DisplayMessageTemplate = strings.Replace(w.actor, "%s", "{{actionUser.userId}}", 1)
	default:
		r.DisplayMessageTemplate = w.neutral
	}
	r.DisplayMessageTemplateData = jsonField(structpb.NewStructValue(v.templateData(r.ActionUser)))
	if c := v.changes(); c != nil {
		r.Changes = jsonField(structpb.NewStructValue(c))
	}
	thread := v.annotation
	if comment := v.data["comment"]; comment.GetStructValue() != nil {
		r.EntityData, r.EntityTargetData = jsonField(comment), jsonField(structpb.NewStructValue(withoutComments(thread)))
		return true
	}
	if r.EntityData = jsonField(structpb.NewStructValue(thread)); r.EntityData == "" {
		// Too large with its comments: the thread's own fields still say what it is.
		r.EntityData = jsonField(structpb.NewStructValue(withoutComments(thread)))
	}
	return true
}

// templateData holds what the templates name: actionUser, actionType and the thread's id
// always; the comment's id, the emoji, the status, priority or assignee where the type has one.
func (v commentView) templateData(actor User) *structpb.Struct {
	f := map[string]*structpb.Value{
		"actionUser": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			"userId": structpb.NewStringValue(actor.UserID), "name": structpb.NewStringValue(actor.Name), "email": structpb.NewStringValue(actor.Email),
		}}),
		"actionType":   structpb.NewStringValue(v.typ),
		"annotationId": v.field("annotationId"),
	}
	if id, ok := v.data["commentId"].GetKind().(*structpb.Value_NumberValue); ok {
		f["commentId"] = structpb.NewNumberValue(id.NumberValue)
	}
	if emoji := v.data["emoji"].GetStringValue(); emoji != "" && strings.HasPrefix(v.typ, "comment.reaction_") {
		f["emoji"] = structpb.NewStringValue(emoji)
	}
	switch v.typ {
	case "comment_annotation.status_change":
		f["status"] = structpb.NewStringValue(label(v.field("status").GetStructValue()))
	case "comment_annotation.priority_change":
		if p := v.field("priority").GetStructValue(); p != nil {
			f["priority"] = structpb.NewStringValue(label(p))
		}
	case "comment_annotation.assign":
		if a := v.field("assignedTo").GetStructValue(); a != nil {
			f["assignee"] = structpb.NewStringValue(displayName(a))
		}
	}
	return &structpb.Struct{Fields: f}
}

// displayName is a user object's name, else email, else id.
func displayName(u *structpb.Struct) string {
	for _, k := range []string{"name", "email", "userId"} {
		if s := u.GetFields()[k].GetStringValue(); s != "" {
			return s
		}
	}
	return ""
}

// changes are the record's changes: a status's from and to (ids, as the event has them), the
// priority (its name) or assignee set or cleared, from the earlier one when the event has it
// (data.previousPriority, data.previousAssignee), an edited comment's text; nil for the other
// types.
func (v commentView) changes() *structpb.Struct {
	change := func(name string, from, to *structpb.Value) *structpb.Struct {
		c := map[string]*structpb.Value{"to": to}
		if from != nil {
			c["from"] = from
		}
		return &structpb.Struct{Fields: map[string]*structpb.Value{name: structpb.NewStructValue(&structpb.Struct{Fields: c})}}
	}
	orNull := func(x *structpb.Value) *structpb.Value {
		if x == nil {
			return structpb.NewNullValue()
		}
		return x
	}
	switch v.typ {
	case "comment_annotation.status_change":
		if from, to := v.data["from"], v.data["to"]; from.GetStringValue() != "" && to.GetStringValue() != "" {
			return change("status", from, to)
		}
	case "comment_annotation.priority_change":
		var from, to *structpb.Value
		if p := v.field("priority").GetStructValue(); p != nil {
			to = structpb.NewStringValue(label(p))
		}
		if p := v.data["previousPriority"].GetStructValue(); p != nil {
			from = structpb.NewStringValue(label(p))
		} else if _, sent := v.data["previousPriority"]; sent {
			from = structpb.NewNullValue()
		}
		return change("priority", from, orNull(to))
	case "comment_annotation.assign":
		var from, to *structpb.Value
		if a := v.field("assignedTo"); a.GetStructValue() != nil {
			to = a
		}
		if a := v.data["previousAssignee"]; a.GetStructValue() != nil {
			from = a
		} else if _, sent := v.data["previousAssignee"]; sent {
			from = structpb.NewNullValue()
		}
		return change("assignedTo", from, orNull(to))
	case "comment.update":
		before := v.data["previousComment"].GetStructValue().GetFields()["commentText"]
		after := v.data["comment"].GetStructValue().GetFields()["commentText"]
		if before != nil && after != nil && before.GetStringValue() != after.GetStringValue() {
			return change("commentText", before, after)
		}
	}
	return nil
}

// withoutComments is the thread without its comments.
func withoutComments(a *structpb.Struct) *structpb.Struct {
	out := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(a.GetFields()))}
	for k, x := range a.GetFields() {
		if k != "comments" {
			out.Fields[k] = x
		}
	}
	return out
}
