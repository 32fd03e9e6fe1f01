package notifications

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	notificationsv1 "github.com/collab/collab/proto/collab/notifications/v1"
)

func accessContext(t testing.TB, fields map[string]any) *notificationsv1.NotificationContext {
	t.Helper()
	s, err := structpb.NewStruct(fields)
	if err != nil {
		t.Fatal(err)
	}
	return &notificationsv1.NotificationContext{Access: s}
}

func inboxIDs(t *testing.T, h *harness, user string) string {
	t.Helper()
	var out []string
	for _, n := range h.inbox(t, user) {
		out = append(out, n.GetId())
	}
	return strings.Join(out, " ")
}

// Issue 21 (1): the fan-out of a notification with a context reaches only the recipients whose
// access context grants every field it names, asking the access service once per 10,000
// recipients; a notification without a context does not ask.
func TestContextFiltersTheFanOut(t *testing.T) {
	h := newHarness(t, 12001)
	h.access.setFields("m00002", "projectId:p9")
	h.access.setFields("m00004", "projectId:p9", "region:us")
	h.access.setFields("m00006", "projectId:p1", "projectId:p2")
	h.access.setFields("m00008", "projectId:p9", "region:eu")
	h.access.setFields("m11999", "level:5")
	org := Scope{APIKey: "k1", OrganizationID: "o", OrgGen: "g1"}
	recipients := func(id string) []string {
		t.Helper()
		n, err := h.store.Notification(context.Background(), org, id)
		if err != nil || !n.FannedOut {
			t.Fatalf("%s: %v %v", id, n, err)
		}
		return n.Recipients
	}

	h.add(t, &notificationsv1.AddNotificationsRequest{NotificationId: "p9", Context: accessContext(t, map[string]any{"projectId": "p9"})})
	if got := recipients("p9"); !slices.Equal(got, []string{"m00002", "m00004", "m00008"}) {
		t.Fatalf("p9 reached %v", got)
	}
	if calls, largest := h.access.matchCalls.Load(), h.access.largest.Load(); calls != 2 || largest != contextBatch {
		t.Fatalf("%d MatchContexts calls of at most %d users for 12,000 recipients, want 2 of %d", calls, largest, contextBatch)
	}
	if got := inboxIDs(t, h, "m00002"); got != "p9" {
		t.Fatalf("m00002's inbox %q", got)
	}
	for _, u := range []string{"m00006", "m00007"} {
		if got := inboxIDs(t, h, u); got != "" {
			t.Fatalf("%s's inbox %q", u, got)
		}
	}

	h.add(t, &notificationsv1.AddNotificationsRequest{NotificationId: "p9eu", Context: accessContext(t, map[string]any{"projectId": "p9", "region": "eu"})})
	if got := recipients("p9eu"); !slices.Equal(got, []string{"m00008"}) {
		t.Fatalf("p9eu reached %v", got)
	}
	h.add(t, &notificationsv1.AddNotificationsRequest{NotificationId: "level", NotifyAll: new(false),
		NotifyUsers: []*notificationsv1.NotificationUser{{UserId: "m11999"}, {UserId: "m00002"}}, Context: accessContext(t, map[string]any{"level": 5})})
	if got := recipients("level"); !slices.Equal(got, []string{"m11999"}) {
		t.Fatalf("level reached %v", got)
	}

	before := h.access.matchCalls.Load()
	h.add(t, &notificationsv1.AddNotificationsRequest{NotificationId: "all"})
	if got := recipients("all"); len(got) != 12000 || h.access.matchCalls.Load() != before {
		t.Fatalf("without a context: %d recipients, %d MatchContexts calls", len(got), h.access.matchCalls.Load()-before)
	}
}

