package e2e

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// notificationIDs are the ids of an inbox, newest first.
func notificationIDs(inbox []map[string]any) string {
	var out []string
	for _, n := range inbox {
		out = append(out, n["id"].(string))
	}
	return strings.Join(out, " ")
}

// setAccessContext gives a member of organization o an access context with Add Permissions.
func setAccessContext(t *testing.T, s *system, user string, access map[string]any) {
	t.Helper()
	s.call("/v2/auth/permissions/add", s.devKey(), map[string]any{"user": map[string]any{"userId": user}, "permissions": map[string]any{
		"resources": []any{map[string]any{"type": "organization", "id": "o", "organizationId": "o"}},
		"context":   map[string]any{"access": access},
	}}).data(t, "Permissions added successfully.")
}

// Issue 21 (1): a notification with context.access reaches only the recipients whose access
// context (Add Permissions, Generate Token) grants every field and value it names, by inbox and
// by mail; a user without an access context gets none. Inbox reads filter by the reader's
// context as it is when read. A notification without context reaches everyone as before.
func TestNotificationContextFiltersRecipients(t *testing.T) {
	t.Parallel()
	s := newMailSystem(t)
	k := s.devKey()
	s.call("/v2/users/add", k, map[string]any{"organizationId": "o", "createOrganization": true, "documentId": "d", "createDocument": true,
		"users": []any{person("ada", "Ada"), person("p12", "P12"), person("none", "None"), person("p9", "P9"), person("p9eu", "P9eu"), person("n5", "N5")}}).data(t, "")
	setAccessContext(t, s.system, "p12", map[string]any{"projectId": []any{"p1", "p2"}})
	setAccessContext(t, s.system, "p9", map[string]any{"projectId": "p9"})
	setAccessContext(t, s.system, "n5", map[string]any{"level": 5})
	// Generate Token's permissions set the context as Add Permissions does.
	s.call("/v2/auth/generate_token", k, map[string]any{"userId": "p9eu", "userProperties": map[string]any{"organizationId": "o"}, "permissions": map[string]any{
		"resources": []any{map[string]any{"type": "organization", "id": "o", "organizationId": "o"}},
		"context":   map[string]any{"access": map[string]any{"projectId": []any{"p9", "p3"}, "region": "eu"}},
	}}).data(t, "Token generated successfully.")

	add := func(id string, access map[string]any) {
		t.Helper()
		d := map[string]any{"organizationId": "o", "documentId": "d", "notificationId": id, "actionUser": person("ada", "Ada"),
			"displayHeadlineMessageTemplate": "{{actionUser}} on " + id, "displayBodyMessage": "b",
			"notifyUsers": []any{person("p12", "P12"), person("none", "None"), person("p9", "P9")}}
		if access != nil {
			d["context"] = map[string]any{"access": access}
		}
		s.call("/v2/notifications/add", k, d).data(t, "Notification added successfully.")
	}
	add("n0", nil)
	add("n1", map[string]any{"projectId": "p9"})
	add("n2", map[string]any{"projectId": "p9", "region": "eu"})
	add("n3", map[string]any{"level": "5"})
	add("n4", map[string]any{"level": 5})
	add("n5", map[string]any{"level": 5, "projectId": "p9"})
	add("n6", nil) // the last: once it is in, every fan-out before it is done

	want := map[string]string{
		"p12":  "n6 n0",
		"none": "n6 n0",
		"p9":   "n6 n1 n0",
		"p9eu": "n6 n2 n1 n0",
		"n5":   "n6 n4 n3 n0",
	}
	inboxes := func() string {
		var out []string
		for _, u := range slices.Sorted(maps.Keys(want)) {
			if got := notificationIDs(s.inbox(t, k, "o", u)); got != want[u] {
				out = append(out, fmt.Sprintf("%s's inbox %q, want %q", u, got, want[u]))
			}
		}
		return strings.Join(out, "; ")
	}
	for deadline := time.Now().Add(10 * time.Second); inboxes() != ""; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: %s", inboxes())
		}
	}
	// Mail (p12, none and p9 are named, so their default MINE mails them): n1 to p9 only.
	s.smtp.WaitFor(t, 3*2+1, 10*time.Second) // n0 and n6 to the three, n1 to p9
	time.Sleep(200 * time.Millisecond)       // nothing more may come
	var mails []string
	for _, m := range s.smtp.Messages() {
		p := m.Parsed(t)
		mails = append(mails, p.To+" "+p.Subject)
	}
	slices.Sort(mails)
	if got := strings.Join(mails, ", "); got != "none@example.com Ada on n0, none@example.com Ada on n6, p12@example.com Ada on n0, p12@example.com Ada on n6, "+
		"p9@example.com Ada on n0, p9@example.com Ada on n1, p9@example.com Ada on n6" {
		t.Fatalf("mails: %s", got)
	}
	// The organization's listing names whom each reached.
	byID := map[string]map[string]any{}
	for _, n := range s.call("/v2/notifications/get", k, map[string]any{"organizationId": "o"}).ok(t)["data"].([]any) {
		byID[n.(map[string]any)["id"].(string)] = n.(map[string]any)
	}
	if r := byID["n1"]["notifyUserIds"]; !equalStrings(r, "p9", "p9eu") {
		t.Fatalf("n1 reached %v", r)
	}
	if r := byID["n1"]["contextAccess"]; fmt.Sprint(r) != "map[projectId:p9]" {
		t.Fatalf("n1's context %v", r)
	}

	// p9's context changes: the inbox shows what it now allows, by page and by id.
	setAccessContext(t, s.system, "p9", map[string]any{"projectId": "p1"})
	if got := notificationIDs(s.inbox(t, k, "o", "p9")); got != "n6 n0" {
		t.Fatalf("p9's inbox after the change %q", got)
	}
	byIDs := s.call("/v2/notifications/get", k, map[string]any{"organizationId": "o", "userId": "p9", "notificationIds": []string{"n1", "n0"}}).ok(t)["data"].([]any)
	if len(byIDs) != 1 || byIDs[0].(map[string]any)["id"] != "n0" {
		t.Fatalf("p9's notifications by id %v", byIDs)
	}
	// A page of two entries, one hidden, shows one and goes on.
	page := s.call("/v2/notifications/get", k, map[string]any{"organizationId": "o", "userId": "p9", "pageSize": 2}).ok(t)
	next := s.call("/v2/notifications/get", k, map[string]any{"organizationId": "o", "userId": "p9", "pageSize": 2, "pageToken": page["pageToken"]}).ok(t)
	if len(page["data"].([]any)) != 1 || len(next["data"].([]any)) != 1 || next["data"].([]any)[0].(map[string]any)["id"] != "n0" {
		t.Fatalf("p9's pages %v / %v", page, next)
	}
	setAccessContext(t, s.system, "p9", map[string]any{"projectId": "p9"})
	if got := notificationIDs(s.inbox(t, k, "o", "p9")); got != "n6 n1 n0" {
		t.Fatalf("p9's inbox with p9 again %q", got)
	}
}

