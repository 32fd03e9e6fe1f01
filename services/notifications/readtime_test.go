package notifications

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	notificationsv1 "github.com/collab/collab/proto/collab/notifications/v1"

	"github.com/collab/collab/internal/email"
)

// Emails are rendered from the notification when sent, for their recipient, as the fan-out
// used to render them: the queued delivery holds the address and name, not the mail.
func TestEmailIsRenderedWhenSent(t *testing.T) {
	h := newHarness(t, 5)
	data, _ := structpb.NewStruct(map[string]any{"doc": "Plan"})
	h.add(t, &notificationsv1.AddNotificationsRequest{NotificationId: "n", NotifyAll: new(false),
		DisplayHeadlineMessageTemplate: "{{actionUser}} wrote to {{recipientUser}} <b> in {{doc}}", DisplayBodyMessage: "line 1\nline <2>",
		DisplayHeadlineMessageTemplateData: data,
		NotifyUsers:                        []*notificationsv1.NotificationUser{{UserId: "m00001", Name: "Bo"}, {UserId: "m00002", Email: "two@example.com"}}})
	ctx := context.Background()
	queued, err := h.store.Deliveries(ctx, "k1", "n")
	if err != nil || len(queued) != 2 {
		t.Fatalf("queued %d (%v)", len(queued), err)
	}
	for _, d := range queued {
		if d.Text != "" || d.HTML != "" || d.Subject != "" {
			t.Fatalf("delivery %s stores its mail: %+v", d.ID, d)
		}
	}
	h.srv.SendDue(ctx)
	want := map[string]string{
		"m00001@example.com": "Ada wrote to Bo <b> in Plan",            // the caller's name, the directory's address
		"two@example.com":    "Ada wrote to Member m00002 <b> in Plan", // the directory's name, the caller's address
	}
	h.mail.mu.Lock()
	defer h.mail.mu.Unlock()
	if len(h.mail.sent) != 2 {
		t.Fatalf("%d mails sent", len(h.mail.sent))
	}
	for _, m := range h.mail.sent {
		headline, ok := want[m.To]
		if !ok {
			t.Fatalf("mail to %s", m.To)
		}
		text, html := emailBodies(headline, "line 1\nline <2>", "d")
		if m.Subject != headline || m.Body != text || m.HTML != html {
			t.Errorf("mail to %s: %q\n%q\n%q", m.To, m.Subject, m.Body, m.HTML)
		}
	}
}

// A delivery queued with its mail (before issue 20) is sent as it is.
func TestEmailQueuedWithItsMailIsSentAsItIs(t *testing.T) {
	h := newHarness(t, 3)
	ctx := context.Background()
	d := delivery("old", Scope{APIKey: "k1", OrganizationID: "o", OrgGen: "g1"}, "gone", tn)
	if err := h.store.QueueDeliveries(ctx, []*Delivery{d}); err != nil {
		t.Fatal(err)
	}
	h.srv.SendDue(ctx)
	h.mail.mu.Lock()
	defer h.mail.mu.Unlock()
	if len(h.mail.sent) != 1 || h.mail.sent[0] != (email.Message{To: d.To, Subject: d.Subject, Body: d.Text, HTML: d.HTML}) {
		t.Fatalf("sent %+v", h.mail.sent)
	}
}

// An inbox headline is rendered when read: with the reader's current name in the contact list,
// the caller's words where the caller named the reader, the same for a listing and a lookup by
// id, and nothing for a notification whose content the caller's resolver supplies.
func TestHeadlineIsRenderedWhenRead(t *testing.T) {
	h := newHarness(t, 4)
	h.add(t, &notificationsv1.AddNotificationsRequest{NotificationId: "a",
		NotifyUsers: []*notificationsv1.NotificationUser{{UserId: "m00002", Name: "Two"}}})
	h.add(t, &notificationsv1.AddNotificationsRequest{NotificationId: "b", DisplayHeadlineMessageTemplate: "{{actionUser}} posted", DisplayBodyMessage: "x"})
	h.add(t, &notificationsv1.AddNotificationsRequest{NotificationId: "c", IsNotificationResolverUsed: true, DisplayHeadlineMessageTemplate: "-", DisplayBodyMessage: "-"})
	calls := h.users.calls.Load()
	for user, want := range map[string][]string{
		"m00001": {"", "Ada posted", "Ada wrote to Member m00001"},
		"m00002": {"", "Ada posted", "Ada wrote to Two"},
	} {
		got := h.inbox(t, user)
		byID, err := h.srv.GetNotifications(k1, &notificationsv1.GetNotificationsRequest{OrganizationId: "o", UserId: user, NotificationIds: []string{"c", "b", "a"}})
		if err != nil {
			t.Fatal(err)
		}
		for i, list := range [][]*notificationsv1.Notification{got, byID.GetData()} {
			var headlines []string
			for _, n := range list {
				headlines = append(headlines, n.GetDisplayHeadlineMessage())
			}
			if strings.Join(headlines, "|") != strings.Join(want, "|") {
				t.Errorf("%s (%d): %q, want %q", user, i, headlines, want)
			}
		}
	}
	// Each read asked the contact list once, for the one reader.
	if n := h.users.calls.Load() - calls; n != 4 {
		t.Errorf("%d directory calls for 4 reads", n)
	}
}

