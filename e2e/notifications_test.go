package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	notificationsv1 "github.com/collab/collab/proto/collab/notifications/v1"

	"github.com/collab/collab/collabd"
	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/testkit/smtptest"
)

// mailSystem is a process that sends its mail through a real SMTP server (started here), and
// posts Slack messages to a local receiver.
type mailSystem struct {
	*system
	smtp  *smtptest.Server
	slack *slackReceiver
}

// slackReceiver is a Slack incoming webhook: it records the JSON posted to it.
type slackReceiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	got  []map[string]any
	fail int // answer the next posts 500
}

func newSlackReceiver(t *testing.T) *slackReceiver {
	r := &slackReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.fail > 0 {
			r.fail--
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		var msg map[string]any
		if req.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &msg) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.got = append(r.got, msg)
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *slackReceiver) posts() []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func newMailSystem(t *testing.T, args ...string) *mailSystem {
	t.Helper()
	m := &mailSystem{smtp: smtptest.Start(t), slack: newSlackReceiver(t)}
	cfg := config(t, append([]string{"--smtp-addr=" + m.smtp.Addr(), "--smtp-from=Collab <collab@example.com>"}, args...)...)
	// Not start(): its recording sender would stand in for the SMTP server.
	s := &system{t: t}
	p, err := collabd.Start(context.Background(), cfg, collabd.Deps{LogOutput: io.Discard})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	s.proc, s.base = p, "http://"+p.HTTPAddr
	m.system = s
	return m
}

// eventually polls until check passes or 10 s have gone by.
func eventually(t *testing.T, what string, check func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !check() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *system) inbox(t *testing.T, k map[string]string, org, user string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, n := range s.call("/v2/notifications/get", k, map[string]any{"organizationId": org, "userId": user}).ok(t)["data"].([]any) {
		out = append(out, n.(map[string]any))
	}
	return out
}

func person(id, name string) map[string]any {
	return map[string]any{"userId": id, "name": name, "email": id + "@example.com"}
}

