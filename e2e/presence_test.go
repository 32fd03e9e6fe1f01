package e2e

import (
	"fmt"
	"slices"
	"testing"
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
