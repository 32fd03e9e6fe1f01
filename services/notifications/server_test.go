package notifications

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"
	notificationsv1 "github.com/collab/collab/proto/collab/notifications/v1"
	usersv1 "github.com/collab/collab/proto/collab/users/v1"
	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"

	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/egress"
	"github.com/collab/collab/internal/email"
	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/outbox"
)

// ---- Fakes of the peers ----

type fakeDocs struct {
	documentsv1.DocumentsServiceClient
}

func (fakeDocs) ResolveResources(_ context.Context, in *documentsv1.ResolveResourcesRequest, _ ...grpc.CallOption) (*documentsv1.ResolveResourcesResponse, error) {
	out := &documentsv1.ResolveResourcesResponse{OrganizationExists: in.GetOrganizationId() == "o", OrganizationGeneration: "g1", Documents: map[string]*documentsv1.ResolvedResource{}}
	for _, d := range in.GetDocumentIds() {
		out.Documents[d] = &documentsv1.ResolvedResource{Exists: true, Generation: "dg-" + d}
	}
	return out, nil
}

func (fakeDocs) EnsureResources(_ context.Context, in *documentsv1.EnsureResourcesRequest, _ ...grpc.CallOption) (*documentsv1.EnsureResourcesResponse, error) {
	return &documentsv1.EnsureResourcesResponse{OrganizationGeneration: "g1", DocumentGeneration: "dg-" + in.GetDocumentId()}, nil
}

// fakeUsers has members m00000..m(n-1), each with an email.
type fakeUsers struct {
	usersv1.UsersServiceClient
	n       int
	calls   atomic.Int32
	noCount bool // CountMembers and MembersAmong are unimplemented (a users service of the release before)
	// amongCalls counts MembersAmong calls; leaver is a member in the first call's answer only
	// (removed from the organization while a request runs).
	amongCalls atomic.Int32
	leaver     string
}

func (f *fakeUsers) ListMembers(_ context.Context, in *usersv1.ListMembersRequest, _ ...grpc.CallOption) (*usersv1.ListMembersResponse, error) {
	f.calls.Add(1)
	out := &usersv1.ListMembersResponse{}
	if len(in.GetUserIds()) > 0 {
		for _, id := range in.GetUserIds() {
			var i int
			if _, err := fmt.Sscanf(id, "m%d", &i); err == nil && i < f.n {
				out.Members = append(out.Members, &usersv1.UserInfo{UserId: id, Name: "Member " + id, Email: id + "@example.com"})
			}
		}
		return out, nil
	}
	for i := range f.n {
		id := fmt.Sprintf("m%05d", i)
		if id <= in.GetAfter() {
			continue
		}
		if len(out.Members) == int(in.GetLimit()) {
			out.More = true
			break
		}
		out.Members = append(out.Members, &usersv1.UserInfo{UserId: id, Name: "Member " + id, Email: id + "@example.com"})
	}
	return out, nil
}

func (f *fakeUsers) MembersAmong(_ context.Context, in *usersv1.MembersAmongRequest, _ ...grpc.CallOption) (*usersv1.MembersAmongResponse, error) {
	call := f.amongCalls.Add(1)
	if f.noCount {
		return nil, status.Error(codes.Unimplemented, "unknown method MembersAmong")
	}
	out := &usersv1.MembersAmongResponse{}
	for _, id := range in.GetUserIds() {
		var i int
		if id == f.leaver && call > 1 {
			continue // removed after the first call
		}
		if _, err := fmt.Sscanf(id, "m%d", &i); err == nil && i < f.n {
			out.UserIds = append(out.UserIds, id)
		}
	}
	return out, nil
}

func (f *fakeUsers) CountMembers(context.Context, *usersv1.CountMembersRequest, ...grpc.CallOption) (*usersv1.CountMembersResponse, error) {
	if f.noCount {
		return nil, status.Error(codes.Unimplemented, "unknown method CountMembers")
	}
	return &usersv1.CountMembersResponse{Count: int64(f.n)}, nil
}