// A notification reaches the inboxes, mailboxes and Slack channel its recipients' configs ask
// for, once, with its headline filled in for each.
func TestNotificationsAreDeliveredByInboxEmailAndSlack(t *testing.T) {
	t.Parallel()
	s := newMailSystem(t)
	k, w := s.devKey(), s.devWorkspace()
	s.call("/v2/workspace/settings/update", w, map[string]any{"slackWebhookUrl": s.slack.srv.URL + "/services/T0/B0/secret"}).data(t, "")
	s.call("/v2/users/add", k, map[string]any{"organizationId": "o", "createOrganization": true, "documentId": "d", "createDocument": true,
		"users": []any{person("ada", "Ada"), person("bob", "Bob"), person("cy", "Cy"), person("dee", "Dee")}}).data(t, "")

	// Defaults: inbox ALL, email MINE.
	cfg := s.call("/v1/notifications/config/get", k, map[string]any{"organizationId": "o", "documentIds": []string{"d"}, "userId": "cy"}).data(t, "User config fetched successfully.")
	_ = cfg
	got := s.call("/v1/notifications/config/get", k, map[string]any{"organizationId": "o", "documentIds": []string{"d"}, "userId": "cy"}).ok(t)["data"].([]any)
	if fmt.Sprint(got) != fmt.Sprintf("[map[config:map[email:MINE inbox:ALL] metadata:map[apiKey:%s documentId:d organizationId:o userId:cy]]]", s.proc.Dev.APIKey) {
		t.Fatalf("default config %v", got)
	}
	set := s.call("/v2/notifications/config/set", k, map[string]any{"organizationId": "o", "documentIds": []string{"d"}, "userIds": []string{"cy"},
		"config": map[string]any{"inbox": "ALL", "email": "ALL", "slack": "ALL"}}).data(t, "User config set successfully.")
	if fmt.Sprint(set["cy"]) != "map[documentId:d message:User config set successfully. success:true userId:cy]" {
		t.Fatalf("set config %v", set)
	}
	s.call("/v2/notifications/config/set", k, map[string]any{"organizationId": "o", "documentIds": []string{"d"}, "userIds": []string{"dee"},
		"config": map[string]any{"inbox": "MINE", "email": "NONE", "slack": "NONE"}}).data(t, "")

	add := map[string]any{"organizationId": "o", "documentId": "d", "notificationId": "n1", "actionUser": person("ada", "Ada"),
		"displayHeadlineMessageTemplate":     "{{actionUser}} mentioned {{recipientUser}} in {{docName}}{{unknown}}",
		"displayHeadlineMessageTemplateData": map[string]any{"docName": "Plan"}, "displayBodyMessage": "Have a look <b>now</b>",
		"notifyUsers": []any{person("bob", "Bob")}, "notificationSource": "comment", "notificationSourceData": map[string]any{"commentId": "c1"}}
	res := s.call("/v2/notifications/add", k, add).data(t, "Notification added successfully.")
	if fmt.Sprint(res) != "map[message:Notification added successfully. notificationId:n1 success:true]" {
		t.Fatalf("add %v", res)
	}
	again := s.call("/v2/notifications/add", k, add).data(t, "")
	if again["success"] != false || again["message"] != "A notification with this id already exists." {
		t.Fatalf("repeat %v", again)
	}

	// Inboxes: bob (named), cy (ALL); not dee (MINE, not named), not ada (she acted).
	eventually(t, "inbox entries", func() bool { return len(s.inbox(t, k, "o", "cy")) == 1 && len(s.inbox(t, k, "o", "bob")) == 1 })
	if n := s.inbox(t, k, "o", "dee"); len(n) != 0 {
		t.Fatalf("dee's inbox %v", n)
	}
	if n := s.inbox(t, k, "o", "ada"); len(n) != 0 {
		t.Fatalf("the actor's inbox %v", n)
	}
	bob := s.inbox(t, k, "o", "bob")[0]
	if bob["displayHeadlineMessage"] != "Ada mentioned Bob in Plan" || bob["read"] != false || bob["displayBodyMessage"] != "Have a look <b>now</b>" ||
		bob["notificationSource"] != "comment" || fmt.Sprint(bob["notificationSourceData"]) != "map[commentId:c1]" || !equalStrings(bob["notifyUserIds"], "bob", "cy", "dee") {
		t.Fatalf("bob's entry %v", bob)
	}

	// Email: bob (MINE, named) and cy (ALL), one each, text and HTML.
	s.smtp.WaitFor(t, 2, 10*time.Second)
	time.Sleep(200 * time.Millisecond) // nothing more may come
	mails := s.smtp.Messages()
	if len(mails) != 2 {
		t.Fatalf("%d mails, want 2", len(mails))
	}
	byTo := map[string]smtptest.Mail{}
	for _, m := range mails {
		p := m.Parsed(t)
		byTo[p.To] = p
	}
	b := byTo["bob@example.com"]
	if b.Subject != "Ada mentioned Bob in Plan" || !strings.Contains(b.Text, "Have a look <b>now</b>") || !strings.Contains(b.HTML, "Have a look &lt;b&gt;now&lt;/b&gt;") {
		t.Fatalf("bob's mail: %+v", b)
	}
	if c := byTo["cy@example.com"]; c.Subject != "Ada mentioned Cy in Plan" {
		t.Fatalf("cy's mail: %+v", c)
	}

	// Slack: one post, for cy.
	eventually(t, "slack post", func() bool { return len(s.slack.posts()) == 1 })
	post := fmt.Sprint(s.slack.posts()[0])
	if !strings.Contains(post, "Have a look &lt;b&gt;now&lt;/b&gt;") || !strings.Contains(post, "_For Cy_") {
		t.Fatalf("slack post %s", post)
	}

	// Read status, then the document's listing shows who read it.
	upd := s.call("/v2/notifications/update", k, map[string]any{"organizationId": "o", "notifications": []any{
		map[string]any{"id": "n1", "readByUserIds": []string{"bob"}}, map[string]any{"id": "nope", "readByUserIds": []string{"bob"}}}}).data(t, "Notifications updated successfully.")
	if fmt.Sprint(upd) != "map[n1:map[message:Notification updated. success:true] nope:map[message:Notification does not exist. success:false]]" {
		t.Fatalf("update %v", upd)
	}
	if s.inbox(t, k, "o", "bob")[0]["read"] != true || s.inbox(t, k, "o", "cy")[0]["read"] != false {
		t.Fatal("read status")
	}
	doc := s.call("/v2/notifications/get", k, map[string]any{"organizationId": "o", "documentId": "d"}).ok(t)["data"].([]any)
	if len(doc) != 1 || !equalStrings(doc[0].(map[string]any)["readByUserIds"], "bob") {
		t.Fatalf("document listing %v", doc)
	}

	// Deleting removes it from every inbox.
	del := s.call("/v2/notifications/delete", k, map[string]any{"organizationId": "o", "notificationIds": []string{"n1", "n1x"}}).data(t, "Notifications deleted successfully.")
	if fmt.Sprint(del) != "map[n1:map[message:Notification deleted. success:true] n1x:map[message:Notification does not exist. success:false]]" {
		t.Fatalf("delete %v", del)
	}
	if n := s.inbox(t, k, "o", "bob"); len(n) != 0 {
		t.Fatalf("inbox after delete %v", n)
	}
}

