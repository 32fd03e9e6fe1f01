package notifications

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	eventsv1 "github.com/collab/collab/proto/collab/events/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/racetest"
	"github.com/collab/collab/internal/testkit/mongotest"
)

// The comments service's events in its shape (services/comments/events.go): data.annotation
// as the API shows it, data.comment and data.commentId for comment events (actionUser: the
// comment's author), data.previousComment of an edit.

func member(i int) map[string]any {
	id := fmt.Sprintf("m%05d", i)
	return map[string]any{"userId": id, "name": "Member " + id}
}

func comment(id int, author int, text string, mentions ...int) map[string]any {
	c := map[string]any{"commentId": float64(id), "commentText": text, "from": member(author)}
	var tagged []any
	for _, m := range mentions {
		tagged = append(tagged, map[string]any{"userId": member(m)["userId"], "contact": member(m)})
	}
	if tagged != nil {
		c["taggedUserContacts"] = tagged
	}
	return c
}

// threadOf is thread a1 of document d, started by member author, with its comments.
func threadOf(author int, extra map[string]any, comments ...map[string]any) map[string]any {
	a := map[string]any{"annotationId": "a1", "organizationId": "o", "documentId": "d", "from": member(author),
		"status": map[string]any{"id": "OPEN", "name": "Open", "type": "default"}, "createdAt": 1.0, "lastUpdated": 2.0}
	var cs []any
	for _, c := range comments {
		cs = append(cs, c)
	}
	a["comments"] = cs
	for k, v := range extra {
		a[k] = v
	}
	return a
}

// commentEvent is an event of the comments service: comment events name their comment (of the
// annotation) and its author as actionUser; actor, when not nil, overrides the acting user.
func commentEvent(t testing.TB, id, typ string, a map[string]any, commentID int, extra map[string]any, actor map[string]any) *lifecyclev1.Event {
	t.Helper()
	data := map[string]any{"annotation": a}
	if commentID > 0 {
		for _, c := range a["comments"].([]any) {
			if c.(map[string]any)["commentId"] == float64(commentID) {
				data["comment"] = c
				if actor == nil {
					actor = c.(map[string]any)["from"].(map[string]any)
				}
			}
		}
		data["commentId"] = float64(commentID)
	}
	for k, v := range extra {
		data[k] = v
	}
	st, err := structpb.NewStruct(data)
	if err != nil {
		t.Fatal(err)
	}
	e := &eventsv1.Event{Id: id, Type: typ, ApiKey: "k1", WorkspaceId: "w", OrganizationId: "o", OrganizationGeneration: "g1",
		DocumentId: "d", DocumentGeneration: "dg-d", Timestamp: float64(tn.UnixMilli()), TargetEntityId: "a1", Data: st}
	if actor != nil {
		e.ActionUser = &eventsv1.ActionUser{UserId: actor["userId"].(string), Name: fmt.Sprint(actor["name"])}
	}
	return lifecycle.Domain(e)
}

func (h *harness) handle(t testing.TB, e *lifecyclev1.Event) {
	t.Helper()
	if err := h.srv.HandleEvent(context.Background(), e); err != nil {
		t.Fatal(err)
	}
}

// headlines are the headlines in a user's inbox, sorted.
func (h *harness) headlines(t *testing.T, user string) []string {
	t.Helper()
	var out []string
	for _, n := range h.inbox(t, user) {
		out = append(out, n.GetDisplayHeadlineMessage())
	}
	sort.Strings(out)
	return out
}

// mailed are the addresses mailed so far, sorted, with each mail's subject.
func (h *harness) mailed() []string {
	h.srv.SendDue(context.Background())
	h.mail.mu.Lock()
	defer h.mail.mu.Unlock()
	var out []string
	for _, m := range h.mail.sent {
		out = append(out, m.To+": "+m.Subject)
	}
	sort.Strings(out)
	return out
}

var docScope = Scope{APIKey: "k1", OrganizationID: "o", OrgGen: "g1", DocumentID: "d", DocGen: "dg-d"}

