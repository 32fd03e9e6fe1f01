package e2e

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// rendered fills a record's displayMessageTemplate with its displayMessageTemplateData, as a
// product's front end does ({{a}} and {{a.b}}).
func rendered(r map[string]any) string {
	data, _ := r["displayMessageTemplateData"].(map[string]any)
	return regexp.MustCompile(`\{\{\s*([A-Za-z0-9_.]+)\s*\}\}`).ReplaceAllStringFunc(r["displayMessageTemplate"].(string), func(m string) string {
		var v any = data
		for _, k := range strings.Split(strings.Trim(m, "{} "), ".") {
			o, _ := v.(map[string]any)
			v = o[k]
		}
		return fmt.Sprint(v)
	})
}

// The comments service's events reach the activity log over HTTP as records that read well:
// thread events under featureType comment, reactions under reaction, the thread as target, each
// with its template, template data and changes; triggers switch them off by the names
// docs/api.md gives them.
func TestCommentEventsInTheActivityLog(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	k := s.devKey()
	s.call("/v2/workspace/activityconfig/update", k, map[string]any{"isEnabled": true, "triggers": map[string]any{
		"comment": map[string]any{"comment_annotation.update": false}, "reaction": map[string]any{"delete": false},
	}}).data(t, "Activity config updated successfully.")
	loc := func(extra map[string]any) map[string]any {
		out := map[string]any{"organizationId": "o", "documentId": "d"}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	ann, bob := map[string]any{"userId": "u1", "name": "Ann"}, map[string]any{"userId": "u2", "name": "Bob"}
	s.call("/v2/commentannotations/add", k, loc(map[string]any{"createOrganization": true, "createDocument": true,
		"commentAnnotations": []any{map[string]any{"annotationId": "a1", "from": ann,
			"commentData": []any{map[string]any{"commentText": "Please review", "from": ann}}}}})).data(t, "Comment annotation(s) added successfully.")
	s.call("/v2/commentannotations/update", k, loc(map[string]any{"annotations": []any{map[string]any{"annotationId": "a1",
		"status": map[string]any{"id": "RESOLVED", "name": "Resolved", "type": "terminal"}, "priority": map[string]any{"id": "P1", "name": "High"},
		"context": map[string]any{"page": "intro"}}}})).data(t, "Comment annotation(s) updated successfully.")
	s.call("/v2/commentannotations/comments/add", k, loc(map[string]any{"annotationId": "a1",
		"commentData": []any{map[string]any{"commentText": "Looks good", "from": bob}}})).data(t, "Comment(s) added successfully.")
	s.call("/v2/commentannotations/comments/update", k, loc(map[string]any{"annotationId": "a1", "commentIds": []any{2},
		"updatedData": map[string]any{"commentText": "Looks good to me"}})).data(t, "Comment updated successfully.")
	for _, op := range []string{"add", "delete"} {
		s.call("/v2/commentannotations/comments/reactions/"+op, k, loc(map[string]any{"annotationId": "a1", "commentId": 2, "emoji": "👍",
			"user": map[string]any{"userId": "u3", "name": "Cy"}})).ok(t)
	}

	// Six records: the thread's update and the reaction's removal are switched off.
	var records []map[string]any
	eventually(t, "the comment events in the activity log", func() bool {
		res := s.call("/v2/activities/get", k, map[string]any{"organizationId": "o", "targetEntityId": "a1", "order": "asc"}).ok(t)
		records = nil
		for _, r := range res["data"].([]any) {
			records = append(records, r.(map[string]any))
		}
		return len(records) >= 6
	})
	byType := map[string]map[string]any{}
	for _, r := range records {
		byType[r["actionType"].(string)] = r
	}
	want := []struct{ typ, feature, reads string }{
		{"comment_annotation.add", "comment", "Ann started a thread"},
		{"comment_annotation.status_change", "comment", "A thread was resolved"},
		{"comment_annotation.priority_change", "comment", "A thread's priority was set to High"},
		{"comment.add", "comment", "Bob commented on a thread"},
		{"comment.update", "comment", "Bob edited a comment"},
		// The event names the comment's author; the reacting user is known by id only.
		{"comment.reaction_add", "reaction", "Cy reacted 👍"},
	}
	if len(records) != len(want) {
		t.Fatalf("%d records, want %d: %v", len(records), len(want), records)
	}
	for _, w := range want {
		r := byType[w.typ]
		if r == nil {
			t.Fatalf("no record of %s among %v", w.typ, records)
		}
		t.Logf("%-34s %-8s %q", w.typ, r["featureType"], rendered(r))
		if r["featureType"] != w.feature || r["targetEntityId"] != "a1" || rendered(r) != w.reads {
			t.Errorf("%s: featureType %v, target %v, reads %q; want %s, a1, %q", w.typ, r["featureType"], r["targetEntityId"], rendered(r), w.feature, w.reads)
		}
	}
	if got := fmt.Sprint(byType["comment_annotation.status_change"]["changes"]); got != "map[status:map[from:OPEN to:RESOLVED]]" {
		t.Errorf("status change's changes %s", got)
	}
	if got := fmt.Sprint(byType["comment.update"]["changes"]); got != "map[commentText:map[from:Looks good to:Looks good to me]]" {
		t.Errorf("edit's changes %s", got)
	}
	comment := byType["comment.add"]["entityData"].(map[string]any)
	thread := byType["comment.add"]["entityTargetData"].(map[string]any)
	if comment["commentText"] != "Looks good" || comment["commentId"] != 2.0 || thread["annotationId"] != "a1" || thread["comments"] != nil {
		t.Errorf("comment.add's entity %v, target %v", comment, thread)
	}
	if added := byType["comment_annotation.add"]; fmt.Sprint(added["actionUser"]) != "map[email: name:Ann userId:u1]" ||
		len(added["entityData"].(map[string]any)["comments"].([]any)) != 1 {
		t.Errorf("thread's record %v", added)
	}
	reactions := s.call("/v2/activities/get", k, map[string]any{"organizationId": "o", "featureTypes": []any{"reaction"}}).ok(t)["data"].([]any)
	if len(reactions) != 1 || reactions[0].(map[string]any)["actionType"] != "comment.reaction_add" {
		t.Fatalf("reaction records %v", reactions)
	}
	// A whole type under the wrong feature is refused, saying where it belongs.
	s.call("/v2/workspace/activityconfig/update", k, map[string]any{"triggers": map[string]any{"comment": map[string]any{"comment.reaction_add": false}}}).
		fails(t, 400, "INVALID_ARGUMENT", "triggers.comment names comment.reaction_add, an event of the feature reaction: name it in triggers.reaction.")
}

// Add Comments over HTTP notifies the users the comment mentions (their inbox holds it, and
// their mailbox by default) and the thread's earlier participants (inbox only), never its
// author; a participant whose config is MINE gets no reply; an assignment reaches a user who
// is not a member. On the memory store and the embedded FerretDB.
func TestCommentNotificationsInTheInbox(t *testing.T) {
	t.Parallel()
	onBothStores(t, testCommentNotificationsInTheInbox)
}

func testCommentNotificationsInTheInbox(t *testing.T, s *system) {
	k := s.devKey()
	s.call("/v2/users/add", k, map[string]any{"organizationId": "o", "createOrganization": true, "documentId": "d", "createDocument": true,
		"users": []any{person("ada", "Ada"), person("bob", "Bob"), person("cy", "Cy"), person("eve", "Eve")}}).data(t, "")
	s.call("/v2/notifications/config/set", k, map[string]any{"organizationId": "o", "documentIds": []any{"d"}, "userIds": []any{"eve"},
		"config": map[string]any{"inbox": "MINE", "email": "MINE", "slack": "NONE"}}).data(t, "User config set successfully.")
	loc := func(extra map[string]any) map[string]any {
		out := map[string]any{"organizationId": "o", "documentId": "d"}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	user := func(id string) map[string]any { return map[string]any{"userId": id} }
	s.call("/v2/commentannotations/add", k, loc(map[string]any{"commentAnnotations": []any{map[string]any{"annotationId": "a1", "from": user("ada"),
		"commentData": []any{map[string]any{"commentText": "Draft ready", "from": user("ada")}, map[string]any{"commentText": "+1", "from": user("eve")}}}}})).
		data(t, "Comment annotation(s) added successfully.")
	s.call("/v2/commentannotations/comments/add", k, loc(map[string]any{"annotationId": "a1", "commentData": []any{map[string]any{
		"commentText": "@Cy can you check the numbers?", "from": map[string]any{"userId": "bob", "name": "Bob"},
		"taggedUserContacts": []any{map[string]any{"userId": "cy", "contact": map[string]any{"userId": "cy", "name": "Cy", "email": "cy@example.com"}}},
	}}})).data(t, "Comment(s) added successfully.")
	s.call("/v2/commentannotations/update", k, loc(map[string]any{"annotations": []any{map[string]any{"annotationId": "a1",
		"assignedTo": map[string]any{"userId": "zed", "name": "Zed", "email": "zed@example.com"}}}})).data(t, "Comment annotation(s) updated successfully.")

	headlines := func(u string) []string {
		var out []string
		for _, n := range s.inbox(t, k, "o", u) {
			out = append(out, n["displayHeadlineMessage"].(string))
		}
		slices.Sort(out)
		return out
	}
	eventually(t, "the mention in cy's inbox and the assignment in zed's", func() bool {
		return len(headlines("cy")) == 1 && len(headlines("zed")) == 1
	})
	for u, want := range map[string][]string{
		"cy":  {"Bob mentioned you in a comment"},
		"ada": {"Bob replied to a comment thread"},
		"zed": {"A comment thread was assigned to you"},
		"bob": nil, // the author
		"eve": nil, // took part, but MINE: a reply is not hers
	} {
		if got := headlines(u); !slices.Equal(got, want) {
			t.Errorf("%s's inbox %v, want %v", u, got, want)
		}
	}
	n := s.inbox(t, k, "o", "cy")[0]
	src := n["notificationSourceData"].(map[string]any)
	if n["notificationSource"] != "comment" || n["displayBodyMessage"] != "@Cy can you check the numbers?" || n["documentId"] != "d" ||
		src["annotationId"] != "a1" || src["commentId"] != 3.0 || src["reason"] != "mention" {
		t.Fatalf("cy's notification %v", n)
	}
	// Mentions and assignments are mailed by default; a reply is not.
	eventually(t, "the mails of the mention and the assignment", func() bool {
		var to []string
		for _, m := range s.mail.Sent() {
			if strings.Contains(m.Subject, "comment") {
				to = append(to, m.To)
			}
		}
		slices.Sort(to)
		return slices.Equal(to, []string{"cy@example.com", "zed@example.com"})
	})
}