// fakeAccess lets even-numbered members read, and matches contexts against the access
// contexts of fields.
type fakeAccess struct {
	accessv1.AccessServiceClient

	mu sync.Mutex
	// fields are users' access contexts ("<field>:<value>").
	fields map[string][]string
	// matchCalls counts MatchContexts calls, and largest is the most users one named.
	matchCalls, largest atomic.Int32
	// noMatch: MatchContexts is unimplemented (an access service of the release before).
	noMatch bool
}

func (f *fakeAccess) setFields(user string, fields ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fields == nil {
		f.fields = map[string][]string{}
	}
	f.fields[user] = fields
}

// MatchContexts grants a context to a user holding every "<field>:<value>" of it (numbers
// printed as %v, which is how the access service prints whole numbers).
func (f *fakeAccess) MatchContexts(_ context.Context, in *accessv1.MatchContextsRequest, _ ...grpc.CallOption) (*accessv1.MatchContextsResponse, error) {
	f.matchCalls.Add(1)
	if n := int32(len(in.GetUserIds())); n > f.largest.Load() {
		f.largest.Store(n)
	}
	if f.noMatch {
		return nil, status.Error(codes.Unimplemented, "unknown method MatchContexts")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &accessv1.MatchContextsResponse{}
	for _, u := range in.GetUserIds() {
		var m *accessv1.ContextMatch
		for i, c := range in.GetContexts() {
			all := true
			for name, v := range c.GetFields() {
				all = all && slices.Contains(f.fields[u], fmt.Sprintf("%s:%v", name, v.AsInterface()))
			}
			if all {
				if m == nil {
					m = &accessv1.ContextMatch{UserId: u}
				}
				m.Contexts = append(m.Contexts, int32(i))
			}
		}
		if m != nil {
			out.Matches = append(out.Matches, m)
		}
	}
	return out, nil
}

// Even-numbered members may read.
func (*fakeAccess) FilterReaders(_ context.Context, in *accessv1.FilterReadersRequest, _ ...grpc.CallOption) (*accessv1.FilterReadersResponse, error) {
	out := &accessv1.FilterReadersResponse{}
	for _, u := range in.GetUserIds() {
		var i int
		if _, err := fmt.Sscanf(u, "m%d", &i); err == nil && i%2 == 0 {
			out.UserIds = append(out.UserIds, u)
		}
	}
	return out, nil
}

type fakeWorkspace struct {
	workspacev1.WorkspaceServiceClient
	url string
}

func (f *fakeWorkspace) GetSlackWebhook(context.Context, *workspacev1.GetSlackWebhookRequest, ...grpc.CallOption) (*workspacev1.GetSlackWebhookResponse, error) {
	return &workspacev1.GetSlackWebhookResponse{Url: f.url}, nil
}

// flakyMail fails the first `fail` sends with err, then records.
type flakyMail struct {
	mu   sync.Mutex
	fail int
	err  error
	sent []email.Message
}

func (m *flakyMail) Send(_ context.Context, msg email.Message) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail > 0 {
		m.fail--
		return m.err
	}
	m.sent = append(m.sent, msg)
	return nil
}

func (m *flakyMail) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sent)
}

// handlerDeliverer hands the outbox's events straight to the server.
type handlerDeliverer struct{ s *Server }

func (d *handlerDeliverer) Deliver(ctx context.Context, _ string, e *lifecyclev1.Event) error {
	return d.s.HandleEvent(ctx, e)
}

var tn = time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)

type harness struct {
	srv    *Server
	store  Store
	box    *outbox.Outbox
	events *recorder
	users  *fakeUsers
	access *fakeAccess
	ws     *fakeWorkspace
	mail   *flakyMail
	clock  *clock.Fake
}

func newHarness(t testing.TB, members int) *harness {
	t.Helper()
	return newHarnessOn(t, members, NewMemoryStore())
}