// A reply notifies the users it mentions (a mention: mailed by default) and the thread's
// earlier participants, its author and the authors of the comments before it (a reply: inbox
// only by default), each once, and never its author, also when it mentions themself. A comment
// after it is no earlier participant. The notification holds the comment's text as body and
// the thread and comment in its source data.
func TestCommentAddNotifiesMentionsAndParticipants(t *testing.T) {
	h := newHarness(t, 10)
	a := threadOf(1, nil,
		comment(1, 1, "first"), comment(2, 2, "second"), comment(3, 3, "the reply, for @m4 and @m2 and me", 4, 2, 3), comment(4, 5, "later"))
	h.handle(t, commentEvent(t, "e1", "comment.add", a, 3, nil, nil))

	mention, reply := []string{"Member m00003 mentioned you in a comment"}, []string{"Member m00003 replied to a comment thread"}
	for user, want := range map[string][]string{
		"m00001": reply, "m00002": mention, "m00004": mention, // m00002 took part and is mentioned: the mention
		"m00003": nil, "m00005": nil, "m00006": nil, // the author; a later comment's author; a stranger
	} {
		if got := h.headlines(t, user); !slices.Equal(got, want) {
			t.Errorf("%s's inbox %v, want %v", user, got, want)
		}
	}
	n := h.inbox(t, "m00004")[0]
	src := n.GetNotificationSourceData().AsMap()
	if n.GetNotificationSource() != "comment" || n.GetDisplayBodyMessage() != "the reply, for @m4 and @m2 and me" || n.GetDocumentId() != "d" ||
		src["annotationId"] != "a1" || src["commentId"] != 3.0 || src["reason"] != "mention" || n.GetActionUser().GetUserId() != "m00003" {
		t.Fatalf("mention notification %v", n)
	}
	if got, want := h.mailed(), []string{
		"m00002@example.com: Member m00003 mentioned you in a comment", "m00004@example.com: Member m00003 mentioned you in a comment",
	}; !slices.Equal(got, want) {
		t.Fatalf("mailed %v, want %v", got, want)
	}
}

// A comment's text is the body, cut at 1,000 characters; a comment of HTML only gives its text.
func TestCommentNotificationBody(t *testing.T) {
	h := newHarness(t, 5)
	long := strings.Repeat("é", 1200)
	a := threadOf(1, nil, comment(1, 1, long, 2))
	h.handle(t, commentEvent(t, "long", "comment.add", a, 1, nil, nil))
	body := h.inbox(t, "m00002")[0].GetDisplayBodyMessage()
	if body != strings.Repeat("é", 999)+"…" {
		t.Fatalf("body of %d characters: %q...", len([]rune(body)), body[:10])
	}
	html := comment(2, 1, "", 3)
	html["commentHtml"] = `<p>Look <b>here</b>,&nbsp;<a href="https://example.com">link</a></p><p>next</p>`
	a = threadOf(1, nil, comment(1, 1, "x"), html)
	h.handle(t, commentEvent(t, "html", "comment.add", a, 2, nil, nil))
	if body := h.inbox(t, "m00003")[0].GetDisplayBodyMessage(); body != "Look here,\u00a0link\nnext" {
		t.Fatalf("body of HTML %q", body)
	}
}

// Each recipient's config for the document decides, as for Add Notifications: NONE takes
// nothing, MINE takes mentions and assignments but not a reply to a thread they took part in,
// ALL takes everything (mailed too with email ALL).
func TestCommentNotificationsFollowConfigs(t *testing.T) {
	h := newHarness(t, 10)
	ctx := context.Background()
	set := func(cfg Config, users ...string) {
		if err := h.store.SetConfigs(ctx, []Scope{docScope}, users, cfg); err != nil {
			t.Fatal(err)
		}
	}
	set(Config{Inbox: None, Email: None, Slack: None}, "m00002", "m00006")
	set(Config{Inbox: Mine, Email: Mine, Slack: None}, "m00003", "m00007")
	set(Config{Inbox: All, Email: All, Slack: None}, "m00004")
	// Participants m00002 (NONE), m00003 (MINE), m00004 (ALL); mentioned m00006 (NONE), m00007 (MINE).
	a := threadOf(2, nil, comment(1, 3, "one"), comment(2, 4, "two"), comment(3, 5, "reply", 6, 7))
	h.handle(t, commentEvent(t, "e", "comment.add", a, 3, nil, nil))
	for user, want := range map[string]int{"m00002": 0, "m00003": 0, "m00004": 1, "m00006": 0, "m00007": 1} {
		if got := len(h.inbox(t, user)); got != want {
			t.Errorf("%s has %d notifications, want %d", user, got, want)
		}
	}
	if got, want := h.mailed(), []string{
		"m00004@example.com: Member m00005 replied to a comment thread", "m00007@example.com: Member m00005 mentioned you in a comment",
	}; !slices.Equal(got, want) {
		t.Fatalf("mailed %v, want %v", got, want)
	}
	// An assignment counts for MINE.
	h.handle(t, commentEvent(t, "assign", "comment_annotation.assign", threadOf(2, map[string]any{"assignedTo": member(3)}, comment(1, 3, "one")), 0, nil, nil))
	if got := h.headlines(t, "m00003"); !slices.Equal(got, []string{"A comment thread was assigned to you"}) {
		t.Fatalf("MINE assignee's inbox %v", got)
	}
}

