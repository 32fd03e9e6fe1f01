package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/collab/collab/internal/testkit/webhooktest"
)

// Every change of a comment thread reaches an advanced webhook endpoint as its event, signed,
// as the real Standard Webhooks receiver verifies, with its data: the annotation (after the
// change, before it for a deletion), the comment and its id for comment events, the emoji and
// user for reactions, the statuses for a status change; an endpoint filtered to comment.add
// gets only those (docs/comments.md, "Events").
func TestCommentEventsReachWebhooks(t *testing.T) {
	t.Parallel()
	rcv := webhooktest.Start(t)
	s := realClockSystem(t)
	k := s.devKey()
	s.call("/v2/workspace/advancedwebhookconfig/update", k, map[string]any{"isEnabled": true}).data(t, "")
	hook(t, s, k, rcv, "/all", map[string]any{})
	hook(t, s, k, rcv, "/adds", map[string]any{"filterTypes": []string{"comment.add"}})

	loc := func(extra map[string]any) map[string]any {
		out := map[string]any{"organizationId": "o", "documentId": "d"}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	u1 := map[string]any{"userId": "u1", "name": "Ann", "email": "ann@example.com"}
	s.call("/v2/commentannotations/add", k, loc(map[string]any{"createOrganization": true, "createDocument": true, "commentAnnotations": []any{map[string]any{
		"annotationId": "a1", "from": u1, "commentData": []any{map[string]any{"commentText": "first", "from": u1}}}}})).data(t, "")
	s.call("/v2/commentannotations/comments/add", k, loc(map[string]any{"annotationId": "a1", "commentData": []any{map[string]any{
		"commentText": "reply", "commentHtml": `<b>reply</b><script>alert(1)</script>`, "from": map[string]any{"userId": "u2"}}}})).data(t, "")
	s.call("/v2/commentannotations/comments/reactions/add", k, loc(map[string]any{"annotationId": "a1", "commentId": 2, "emoji": "👍", "user": u1})).data(t, "")
	s.call("/v2/commentannotations/comments/update", k, loc(map[string]any{"annotationId": "a1", "commentIds": []any{2}, "updatedData": map[string]any{"commentText": "edited"}})).data(t, "")
	s.call("/v2/commentannotations/update", k, loc(map[string]any{"annotations": []any{map[string]any{"annotationId": "a1",
		"status": map[string]any{"id": "DONE", "name": "Done", "type": "terminal"}}}})).data(t, "")
	s.call("/v2/commentannotations/comments/reactions/delete", k, loc(map[string]any{"annotationId": "a1", "commentId": 2, "emoji": "👍", "user": u1})).data(t, "")
	s.call("/v2/commentannotations/comments/delete", k, loc(map[string]any{"annotationId": "a1", "commentIds": []any{2}})).data(t, "")
	s.call("/v2/commentannotations/delete", k, loc(map[string]any{"annotationIds": []any{"a1"}})).data(t, "")

	want := []string{"comment_annotation.add", "comment.add", "comment.reaction_add", "comment.update",
		"comment_annotation.status_change", "comment.reaction_delete", "comment.delete", "comment_annotation.delete"}
	got := map[string]map[string]any{}
	var order []string
	for _, d := range rcv.WaitFor(t, "/all", len(want), 20*time.Second) {
		p := payloadOf(t, d)
		ev, _ := p["event"].(string)
		if _, dup := got[ev]; dup {
			t.Fatalf("%s delivered twice", ev)
		}
		got[ev] = p
		order = append(order, ev)
	}
	for _, ev := range want {
		if _, ok := got[ev]; !ok {
			t.Fatalf("no %s among %v", ev, order)
		}
	}
	data := func(ev string) map[string]any {
		d, _ := got[ev]["data"].(map[string]any)
		if d == nil || d["annotation"].(map[string]any)["annotationId"] != "a1" {
			t.Fatalf("%s: data %v without the annotation", ev, got[ev]["data"])
		}
		return d
	}
	commentOf := func(ev string) map[string]any {
		d := data(ev)
		c, _ := d["comment"].(map[string]any)
		if c == nil || d["commentId"] != c["commentId"] {
			t.Fatalf("%s: data %v without the comment and its id", ev, d)
		}
		return c
	}
	if c := commentOf("comment.add"); c["commentText"] != "reply" || c["commentHtml"] != "<b>reply</b>" || c["commentId"] != float64(2) {
		t.Fatalf("comment.add's comment %v", c)
	}
	if c := commentOf("comment.update"); c["commentText"] != "edited" {
		t.Fatalf("comment.update's comment %v", c)
	}
	if d := data("comment.reaction_add"); d["emoji"] != "👍" || d["userId"] != "u1" {
		t.Fatalf("comment.reaction_add's data %v", d)
	}
	if d := data("comment.reaction_delete"); d["emoji"] != "👍" || d["userId"] != "u1" {
		t.Fatalf("comment.reaction_delete's data %v", d)
	}
	if d := data("comment_annotation.status_change"); d["from"] != "OPEN" || d["to"] != "DONE" || d["annotation"].(map[string]any)["status"].(map[string]any)["id"] != "DONE" {
		t.Fatalf("comment_annotation.status_change's data %v", d)
	}
	commentOf("comment.delete")
	if cs, _ := data("comment_annotation.delete")["annotation"].(map[string]any)["comments"].([]any); len(cs) != 1 {
		t.Fatalf("the deleted thread's annotation holds %d comments, want the one left", len(cs))
	}
	if a := got["comment.add"]; a["source"] != "comment" || a["actionType"] != "add" {
		t.Fatalf("comment.add's payload %v", a)
	}
	if au, _ := data("comment.add")["actionUser"].(map[string]any); au == nil || au["userId"] != "u2" {
		t.Fatalf("comment.add's actionUser %v, want the comment's author", data("comment.add")["actionUser"])
	}
	if d := data("comment.add"); d["targetEntityId"] != "a1" || d["organizationId"] != "o" || d["documentId"] != "d" {
		t.Fatalf("comment.add's data %v, want the thread as its target", d)
	}
	// The filtered endpoint: comment.add only (a thread's first comment comes with the thread).
	rcv.WaitFor(t, "/adds", 1, 10*time.Second)
	time.Sleep(500 * time.Millisecond) // anything else would have come by now
	if adds := rcv.Received(t, "/adds"); len(adds) != 1 || payloadOf(t, adds[0])["event"] != "comment.add" {
		var evs []string
		for _, d := range adds {
			evs = append(evs, fmt.Sprint(payloadOf(t, d)["event"]))
		}
		t.Fatalf("the comment.add endpoint got %v", evs)
	}
}