// newHarnessOn is newHarness on the given store.
func newHarnessOn(t testing.TB, members int, store Store) *harness {
	t.Helper()
	h := &harness{store: store, users: &fakeUsers{n: members}, access: &fakeAccess{}, ws: &fakeWorkspace{}, mail: &flakyMail{}, clock: clock.NewFake(tn)}
	quiet := slog.New(slog.DiscardHandler)
	d := &handlerDeliverer{}
	h.box = outbox.New("notifications", outbox.NewMemoryStore(), d, outbox.To("notifications"), outbox.WithClock(h.clock), outbox.WithLogger(quiet))
	h.events = &recorder{box: h.box}
	srv, err := New(h.store, Peers{Documents: fakeDocs{}, Users: h.users, Access: h.access, Workspace: h.ws}, h.events, make([]byte, 32),
		WithClock(h.clock), WithLogger(quiet), WithMail(h.mail), WithSlackPrivateTargets(true))
	if err != nil {
		t.Fatal(err)
	}
	d.s, h.srv = srv, srv
	return h
}

var k1 = authn.WithCaller(context.Background(), authn.Caller{APIKey: "k1", WorkspaceID: "w", Settings: authn.Settings{Notifications: true}})

func (h *harness) add(t testing.TB, req *notificationsv1.AddNotificationsRequest) {
	t.Helper()
	if req.OrganizationId == "" {
		req.OrganizationId = "o"
	}
	if req.DocumentId == "" {
		req.DocumentId = "d"
	}
	if req.ActionUser == nil {
		req.ActionUser = &notificationsv1.NotificationUser{UserId: "m00000", Name: "Ada"}
	}
	if req.DisplayHeadlineMessageTemplate == "" {
		req.DisplayHeadlineMessageTemplate, req.DisplayBodyMessage = "{{actionUser}} wrote to {{recipientUser}}", "body"
	}
	resp, err := h.srv.AddNotifications(k1, req)
	if err != nil || !resp.GetData().GetSuccess() {
		t.Fatalf("add: %v %v", resp, err)
	}
	h.box.RunDue(context.Background()) // the fan-out
}

func (h *harness) inbox(t *testing.T, user string) []*notificationsv1.Notification {
	t.Helper()
	size := int32(1000)
	resp, err := h.srv.GetNotifications(k1, &notificationsv1.GetNotificationsRequest{OrganizationId: "o", UserId: user, PageSize: &size})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetData()
}

// ---- Tests ----

func TestRender(t *testing.T) {
	n := &Notification{ActionUser: User{UserID: "a", Name: "Ada", Email: "ada@example.com"}, HeadlineData: `{"doc":"Plan","n":"7","actionUser":{"name":"Ada L."}}`}
	v := headlineValues(n, User{UserID: "b", Email: "bob@example.com"})
	for tpl, want := range map[string]string{
		"{{actionUser}} in {{ doc }}":                     "Ada L. in Plan",
		"{{actionUser.email}} → {{recipientUser}}":        "ada@example.com → bob@example.com",
		"{{recipientUser.name}}|{{recipientUser.userId}}": "|b",
		"{{missing}}x{{n}}":                               "x7",
		"{{ not closed":                                   "{{ not closed",
	} {
		if got := render(tpl, v); got != want {
			t.Errorf("render(%q) = %q, want %q", tpl, got, want)
		}
	}
	if s := subject("a\r\nBcc: x@y\u202e  b"); s != "a Bcc: x@y b" {
		t.Errorf("subject %q", s)
	}
}

// notifyAll reaches every member once, without the actor; verifyUserPermissions keeps readers
// only; the fan-out pages the members and runs once however often its event comes.
func TestFanOutToTheOrganization(t *testing.T) {
	h := newHarness(t, 12001)
	h.add(t, &notificationsv1.AddNotificationsRequest{NotificationId: "all"})
	n, err := h.store.Notification(context.Background(), Scope{APIKey: "k1", OrganizationID: "o", OrgGen: "g1"}, "all")
	if err != nil || !n.FannedOut || len(n.Recipients) != 12000 || slices.Contains(n.Recipients, "m00000") {
		t.Fatalf("recipients %d %v", len(n.Recipients), err)
	}
	if calls := h.users.calls.Load(); calls != 3 {
		t.Fatalf("%d member pages for 12,001 members, want 3", calls)
	}
	if got := h.inbox(t, "m00007"); len(got) != 1 || got[0].GetDisplayHeadlineMessage() != "Ada wrote to Member m00007" {
		t.Fatalf("inbox %v", got)
	}
	// The event again (a redelivery): nothing more.
	ds, _ := h.store.Deliveries(context.Background(), "k1", "all")
	if err := h.srv.HandleEvent(context.Background(), mustEvent(t, h, "all")); err != nil {
		t.Fatal(err)
	}
	again, _ := h.store.Deliveries(context.Background(), "k1", "all")
	if len(again) != len(ds) || len(h.inbox(t, "m00007")) != 1 {
		t.Fatalf("a redelivery queued %d more", len(again)-len(ds))
	}

	h.add(t, &notificationsv1.AddNotificationsRequest{NotificationId: "readers", VerifyUserPermissions: true})
	n, _ = h.store.Notification(context.Background(), Scope{APIKey: "k1", OrganizationID: "o", OrgGen: "g1"}, "readers")
	if len(n.Recipients) != 6000 || slices.Contains(n.Recipients, "m00001") {
		t.Fatalf("readers %d", len(n.Recipients))
	}
}

