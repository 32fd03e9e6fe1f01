package activity

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	activityv1 "github.com/collab/collab/proto/collab/activity/v1"
	eventsv1 "github.com/collab/collab/proto/collab/events/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/lifecycle"
)

// The comments service's events in its shape (services/comments/events.go): data.annotation
// as the API shows it, data.comment and data.commentId for comment events, data.from/to of a
// status change, data.emoji/userId of a reaction, data.previousComment of an edit.

var (
	ann = map[string]any{"userId": "u1", "name": "Ann", "email": "ann@example.com"}
	bob = map[string]any{"userId": "u2", "name": "Bob"}
)

func thread(status map[string]any, extra map[string]any) map[string]any {
	a := map[string]any{
		"annotationId": "a1", "organizationId": "o", "documentId": "d", "from": ann, "status": status,
		"createdAt": 1.0, "lastUpdated": 2.0,
		"comments": []any{
			map[string]any{"commentId": 1.0, "commentText": "first", "from": ann},
			map[string]any{"commentId": 2.0, "commentText": "second", "from": bob},
		},
	}
	for k, v := range extra {
		a[k] = v
	}
	return a
}

var (
	open     = map[string]any{"id": "OPEN", "name": "Open", "type": "default"}
	resolved = map[string]any{"id": "RESOLVED", "name": "Resolved", "type": "terminal"}
	ongoing  = map[string]any{"id": "IN_PROGRESS", "name": "In progress", "type": "ongoing"}
)

// commentEvent is an event of the comments service: the annotation, the comment (by id, from
// the annotation), extra data, and the acting user when one is known.
func commentEvent(t *testing.T, id, typ string, a map[string]any, commentID float64, extra map[string]any, actor map[string]any) *lifecyclev1.Event {
	t.Helper()
	data := map[string]any{"annotation": a}
	if commentID > 0 {
		for _, c := range a["comments"].([]any) {
			if c.(map[string]any)["commentId"] == commentID {
				data["comment"] = c
			}
		}
		data["commentId"] = commentID
	}
	for k, v := range extra {
		data[k] = v
	}
	e := &eventsv1.Event{Id: id, Type: typ, ApiKey: "k1", WorkspaceId: "w", OrganizationId: "o", OrganizationGeneration: "g1",
		DocumentId: "d", DocumentGeneration: "dg1", Timestamp: float64(t0.UnixMilli()), TargetEntityId: "a1", Data: mustStruct(t, data)}
	if actor != nil {
		e.ActionUser = &eventsv1.ActionUser{UserId: str(actor["userId"]), Name: str(actor["name"]), Email: str(actor["email"])}
	}
	return lifecycle.Domain(e)
}

func str(v any) string { s, _ := v.(string); return s }