// Add Notifications refuses a context.access that names nothing or holds anything but strings
// and numbers, with the envelope, and stores nothing.
func TestNotificationContextBadInput(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	k := s.devKey()
	s.addOrganization(t, k, "o")
	wide := map[string]any{}
	for i := range 21 {
		wide[fmt.Sprintf("f%02d", i)] = "x"
	}
	for _, c := range []struct {
		context any
		msg     string
	}{
		{map[string]any{}, "context.access is required inside context and must name at least one field."},
		{map[string]any{"access": nil}, "context.access is required inside context and must name at least one field."},
		{map[string]any{"access": map[string]any{}}, "context.access is required inside context and must name at least one field."},
		{map[string]any{"access": wide}, "context.access must hold at most 20 fields."},
		{map[string]any{"access": map[string]any{"team": true}}, "context.access.team must be a string or a number."},
		{map[string]any{"access": map[string]any{"team": nil}}, "context.access.team must be a string or a number."},
		{map[string]any{"access": map[string]any{"team": []any{"red"}}}, "context.access.team must be a string or a number."},
		{map[string]any{"access": map[string]any{"team": map[string]any{"id": "red"}}}, "context.access.team must be a string or a number."},
		{map[string]any{"access": map[string]any{"team": strings.Repeat("x", 257)}}, "context.access.team must be at most 256 characters."},
		{map[string]any{"access": map[string]any{"": "red"}}, "context.access field name is required."},
		{map[string]any{"access": map[string]any{"te\u0000am": "red"}}, "context.access field name must not contain control characters."},
	} {
		s.call("/v2/notifications/add", k, map[string]any{"organizationId": "o", "documentId": "d", "createDocument": true, "actionUser": person("a", "A"),
			"displayHeadlineMessageTemplate": "h", "displayBodyMessage": "b", "notifyUsers": []any{person("b", "B")}, "context": c.context}).fails(t, 400, "INVALID_ARGUMENT", c.msg)
	}
	if n := s.call("/v2/notifications/get", k, map[string]any{"organizationId": "o"}).ok(t)["data"].([]any); len(n) != 0 {
		t.Fatalf("refused requests wrote %v", n)
	}
}