// A new assignee is notified: by Update (comment_annotation.assign) and by a thread added with
// one, never when they assigned themselves; unassigning notifies no one. A new thread's
// mentions notify too, each comment's by its author.
func TestAssigneesAndNewThreads(t *testing.T) {
	h := newHarness(t, 10)
	first := comment(1, 1, "have a look", 3)
	h.handle(t, commentEvent(t, "new", "comment_annotation.add", threadOf(1, map[string]any{"assignedTo": member(2)}, first, comment(2, 4, "me too", 1, 4)), 0, nil, nil))
	for user, want := range map[string][]string{
		"m00001": {"Member m00004 mentioned you in a comment"},
		"m00002": {"Member m00001 assigned you a comment thread"}, // a backend's add: the author assigned
		"m00003": {"Member m00001 mentioned you in a comment"},
		"m00004": nil,
	} {
		if got := h.headlines(t, user); !slices.Equal(got, want) {
			t.Errorf("%s's inbox %v, want %v", user, got, want)
		}
	}
	if n := h.inbox(t, "m00002")[0]; n.GetDisplayBodyMessage() != "have a look" || n.GetNotificationSourceData().AsMap()["reason"] != "assign" {
		t.Fatalf("assignment %v", n)
	}
	// Update's assignment: without an acting user (a backend's call), and by the assignee themself.
	h.handle(t, commentEvent(t, "to5", "comment_annotation.assign", threadOf(1, map[string]any{"assignedTo": member(5)}, first), 0, nil, nil))
	h.handle(t, commentEvent(t, "self", "comment_annotation.assign", threadOf(1, map[string]any{"assignedTo": member(6)}, first), 0, nil, member(6)))
	h.handle(t, commentEvent(t, "none", "comment_annotation.assign", threadOf(1, nil, first), 0, nil, nil))
	if got := h.headlines(t, "m00005"); !slices.Equal(got, []string{"A comment thread was assigned to you"}) {
		t.Fatalf("assignee's inbox %v", got)
	}
	if got := h.headlines(t, "m00006"); got != nil {
		t.Fatalf("self-assigned inbox %v", got)
	}
}

// An edit notifies only the users it mentions that the comment did not mention before.
func TestCommentUpdateNotifiesNewMentionsOnly(t *testing.T) {
	h := newHarness(t, 10)
	before := comment(1, 1, "hi @m2", 2)
	after := comment(1, 1, "hi @m2 @m3 @m1", 2, 3, 1)
	h.handle(t, commentEvent(t, "edit", "comment.update", threadOf(1, nil, after), 1, map[string]any{"previousComment": before}, nil))
	if got := h.headlines(t, "m00003"); !slices.Equal(got, []string{"Member m00001 mentioned you in a comment"}) {
		t.Fatalf("new mention's inbox %v", got)
	}
	if got := h.headlines(t, "m00002"); got != nil {
		t.Fatalf("an earlier mention was notified again: %v", got)
	}
	// Without the comment as it was (a product's own event), nothing: the new mentions are unknown.
	h.handle(t, commentEvent(t, "edit-blind", "comment.update", threadOf(1, nil, after), 1, nil, nil))
	if got := h.headlines(t, "m00002"); got != nil {
		t.Fatalf("an edit without the comment before notified %v", got)
	}
}

// A thread's context.access limits its notifications as a notification's context does.
func TestCommentNotificationsFollowTheThreadsContext(t *testing.T) {
	h := newHarness(t, 10)
	h.access.setFields("m00002", "team:a")
	a := threadOf(1, map[string]any{"context": map[string]any{"access": map[string]any{"team": "a"}, "page": "p1"}}, comment(1, 1, "x", 2, 3))
	h.handle(t, commentEvent(t, "e", "comment.add", a, 1, nil, nil))
	if len(h.inbox(t, "m00002")) != 1 || len(h.inbox(t, "m00003")) != 0 {
		t.Fatalf("inboxes %d %d, want 1 0", len(h.inbox(t, "m00002")), len(h.inbox(t, "m00003")))
	}
	// A context that Add Notifications would refuse is refused for good: no notification.
	bad := threadOf(1, map[string]any{"context": map[string]any{"access": map[string]any{"team": []any{"a"}}}}, comment(1, 1, "x", 4))
	if err := h.srv.HandleEvent(context.Background(), commentEvent(t, "bad", "comment.add", bad, 1, nil, nil)); !lifecycle.Permanent(err) {
		t.Fatalf("a bad context: %v, want a refusal for good", err)
	}
	if len(h.inbox(t, "m00004")) != 0 {
		t.Fatal("notified under a bad context")
	}
}

