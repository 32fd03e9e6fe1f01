package e2e

import (
	"fmt"
	"testing"
)

// The comments operations over HTTP, on both stores: a thread added with its organization and
// document created, read back, its priority and assignee cleared with null, a reply with
// mentions replaced through a JSON list, a reaction, counts with unread; the changes reach the
// activity log as comment events.
func TestCommentsOverHTTP(t *testing.T) {
	t.Parallel()
	onBothStores(t, testCommentsOverHTTP)
}

func testCommentsOverHTTP(t *testing.T, s *system) {
	k := s.devKey()
	s.call("/v2/workspace/activityconfig/update", k, map[string]any{"isEnabled": true}).data(t, "")
	loc := map[string]any{"organizationId": "o", "documentId": "d"}
	with := func(extra map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range loc {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	added := s.call("/v2/commentannotations/add", k, with(map[string]any{"createOrganization": true, "createDocument": true,
		"commentAnnotations": []any{map[string]any{"annotationId": "a1", "from": map[string]any{"userId": "u1", "name": "Ann"},
			"priority": map[string]any{"id": "P1", "name": "High"}, "assignedTo": map[string]any{"userId": "u2"},
			"commentData": []any{map[string]any{"commentText": "first", "from": map[string]any{"userId": "u1"}}}}}})).data(t, "Comment annotation(s) added successfully.")
	if fmt.Sprint(added["a1"]) != "map[id:a1 message:Comment annotation added. success:true]" {
		t.Fatalf("added %v", added)
	}
	s.call("/v2/commentannotations/add", k, with(map[string]any{"commentAnnotations": []any{map[string]any{"annotationId": "a1",
		"from": map[string]any{"userId": "u1"}, "commentData": []any{map[string]any{"commentText": "again", "from": map[string]any{"userId": "u1"}}}}}})).
		data(t, "Comment annotation(s) added successfully.")
	got := s.call("/v2/commentannotations/get", k, loc).ok(t)["data"].([]any)
	if len(got) != 1 || got[0].(map[string]any)["priority"] == nil || got[0].(map[string]any)["status"].(map[string]any)["id"] != "OPEN" {
		t.Fatalf("got %v", got)
	}
	// null clears the priority and the assignee.
	upd := s.call("/v2/commentannotations/update", k, with(map[string]any{"annotations": []any{map[string]any{"annotationId": "a1", "priority": nil, "assignedTo": nil}}})).
		data(t, "Comment annotation(s) updated successfully.")
	if upd["a1"].(map[string]any)["success"] != true {
		t.Fatalf("update %v", upd)
	}
	a := s.call("/v2/commentannotations/get", k, loc).ok(t)["data"].([]any)[0].(map[string]any)
	if a["priority"] != nil || a["assignedTo"] != nil {
		t.Fatalf("after null: priority %v assignee %v", a["priority"], a["assignedTo"])
	}
	ids := s.call("/v2/commentannotations/comments/add", k, with(map[string]any{"annotationId": "a1",
		"commentData": []any{map[string]any{"commentText": "reply", "from": map[string]any{"userId": "u2"}}}})).ok(t)["data"].([]any)
	if len(ids) != 1 || ids[0] != float64(2) {
		t.Fatalf("new comment ids %v, want [2]", ids)
	}
	s.call("/v2/commentannotations/comments/update", k, with(map[string]any{"annotationId": "a1", "commentIds": []any{2},
		"updatedData": map[string]any{"taggedUserContacts": []any{map[string]any{"userId": "u3", "contact": map[string]any{"userId": "u3", "email": "u3@example.com"}}}}})).
		data(t, "Comment updated successfully.")
	s.call("/v2/commentannotations/comments/reactions/add", k, with(map[string]any{"annotationId": "a1", "commentId": 2, "emoji": "👍", "user": map[string]any{"userId": "u1"}})).
		data(t, "Reaction added successfully.")
	cs := s.call("/v2/commentannotations/comments/get", k, with(map[string]any{"annotationId": "a1", "commentIds": []any{2}})).ok(t)["data"].([]any)
	c := cs[0].(map[string]any)
	mention := c["taggedUserContacts"].([]any)[0].(map[string]any)
	if mention["userId"] != "u3" || mention["contact"].(map[string]any)["email"] != "u3@example.com" || fmt.Sprint(c["reactions"]) != "[map[emoji:👍 userIds:[u1]]]" {
		t.Fatalf("comment %v", c)
	}
	s.call("/v2/commentannotations/read", k, with(map[string]any{"userId": "u1", "annotationIds": []any{"a1"}})).data(t, "Comment annotation(s) marked as read.")
	counts := s.call("/v2/commentannotations/count", k, map[string]any{"organizationId": "o", "documentIds": []any{"d"}, "userId": "u1"}).ok(t)["data"]
	if fmt.Sprint(counts) != "map[d:map[total:1 unread:0]]" {
		t.Fatalf("counts %v", counts)
	}
	// Refusals in the envelope.
	s.call("/v2/commentannotations/comments/add", k, with(map[string]any{"annotationId": "nope",
		"commentData": []any{map[string]any{"commentText": "x", "from": map[string]any{"userId": "u"}}}})).fails(t, 404, "NOT_FOUND", "Comment annotation does not exist in this document.")
	s.call("/v2/commentannotations/comments/reactions/add", k, with(map[string]any{"annotationId": "a1", "commentId": 1.5, "emoji": "x", "user": map[string]any{"userId": "u1"}})).
		fails(t, 400, "INVALID_ARGUMENT", "")
	s.call("/v2/commentannotations/get", k, map[string]any{"organizationId": "o"}).fails(t, 400, "INVALID_ARGUMENT", "documentId or documentIds is required.")
	// Delete Data by Location takes the threads at the location.
	s.call("/v2/commentannotations/add", k, with(map[string]any{"commentAnnotations": []any{map[string]any{"annotationId": "at-l1",
		"location": map[string]any{"id": "L1"}, "from": map[string]any{"userId": "u1"}, "commentData": []any{map[string]any{"commentText": "here", "from": map[string]any{"userId": "u1"}}}}}})).
		data(t, "Comment annotation(s) added successfully.")
	s.call("/v1/organizations/documents/locations/data/delete", k, map[string]any{"organizationId": "o", "documentId": "d", "location": map[string]any{"id": "L1"}}).ok(t)
	eventually(t, "the location's thread deleted", func() bool {
		res := s.call("/v2/commentannotations/get", k, with(map[string]any{"annotationIds": []any{"at-l1"}}))
		return res.status == 200 && len(res.body["result"].(map[string]any)["data"].([]any)) == 0
	})
	// The comment events are in the activity log, filed under the thread.
	eventually(t, "the comment events in the activity log", func() bool {
		ids, _ := s.activityIDs(t, k, map[string]any{"organizationId": "o", "targetEntityId": "a1", "featureTypes": []any{"comment"}})
		return len(ids) >= 3
	})
}

// End users call the comments operations with the JWT of Generate Token as Authorization:
// Bearer, without K headers: the token's user is the author, a viewer comments but does not
// resolve, another's comment cannot be edited, and after the API key's auth token is reset the
// old JWT is refused (docs/comments.md, "End users").
func TestCommentsForEndUsers(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	wsID, wsToken := s.newWorkspace("comments-users@example.com")
	key, auth := s.newKey(wsID, wsToken)
	k := keyHeaders(key, auth)
	s.call("/v2/users/add", k, map[string]any{"organizationId": "o", "createOrganization": true, "documentId": "d", "createDocument": true, "users": users("ed", "vi")}).data(t, "")
	bearer := func(user, role string) map[string]string {
		body := map[string]any{"userId": user, "userProperties": map[string]any{"name": "Name " + user, "email": user + "@example.com"},
			"permissions": map[string]any{"resources": []any{map[string]any{"type": "document", "id": "d", "organizationId": "o", "accessRole": role}}}}
		token := s.call("/v2/auth/generate_token", k, body).data(t, "Token generated successfully.")["token"].(string)
		return map[string]string{"Authorization": "Bearer " + token}
	}
	ed, vi := bearer("ed", "editor"), bearer("vi", "viewer")
	loc := func(extra map[string]any) map[string]any {
		out := map[string]any{"organizationId": "o", "documentId": "d"}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	s.call("/v2/commentannotations/add", vi, loc(map[string]any{"commentAnnotations": []any{map[string]any{"annotationId": "a1",
		"commentData": []any{map[string]any{"commentText": "a viewer's question"}}}}})).data(t, "Comment annotation(s) added successfully.")
	got := s.call("/v2/commentannotations/comments/get", ed, loc(map[string]any{"annotationId": "a1"})).ok(t)["data"].([]any)
	if from := got[0].(map[string]any)["from"].(map[string]any); from["userId"] != "vi" || from["email"] != "vi@example.com" {
		t.Fatalf("from %v, want the token's user", from)
	}
	s.call("/v2/commentannotations/update", vi, loc(map[string]any{"annotations": []any{map[string]any{"annotationId": "a1", "status": map[string]any{"id": "DONE", "type": "terminal"}}}})).
		fails(t, 403, "PERMISSION_DENIED", "Changing a comment annotation's status, priority, assignee, context or location needs the editor role.")
	s.call("/v2/commentannotations/comments/update", ed, loc(map[string]any{"annotationId": "a1", "commentIds": []any{1}, "updatedData": map[string]any{"commentText": "hijacked"}})).
		fails(t, 403, "PERMISSION_DENIED", "You may change only your own comments.")
	s.call("/v2/commentannotations/update", ed, loc(map[string]any{"annotations": []any{map[string]any{"annotationId": "a1", "status": map[string]any{"id": "DONE", "type": "terminal"}}}})).
		data(t, "Comment annotation(s) updated successfully.")
	// A tampered token, then every token of the key after its auth token is reset.
	s.call("/v2/commentannotations/get", map[string]string{"Authorization": tampered(ed["Authorization"])}, loc(nil)).fails(t, 403, "PERMISSION_DENIED", "")
	s.call("/v2/workspace/authtoken/reset", workspaceHeaders(wsID, wsToken), map[string]any{"apiKey": key}).data(t, "Auth token reset successfully.")
	s.call("/v2/commentannotations/get", ed, loc(nil)).fails(t, 403, "PERMISSION_DENIED", "")
	// Neither credential: the K refusal.
	s.call("/v2/commentannotations/get", nil, loc(nil)).fails(t, 400, "INVALID_ARGUMENT", "API key not found in headers.")
}