func mustEvent(t *testing.T, h *harness, id string) *lifecyclev1.Event {
	t.Helper()
	h.events.mu.Lock()
	defer h.events.mu.Unlock()
	for _, e := range h.events.published {
		if e.GetDomain().GetId() == id {
			return e
		}
	}
	t.Fatalf("no event %s", id)
	return nil
}

// recorder keeps what the server publishes and passes it to the outbox.
type recorder struct {
	box       *outbox.Outbox
	mu        sync.Mutex
	published []*lifecyclev1.Event
}

func (r *recorder) PublishAsync(ctx context.Context, e *lifecyclev1.Event) (*outbox.Record, error) {
	r.mu.Lock()
	r.published = append(r.published, proto.Clone(e).(*lifecyclev1.Event))
	r.mu.Unlock()
	return r.box.PublishAsync(ctx, e)
}

// Emails are retried on transient failures, given up on refusals, and never sent again once
// sent, also by a new process on the same store.
func TestEmailRetriesAndSendsOnce(t *testing.T) {
	h := newHarness(t, 3)
	h.mail.fail, h.mail.err = 2, &textproto.Error{Code: 451, Msg: "try later"}
	h.add(t, &notificationsv1.AddNotificationsRequest{NotificationId: "n", NotifyAll: new(false),
		NotifyUsers: []*notificationsv1.NotificationUser{{UserId: "m00001", Email: "m1@example.com"}}})
	ctx := context.Background()
	h.srv.SendDue(ctx)
	d, _ := h.store.Deliveries(ctx, "k1", "n")
	if len(d) != 1 || d[0].State != StatePending || d[0].Attempts != 1 || h.mail.count() != 0 {
		t.Fatalf("after a failure %+v", d)
	}
	wait := d[0].NextAttempt.Sub(tn)
	if wait < 8*time.Second || wait > 12*time.Second {
		t.Fatalf("first retry after %v, want about 10 s", wait)
	}
	h.srv.SendDue(ctx) // not due
	h.clock.Advance(15 * time.Second)
	h.srv.SendDue(ctx)
	h.clock.Advance(2 * time.Minute)
	h.srv.SendDue(ctx)
	d, _ = h.store.Deliveries(ctx, "k1", "n")
	if d[0].State != StateSent || d[0].Attempts != 3 || h.mail.count() != 1 {
		t.Fatalf("after retries %+v, %d sent", d[0], h.mail.count())
	}
	// A restart on the same store sends nothing again.
	restarted, _ := New(h.store, Peers{Documents: fakeDocs{}, Users: h.users, Access: h.access, Workspace: h.ws}, h.events, make([]byte, 32), WithClock(h.clock), WithMail(h.mail), WithLogger(slog.New(slog.DiscardHandler)))
	h.clock.Advance(time.Hour)
	restarted.SendDue(ctx)
	if h.mail.count() != 1 {
		t.Fatalf("sent %d times", h.mail.count())
	}

	// A refusal (5xx) is final.
	h.mail.fail, h.mail.err = 1, &textproto.Error{Code: 550, Msg: "no such user"}
	h.add(t, &notificationsv1.AddNotificationsRequest{NotificationId: "bad", NotifyAll: new(false),
		NotifyUsers: []*notificationsv1.NotificationUser{{UserId: "m00002", Email: "m2@example.com"}}})
	h.srv.SendDue(ctx)
	d, _ = h.store.Deliveries(ctx, "k1", "bad")
	if d[0].State != StateFailed || d[0].Attempts != 1 {
		t.Fatalf("refused %+v", d[0])
	}
	// Every attempt counted once, under its outcome.
	for outcome, want := range map[string]float64{"retry": 2, "sent": 1, "failed": 1} {
		if got := testutil.ToFloat64(h.srv.metrics.sends.WithLabelValues(ChannelEmail, outcome)); got != want {
			t.Errorf("email %s: %v, want %v", outcome, got, want)
		}
	}
}