// Inbox reads ask the access service once per page, each distinct context once, and show
// what the reader's access context grants when read.
func TestContextFiltersInboxReads(t *testing.T) {
	h := newHarness(t, 5)
	h.access.setFields("m00001", "projectId:p9", "region:eu")
	named := []*notificationsv1.NotificationUser{{UserId: "m00001"}}
	h.add(t, &notificationsv1.AddNotificationsRequest{NotificationId: "plain", NotifyAll: new(false), NotifyUsers: named})
	h.clock.Advance(time.Millisecond)
	for _, id := range []string{"a1", "a2"} {
		h.add(t, &notificationsv1.AddNotificationsRequest{NotificationId: id, NotifyAll: new(false), NotifyUsers: named, Context: accessContext(t, map[string]any{"projectId": "p9"})})
		h.clock.Advance(time.Millisecond)
	}
	h.add(t, &notificationsv1.AddNotificationsRequest{NotificationId: "eu", NotifyAll: new(false), NotifyUsers: named, Context: accessContext(t, map[string]any{"region": "eu"})})

	read := func(what string, want string, get func() []*notificationsv1.Notification) {
		t.Helper()
		before := h.access.matchCalls.Load()
		var got []string
		for _, n := range get() {
			got = append(got, n.GetId())
		}
		if strings.Join(got, " ") != want {
			t.Fatalf("%s: %v, want %q", what, got, want)
		}
		if calls := h.access.matchCalls.Load() - before; calls != 1 {
			t.Fatalf("%s: %d MatchContexts calls, want 1", what, calls)
		}
	}
	page := func() []*notificationsv1.Notification { return h.inbox(t, "m00001") }
	byID := func() []*notificationsv1.Notification {
		resp, err := h.srv.GetNotifications(k1, &notificationsv1.GetNotificationsRequest{OrganizationId: "o", UserId: "m00001", NotificationIds: []string{"a1", "plain", "eu", "a2"}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetData()
	}
	read("the inbox", "eu a2 a1 plain", page)
	read("by id", "a1 plain eu a2", byID)
	h.access.setFields("m00001", "region:eu")
	read("the inbox after the change", "eu plain", page)
	read("by id after the change", "plain eu", byID)
	h.access.setFields("m00001")
	read("the inbox without a context", "plain", page)

	// The organization's listing is not a reader's: it lists them all.
	resp, err := h.srv.GetNotifications(k1, &notificationsv1.GetNotificationsRequest{OrganizationId: "o"})
	if err != nil || len(resp.GetData()) != 4 {
		t.Fatalf("organization listing %v %v", resp, err)
	}
}

// While the access service is of the release before (MatchContexts unimplemented) the fan-out
// of a notification with a context waits (its event is retried), and reads hide notifications
// with a context; neither reaches whom the context excludes.
func TestContextWithAnOlderAccessService(t *testing.T) {
	h := newHarness(t, 3)
	h.access.setFields("m00001", "projectId:p9")
	h.access.noMatch = true
	h.add(t, &notificationsv1.AddNotificationsRequest{NotificationId: "c", Context: accessContext(t, map[string]any{"projectId": "p9"})})
	n, err := h.store.Notification(context.Background(), Scope{APIKey: "k1", OrganizationID: "o", OrgGen: "g1"}, "c")
	if err != nil || n.FannedOut {
		t.Fatalf("fanned out without the filter: %v %v", n, err)
	}
	for _, u := range []string{"m00001", "m00002"} {
		if got := inboxIDs(t, h, u); got != "" {
			t.Fatalf("%s's inbox %q", u, got)
		}
	}
	h.access.noMatch = false
	h.clock.Advance(time.Minute)
	h.box.RunDue(context.Background())
	if got := inboxIDs(t, h, "m00001"); got != "c" {
		t.Fatalf("after the upgrade: %q", got)
	}
	if got := inboxIDs(t, h, "m00002"); got != "" {
		t.Fatalf("m00002 after the upgrade: %q", got)
	}
	h.add(t, &notificationsv1.AddNotificationsRequest{NotificationId: "plain"})
	h.access.noMatch = true // rolled back
	if got := inboxIDs(t, h, "m00001"); got != "plain" {
		t.Fatalf("with an older access service again: %q", got)
	}
}