// record reads one record back as JSON, the way the API shows it.
func (h *harness) record(t *testing.T, id string) map[string]any {
	t.Helper()
	resp, err := h.srv.GetActivityLogs(k1, &activityv1.GetActivityLogsRequest{OrganizationId: "o", ActivityIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetData()) != 1 {
		t.Fatalf("record %s: %d records", id, len(resp.GetData()))
	}
	b, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(resp.GetData()[0]) // as the gateway writes it
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// jsonEq compares two JSON values by their encoding (maps encode with sorted keys).
func jsonEq(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// Every event of the comments service becomes a record that reads well: its feature type
// (comment, reactions: reaction), the thread as target, a template naming what happened with
// the data it names, the changes of status, priority, assignee and text, and the comment or
// thread as entity. Without an acting user (a backend's call) the wording is neutral, except
// for a new thread, whose author started it.
func TestCommentEventsReadWell(t *testing.T) {
	h := newHarness(t)
	h.configure(t, &activityv1.UpdateActivityConfigRequest{IsEnabled: on(true)})
	withoutComments := func(a map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range a {
			if k != "comments" {
				out[k] = v
			}
		}
		return out
	}
	annUser := map[string]any{"userId": "u1", "name": "Ann", "email": "ann@example.com"}
	bobUser := map[string]any{"userId": "u2", "name": "Bob", "email": ""}
	none := map[string]any{"userId": "", "name": "", "email": ""}
	edited := thread(open, nil)
	edited["comments"].([]any)[1].(map[string]any)["commentText"] = "second, edited"
	cases := []struct {
		event    *lifecyclev1.Event
		feature  string
		actor    map[string]any
		template string
		data     map[string]any // templateData without actionUser and actionType
		changes  any
		entity   any
		target   any
	}{
		{commentEvent(t, "e-add", "comment_annotation.add", thread(open, nil), 0, nil, nil), "comment", annUser,
			"{{actionUser.name}} started a thread", map[string]any{"annotationId": "a1"}, nil, thread(open, nil), nil},
		{commentEvent(t, "e-resolve", "comment_annotation.status_change", thread(resolved, nil), 0, map[string]any{"from": "OPEN", "to": "RESOLVED"}, nil), "comment", none,
			"A thread was resolved", map[string]any{"annotationId": "a1", "status": "Resolved"},
			map[string]any{"status": map[string]any{"from": "OPEN", "to": "RESOLVED"}}, thread(resolved, nil), nil},
		{commentEvent(t, "e-resolve-by", "comment_annotation.status_change", thread(resolved, nil), 0, map[string]any{"from": "OPEN", "to": "RESOLVED"}, bob), "comment", bobUser,
			"{{actionUser.name}} resolved a thread", map[string]any{"annotationId": "a1", "status": "Resolved"},
			map[string]any{"status": map[string]any{"from": "OPEN", "to": "RESOLVED"}}, thread(resolved, nil), nil},
		{commentEvent(t, "e-status", "comment_annotation.status_change", thread(ongoing, nil), 0, map[string]any{"from": "OPEN", "to": "IN_PROGRESS"}, nil), "comment", none,
			"A thread's status was set to {{status}}", map[string]any{"annotationId": "a1", "status": "In progress"},
			map[string]any{"status": map[string]any{"from": "OPEN", "to": "IN_PROGRESS"}}, thread(ongoing, nil), nil},
		{commentEvent(t, "e-priority", "comment_annotation.priority_change", thread(open, map[string]any{"priority": map[string]any{"id": "P1", "name": "High"}}), 0, nil, nil), "comment", none,
			"A thread's priority was set to {{priority}}", map[string]any{"annotationId": "a1", "priority": "High"},
			map[string]any{"priority": map[string]any{"to": "High"}}, thread(open, map[string]any{"priority": map[string]any{"id": "P1", "name": "High"}}), nil},
		{commentEvent(t, "e-unprioritise", "comment_annotation.priority_change", thread(open, nil), 0, nil, nil), "comment", none,
			"A thread's priority was cleared", map[string]any{"annotationId": "a1"},
			map[string]any{"priority": map[string]any{"to": nil}}, thread(open, nil), nil},
		{commentEvent(t, "e-assign", "comment_annotation.assign", thread(open, map[string]any{"assignedTo": bob}), 0, nil, nil), "comment", none,
			"A thread was assigned to {{assignee}}", map[string]any{"annotationId": "a1", "assignee": "Bob"},
			map[string]any{"assignedTo": map[string]any{"to": bob}}, thread(open, map[string]any{"assignedTo": bob}), nil},
		{commentEvent(t, "e-unassign", "comment_annotation.assign", thread(open, nil), 0, nil, ann), "comment", annUser,
			"{{actionUser.name}} unassigned a thread", map[string]any{"annotationId": "a1"},
			map[string]any{"assignedTo": map[string]any{"to": nil}}, thread(open, nil), nil},
		{commentEvent(t, "e-update", "comment_annotation.update", thread(open, nil), 0, nil, nil), "comment", none,
			"A thread was updated", map[string]any{"annotationId": "a1"}, nil, thread(open, nil), nil},
		{commentEvent(t, "e-delete", "comment_annotation.delete", thread(open, nil), 0, nil, nil), "comment", none,
			"A thread was deleted", map[string]any{"annotationId": "a1"}, nil, thread(open, nil), nil},
		{commentEvent(t, "e-comment", "comment.add", thread(open, nil), 2, nil, bob), "comment", bobUser,
			"{{actionUser.name}} commented on a thread", map[string]any{"annotationId": "a1", "commentId": 2.0}, nil,
			thread(open, nil)["comments"].([]any)[1], withoutComments(thread(open, nil))},
		{commentEvent(t, "e-edit", "comment.update", edited, 2, map[string]any{"previousComment": thread(open, nil)["comments"].([]any)[1]}, bob), "comment", bobUser,
			"{{actionUser.name}} edited a comment", map[string]any{"annotationId": "a1", "commentId": 2.0},
			map[string]any{"commentText": map[string]any{"from": "second", "to": "second, edited"}},
			edited["comments"].([]any)[1], withoutComments(edited)},
		{commentEvent(t, "e-uncomment", "comment.delete", thread(open, nil), 2, nil, bob), "comment", bobUser,
			"{{actionUser.name}} deleted a comment", map[string]any{"annotationId": "a1", "commentId": 2.0}, nil,
			thread(open, nil)["comments"].([]any)[1], withoutComments(thread(open, nil))},
		// A reaction is the reacting user's act (data.userId), whatever the event's actionUser
		// (the comment's author) says; the template names them by what is known of them.
		{commentEvent(t, "e-react", "comment.reaction_add", thread(open, nil), 2, map[string]any{"emoji": "👍", "userId": "u3"}, bob), "reaction",
			map[string]any{"userId": "u3", "name": "", "email": ""},
			"{{actionUser.userId}} reacted {{emoji}}", map[string]any{"annotationId": "a1", "commentId": 2.0, "emoji": "👍"}, nil,
			thread(open, nil)["comments"].([]any)[1], withoutComments(thread(open, nil))},
		{commentEvent(t, "e-unreact", "comment.reaction_delete", thread(open, nil), 2, map[string]any{"emoji": "👍", "userId": "u2"}, bob), "reaction", bobUser,
			"{{actionUser.name}} removed the reaction {{emoji}}", map[string]any{"annotationId": "a1", "commentId": 2.0, "emoji": "👍"}, nil,
			thread(open, nil)["comments"].([]any)[1], withoutComments(thread(open, nil))},
		// Known by an email only.
		{commentEvent(t, "e-mail", "comment.add", thread(open, nil), 1, nil, map[string]any{"email": "ann@example.com"}), "comment",
			map[string]any{"userId": "", "name": "", "email": "ann@example.com"},
			"{{actionUser.email}} commented on a thread", map[string]any{"annotationId": "a1", "commentId": 1.0}, nil,
			thread(open, nil)["comments"].([]any)[0], withoutComments(thread(open, nil))},
	}
	for _, c := range cases {
		h.deliver(t, c.event)
		e := c.event.GetDomain()
		r := h.record(t, e.GetId())
		data := map[string]any{"actionUser": c.actor, "actionType": e.GetType()}
		for k, v := range c.data {
			data[k] = v
		}
		for field, want := range map[string]any{
			"featureType": c.feature, "actionType": e.GetType(), "targetEntityId": "a1", "actionUser": c.actor,
			"displayMessageTemplate": c.template, "displayMessageTemplateData": data, "changes": c.changes,
			"entityData": c.entity, "entityTargetData": c.target,
		} {
			if !jsonEq(r[field], want) {
				t.Errorf("%s: %s = %v, want %v", e.GetType(), field, r[field], want)
			}
		}
	}
}

// The feature type filter finds thread events under comment and reactions under reaction.
func TestCommentEventsFilterByFeature(t *testing.T) {
	h := newHarness(t)
	h.configure(t, &activityv1.UpdateActivityConfigRequest{IsEnabled: on(true)})
	h.deliver(t, commentEvent(t, "thread", "comment_annotation.add", thread(open, nil), 0, nil, nil))
	h.deliver(t, commentEvent(t, "reacted", "comment.reaction_add", thread(open, nil), 1, map[string]any{"emoji": "x", "userId": "u2"}, nil))
	if got := h.ids(t, &activityv1.GetActivityLogsRequest{FeatureTypes: []string{"comment"}}); fmt.Sprint(got) != "[thread]" {
		t.Errorf("comment: %v", got)
	}
	if got := h.ids(t, &activityv1.GetActivityLogsRequest{FeatureTypes: []string{"reaction"}}); fmt.Sprint(got) != "[reacted]" {
		t.Errorf("reaction: %v", got)
	}
}

// Triggers switch the comments service's events off by the names docs/api.md gives them: a
// thread event under comment as annotation_<action> or its whole type, a reaction under
// reaction as its action (add, delete) or its whole type. A whole type named under the wrong
// feature is refused, saying where it belongs.
func TestCommentEventTriggers(t *testing.T) {
	h := newHarness(t)
	h.configure(t, &activityv1.UpdateActivityConfigRequest{IsEnabled: on(true), Triggers: mustStruct(t, map[string]any{
		"comment":  map[string]any{"comment_annotation.status_change": false, "annotation_assign": false, "add": false},
		"reaction": map[string]any{"comment.reaction_add": false},
	})})
	resp, err := h.srv.GetActivityConfig(k1, &activityv1.GetActivityConfigRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"comment": map[string]any{"annotation_status_change": false, "annotation_assign": false, "add": false}, "reaction": map[string]any{"add": false}}
	if got := resp.GetData().GetActivityServiceConfig().GetTriggers().AsMap(); !jsonEq(got, want) {
		t.Fatalf("triggers stored as %v, want %v", got, want)
	}
	a := thread(open, nil)
	h.deliver(t, commentEvent(t, "status", "comment_annotation.status_change", a, 0, map[string]any{"from": "OPEN", "to": "X"}, nil))
	h.deliver(t, commentEvent(t, "assign", "comment_annotation.assign", a, 0, nil, nil))
	h.deliver(t, commentEvent(t, "comment", "comment.add", a, 2, nil, bob))
	h.deliver(t, commentEvent(t, "react", "comment.reaction_add", a, 2, map[string]any{"emoji": "x", "userId": "u3"}, nil))
	h.deliver(t, commentEvent(t, "thread", "comment_annotation.add", a, 0, nil, nil))                                            // annotation_add: absent, recorded
	h.deliver(t, commentEvent(t, "unreact", "comment.reaction_delete", a, 2, map[string]any{"emoji": "x", "userId": "u3"}, nil)) // delete: absent
	if got := h.ids(t, &activityv1.GetActivityLogsRequest{Order: "asc"}); fmt.Sprint(got) != "[thread unreact]" && fmt.Sprint(got) != "[unreact thread]" {
		t.Fatalf("recorded %v, want thread and unreact", got)
	}
	for _, bad := range []struct {
		triggers map[string]any
		message  string
	}{
		{map[string]any{"comment": map[string]any{"comment.reaction_add": true}},
			`triggers.comment names comment.reaction_add, an event of the feature reaction: name it in triggers.reaction.`},
		{map[string]any{"reaction": map[string]any{"comment_annotation.add": true}},
			`triggers.reaction names comment_annotation.add, an event of the feature comment: name it in triggers.comment.`},
		{map[string]any{"comment": map[string]any{"comment_annotation.x.y": true}},
			`triggers.comment has an invalid event name "comment_annotation.x.y": use the action (e.g. add) or the whole type (e.g. comment.add).`},
		{map[string]any{"comment": map[string]any{"reaction_add": true}},
			`triggers.comment names comment.reaction_add, an event of the feature reaction: name it in triggers.reaction.`},
		{map[string]any{"reaction": map[string]any{"comment.reaction_": true}},
			`triggers.reaction has an invalid event name "comment.reaction_": use the action (e.g. add) or the whole type (e.g. reaction.add).`},
		{map[string]any{"comment": map[string]any{"annotation_add": true, "comment_annotation.add": false}},
			"triggers.comment names the event annotation_add twice."},
	} {
		_, err := h.srv.UpdateActivityConfig(k1, &activityv1.UpdateActivityConfigRequest{Triggers: mustStruct(t, bad.triggers)})
		if st := status.Convert(err); st.Code() != codes.InvalidArgument || st.Message() != bad.message {
			t.Errorf("%v: %v, want %q", bad.triggers, err, bad.message)
		}
	}
}

// A thread too large for a record's entityData is recorded without its comments, which the
// thread's own fields still describe; a comment event's entityData is its comment.
func TestLargeThreadIsRecordedWithoutItsComments(t *testing.T) {
	h := newHarness(t)
	h.configure(t, &activityv1.UpdateActivityConfigRequest{IsEnabled: on(true)})
	a := thread(open, nil)
	big := strings.Repeat("x", 16<<10)
	var comments []any
	for i := range 6 {
		comments = append(comments, map[string]any{"commentId": float64(i + 1), "commentText": big, "from": ann})
	}
	a["comments"] = comments
	h.deliver(t, commentEvent(t, "big", "comment_annotation.add", a, 0, nil, nil))
	r := h.record(t, "big")
	entity, ok := r["entityData"].(map[string]any)
	if !ok || entity["annotationId"] != "a1" || entity["comments"] != nil || r["displayMessageTemplate"] != "{{actionUser.name}} started a thread" {
		t.Fatalf("entityData of a large thread %v", r["entityData"])
	}
	h.deliver(t, commentEvent(t, "big-comment", "comment.add", a, 3, nil, ann))
	r = h.record(t, "big-comment")
	if c, ok := r["entityData"].(map[string]any); !ok || c["commentId"] != 3.0 || r["entityTargetData"].(map[string]any)["comments"] != nil {
		t.Fatalf("entityData of a comment of a large thread %v", r["entityData"])
	}
}

// A product's own comment.add (Publish Event) without the comments service's data keeps the
// default template and its data, as before.
func TestProductCommentEventKeepsTheDefault(t *testing.T) {
	h := newHarness(t)
	h.configure(t, &activityv1.UpdateActivityConfigRequest{IsEnabled: on(true)})
	e := domain("product", "comment.add", "d")
	e.GetDomain().Data = mustStruct(t, map[string]any{"commentText": "Hello", "annotation": "not an object"})
	h.deliver(t, e)
	r := h.record(t, "product")
	if r["displayMessageTemplate"] != defaultTemplate || r["displayMessageTemplateData"].(map[string]any)["commentText"] != "Hello" || r["featureType"] != "comment" {
		t.Fatalf("product record %v", r)
	}
}