// verifyUserPermissions leaves out who cannot read the document; the resolver keeps ids only and
// sends no mail; an organization's deletion takes its notifications.
func TestNotificationPermissionsResolverAndLifecycle(t *testing.T) {
	t.Parallel()
	s := newMailSystem(t)
	k := s.devKey()
	s.call("/v2/users/add", k, map[string]any{"organizationId": "o", "createOrganization": true, "documentId": "secret", "createDocument": true,
		"users": []any{person("ada", "Ada"), person("bob", "Bob")}}).data(t, "")
	s.call("/v2/users/add", k, map[string]any{"organizationId": "o", "users": []any{person("eve", "Eve")}}).data(t, "")
	s.call("/v1/organizations/documents/access/update", k, map[string]any{"organizationId": "o", "documentIds": []string{"secret"}, "accessType": "restricted"}).data(t, "")
	s.call("/v2/notifications/add", k, map[string]any{"organizationId": "o", "documentId": "secret", "notificationId": "v1", "actionUser": person("ada", "Ada"),
		"verifyUserPermissions": true, "displayHeadlineMessageTemplate": "news", "displayBodyMessage": "b", "notifyUsers": []any{}}).data(t, "")
	eventually(t, "bob's entry", func() bool { return len(s.inbox(t, k, "o", "bob")) == 1 })
	if n := s.inbox(t, k, "o", "eve"); len(n) != 0 {
		t.Fatalf("eve cannot read the document but got %v", n)
	}

	s.call("/v2/notifications/add", k, map[string]any{"organizationId": "o", "documentId": "secret", "notificationId": "r1", "actionUser": person("ada", "Ada"),
		"isNotificationResolverUsed": true, "notifyUsers": []any{person("bob", "Bob")}, "notifyAll": false}).data(t, "")
	eventually(t, "the resolver's entry", func() bool { return len(s.inbox(t, k, "o", "bob")) == 2 })
	r := s.call("/v2/notifications/get", k, map[string]any{"organizationId": "o", "notificationIds": []string{"r1"}}).ok(t)["data"].([]any)[0].(map[string]any)
	if r["isNotificationResolverUsed"] != true || fmt.Sprint(r["actionUser"]) != "map[email: name: userId:ada]" || r["displayBodyMessage"] != "" ||
		r["displayHeadlineMessageTemplate"] != "" || r["displayHeadlineMessageTemplateData"] != nil {
		t.Fatalf("resolver record keeps personal data: %v", r)
	}
	// Bob's default email is MINE and he was named: yet no mail, the record holds no address.
	time.Sleep(300 * time.Millisecond)
	for _, m := range s.smtp.Messages() {
		if strings.Contains(string(m.Data), "r1") || m.Parsed(t).Subject == "" {
			t.Fatalf("a resolver notification was mailed: %s", m.Data)
		}
	}

	// Made again, the organization is another generation: nothing of the old one shows (the
	// deletion's removal of the records themselves is held by the service's unit tests).
	s.call("/v2/organizations/delete", k, map[string]any{"organizationIds": []string{"o"}}).data(t, "")
	s.call("/v2/organizations/add", k, map[string]any{"organizations": []any{map[string]any{"organizationId": "o", "organizationName": "O"}}}).data(t, "")
	if n := s.inbox(t, k, "o", "bob"); len(n) != 0 {
		t.Fatalf("notifications outlived their organization: %v", n)
	}
}

