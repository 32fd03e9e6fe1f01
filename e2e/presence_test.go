package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/collab/collab/internal/testkit/webhooktest"
)

// Issue 21, item 2: notifyUsers is required in Add Notifications (the spec's table says so).
// Over HTTP a body without it, or with it null, is INVALID_ARGUMENT naming it, and nothing is
// stored; an empty list is valid, with notifyAll.
func TestAddNotificationsRequiresNotifyUsers(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	k := s.devKey()
	s.call("/v2/users/add", k, map[string]any{"organizationId": "o", "createOrganization": true, "documentId": "d", "createDocument": true,
		"users": []any{person("ada", "Ada"), person("bob", "Bob")}}).data(t, "")
	add := "/v2/notifications/add"
	body := func(id string) map[string]any {
		return map[string]any{"organizationId": "o", "documentId": "d", "notificationId": id, "actionUser": person("ada", "Ada"),
			"displayHeadlineMessageTemplate": "h", "displayBodyMessage": "b"}
	}
	s.call(add, k, body("absent")).fails(t, 400, "INVALID_ARGUMENT", "notifyUsers is required.")
	null := body("null")
	null["notifyUsers"] = nil
	s.call(add, k, null).fails(t, 400, "INVALID_ARGUMENT", "notifyUsers is required.")
	// Both names of the field count; an empty body is {"data": {}}, which lacks it too.
	s.post(add, k, `{"data": {"notify_users": null}}`).fails(t, 400, "INVALID_ARGUMENT", "notifyUsers is required.")
	s.post(add, k, "").fails(t, 400, "INVALID_ARGUMENT", "notifyUsers is required.")
	// A wrong type is still reported as such.
	wrong := body("wrong")
	wrong["notifyUsers"] = "bob"
	s.call(add, k, wrong).fails(t, 400, "INVALID_ARGUMENT", "data.notifyUsers must be an array of objects.")

	// [] is valid: with notifyAll (its default) every member gets it.
	empty := body("empty")
	empty["notifyUsers"] = []any{}
	s.call(add, k, empty).data(t, "Notification added successfully.")
	all := body("all")
	all["notifyUsers"], all["notifyAll"] = []any{}, true
	s.call(add, k, all).data(t, "Notification added successfully.")
	snake := body("snake")
	delete(snake, "notifyUsers")
	snake["notify_users"] = []any{person("bob", "Bob")}
	s.call(add, k, snake).data(t, "Notification added successfully.")
	eventually(t, "bob's entries", func() bool { return len(s.inbox(t, k, "o", "bob")) == 3 })
	var ids []string
	for _, n := range s.call("/v2/notifications/get", k, map[string]any{"organizationId": "o"}).ok(t)["data"].([]any) {
		ids = append(ids, n.(map[string]any)["id"].(string))
	}
	if slices.Sort(ids); fmt.Sprint(ids) != "[all empty snake]" {
		t.Fatalf("notifications stored %v, want the three accepted ones", ids)
	}
}