// Events of these types that are not the comments service's (a product's own comment.add
// through Publish Event, without the annotation) notify no one.
func TestOtherCommentEventsNotifyNoOne(t *testing.T) {
	h := newHarness(t, 5)
	for i, data := range []map[string]any{
		{"commentText": "Hello", "taggedUserContacts": []any{map[string]any{"userId": "m00002"}}},
		{"annotation": "a1", "comment": map[string]any{"taggedUserContacts": []any{map[string]any{"userId": "m00002"}}}},
		{"annotation": map[string]any{"annotationId": "a1"}, "comment": "x"},
	} {
		st, _ := structpb.NewStruct(data)
		e := lifecycle.Domain(&eventsv1.Event{Id: fmt.Sprint("p", i), Type: "comment.add", ApiKey: "k1", WorkspaceId: "w", OrganizationId: "o", OrganizationGeneration: "g1",
			DocumentId: "d", DocumentGeneration: "dg-d", Data: st, ActionUser: &eventsv1.ActionUser{UserId: "m00001"}})
		h.handle(t, e)
	}
	if got := h.inbox(t, "m00002"); len(got) != 0 {
		t.Fatalf("notified by a product's event: %v", got)
	}
}

// The outbox delivers at least once: the same event again, or from several replicas at once,
// makes one notification per recipient, one mail and one count in the inbox quota, on the
// memory store and on the embedded MongoDB-wire server.
func TestCommentRedeliveryAddsNothing(t *testing.T) {
	for name, store := range map[string]func(t *testing.T) Store{
		"memory": func(*testing.T) Store { return NewMemoryStore() },
		"mongo": func(t *testing.T) Store {
			s, err := NewMongoStore(context.Background(), mongotest.Connect(t).Database("notifications"))
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarnessOn(t, 5, store(t))
			a := threadOf(1, nil, comment(1, 1, "one"), comment(2, 3, "reply", 2))
			e := commentEvent(t, "e", "comment.add", a, 2, nil, nil)
			// Several replicas at once, first: all may count it before one adds it.
			racetest.N(6, func(int) {
				if err := h.srv.HandleEvent(context.Background(), e); err != nil {
					t.Error(err)
				}
			})
			h.handle(t, e)
			org := Scope{APIKey: "k1", OrganizationID: "o", OrgGen: "g1"}
			for user, want := range map[string]string{"m00001": "replied", "m00002": "mentioned"} {
				got := h.inbox(t, user)
				if len(got) != 1 || !strings.Contains(got[0].GetDisplayHeadlineMessage(), want) {
					t.Errorf("%s's inbox %v", user, got)
				}
				if n, err := h.store.InboxCount(context.Background(), org, user); err != nil || n != 1 {
					t.Errorf("%s's inbox counts %d notifications (%v), want 1", user, n, err)
				}
			}
			if got := h.mailed(); len(got) != 1 {
				t.Fatalf("mailed %v, want one mail", got)
			}
			// The incidental reply is still not MINE after being read back from the store.
			n, err := h.store.Notification(context.Background(), org, h.inbox(t, "m00001")[0].GetId())
			if err != nil || !n.Incidental {
				t.Fatalf("stored reply %+v %v", n, err)
			}
		})
	}
}

// The quotas hold for comment notifications: a recipient whose inbox is full is left out (the
// others still get theirs), and a workspace past its recipients of the minute is refused for
// now (the outbox retries) and notified once the minute has passed.
func TestCommentNotificationsRespectQuotas(t *testing.T) {
	h := newHarness(t, 10)
	h.srv.quotas = Quotas{RecipientsPerMinute: 3, InboxSize: 1}
	h.handle(t, commentEvent(t, "first", "comment.add", threadOf(1, nil, comment(1, 1, "x", 2)), 1, nil, nil))
	h.handle(t, commentEvent(t, "second", "comment.add", threadOf(1, nil, comment(1, 1, "y", 2, 3)), 1, nil, nil))
	if len(h.inbox(t, "m00002")) != 1 || len(h.inbox(t, "m00003")) != 1 {
		t.Fatalf("inboxes %d %d, want 1 1 (m00002's was full)", len(h.inbox(t, "m00002")), len(h.inbox(t, "m00003")))
	}
	// Three recipients in this minute already; two more pass the minute's three.
	e := commentEvent(t, "third", "comment.add", threadOf(1, nil, comment(1, 1, "z", 4, 5)), 1, nil, nil)
	if err := h.srv.HandleEvent(context.Background(), e); status.Code(err) != codes.ResourceExhausted || lifecycle.Permanent(err) {
		t.Fatalf("past the minute's recipients: %v, want RESOURCE_EXHAUSTED, retried", err)
	}
	if len(h.inbox(t, "m00004")) != 0 {
		t.Fatal("notified past the quota")
	}
	h.clock.Advance(time.Minute)
	h.handle(t, e)
	if len(h.inbox(t, "m00004")) != 1 || len(h.inbox(t, "m00005")) != 1 {
		t.Fatal("not notified in the next minute")
	}
}
