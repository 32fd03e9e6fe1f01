package notifications

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	notificationsv1 "github.com/collab/collab/proto/collab/notifications/v1"
)

// addRaw calls Add Notifications for the org o and document d as the harness's caller, without
// running the fan-out.
func (h *harness) addRaw(req *notificationsv1.AddNotificationsRequest) (*notificationsv1.AddNotificationsResponse, error) {
	req.OrganizationId, req.DocumentId = "o", "d"
	req.ActionUser = &notificationsv1.NotificationUser{UserId: "m00000", Name: "Ada"}
	req.DisplayHeadlineMessageTemplate, req.DisplayBodyMessage = "{{actionUser}} wrote", "body"
	return h.srv.AddNotifications(k1, req)
}

func wantExhausted(t *testing.T, what string, err error, msg string) {
	t.Helper()
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), msg) {
		t.Fatalf("%s: %v, want RESOURCE_EXHAUSTED %q", what, err, msg)
	}
}

func (h *harness) published() int {
	h.events.mu.Lock()
	defer h.events.mu.Unlock()
	return len(h.events.published)
}

// The issue's scenario with the default quotas: Add Notifications with notifyAll to an
// organization of 10,000 members, 30 times at once. Twenty pass (200,000 recipients a minute),
// the others are refused with RESOURCE_EXHAUSTED and leave nothing; a minute later more pass.
func TestFanOutQuotaRefusesTheIssueScenario(t *testing.T) {
	h := newHarness(t, scenarioMembers)
	for i := range scenarioRequests {
		_, err := h.addRaw(&notificationsv1.AddNotificationsRequest{NotificationId: fmt.Sprint("n", i)})
		if i < 20 && err != nil {
			t.Fatalf("add %d: %v", i, err)
		}
		if i >= 20 {
			wantExhausted(t, fmt.Sprint("add ", i), err, "The notifications of this workspace may reach at most 200000 recipients a minute, and this one (to 10000) would pass that. Try again after a minute.")
		}
	}
	if n := h.published(); n != 20 {
		t.Fatalf("%d notifications published, want 20", n)
	}
	h.box.RunDue(context.Background())
	if _, err := h.store.Notification(context.Background(), Scope{APIKey: "k1", OrganizationID: "o", OrgGen: "g1"}, "n20"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a refused notification was stored: %v", err)
	}
	h.clock.Advance(time.Minute)
	if _, err := h.addRaw(&notificationsv1.AddNotificationsRequest{NotificationId: "later"}); err != nil {
		t.Fatalf("a minute later: %v", err)
	}
	// An organization larger than a minute's quota cannot be notified whole at all.
	h.users.n = 200_001
	_, err := h.addRaw(&notificationsv1.AddNotificationsRequest{NotificationId: "huge"})
	wantExhausted(t, "to 200,001 members", err, "This notification would reach 200001 recipients; the notifications of a workspace may reach at most 200000 a minute.")
	if got := testutil.ToFloat64(h.srv.metrics.refusals.WithLabelValues(quotaRecipients)); got != 11 {
		t.Errorf("%v refusals counted, want 11", got)
	}
	// A users service of the release before counts by paging its members (a rolling upgrade).
	h.users.n, h.users.noCount = 10_000, true
	h.clock.Advance(time.Minute)
	for i := range 21 {
		_, err := h.addRaw(&notificationsv1.AddNotificationsRequest{NotificationId: fmt.Sprint("old", i)})
		if i < 20 && err != nil {
			t.Fatalf("add %d counted by pages: %v", i, err)
		}
		if i == 20 {
			wantExhausted(t, "counted by pages", err, "this one (to 10000) would pass that")
		}
	}
	h.users.noCount = false
	h.clock.Advance(time.Minute)
	// Named users only count themselves.
	if _, err := h.addRaw(&notificationsv1.AddNotificationsRequest{NotificationId: "named", NotifyAll: new(false),
		NotifyUsers: []*notificationsv1.NotificationUser{{UserId: "m00001"}}}); err != nil {
		t.Fatalf("a mention: %v", err)
	}
}