func TestNotificationsBadInput(t *testing.T) { onBothStores(t, testNotificationsBadInput) }

func testNotificationsBadInput(t *testing.T, s *system) {
	k := s.devKey()
	s.addOrganization(t, k, "o")
	bad := func(path string, data map[string]any, msg string) {
		t.Helper()
		s.call(path, k, data).fails(t, 400, "INVALID_ARGUMENT", msg)
	}
	get := "/v1/notifications/config/get"
	bad(get, map[string]any{"documentIds": []string{"d"}, "userId": "u"}, "organizationId is required.")
	bad(get, map[string]any{"organizationId": "o", "userId": "u"}, "documentIds must contain at least one id.")
	bad(get, map[string]any{"organizationId": "o", "documentIds": make([]string, 31), "userId": "u"}, "documentIds must contain at most 30 ids.")
	bad(get, map[string]any{"organizationId": "o", "documentIds": []string{"d"}}, "userId is required.")
	set := "/v2/notifications/config/set"
	okSet := func() map[string]any {
		return map[string]any{"organizationId": "o", "documentIds": []string{"d"}, "userIds": []string{"u"}, "config": map[string]any{"inbox": "ALL", "email": "MINE", "slack": "NONE"}}
	}
	for field, msg := range map[string]string{"inbox": "config.inbox must be one of ALL, MINE, NONE.", "email": "config.email must be one of ALL, MINE, NONE.", "slack": "config.slack must be one of ALL, MINE, NONE."} {
		d := okSet()
		d["config"].(map[string]any)[field] = "SOME"
		bad(set, d, msg)
		delete(d["config"].(map[string]any), field)
		bad(set, d, "config."+field+" is required.")
	}
	d := okSet()
	delete(d, "config")
	bad(set, d, "config is required.")
	d = okSet()
	d["userIds"] = []string{}
	bad(set, d, "userIds must contain at least one id.")
	// A document the documents service does not know has no settings to read or keep.
	s.call(get, k, map[string]any{"organizationId": "o", "documentIds": []string{"nodoc"}, "userId": "u"}).fails(t, 404, "NOT_FOUND", "Document does not exist.")
	d = okSet()
	d["documentIds"] = []string{"nodoc"}
	s.call(set, k, d).fails(t, 404, "NOT_FOUND", "Document does not exist.")

	add := "/v2/notifications/add"
	okAdd := func() map[string]any {
		return map[string]any{"organizationId": "o", "documentId": "d", "createDocument": true, "actionUser": person("a", "A"),
			"displayHeadlineMessageTemplate": "h", "displayBodyMessage": "b", "notifyUsers": []any{person("b", "B")}}
	}
	for _, c := range []struct {
		mod func(map[string]any)
		msg string
	}{
		{func(d map[string]any) { delete(d, "documentId") }, "documentId is required."},
		{func(d map[string]any) { delete(d, "actionUser") }, "actionUser is required."},
		{func(d map[string]any) { d["actionUser"] = map[string]any{"name": "A"} }, "actionUser.userId is required."},
		{func(d map[string]any) { d["notificationId"] = "has space" }, "notificationId may contain only letters, digits, _ and -."},
		{func(d map[string]any) { delete(d, "displayHeadlineMessageTemplate") }, "displayHeadlineMessageTemplate is required unless isNotificationResolverUsed is true."},
		{func(d map[string]any) { delete(d, "displayBodyMessage") }, "displayBodyMessage is required unless isNotificationResolverUsed is true."},
		{func(d map[string]any) { d["notifyAll"] = false; d["notifyUsers"] = []any{} }, "notifyUsers must name at least one user when notifyAll is false."},
		{func(d map[string]any) { d["notifyUsers"] = []any{person("b", "B"), person("b", "B")} }, "notifyUsers[1].userId repeats notifyUsers[0].userId: each user may appear once."},
		{func(d map[string]any) { d["notifyUsers"] = []any{map[string]any{"userId": "b", "email": "nope"}} }, "notifyUsers[0].email must be a valid email address."},
		{func(d map[string]any) { d["notificationSource"] = "email" }, "notificationSource must be one of custom, comment, huddle, crdt."},
		{func(d map[string]any) { d["displayHeadlineMessageTemplateData"] = map[string]any{"n": 1} }, "displayHeadlineMessageTemplateData.n must be a string."},
		{func(d map[string]any) { d["context"] = map[string]any{} }, "context.access is required inside context and must name at least one field."},
		{func(d map[string]any) { d["context"] = map[string]any{"access": map[string]any{"team": true}} }, "context.access.team must be a string or a number."},
	} {
		d := okAdd()
		c.mod(d)
		bad(add, d, c.msg)
	}
	s.call(add, k, map[string]any{"organizationId": "nope", "documentId": "d", "actionUser": person("a", "A"), "displayHeadlineMessageTemplate": "h", "displayBodyMessage": "b",
		"notifyUsers": []any{}}).fails(t, 404, "NOT_FOUND", "")

	list := "/v2/notifications/get"
	bad(list, map[string]any{"organizationId": "o", "documentId": "d", "userId": "u"}, "Provide documentId or userId, not both.")
	bad(list, map[string]any{"organizationId": "o", "notificationIds": make([]string, 31)}, "notificationIds must contain at most 30 ids.")
	bad(list, map[string]any{"organizationId": "o", "pageSize": 0}, "pageSize must be between 1 and 1000.")
	bad(list, map[string]any{"organizationId": "o", "order": "up"}, "order must be asc or desc.")
	bad(list, map[string]any{"organizationId": "o", "pageToken": "forged"}, "pageToken is invalid.")
	bad("/v2/notifications/update", map[string]any{"organizationId": "o", "notifications": []any{map[string]any{"id": "n"}}}, "notifications[0] must name users in readByUserIds or unreadByUserIds.")
	bad("/v2/notifications/update", map[string]any{"organizationId": "o", "notifications": []any{map[string]any{"id": "n", "readByUserIds": []string{"u"}, "unreadByUserIds": []string{"u"}}}}, "notifications[0] names user u as both read and unread.")
	bad("/v2/notifications/delete", map[string]any{"organizationId": "o"}, "notificationIds must contain at least one id.")

	// Nothing was written: no notification, no config.
	if n := s.call(list, k, map[string]any{"organizationId": "o"}).ok(t)["data"].([]any); len(n) != 0 {
		t.Fatalf("refused requests wrote %v", n)
	}
	// With the switch off, the config operations say so; the notifications themselves, which
	// the spec does not put behind the switch, go on.
	s.call("/v2/workspace/settings/update", s.devWorkspace(), map[string]any{"notifications": false}).data(t, "")
	s.call("/v1/notifications/config/get", k, map[string]any{"organizationId": "o", "documentIds": []string{"d"}, "userId": "u"}).fails(t, 400, "FAILED_PRECONDITION",
		"Notifications are not enabled for this workspace. Turn them on with Update Workspace Settings (notifications).")
	s.call("/v2/notifications/config/set", k, map[string]any{"organizationId": "o", "documentIds": []string{"d"}, "userIds": []string{"u"},
		"config": map[string]any{"inbox": "ALL", "email": "ALL", "slack": "ALL"}}).fails(t, 400, "FAILED_PRECONDITION", "")
	s.call(add, k, okAdd()).data(t, "")
	s.call(list, k, map[string]any{"organizationId": "o"}).data(t, "")
}