// A headline template that, filled in, could pass 16 KiB for some reader is refused when added.
func TestHeadlineTooLongFilledInIsRefused(t *testing.T) {
	h := newHarness(t, 3)
	data, _ := structpb.NewStruct(map[string]any{"x": strings.Repeat("y", 8<<10)})
	for _, c := range []struct {
		tpl  string
		data *structpb.Struct
		ok   bool
	}{
		{"{{x}}", data, true},
		{"{{x}} {{ x }}", data, false},
		{"{{x}}{{recipientUser}}", data, true},
		{"{{x}}{{x}}{{recipientUser}}", data, false},
		{strings.Repeat("{{recipientUser}}", 17), nil, false},
		{strings.Repeat("{{recipientUser}}", 16), nil, true},
	} {
		_, err := h.srv.AddNotifications(k1, &notificationsv1.AddNotificationsRequest{OrganizationId: "o", DocumentId: "d",
			ActionUser: &notificationsv1.NotificationUser{UserId: "m00000"}, DisplayHeadlineMessageTemplate: c.tpl,
			DisplayHeadlineMessageTemplateData: c.data, DisplayBodyMessage: "b"})
		if c.ok != (err == nil) || !c.ok && (status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "at most 16 KiB")) {
			t.Errorf("%.40q: %v, want ok %v", c.tpl, err, c.ok)
		}
	}
}

// The headline rendered for a reader when read is the one the fan-out rendered and stored
// before (render with headlineValues), whatever the template and data.
func TestHeadlinerRendersAsTheFanOutDid(t *testing.T) {
	datas := []string{
		"",
		`{"doc":"Plan","n":"7"}`,
		`{"actionUser":{"name":"Ada L.","email":"al@example.com"},"doc":"Plan"}`,
		`{"actionUser.name":"forged","recipientUser.email":"forged","recipientUser":{"name":"forged"},"actionUserX":"x","actionUser.foo":"foo"}`,
		`{"actionUser":{"userId":"a2"}}`,
	}
	templates := []string{
		"", "no variables", "{{actionUser}} wrote to {{recipientUser}} in {{doc}}", "{{ actionUser.name }}|{{actionUser.email}}|{{actionUser.userId}}",
		"{{recipientUser.name}}|{{recipientUser.email}}|{{recipientUser.userId}}", "{{missing}}x{{n}}{{ not closed", "{{actionUserX}}{{actionUser.foo}}{{recipientUser.foo}}",
		"{{recipientUser}}{{recipientUser}}{{doc.x}}",
	}
	readers := []User{{UserID: "b"}, {UserID: "b", Email: "bob@example.com"}, {UserID: "b", Name: "Bob", Email: "bob@example.com"}}
	for _, data := range datas {
		for _, tpl := range templates {
			n := &Notification{ActionUser: User{UserID: "a", Name: "Ada", Email: "ada@example.com"}, HeadlineTemplate: tpl, HeadlineData: data}
			h := newHeadliner(n)
			for _, r := range readers {
				if got, want := h.For(r), render(tpl, headlineValues(n, r)); got != want {
					t.Errorf("%s with %s for %+v: %q, want %q", tpl, data, r, got, want)
				}
			}
		}
	}
}

// FuzzHeadline holds TestHeadlinerRendersAsTheFanOutDid's property for any caller's template
// and data (written as Add Notifications writes it, by encoding/json from an object of string
// fields and an actionUser): the headline a reader gets when read is the one render gives, and
// renderedLen is its length.
func FuzzHeadline(f *testing.F) {
	f.Add("{{actionUser}} wrote to {{recipientUser}} in {{doc}}", "doc", "Plan", "Ada L.", "b", "Bob", "")
	f.Add("{{ recipientUser.email }}{{actionUser.userId}}{{x}}", "actionUser.name", "forged", "", "b", "", "bob@example.com")
	f.Add("{{actionUserX}}{{ not closed {{recipientUser", "actionUserX", "x", "", "", "", "")
	f.Fuzz(func(t *testing.T, tpl, key, value, actorName, readerID, readerName, readerEmail string) {
		data := map[string]any{key: value}
		if actorName != "" {
			data["actionUser"] = map[string]any{"name": actorName}
		}
		b, err := json.Marshal(data)
		if err != nil {
			t.Fatal(err)
		}
		n := &Notification{ActionUser: User{UserID: "a", Name: "Ada", Email: "ada@example.com"}, HeadlineTemplate: tpl, HeadlineData: string(b)}
		r := User{UserID: readerID, Name: readerName, Email: readerEmail}
		want := render(tpl, headlineValues(n, r))
		if got := newHeadliner(n).For(r); got != want {
			t.Fatalf("%q with %s for %+v: %q, want %q", tpl, b, r, got, want)
		}
		if got := renderedLen(tpl, headlineValues(n, r)); got != len(want) {
			t.Fatalf("renderedLen %d, rendered %d", got, len(want))
		}
	})
}