// A user's inbox holds at most the inbox quota: notifications to everyone count in every
// inbox, mentions in the named users'; deleting a notification makes room; a refused or
// repeated notification counts for nothing.
func TestInboxQuota(t *testing.T) {
	h := newHarness(t, 5)
	h.srv.quotas.InboxSize = 3
	mention := func(id string, users ...string) (*notificationsv1.AddNotificationsResponse, error) {
		req := &notificationsv1.AddNotificationsRequest{NotificationId: id, NotifyAll: new(false)}
		for _, u := range users {
			req.NotifyUsers = append(req.NotifyUsers, &notificationsv1.NotificationUser{UserId: u})
		}
		return h.addRaw(req)
	}
	org := Scope{APIKey: "k1", OrganizationID: "o", OrgGen: "g1"}
	if _, err := h.addRaw(&notificationsv1.AddNotificationsRequest{NotificationId: "all1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := mention("m0", "m00004"); err != nil {
		t.Fatal(err)
	}
	// The same id again counts nothing.
	if resp, err := mention("m0", "m00004"); err != nil || resp.GetData().GetSuccess() {
		t.Fatalf("repeated id: %v %v", resp, err)
	}
	inboxCount(t, h.store, "after the repeat", org, "m00004", 2)
	if _, err := h.addRaw(&notificationsv1.AddNotificationsRequest{NotificationId: "all2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := mention("m1", "m00001", "m00002"); err != nil {
		t.Fatal(err)
	}
	_, err := mention("m2", "m00003", "m00001")
	wantExhausted(t, "m00001's inbox full", err, "The inbox of user m00001 in organization o holds 3 notifications, the most an inbox may hold (3). Delete older notifications (Delete Notifications) to make room.")
	_, err = h.addRaw(&notificationsv1.AddNotificationsRequest{NotificationId: "all3"})
	wantExhausted(t, "everyone's", err, "The inbox of user m00001 in organization o holds 3 notifications")
	// The refused m2 counted nothing for m00003.
	if _, err := mention("m3", "m00003"); err != nil {
		t.Fatalf("m00003 has room: %v", err)
	}
	h.box.RunDue(context.Background()) // the fan-outs
	if _, err := h.srv.DeleteNotifications(k1, &notificationsv1.DeleteNotificationsRequest{OrganizationId: "o", NotificationIds: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := mention("m4", "m00001"); err != nil {
		t.Fatalf("after deleting m1: %v", err)
	}
	_, err = mention("m5", "m00003")
	wantExhausted(t, "m00003 full", err, "The inbox of user m00003 in organization o holds 3 notifications")
	h.box.RunDue(context.Background())
	if _, err := h.srv.DeleteNotifications(k1, &notificationsv1.DeleteNotificationsRequest{OrganizationId: "o", NotificationIds: []string{"all1", "all2"}}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"all4", "all5"} {
		if _, err := h.addRaw(&notificationsv1.AddNotificationsRequest{NotificationId: id}); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	if _, err := mention("m6", "m00002"); err != nil {
		t.Fatalf("m00002: %v", err)
	}
	_, err = h.addRaw(&notificationsv1.AddNotificationsRequest{NotificationId: "all6"})
	wantExhausted(t, "full again", err, "holds 3 notifications")
	h.srv.quotas.InboxSize = 0 // off
	if _, err := h.addRaw(&notificationsv1.AddNotificationsRequest{NotificationId: "all6"}); err != nil {
		t.Fatalf("quota off: %v", err)
	}
}

// Concurrent Add Notifications never pass a quota, on either store: of 24 notifications to an
// organization of 1,000 members at once, exactly 10 pass a quota of 10,000 recipients a minute,
// and exactly 5 an inbox quota of 5; exactly those are published.
func TestConcurrentAddsHoldTheQuotas(t *testing.T) {
	for _, c := range []struct {
		name  string
		store func(t *testing.T) Store
	}{
		{"memory", func(*testing.T) Store { return NewMemoryStore() }},
		{"mongodb", func(t *testing.T) Store { return newMongoStore(t) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, q := range []struct {
				quotas Quotas
				want   int
			}{
				{Quotas{RecipientsPerMinute: 10_000}, 10},
				{Quotas{InboxSize: 5}, 5},
			} {
				h := newHarnessOn(t, 1000, c.store(t))
				h.srv.quotas = q.quotas
				const adds = 24
				errs := make([]error, adds)
				var wg sync.WaitGroup
				for i := range adds {
					wg.Go(func() {
						_, errs[i] = h.addRaw(&notificationsv1.AddNotificationsRequest{NotificationId: fmt.Sprint("n", i)})
					})
				}
				wg.Wait()
				passed := 0
				for _, err := range errs {
					switch {
					case err == nil:
						passed++
					case status.Code(err) != codes.ResourceExhausted:
						t.Fatalf("%+v: %v", q.quotas, err)
					}
				}
				if passed != q.want || h.published() != q.want {
					t.Errorf("%+v: %d passed, %d published, want %d", q.quotas, passed, h.published(), q.want)
				}
				if n, err := h.store.InboxCount(context.Background(), Scope{APIKey: "k1", OrganizationID: "o", OrgGen: "g1"}, "m00001"); err != nil || n != passed {
					t.Errorf("%+v: inbox count %d (%v), want %d", q.quotas, n, err, passed)
				}
			}
		})
	}
}