// Issue 21, item 5: Update Advanced Webhook Endpoint with null clears filterTypes, channels,
// rateLimit, description, uid and metadata (the answer shows null, and a cleared filter lets
// every type through to a real receiver); an absent field is unchanged; [] stays refused, as do
// nulls of fields that cannot be unset.
func TestUpdateEndpointNullClears(t *testing.T) {
	t.Parallel()
	rcv := webhooktest.Start(t)
	s := realClockSystem(t)
	k := s.devKey()
	s.addOrganization(t, k, "o")
	s.call("/v2/workspace/advancedwebhookconfig/update", k, map[string]any{"isEnabled": true}).data(t, "")
	id := hook(t, s, k, rcv, "/ep", map[string]any{"filterTypes": []string{"comment.add"}, "channels": []string{"general"}, "rateLimit": 5,
		"description": "d", "uid": "u1", "metadata": map[string]any{"team": "a"}})
	update := "/v2/workspace/advancedwebhook/endpoints/update"
	send := func(fields map[string]any) map[string]any {
		t.Helper()
		fields["endpointId"] = id
		return s.call(update, k, fields).data(t, "Endpoint updated successfully.")
	}
	bad := func(fields map[string]any, msg string) {
		t.Helper()
		fields["endpointId"] = id
		s.call(update, k, fields).fails(t, 400, "INVALID_ARGUMENT", msg)
	}
	want := func(what string, e map[string]any, fields string) {
		t.Helper()
		got := fmt.Sprintf("description=%v filterTypes=%v channels=%v rateLimit=%v uid=%v metadata=%v disabled=%v",
			e["description"], e["filterTypes"], e["channels"], e["rateLimit"], e["uid"], e["metadata"], e["disabled"])
		if got != fields {
			t.Fatalf("%s:\n got %s\nwant %s", what, got, fields)
		}
		listed := s.call("/v2/workspace/advancedwebhook/endpoints/get", k, map[string]any{}).data(t, "")["endpoints"].([]any)[0].(map[string]any)
		if fmt.Sprint(listed) != fmt.Sprint(e) {
			t.Fatalf("%s: listed %v, answered %v", what, listed, e)
		}
	}

	// [] stays refused; so are nulls of the fields that have no unset state.
	bad(map[string]any{"filterTypes": []string{}}, "filterTypes must be a non-empty array of strings when given.")
	bad(map[string]any{"channels": []string{}}, "channels must be a non-empty array of strings when given.")
	bad(map[string]any{"url": nil}, "url cannot be null (only description, filterTypes, channels, rateLimit, uid and metadata can be cleared).")
	bad(map[string]any{"disabled": nil}, "disabled cannot be null (only description, filterTypes, channels, rateLimit, uid and metadata can be cleared).")
	s.call(update, k, map[string]any{"endpointId": nil, "description": nil}).fails(t, 400, "INVALID_ARGUMENT", "endpointId is required.")

	// Absent fields are unchanged.
	e := send(map[string]any{"disabled": false})
	want("absent fields", e, "description=d filterTypes=[comment.add] channels=[general] rateLimit=5 uid=u1 metadata=map[team:a] disabled=false")

	// filterTypes: null clears the filter: every type reaches the endpoint again.
	e = send(map[string]any{"filterTypes": nil})
	want("filterTypes null", e, "description=d filterTypes=<nil> channels=[general] rateLimit=5 uid=u1 metadata=map[team:a] disabled=false")
	s.publish(t, k, map[string]any{"id": "h1", "type": "huddle.join", "organizationId": "o", "channel": "general"})
	if p := payloadOf(t, rcv.WaitFor(t, "/ep", 1, 10*time.Second)[0]); p["event"] != "huddle.join" {
		t.Fatalf("delivered %v", p)
	}

	// The snake_case name clears too; several at once, each by its own null.
	e = send(map[string]any{"channels": nil, "rate_limit": nil, "description": nil})
	want("channels, rateLimit, description null", e, "description=<nil> filterTypes=<nil> channels=<nil> rateLimit=<nil> uid=u1 metadata=map[team:a] disabled=false")
	s.publish(t, k, map[string]any{"id": "c1", "type": "comment.add", "organizationId": "o", "channel": "random"})
	if p := payloadOf(t, rcv.WaitFor(t, "/ep", 2, 10*time.Second)[1]); p["event"] != "comment.add" {
		t.Fatalf("delivered %v", p)
	}
	e = send(map[string]any{"uid": nil, "metadata": nil})
	want("uid, metadata null", e, "description=<nil> filterTypes=<nil> channels=<nil> rateLimit=<nil> uid=<nil> metadata=<nil> disabled=false")

	// Cleared fields can be set again; clearing what is unset is no error.
	e = send(map[string]any{"filterTypes": []string{"huddle.join"}, "rateLimit": 7, "description": nil})
	want("set again", e, "description=<nil> filterTypes=[huddle.join] channels=<nil> rateLimit=7 uid=<nil> metadata=<nil> disabled=false")
}