// Slack gets one post per notification; 429 waits as told, 5xx retries, 4xx gives up.
func TestSlackDelivery(t *testing.T) {
	var mu sync.Mutex
	codes := []int{http.StatusTooManyRequests, http.StatusBadGateway, http.StatusOK}
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		code := codes[0]
		codes = codes[1:]
		if code == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "30")
		}
		buf := make([]byte, 4096)
		n, _ := r.Body.Read(buf)
		bodies = append(bodies, string(buf[:n]))
		w.WriteHeader(code)
	}))
	defer srv.Close()
	h := newHarness(t, 3)
	h.ws.url = srv.URL
	ctx := context.Background()
	scope := Scope{APIKey: "k1", OrganizationID: "o", OrgGen: "g1", DocumentID: "d", DocGen: "dg-d"}
	if err := h.store.SetConfigs(ctx, []Scope{scope}, []string{"m00001", "m00002"}, Config{Inbox: All, Email: None, Slack: All}); err != nil {
		t.Fatal(err)
	}
	h.add(t, &notificationsv1.AddNotificationsRequest{NotificationId: "s"})
	h.srv.SendDue(ctx)
	d, _ := h.store.Deliveries(ctx, "k1", "s")
	if len(d) != 1 || d[0].Channel != ChannelSlack || d[0].State != StatePending || !d[0].NextAttempt.Equal(tn.Add(30*time.Second)) {
		t.Fatalf("after 429 %+v", d)
	}
	h.clock.Advance(31 * time.Second)
	h.srv.SendDue(ctx) // 502: retried after about a minute
	h.clock.Advance(2 * time.Minute)
	h.srv.SendDue(ctx)
	d, _ = h.store.Deliveries(ctx, "k1", "s")
	if d[0].State != StateSent || d[0].Attempts != 3 || len(bodies) != 3 {
		t.Fatalf("after retries %+v (%d posts)", d[0], len(bodies))
	}
	if want := `"text":"*Ada wrote to Member m00001, Member m00002*\nbody\n_For Member m00001, Member m00002_"`; !strings.Contains(bodies[2], want) {
		t.Fatalf("slack body %s", bodies[2])
	}
}

// A deleted organization takes its notifications; a listing by id answers in the order asked.
func TestLifecycleAndListing(t *testing.T) {
	h := newHarness(t, 3)
	data, _ := structpb.NewStruct(map[string]any{"k": "v"})
	h.add(t, &notificationsv1.AddNotificationsRequest{NotificationId: "a", NotificationSourceData: data})
	h.clock.Advance(time.Millisecond)
	h.add(t, &notificationsv1.AddNotificationsRequest{NotificationId: "b"})
	resp, err := h.srv.GetNotifications(k1, &notificationsv1.GetNotificationsRequest{OrganizationId: "o", NotificationIds: []string{"b", "zz", "a"}})
	if err != nil || len(resp.GetData()) != 2 || resp.GetData()[0].GetId() != "b" || resp.GetData()[1].GetNotificationSourceData().GetFields()["k"].GetStringValue() != "v" {
		t.Fatalf("%v %v", resp, err)
	}
	if err := h.srv.HandleEvent(context.Background(), &lifecyclev1.Event{Id: "x", Type: "organization.deleted", ApiKey: "k1", OrganizationId: "o", OrganizationGeneration: "g1",
		Payload: &lifecyclev1.Event_OrganizationDeleted{OrganizationDeleted: &lifecyclev1.OrganizationDeleted{}}}); err != nil {
		t.Fatal(err)
	}
	if got := h.inbox(t, "m00001"); len(got) != 0 {
		t.Fatalf("after the organization's deletion %v", got)
	}
}