// The same operations over gRPC, with the key in metadata, as internal callers use them.
func TestNotificationsOverGRPC(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	s.call("/v2/users/add", s.devKey(), map[string]any{"organizationId": "o", "createOrganization": true, "users": []any{person("ada", "Ada"), person("bob", "Bob")}}).data(t, "")
	conn, err := grpc.NewClient(s.proc.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := metadata.AppendToOutgoingContext(context.Background(), authn.HeaderAPIKey, s.proc.Dev.APIKey, authn.HeaderAuthToken, s.proc.Dev.AuthToken)
	c := notificationsv1.NewNotificationsServiceClient(conn)
	add, err := c.AddNotifications(ctx, &notificationsv1.AddNotificationsRequest{OrganizationId: "o", DocumentId: "d", CreateDocument: true,
		ActionUser: &notificationsv1.NotificationUser{UserId: "ada"}, DisplayHeadlineMessageTemplate: "hi {{recipientUser}}", DisplayBodyMessage: "b"})
	if err != nil || !add.GetData().GetSuccess() || !strings.HasPrefix(add.GetData().GetNotificationId(), "ntf_") {
		t.Fatalf("add over gRPC: %v %v", add, err)
	}
	eventually(t, "bob's entry over gRPC", func() bool {
		got, err := c.GetNotifications(ctx, &notificationsv1.GetNotificationsRequest{OrganizationId: "o", UserId: "bob"})
		return err == nil && len(got.GetData()) == 1 && got.GetData()[0].GetDisplayHeadlineMessage() == "hi Bob"
	})
	if _, err := c.GetNotifications(metadata.AppendToOutgoingContext(context.Background(), authn.HeaderAPIKey, "nope", authn.HeaderAuthToken, "x"),
		&notificationsv1.GetNotificationsRequest{OrganizationId: "o"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a wrong key over gRPC: %v", err)
	}
}

// The fan-out quotas over HTTP (issue 20): past a workspace's recipients of the minute, or an
// inbox's size, Add Notifications answers 429 RESOURCE_EXHAUSTED with the reason, and nothing of
// the notification is stored; on both stores.
func TestNotificationQuotas(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
	}{{"memory", nil}, {"ferretdb", []string{"--data-dir=" + t.TempDir()}}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newSystem(t, append([]string{"--notifications-recipients-per-minute=5", "--notifications-inbox-limit=2"}, c.args...)...)
			k := s.devKey()
			s.call("/v2/users/add", k, map[string]any{"organizationId": "o", "createOrganization": true, "documentId": "d", "createDocument": true,
				"users": []any{person("ada", "Ada"), person("bob", "Bob"), person("cy", "Cy")}}).data(t, "")
			add := func(id string, named ...string) response {
				req := map[string]any{"organizationId": "o", "documentId": "d", "notificationId": id, "actionUser": person("ada", "Ada"),
					"displayHeadlineMessageTemplate": "{{actionUser}} wrote", "displayBodyMessage": "b", "notifyUsers": []any{}}
				if len(named) > 0 {
					req["notifyAll"] = false
					var users []any
					for _, u := range named {
						users = append(users, map[string]any{"userId": u})
					}
					req["notifyUsers"] = users
				}
				return s.call("/v2/notifications/add", k, req)
			}
			add("all1").data(t, "Notification added successfully.") // three members: three recipients
			add("all2").fails(t, 429, "RESOURCE_EXHAUSTED",
				"The notifications of this workspace may reach at most 5 recipients a minute, and this one (to 3) would pass that. Try again after a minute.")
			add("bob1", "bob").data(t, "Notification added successfully.")
			add("bob2", "bob").fails(t, 429, "RESOURCE_EXHAUSTED",
				"The inbox of user bob in organization o holds 2 notifications, the most an inbox may hold (2). Delete older notifications (Delete Notifications) to make room.")
			// The refusal gave its recipient back: one more fits this minute.
			add("cy1", "cy").data(t, "Notification added successfully.")
			eventually(t, "the fan-outs", func() bool { return len(s.inbox(t, k, "o", "bob")) == 2 && len(s.inbox(t, k, "o", "cy")) == 2 })
			got := s.call("/v2/notifications/get", k, map[string]any{"organizationId": "o"}).ok(t)["data"].([]any)
			if len(got) != 3 {
				t.Fatalf("%d notifications stored, want 3: %v", len(got), got)
			}
		})
	}
}