// A process that stops after the fan-out and before sending loses nothing: the next one on the
// same store sends what was queued.
func TestQueuedMailSurvivesARestart(t *testing.T) {
	h := newHarness(t, 3)
	h.add(t, &notificationsv1.AddNotificationsRequest{NotificationId: "q", NotifyAll: new(false),
		NotifyUsers: []*notificationsv1.NotificationUser{{UserId: "m00001", Email: "m1@example.com"}, {UserId: "m00002", Email: "m2@example.com"}}})
	if h.mail.count() != 0 {
		t.Fatal("sent before the worker ran")
	}
	next, err := New(h.store, Peers{Documents: fakeDocs{}, Users: h.users, Access: h.access, Workspace: h.ws}, h.events, make([]byte, 32),
		WithClock(h.clock), WithMail(h.mail), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	next.SendDue(context.Background())
	if h.mail.count() != 2 {
		t.Fatalf("%d mails after the restart, want 2", h.mail.count())
	}
}

// Users removed from a document lose their inbox entries of it; a folder's removal touches
// nothing; a document's deletion takes its notifications.
func TestUsersRemovedAndDocumentDeleted(t *testing.T) {
	h := newHarness(t, 4)
	h.add(t, &notificationsv1.AddNotificationsRequest{NotificationId: "a"})
	h.add(t, &notificationsv1.AddNotificationsRequest{NotificationId: "b", DocumentId: "e"})
	removed := func(doc, folder string) {
		t.Helper()
		e := &lifecyclev1.Event{Id: "r" + doc + folder, Type: "users.removed", ApiKey: "k1", OrganizationId: "o", OrganizationGeneration: "g1",
			Payload: &lifecyclev1.Event_UsersRemoved{UsersRemoved: &lifecyclev1.UsersRemoved{UserIds: []string{"m00001"}, DocumentId: doc, DocumentGeneration: "dg-" + doc, FolderId: folder}}}
		if err := h.srv.HandleEvent(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	removed("", "f")
	if n := len(h.inbox(t, "m00001")); n != 2 {
		t.Fatalf("a folder's removal took %d entries", 2-n)
	}
	removed("d", "")
	if got := h.inbox(t, "m00001"); len(got) != 1 || got[0].GetId() != "b" {
		t.Fatalf("after removal from d: %v", got)
	}
	if err := h.srv.HandleEvent(context.Background(), &lifecyclev1.Event{Id: "dd", Type: "document.deleted", ApiKey: "k1", OrganizationId: "o", OrganizationGeneration: "g1",
		Payload: &lifecyclev1.Event_DocumentsDeleted{DocumentsDeleted: &lifecyclev1.DocumentsDeleted{DocumentIds: []string{"e"}, Generations: []string{"dg-e"}}}}); err != nil {
		t.Fatal(err)
	}
	if got := h.inbox(t, "m00002"); len(got) != 1 || got[0].GetId() != "a" {
		t.Fatalf("after e's deletion: %v", got)
	}
}

// A migration moves a document's notifications to its new id; one without the new id is
// refused for good and moves nothing (it moved them to the empty id before lifecycle.Dispatch).
func TestDocumentMigrated(t *testing.T) {
	h := newHarness(t, 2)
	h.add(t, &notificationsv1.AddNotificationsRequest{NotificationId: "a"})
	migrate := func(to string) error {
		return h.srv.HandleEvent(context.Background(), &lifecyclev1.Event{Id: "m" + to, Type: "document.migrated", ApiKey: "k1", OrganizationId: "o", OrganizationGeneration: "g1",
			Payload: &lifecyclev1.Event_DocumentMigrated{DocumentMigrated: &lifecyclev1.DocumentMigrated{FromDocumentId: "d", ToDocumentId: to, Generation: "dg-d"}}})
	}
	if err := migrate(""); !lifecycle.Permanent(err) {
		t.Fatalf("a migration to no id: %v, want refused for good", err)
	}
	if got := h.inbox(t, "m00001"); len(got) != 1 || got[0].GetDocumentId() != "d" {
		t.Fatalf("after the refused migration: %v", got)
	}
	if err := migrate("d2"); err != nil {
		t.Fatal(err)
	}
	if got := h.inbox(t, "m00001"); len(got) != 1 || got[0].GetDocumentId() != "d2" {
		t.Fatalf("after the migration: %v", got)
	}
}

// Without private targets allowed, a Slack webhook on a loopback address is refused for good.
func TestSlackToAPrivateAddressIsRefused(t *testing.T) {
	h := newHarness(t, 3)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer srv.Close()
	h.srv.http = egress.Client(false, sendTimeout, 4)
	h.ws.url = srv.URL
	ctx := context.Background()
	scope := Scope{APIKey: "k1", OrganizationID: "o", OrgGen: "g1", DocumentID: "d", DocGen: "dg-d"}
	if err := h.store.SetConfigs(ctx, []Scope{scope}, []string{"m00001"}, Config{Inbox: All, Email: None, Slack: All}); err != nil {
		t.Fatal(err)
	}
	h.add(t, &notificationsv1.AddNotificationsRequest{NotificationId: "p"})
	h.srv.SendDue(ctx)
	d, _ := h.store.Deliveries(ctx, "k1", "p")
	if len(d) != 1 || d[0].State != StateFailed || !strings.Contains(d[0].LastError, "loopback") {
		t.Fatalf("%+v", d)
	}
}

// A user removed from the organization is sent no mail queued for them; a mention of a user the
// caller gave no address for is mailed at the directory's address.
func TestRemovedUsersGetNoMailAndMentionsFindAddresses(t *testing.T) {
	h := newHarness(t, 5)
	h.add(t, &notificationsv1.AddNotificationsRequest{NotificationId: "n1", NotifyAll: new(false),
		NotifyUsers: []*notificationsv1.NotificationUser{{UserId: "m00001", Email: "m1@example.com"}, {UserId: "m00002"}}})
	ev := &lifecyclev1.Event{Id: "rm", Type: "users.removed", ApiKey: "k1", OrganizationId: "o", OrganizationGeneration: "g1",
		Payload: &lifecyclev1.Event_UsersRemoved{UsersRemoved: &lifecyclev1.UsersRemoved{UserIds: []string{"m00001"}}}}
	if err := h.srv.HandleEvent(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	h.srv.SendDue(context.Background())
	h.mail.mu.Lock()
	defer h.mail.mu.Unlock()
	if len(h.mail.sent) != 1 || h.mail.sent[0].To != "m00002@example.com" {
		t.Fatalf("mails %+v", h.mail.sent)
	}
}

// TestWorkerPrunesOldDeliveries: the delivery worker removes sent and failed deliveries past
// the retention when it starts (and hourly), and keeps the recent and the pending ones.
func TestWorkerPrunesOldDeliveries(t *testing.T) {
	h := newHarness(t, 0)
	ctx := context.Background()
	old := tn.Add(-retention - time.Minute)
	queue := []*Delivery{
		{ID: "old-sent", APIKey: "k1", NotificationID: "n", Channel: ChannelEmail, State: StateSent, CreatedAt: old},
		{ID: "old-failed", APIKey: "k1", NotificationID: "n", Channel: ChannelEmail, State: StateFailed, CreatedAt: old},
		{ID: "recent-sent", APIKey: "k1", NotificationID: "n", Channel: ChannelEmail, State: StateSent, CreatedAt: tn.Add(-time.Hour)},
		{ID: "old-pending", APIKey: "k1", NotificationID: "n", Channel: ChannelEmail, State: StatePending, CreatedAt: old, NextAttempt: tn.Add(time.Hour)},
	}
	if err := h.store.QueueDeliveries(ctx, queue); err != nil {
		t.Fatal(err)
	}
	run, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { h.srv.RunDeliveries(run); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ds, err := h.store.Deliveries(ctx, "k1", "n")
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, d := range ds {
			ids = append(ids, d.ID)
		}
		if slices.Equal(ids, []string{"old-pending", "recent-sent"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries after the worker started: %v", ids)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	<-done
}