// Issue 21 (3): Set Notification Config answers success: false for a user who is not a member
// of the organization, and keeps nothing for them; Get Notification Config of such a user is
// NOT_FOUND rather than the defaults.
func TestNotificationConfigOfNonMembers(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	k := s.devKey()
	s.call("/v2/users/add", k, map[string]any{"organizationId": "o", "createOrganization": true, "documentId": "d", "createDocument": true,
		"users": []any{person("ada", "Ada")}}).data(t, "")
	s.call("/v2/users/add", k, map[string]any{"organizationId": "other", "createOrganization": true, "users": []any{person("eve", "Eve")}}).data(t, "")

	set := s.call("/v2/notifications/config/set", k, map[string]any{"organizationId": "o", "documentIds": []string{"d"}, "userIds": []string{"ada", "eve", "ghost"},
		"config": map[string]any{"inbox": "NONE", "email": "NONE", "slack": "NONE"}}).data(t, "User config set successfully.")
	if fmt.Sprint(set["ada"]) != "map[documentId:d message:User config set successfully. success:true userId:ada]" ||
		fmt.Sprint(set["eve"]) != "map[documentId:d message:User does not exist. success:false userId:eve]" ||
		fmt.Sprint(set["ghost"]) != "map[documentId:d message:User does not exist. success:false userId:ghost]" || len(set) != 3 {
		t.Fatalf("set config %v", set)
	}
	got := s.call("/v1/notifications/config/get", k, map[string]any{"organizationId": "o", "documentIds": []string{"d"}, "userId": "ada"}).ok(t)["data"].([]any)
	if fmt.Sprint(got[0].(map[string]any)["config"]) != "map[email:NONE inbox:NONE]" {
		t.Fatalf("ada's config %v", got)
	}
	for _, u := range []string{"eve", "ghost"} {
		s.call("/v1/notifications/config/get", k, map[string]any{"organizationId": "o", "documentIds": []string{"d"}, "userId": u}).fails(t, 404, "NOT_FOUND", "User does not exist.")
	}
	// Nothing was kept for eve: once a member, she has the defaults.
	s.call("/v2/users/add", k, map[string]any{"organizationId": "o", "users": []any{person("eve", "Eve")}}).data(t, "")
	got = s.call("/v1/notifications/config/get", k, map[string]any{"organizationId": "o", "documentIds": []string{"d"}, "userId": "eve"}).ok(t)["data"].([]any)
	if fmt.Sprint(got[0].(map[string]any)["config"]) != "map[email:MINE inbox:ALL]" {
		t.Fatalf("eve's config %v", got)
	}
}
