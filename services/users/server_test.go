package users

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"
	usersv1 "github.com/collab/collab/proto/collab/users/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/grpcserver"
	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/outbox"
)

// ---- Fakes ----

// fakeDocs answers EnsureResources from in-memory sets of organizations, folders and documents
// per API key, honouring the create flags like the documents service.
type fakeDocs struct {
	documentsv1.DocumentsServiceClient

	mu    sync.Mutex
	known map[string]bool   // kind|apiKey|org[|id]
	gens  map[string]string // generation by the same key; none: the empty generation
	calls []*documentsv1.EnsureResourcesRequest
	err   error // when set, every call fails with it
	// afterEnsure, when set, runs after each EnsureResources answer (a racing deletion).
	afterEnsure func()
}

func newFakeDocs() *fakeDocs { return &fakeDocs{known: map[string]bool{}, gens: map[string]string{}} }

// recreate gives a resource a new generation, as deleting and adding it again would.
func (f *fakeDocs) recreate(kind, apiKey, org, id, gen string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.known[resKey(kind, apiKey, org, id)] = true
	f.gens[resKey(kind, apiKey, org, id)] = gen
}

// remove deletes a resource.
func (f *fakeDocs) remove(kind, apiKey, org, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.known, resKey(kind, apiKey, org, id))
}

func (f *fakeDocs) ResolveResources(_ context.Context, in *documentsv1.ResolveResourcesRequest, _ ...grpc.CallOption) (*documentsv1.ResolveResourcesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	k, org := in.GetApiKey(), in.GetOrganizationId()
	out := &documentsv1.ResolveResourcesResponse{Documents: map[string]*documentsv1.ResolvedResource{}, Folders: map[string]*documentsv1.ResolvedResource{}}
	if !f.known[resKey("org", k, org, "")] {
		return out, nil
	}
	out.OrganizationExists, out.OrganizationGeneration = true, f.gens[resKey("org", k, org, "")]
	for _, d := range in.GetDocumentIds() {
		key := resKey("document", k, org, d)
		out.Documents[d] = &documentsv1.ResolvedResource{Exists: f.known[key], Generation: f.gens[key]}
	}
	return out, nil
}

func resKey(kind, apiKey, org, id string) string { return kind + "|" + apiKey + "|" + org + "|" + id }

func (f *fakeDocs) addOrg(apiKey, org string) { f.known[resKey("org", apiKey, org, "")] = true }
func (f *fakeDocs) addFolder(apiKey, org, folder string) {
	f.known[resKey("folder", apiKey, org, folder)] = true
}

func (f *fakeDocs) has(kind, apiKey, org, id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.known[resKey(kind, apiKey, org, id)]
}

func (f *fakeDocs) EnsureResources(ctx context.Context, in *documentsv1.EnsureResourcesRequest, _ ...grpc.CallOption) (*documentsv1.EnsureResourcesResponse, error) {
	out, err := f.ensure(in)
	// A racing deletion runs once the answer is out, as it would in another process.
	if hook := f.afterEnsure; hook != nil && err == nil {
		hook()
	}
	return out, err
}

func (f *fakeDocs) ensure(in *documentsv1.EnsureResourcesRequest) (*documentsv1.EnsureResourcesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, proto.Clone(in).(*documentsv1.EnsureResourcesRequest))
	if f.err != nil {
		return nil, f.err
	}
	type want struct {
		kind, id string
		create   bool
		missing  string
	}
	wants := []want{{"org", "", in.GetCreateOrganization(), "Organization does not exist."}}
	if in.GetFolderId() != "" {
		wants = append(wants, want{"folder", in.GetFolderId(), in.GetCreateFolder(), "Folder does not exist."})
	}
	if in.GetDocumentId() != "" {
		wants = append(wants, want{"document", in.GetDocumentId(), in.GetCreateDocument(), "Document does not exist."})
	}
	// Everything is checked before anything is created, as the real service does.
	for _, w := range wants {
		if !f.known[resKey(w.kind, in.GetApiKey(), in.GetOrganizationId(), w.id)] && !w.create {
			return nil, status.Error(codes.NotFound, w.missing)
		}
	}
	gen := func(kind, id string) string { return f.gens[resKey(kind, in.GetApiKey(), in.GetOrganizationId(), id)] }
	for _, w := range wants {
		f.known[resKey(w.kind, in.GetApiKey(), in.GetOrganizationId(), w.id)] = true
	}
	out := &documentsv1.EnsureResourcesResponse{OrganizationGeneration: gen("org", ""), FolderGeneration: gen("folder", in.GetFolderId()),
		DocumentGeneration: gen("document", in.GetDocumentId())}
	return out, nil
}

func (f *fakeDocs) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func (f *fakeDocs) lastCall() *documentsv1.EnsureResourcesRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[len(f.calls)-1]
}

// fakeAccess records SetRoles calls; fail, when set, decides which of them fail.
type fakeAccess struct {
	accessv1.AccessServiceClient

	mu    sync.Mutex
	calls []*accessv1.SetRolesRequest
	fail  func(*accessv1.SetRolesRequest) bool
}

func (f *fakeAccess) SetRoles(_ context.Context, in *accessv1.SetRolesRequest, _ ...grpc.CallOption) (*accessv1.SetRolesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, proto.Clone(in).(*accessv1.SetRolesRequest))
	if f.fail != nil && f.fail(in) {
		return nil, status.Error(codes.Unavailable, "access is down")
	}
	return &accessv1.SetRolesResponse{}, nil
}

// take returns the calls so far and forgets them.
func (f *fakeAccess) take() []*accessv1.SetRolesRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.calls
	f.calls = nil
	return out
}

// recordingPublisher counts what the server publishes and passes it to the real outbox.
type recordingPublisher struct {
	box       *outbox.Outbox
	mu        sync.Mutex
	published []*lifecyclev1.Event
}

func (p *recordingPublisher) Publish(ctx context.Context, e *lifecyclev1.Event) (*outbox.Record, error) {
	r, err := p.box.Publish(ctx, e) // gives the event its id
	p.mu.Lock()
	p.published = append(p.published, proto.Clone(e).(*lifecyclev1.Event))
	p.mu.Unlock()
	return r, err
}

func (p *recordingPublisher) events() []*lifecyclev1.Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.published)
}

// handlerDeliverer delivers the outbox's events straight to the server's HandleEvent.
type handlerDeliverer struct{ h lifecycle.Handler }

func (d *handlerDeliverer) Deliver(ctx context.Context, subscriber string, e *lifecyclev1.Event) error {
	if subscriber != "users" {
		return fmt.Errorf("unexpected subscriber %s", subscriber)
	}
	return d.h.HandleEvent(ctx, e)
}

// ---- Harness ----

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

type harness struct {
	srv    *Server
	store  *MemoryStore
	docs   *fakeDocs
	access *fakeAccess
	events *recordingPublisher
	box    *outbox.Outbox
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{store: NewMemoryStore(), docs: newFakeDocs(), access: &fakeAccess{}}
	discard := slog.New(slog.DiscardHandler)
	fake := clock.NewFake(t0)
	deliverer := &handlerDeliverer{}
	h.box = outbox.New("users", outbox.NewMemoryStore(), deliverer, outbox.To("users"), outbox.WithClock(fake), outbox.WithLogger(discard))
	h.events = &recordingPublisher{box: h.box}
	srv, err := New(h.store, h.docs, h.access, h.events, WithClock(fake), WithLogger(discard))
	if err != nil {
		t.Fatal(err)
	}
	deliverer.h = srv
	h.srv = srv
	return h
}

var bg = context.Background()

func as(apiKey string) context.Context {
	return authn.WithCaller(bg, authn.Caller{APIKey: apiKey, WorkspaceID: "w"})
}

var k1 = as("k1")

func asStatus(err error) *status.Status {
	return status.Convert(apierr.ToStatus(bg, slog.New(slog.DiscardHandler), err))
}

func wantStatus(t *testing.T, what string, err error, code codes.Code, msg string) {
	t.Helper()
	st := asStatus(err)
	if st.Code() != code || (msg != "" && st.Message() != msg) {
		t.Fatalf("%s: %v %q, want %v %q", what, st.Code(), st.Message(), code, msg)
	}
}

func user(id string) *usersv1.User {
	return &usersv1.User{UserId: id, Name: "Name " + id, Email: id + "@example.com"}
}

func usersOf(ids ...string) []*usersv1.User {
	var out []*usersv1.User
	for _, id := range ids {
		out = append(out, user(id))
	}
	return out
}

// add adds users to the organization (creating it) and, when doc is set, to the document.
func (h *harness) add(t *testing.T, ctx context.Context, org, doc string, ids ...string) {
	t.Helper()
	_, err := h.srv.AddUsers(ctx, &usersv1.AddUsersRequest{OrganizationId: org, CreateOrganization: true, DocumentId: doc, CreateDocument: doc != "", Users: usersOf(ids...)})
	if err != nil {
		t.Fatal(err)
	}
}

func (h *harness) get(t *testing.T, ctx context.Context, req *usersv1.GetUsersRequest) []string {
	t.Helper()
	resp, err := h.srv.GetUsers(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, u := range resp.GetData() {
		out = append(out, u.GetUserId())
	}
	return out
}

func (h *harness) group(t *testing.T, ctx context.Context, org, group string, ids ...string) {
	t.Helper()
	if _, err := h.srv.AddUserGroups(ctx, &usersv1.AddUserGroupsRequest{OrganizationId: org, OrganizationUserGroups: []*usersv1.UserGroup{{GroupId: group, GroupName: "Group " + group}}}); err != nil {
		t.Fatal(err)
	}
	if len(ids) > 0 {
		if _, err := h.srv.AddUsersToGroup(ctx, &usersv1.AddUsersToGroupRequest{OrganizationId: org, OrganizationUserGroupId: group, UserIds: ids}); err != nil {
			t.Fatal(err)
		}
	}
}

func wantItem(t *testing.T, data map[string]*usersv1.UserResult, id string, success bool, msg string) {
	t.Helper()
	item := data[id]
	if item.GetSuccess() != success || item.GetId() != id || item.GetMessage() != msg {
		t.Fatalf("item %s: %v, want success=%v %q", id, item, success, msg)
	}
}

func role(apiKey, org, typ, id, accessRole string, onlyIfAbsent bool, users ...string) *accessv1.SetRolesRequest {
	return &accessv1.SetRolesRequest{ApiKey: apiKey, OrganizationId: org, UserIds: users, ResourceType: typ, ResourceId: id, AccessRole: accessRole, OnlyIfAbsent: onlyIfAbsent}
}

func wantRoles(t *testing.T, got []*accessv1.SetRolesRequest, want ...*accessv1.SetRolesRequest) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("SetRoles calls %v, want %v", got, want)
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Fatalf("SetRoles call %d: %v, want %v", i, got[i], want[i])
		}
	}
}

// dump writes the whole memory store in a stable form, so a test can tell that nothing changed.
func dump(s *MemoryStore) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var lines []string
	for k, u := range s.users {
		lines = append(lines, fmt.Sprintf("user %v %+v", k, u))
	}
	for k, m := range s.members {
		lines = append(lines, fmt.Sprintf("member %v %v", k, m.filtered(nil)))
	}
	for k, m := range s.contacts {
		lines = append(lines, fmt.Sprintf("contact %v %v", k, m.filtered(nil)))
	}
	for k, g := range s.groups {
		lines = append(lines, fmt.Sprintf("group %v %+v", k, g))
	}
	for k, m := range s.groupMembers {
		lines = append(lines, fmt.Sprintf("group member %v %v", k, m.filtered(nil)))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// step runs one step of a scenario as a subtest of t, so that a failure names the step. Steps
// share their test's state and run in order: a step after a failed one is skipped, since it
// would start from a state the story did not reach.
func step(t *testing.T, name string, f func(t *testing.T)) {
	t.Helper()
	t.Run(name, func(st *testing.T) {
		if t.Failed() {
			st.Skip("an earlier step failed")
		}
		f(st)
	})
}

// ---- Tests ----

func TestNewNeedsItsDependencies(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for name, f := range map[string]func() (*Server, error){
		"store":  func() (*Server, error) { return New(nil, h.docs, h.access, h.events) },
		"docs":   func() (*Server, error) { return New(h.store, nil, h.access, h.events) },
		"access": func() (*Server, error) { return New(h.store, h.docs, nil, h.events) },
		"events": func() (*Server, error) { return New(h.store, h.docs, h.access, nil) },
	} {
		t.Run("refuses no "+name, func(t *testing.T) {
			if s, err := f(); err == nil || s != nil {
				t.Errorf("without %s: %v %v", name, s, err)
			}
		})
	}
	if err := h.srv.Ping(bg); err != nil {
		t.Fatalf("ping: %v", err)
	}
}

func TestCallsWithoutCallerAreRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"add users without caller", func() error {
			_, err := h.srv.AddUsers(bg, &usersv1.AddUsersRequest{OrganizationId: "o", Users: usersOf("u1")})
			return err
		}},
		{"get users without caller", func() error {
			_, err := h.srv.GetUsers(bg, &usersv1.GetUsersRequest{OrganizationId: "o"})
			return err
		}},
		{"group without caller", func() error {
			_, err := h.srv.AddUsersToGroup(bg, &usersv1.AddUsersToGroupRequest{OrganizationId: "o", OrganizationUserGroupId: "g", UserIds: []string{"u1"}})
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantStatus(t, c.name, c.call(), codes.Internal, "Internal error.")
		})
	}
	t.Run("refused calls did nothing", func(t *testing.T) {
		if h.docs.callCount() != 0 || dump(h.store) != "" {
			t.Fatal("a call without caller did something")
		}
	})
}

func TestAddUsers(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	viewer := user("u2")
	viewer.AccessRole = "viewer"
	viewer.PhotoUrl = " https://img.example.com/u2.png "
	step(t, "add to a new organization and document", func(t *testing.T) {
		resp, err := h.srv.AddUsers(k1, &usersv1.AddUsersRequest{
			OrganizationId: "o", CreateOrganization: true, DocumentId: "d1", CreateDocument: true,
			Users: []*usersv1.User{user("u1"), viewer},
		})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetStatus() != "success" || resp.GetMessage() != "User(s) processed successfully." || len(resp.GetData()) != 2 {
			t.Fatalf("response %v", resp)
		}
		wantItem(t, resp.GetData(), "u1", true, "User added.")
		wantItem(t, resp.GetData(), "u2", true, "User added.")
		if got := h.docs.lastCall(); !proto.Equal(got, &documentsv1.EnsureResourcesRequest{ApiKey: "k1", OrganizationId: "o", CreateOrganization: true, DocumentId: "d1", CreateDocument: true}) {
			t.Fatalf("EnsureResources %v", got)
		}
		// No role: editor, but only where the user has none. A role: set as given. Organization
		// first, then the document.
		wantRoles(t, h.access.take(),
			role("k1", "o", "organization", "o", "editor", true, "u1"),
			role("k1", "o", "document", "d1", "editor", true, "u1"),
			role("k1", "o", "organization", "o", "viewer", false, "u2"),
			role("k1", "o", "document", "d1", "viewer", false, "u2"),
		)
		got, _ := h.store.Users(bg, "k1", []string{"u1", "u2"})
		if len(got) != 2 || *got[0] != (User{UserID: "u1", Name: "Name u1", Email: "u1@example.com"}) ||
			*got[1] != (User{UserID: "u2", Name: "Name u2", Email: "u2@example.com", PhotoURL: "https://img.example.com/u2.png"}) {
			t.Fatalf("identities %+v %+v", got[0], got[1])
		}
		members, _ := h.store.Members(bg, "k1", "o", nil, 0)
		contacts, _ := h.store.DocumentContacts(bg, "k1", "o", "d1", nil)
		if !slices.Equal(members, []string{"u1", "u2"}) || !slices.Equal(contacts, []string{"u1", "u2"}) {
			t.Fatalf("members %v contacts %v", members, contacts)
		}
	})

	step(t, "again with only a name changes only the name", func(t *testing.T) {
		// Again, with only a name and no document: only the name changes, no document is touched.
		if _, err := h.srv.AddUsers(k1, &usersv1.AddUsersRequest{OrganizationId: "o", Users: []*usersv1.User{{UserId: "u2", Name: "Second"}}}); err != nil {
			t.Fatal(err)
		}
		got, _ := h.store.Users(bg, "k1", []string{"u2"})
		if *got[0] != (User{UserID: "u2", Name: "Second", Email: "u2@example.com", PhotoURL: "https://img.example.com/u2.png"}) {
			t.Fatalf("after second add %+v", got[0])
		}
		wantRoles(t, h.access.take(), role("k1", "o", "organization", "o", "editor", true, "u2"))
	})

	step(t, "folder scope grants on the folder", func(t *testing.T) {
		// Folder scope: the grant goes on the folder; folders have no contact list.
		if _, err := h.srv.AddUsers(k1, &usersv1.AddUsersRequest{OrganizationId: "o", FolderId: "f1", CreateFolder: true, Users: []*usersv1.User{{UserId: "u3", AccessRole: "editor"}}}); err != nil {
			t.Fatal(err)
		}
		if !h.docs.has("folder", "k1", "o", "f1") {
			t.Fatal("createFolder did not reach the documents service")
		}
		wantRoles(t, h.access.take(),
			role("k1", "o", "organization", "o", "editor", false, "u3"),
			role("k1", "o", "folder", "f1", "editor", false, "u3"),
		)
		if got := h.get(t, k1, &usersv1.GetUsersRequest{OrganizationId: "o"}); !slices.Equal(got, []string{"u1", "u2", "u3"}) {
			t.Fatalf("organization users %v", got)
		}
	})
}

func TestAddUsersMissingResources(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.docs.addOrg("k1", "o")
	h.docs.addFolder("k1", "o", "f1")
	cases := []struct {
		name string
		req  *usersv1.AddUsersRequest
		msg  string
	}{
		{"missing organization", &usersv1.AddUsersRequest{OrganizationId: "nope", Users: usersOf("u1")}, "Organization does not exist."},
		{"createDocument in a missing organization", &usersv1.AddUsersRequest{OrganizationId: "nope", DocumentId: "d", CreateDocument: true, Users: usersOf("u1")}, "Organization does not exist."},
		{"missing document", &usersv1.AddUsersRequest{OrganizationId: "o", DocumentId: "nope", Users: usersOf("u1")}, "Document does not exist."},
		{"missing folder", &usersv1.AddUsersRequest{OrganizationId: "o", FolderId: "nope", Users: usersOf("u1")}, "Folder does not exist."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := h.srv.AddUsers(k1, c.req)
			wantStatus(t, fmt.Sprint(c.req), err, codes.NotFound, c.msg)
		})
	}
	t.Run("refused adds wrote nothing and called nothing", func(t *testing.T) {
		if d := dump(h.store); d != "" {
			t.Fatalf("refused adds wrote:\n%s", d)
		}
		if calls := h.access.take(); len(calls) != 0 {
			t.Fatalf("refused adds called access: %v", calls)
		}
	})
}

func TestAddUsersAccessFailure(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.access.fail = func(r *accessv1.SetRolesRequest) bool {
		return slices.Contains(r.GetUserIds(), "u2") || (r.GetResourceType() == "document" && slices.Contains(r.GetUserIds(), "u3"))
	}
	resp, err := h.srv.AddUsers(k1, &usersv1.AddUsersRequest{OrganizationId: "o", CreateOrganization: true, DocumentId: "d", CreateDocument: true, Users: usersOf("u1", "u2", "u3")})
	if err != nil {
		t.Fatal(err)
	}
	wantItem(t, resp.GetData(), "u1", true, "User added.")
	wantItem(t, resp.GetData(), "u2", false, "Could not set the user's access role.")
	wantItem(t, resp.GetData(), "u3", false, "Could not set the user's access role.")
	if resp.GetMessage() != "User(s) processed successfully." {
		t.Fatalf("overall %v", resp)
	}
	// A failed organization grant is not followed by a document grant.
	for _, c := range h.access.take() {
		if c.GetResourceType() == "document" && slices.Contains(c.GetUserIds(), "u2") {
			t.Fatalf("document grant after a failed organization grant: %v", c)
		}
	}
}

// isAdmin is settable only by token generation: the users API has no such field, a JSON body
// carrying it is read without it, and nothing of it is passed on or stored.
func TestIsAdminIsIgnored(t *testing.T) {
	t.Parallel()
	for _, m := range []proto.Message{&usersv1.User{}, &usersv1.UserUpdate{}, &usersv1.AddUsersRequest{}, &usersv1.UpdateUsersRequest{}} {
		t.Run(string(m.ProtoReflect().Descriptor().Name())+" has no isAdmin", func(t *testing.T) {
			fields := m.ProtoReflect().Descriptor().Fields()
			if fields.ByJSONName("isAdmin") != nil || fields.ByName("is_admin") != nil {
				t.Fatalf("%s has an isAdmin field", m.ProtoReflect().Descriptor().FullName())
			}
		})
	}
	step(t, "a JSON body's isAdmin is dropped on add and update, nothing of it stored", func(t *testing.T) {
		h := newHarness(t)
		var add usersv1.AddUsersRequest
		// The gateway reads bodies ignoring unknown fields; so does this.
		body := `{"organizationId": "o", "createOrganization": true, "users": [{"userId": "u1", "name": "Ann", "isAdmin": true}]}`
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal([]byte(body), &add); err != nil {
			t.Fatal(err)
		}
		resp, err := h.srv.AddUsers(k1, &add)
		if err != nil {
			t.Fatal(err)
		}
		wantItem(t, resp.GetData(), "u1", true, "User added.")
		var update usersv1.UpdateUsersRequest
		body = `{"organizationId": "o", "users": [{"userId": "u1", "isAdmin": true, "accessRole": "viewer"}]}`
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal([]byte(body), &update); err != nil {
			t.Fatal(err)
		}
		up, err := h.srv.UpdateUsers(k1, &update)
		if err != nil {
			t.Fatal(err)
		}
		wantItem(t, up.GetData(), "u1", true, "User updated.")
		wantRoles(t, h.access.take(),
			role("k1", "o", "organization", "o", "editor", true, "u1"),
			role("k1", "o", "organization", "o", "viewer", false, "u1"),
		)
		if d := dump(h.store); strings.Contains(strings.ToLower(d), "admin") {
			t.Fatalf("admin stored:\n%s", d)
		}
		got, _ := h.store.Users(bg, "k1", []string{"u1"})
		if *got[0] != (User{UserID: "u1", Name: "Ann"}) {
			t.Fatalf("identity %+v", got[0])
		}
	})
}

func TestGetUsersFilters(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.add(t, k1, "o", "d1", "u1", "u2")
	h.add(t, k1, "o", "", "u3", "u4")
	h.add(t, k1, "other", "d1", "u5") // same document id in another organization
	h.group(t, k1, "o", "g1", "u2", "u3")
	h.group(t, k1, "o", "g2", "u4")
	h.group(t, k1, "o", "empty")

	cases := []struct {
		name string
		req  *usersv1.GetUsersRequest
		want []string
	}{
		{"organization", &usersv1.GetUsersRequest{OrganizationId: "o"}, []string{"u1", "u2", "u3", "u4"}},
		{"organization+document", &usersv1.GetUsersRequest{OrganizationId: "o", DocumentId: "d1"}, []string{"u1", "u2"}},
		{"unknown document", &usersv1.GetUsersRequest{OrganizationId: "o", DocumentId: "nope"}, []string{}},
		{"with user ids", &usersv1.GetUsersRequest{OrganizationId: "o", UserIds: []string{"u4", "nobody", "u1", "u5", "u4"}}, []string{"u1", "u4"}},
		{"with group ids", &usersv1.GetUsersRequest{OrganizationId: "o", OrganizationUserGroupIds: []string{"g1"}}, []string{"u2", "u3"}},
		{"with several groups", &usersv1.GetUsersRequest{OrganizationId: "o", OrganizationUserGroupIds: []string{"g1", "g2", "nope"}}, []string{"u2", "u3", "u4"}},
		{"with an empty group", &usersv1.GetUsersRequest{OrganizationId: "o", OrganizationUserGroupIds: []string{"empty"}}, []string{}},
		{"document+user ids", &usersv1.GetUsersRequest{OrganizationId: "o", DocumentId: "d1", UserIds: []string{"u2", "u3"}}, []string{"u2"}},
		{"document+groups", &usersv1.GetUsersRequest{OrganizationId: "o", DocumentId: "d1", OrganizationUserGroupIds: []string{"g1"}}, []string{"u2"}},
		{"user ids+groups", &usersv1.GetUsersRequest{OrganizationId: "o", UserIds: []string{"u1", "u3", "u4"}, OrganizationUserGroupIds: []string{"g1", "g2"}}, []string{"u3", "u4"}},
		{"all together", &usersv1.GetUsersRequest{OrganizationId: "o", DocumentId: "d1", UserIds: []string{"u2", "u3"}, OrganizationUserGroupIds: []string{"g1"}}, []string{"u2"}},
		{"all together, disjoint", &usersv1.GetUsersRequest{OrganizationId: "o", DocumentId: "d1", UserIds: []string{"u1"}, OrganizationUserGroupIds: []string{"g1"}}, []string{}},
		{"other organization", &usersv1.GetUsersRequest{OrganizationId: "other", DocumentId: "d1"}, []string{"u5"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := h.get(t, k1, c.req); !slices.Equal(got, c.want) {
				t.Errorf("%s: %v, want %v", c.name, got, c.want)
			}
		})
	}

	step(t, "answers identities without creating anything", func(t *testing.T) {
		resp, err := h.srv.GetUsers(k1, &usersv1.GetUsersRequest{OrganizationId: "o", UserIds: []string{"u2", "u1"}})
		if err != nil {
			t.Fatal(err)
		}
		want := []*usersv1.UserInfo{{UserId: "u1", Name: "Name u1", Email: "u1@example.com"}, {UserId: "u2", Name: "Name u2", Email: "u2@example.com"}}
		if resp.GetStatus() != "success" || resp.GetMessage() != "Users retrieved successfully." || len(resp.GetData()) != 2 ||
			!proto.Equal(resp.GetData()[0], want[0]) || !proto.Equal(resp.GetData()[1], want[1]) {
			t.Fatalf("response %v", resp)
		}
		if got := h.docs.lastCall(); !proto.Equal(got, &documentsv1.EnsureResourcesRequest{ApiKey: "k1", OrganizationId: "o"}) {
			t.Fatalf("EnsureResources %v", got)
		}
	})

	step(t, "unknown organization", func(t *testing.T) {
		_, err := h.srv.GetUsers(k1, &usersv1.GetUsersRequest{OrganizationId: "nope"})
		wantStatus(t, "unknown organization", err, codes.NotFound, "Organization does not exist.")
	})
}

func TestUpdateUsers(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.add(t, k1, "o", "d1", "u1", "u2")
	h.docs.addFolder("k1", "o", "f1")
	h.access.take()

	step(t, "identities and organization roles; unknown users fail", func(t *testing.T) {
		resp, err := h.srv.UpdateUsers(k1, &usersv1.UpdateUsersRequest{OrganizationId: "o", Users: []*usersv1.UserUpdate{
			{UserId: "u1", Name: ptr("Renamed"), AccessRole: ptr("viewer")},
			{UserId: "u2", Email: ptr(""), PhotoUrl: ptr("http://img.example.com/2")},
			{UserId: "ghost", Name: ptr("x"), AccessRole: ptr("editor")},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetStatus() != "success" || resp.GetMessage() != "User(s) processed successfully." || len(resp.GetData()) != 3 {
			t.Fatalf("response %v", resp)
		}
		wantItem(t, resp.GetData(), "u1", true, "User updated.")
		wantItem(t, resp.GetData(), "u2", true, "User updated.")
		wantItem(t, resp.GetData(), "ghost", false, "User does not exist.")
		// Only u1 sent a role; the ghost gets nothing.
		wantRoles(t, h.access.take(), role("k1", "o", "organization", "o", "viewer", false, "u1"))
		got, _ := h.store.Users(bg, "k1", []string{"u1", "u2", "ghost"})
		if len(got) != 2 || *got[0] != (User{UserID: "u1", Name: "Renamed", Email: "u1@example.com"}) ||
			*got[1] != (User{UserID: "u2", Name: "Name u2", PhotoURL: "http://img.example.com/2"}) {
			t.Fatalf("identities %+v", got)
		}
	})

	step(t, "document and folder scope", func(t *testing.T) {
		if _, err := h.srv.UpdateUsers(k1, &usersv1.UpdateUsersRequest{OrganizationId: "o", DocumentId: "d1", Users: []*usersv1.UserUpdate{{UserId: "u1", AccessRole: ptr("editor")}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.srv.UpdateUsers(k1, &usersv1.UpdateUsersRequest{OrganizationId: "o", FolderId: "f1", Users: []*usersv1.UserUpdate{{UserId: "u2", AccessRole: ptr("viewer")}, {UserId: "u1", Name: ptr("No role")}}}); err != nil {
			t.Fatal(err)
		}
		wantRoles(t, h.access.take(),
			role("k1", "o", "document", "d1", "editor", false, "u1"),
			role("k1", "o", "folder", "f1", "viewer", false, "u2"),
		)
		if got := h.docs.lastCall(); !proto.Equal(got, &documentsv1.EnsureResourcesRequest{ApiKey: "k1", OrganizationId: "o", FolderId: "f1"}) {
			t.Fatalf("EnsureResources %v", got)
		}
	})

	step(t, "a failing access call fails that user's item", func(t *testing.T) {
		h.access.fail = func(*accessv1.SetRolesRequest) bool { return true }
		resp, err := h.srv.UpdateUsers(k1, &usersv1.UpdateUsersRequest{OrganizationId: "o", Users: []*usersv1.UserUpdate{{UserId: "u1", AccessRole: ptr("editor")}, {UserId: "u2", Name: ptr("Fine")}}})
		if err != nil {
			t.Fatal(err)
		}
		wantItem(t, resp.GetData(), "u1", false, "Could not set the user's access role.")
		wantItem(t, resp.GetData(), "u2", true, "User updated.")
		h.access.fail = nil
	})

	step(t, "missing resources are refused and nothing is done", func(t *testing.T) {
		// The named organization, document or folder must exist; nothing is done otherwise.
		h.access.take()
		before := dump(h.store)
		for _, c := range []struct {
			req *usersv1.UpdateUsersRequest
			msg string
		}{
			{&usersv1.UpdateUsersRequest{OrganizationId: "nope", Users: []*usersv1.UserUpdate{{UserId: "u1", Name: ptr("x")}}}, "Organization does not exist."},
			{&usersv1.UpdateUsersRequest{OrganizationId: "o", DocumentId: "nope", Users: []*usersv1.UserUpdate{{UserId: "u1", Name: ptr("x")}}}, "Document does not exist."},
			{&usersv1.UpdateUsersRequest{OrganizationId: "o", FolderId: "nope", Users: []*usersv1.UserUpdate{{UserId: "u1", AccessRole: ptr("editor")}}}, "Folder does not exist."},
		} {
			t.Run(c.msg, func(t *testing.T) {
				_, err := h.srv.UpdateUsers(k1, c.req)
				wantStatus(t, fmt.Sprint(c.req), err, codes.NotFound, c.msg)
			})
		}
		if dump(h.store) != before || len(h.access.take()) != 0 {
			t.Fatal("an update of missing resources changed something")
		}
		if h.docs.has("org", "k1", "nope", "") {
			t.Fatal("update created an organization")
		}
	})
}

func TestDeleteUsersFromTheOrganization(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.add(t, k1, "o", "d1", "u1", "u2", "u3")
	h.add(t, k1, "o", "d2", "u1")
	h.add(t, k1, "other", "d1", "u1")
	h.group(t, k1, "o", "g1", "u1", "u2")
	var e *lifecyclev1.Event

	step(t, "answers each user once", func(t *testing.T) {
		resp, err := h.srv.DeleteUsers(k1, &usersv1.DeleteUsersRequest{OrganizationId: "o", UserIds: []string{"u1", "ghost", "u2", "u1"}})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetStatus() != "success" || resp.GetMessage() != "User(s) deleted successfully." || len(resp.GetData()) != 3 {
			t.Fatalf("response %v", resp)
		}
		for id, want := range map[string]*usersv1.DeleteResult{
			"u1": {Success: true, Message: "User removed."}, "u2": {Success: true, Message: "User removed."},
			"ghost": {Success: false, Message: "User does not exist."},
		} {
			t.Run(id, func(t *testing.T) {
				if !proto.Equal(resp.GetData()[id], want) {
					t.Fatalf("%s: %v", id, resp.GetData()[id])
				}
			})
		}
	})
	step(t, "one event for the members only", func(t *testing.T) {
		// One event for the members only; the tenant and organization on it.
		events := h.events.events()
		if len(events) != 1 {
			t.Fatalf("published %v", events)
		}
		e = events[0]
		want := &lifecyclev1.UsersRemoved{UserIds: []string{"u1", "u2"}}
		if e.GetType() != "users.removed" || e.GetApiKey() != "k1" || e.GetOrganizationId() != "o" ||
			e.GetCreatedAt() != float64(t0.UnixMilli()) || !proto.Equal(e.GetUsersRemoved(), want) {
			t.Fatalf("event %v", e)
		}
	})
	step(t, "delivered at once: gone from the organization, its documents and groups only", func(t *testing.T) {
		// Delivered at once: gone from the organization, its documents and groups; not elsewhere.
		for name, c := range map[string]struct {
			req  *usersv1.GetUsersRequest
			want []string
		}{
			"organization": {&usersv1.GetUsersRequest{OrganizationId: "o"}, []string{"u3"}},
			"d1":           {&usersv1.GetUsersRequest{OrganizationId: "o", DocumentId: "d1"}, []string{"u3"}},
			"g1":           {&usersv1.GetUsersRequest{OrganizationId: "o", OrganizationUserGroupIds: []string{"g1"}}, []string{}},
			"other":        {&usersv1.GetUsersRequest{OrganizationId: "other", DocumentId: "d1"}, []string{"u1"}},
		} {
			t.Run(name, func(t *testing.T) {
				if got := h.get(t, k1, c.req); !slices.Equal(got, c.want) {
					t.Errorf("%s: %v, want %v", name, got, c.want)
				}
			})
		}
		if c, _ := h.store.DocumentContacts(bg, "k1", "o", "d2", nil); len(c) != 0 {
			t.Fatalf("d2 keeps %v", c)
		}
		if u, _ := h.store.Users(bg, "k1", []string{"u1"}); len(u) != 1 {
			t.Fatal("the identity belongs to the API key and stays")
		}
		if rec, err := h.box.Get(bg, e.GetId()); err != nil || rec.State() != "completed" {
			t.Fatalf("event record %+v %v", rec, err)
		}
	})

	step(t, "nobody left to remove publishes nothing", func(t *testing.T) {
		resp, err := h.srv.DeleteUsers(k1, &usersv1.DeleteUsersRequest{OrganizationId: "o", UserIds: []string{"u1"}})
		if err != nil || resp.GetData()["u1"].GetSuccess() {
			t.Fatalf("second delete %v %v", resp, err)
		}
		if n := len(h.events.events()); n != 1 {
			t.Fatalf("%d events after deleting non-members", n)
		}
	})
}

func TestDeleteUsersFromADocumentOrFolder(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.add(t, k1, "o", "d1", "u1", "u2")
	h.add(t, k1, "o", "d2", "u1")
	h.docs.addFolder("k1", "o", "f1")
	h.group(t, k1, "o", "g1", "u1")

	step(t, "from a document", func(t *testing.T) {
		resp, err := h.srv.DeleteUsers(k1, &usersv1.DeleteUsersRequest{OrganizationId: "o", DocumentId: "d1", UserIds: []string{"u1", "ghost"}})
		if err != nil {
			t.Fatal(err)
		}
		if !resp.GetData()["u1"].GetSuccess() || resp.GetData()["ghost"].GetSuccess() || resp.GetData()["ghost"].GetMessage() != "User does not exist." {
			t.Fatalf("response %v", resp)
		}
		if got := h.get(t, k1, &usersv1.GetUsersRequest{OrganizationId: "o", DocumentId: "d1"}); !slices.Equal(got, []string{"u2"}) {
			t.Fatalf("d1 %v", got)
		}
	})
	step(t, "other lists keep the user", func(t *testing.T) {
		for name, req := range map[string]*usersv1.GetUsersRequest{
			"organization": {OrganizationId: "o", UserIds: []string{"u1"}},
			"d2":           {OrganizationId: "o", DocumentId: "d2"},
			"g1":           {OrganizationId: "o", OrganizationUserGroupIds: []string{"g1"}},
		} {
			t.Run(name+" keeps the user", func(t *testing.T) {
				if got := h.get(t, k1, req); !slices.Equal(got, []string{"u1"}) {
					t.Fatalf("%s lost u1: %v", name, got)
				}
			})
		}
	})

	step(t, "from a folder leaves this service's data to access", func(t *testing.T) {
		before := dump(h.store)
		if _, err := h.srv.DeleteUsers(k1, &usersv1.DeleteUsersRequest{OrganizationId: "o", FolderId: "f1", UserIds: []string{"u1"}}); err != nil {
			t.Fatal(err)
		}
		if dump(h.store) != before {
			t.Fatal("a folder-scoped delete changed the users service's data (access removes the folder grants)")
		}
	})
	step(t, "one event per delete, naming its scope", func(t *testing.T) {
		events := h.events.events()
		if len(events) != 2 || !proto.Equal(events[0].GetUsersRemoved(), &lifecyclev1.UsersRemoved{UserIds: []string{"u1"}, DocumentId: "d1"}) ||
			!proto.Equal(events[1].GetUsersRemoved(), &lifecyclev1.UsersRemoved{UserIds: []string{"u1"}, FolderId: "f1"}) {
			t.Fatalf("events %v", events)
		}
	})

	step(t, "missing resources are refused and publish nothing", func(t *testing.T) {
		for _, c := range []struct {
			req *usersv1.DeleteUsersRequest
			msg string
		}{
			{&usersv1.DeleteUsersRequest{OrganizationId: "nope", UserIds: []string{"u1"}}, "Organization does not exist."},
			{&usersv1.DeleteUsersRequest{OrganizationId: "o", DocumentId: "nope", UserIds: []string{"u1"}}, "Document does not exist."},
			{&usersv1.DeleteUsersRequest{OrganizationId: "o", FolderId: "nope", UserIds: []string{"u1"}}, "Folder does not exist."},
		} {
			t.Run(c.msg, func(t *testing.T) {
				_, err := h.srv.DeleteUsers(k1, c.req)
				wantStatus(t, fmt.Sprint(c.req), err, codes.NotFound, c.msg)
			})
		}
		if len(h.events.events()) != 2 {
			t.Fatal("a refused delete published")
		}
	})
}

func TestUserGroups(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.add(t, k1, "o", "", "u1", "u2", "u3")

	step(t, "add a group", func(t *testing.T) {
		resp, err := h.srv.AddUserGroups(k1, &usersv1.AddUserGroupsRequest{OrganizationId: "o", OrganizationUserGroups: []*usersv1.UserGroup{{GroupId: "g1", GroupName: "Team"}}})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetStatus() != "success" || resp.GetMessage() != "Group(s) processed successfully." {
			t.Fatalf("response %v", resp)
		}
		wantItem(t, resp.GetData(), "g1", true, "Group added.")
	})
	step(t, "adding an existing group renames it", func(t *testing.T) {
		resp, err := h.srv.AddUserGroups(k1, &usersv1.AddUserGroupsRequest{OrganizationId: "o", OrganizationUserGroups: []*usersv1.UserGroup{{GroupId: "g1", GroupName: "Renamed"}, {GroupId: "g2", GroupName: "Other"}}})
		if err != nil {
			t.Fatal(err)
		}
		wantItem(t, resp.GetData(), "g1", true, "Group updated.")
		wantItem(t, resp.GetData(), "g2", true, "Group added.")
		if g, _ := h.store.Group(bg, "k1", "o", "g1"); g.Name != "Renamed" {
			t.Fatalf("group %+v", g)
		}
	})
	step(t, "groups of a missing organization", func(t *testing.T) {
		_, err := h.srv.AddUserGroups(k1, &usersv1.AddUserGroupsRequest{OrganizationId: "nope", OrganizationUserGroups: []*usersv1.UserGroup{{GroupId: "g1"}}})
		wantStatus(t, "groups of a missing organization", err, codes.NotFound, "Organization does not exist.")
	})

	step(t, "add users to a group, once each; unknown users fail", func(t *testing.T) {
		add, err := h.srv.AddUsersToGroup(k1, &usersv1.AddUsersToGroupRequest{OrganizationId: "o", OrganizationUserGroupId: "g1", UserIds: []string{"u1", "u2", "ghost", "u1"}})
		if err != nil {
			t.Fatal(err)
		}
		if add.GetStatus() != "success" || add.GetMessage() != "User(s) processed successfully." || len(add.GetData()) != 3 {
			t.Fatalf("response %v", add)
		}
		wantItem(t, add.GetData(), "u1", true, "User added to group.")
		wantItem(t, add.GetData(), "u2", true, "User added to group.")
		wantItem(t, add.GetData(), "ghost", false, "User does not exist.")
		if got, _ := h.store.GroupMembers(bg, "k1", "o", []string{"g1"}, nil); !slices.Equal(got, []string{"u1", "u2"}) {
			t.Fatalf("g1 %v", got)
		}
	})

	step(t, "delete users from a group keeps them in the organization", func(t *testing.T) {
		del, err := h.srv.DeleteUsersFromGroup(k1, &usersv1.DeleteUsersFromGroupRequest{OrganizationId: "o", OrganizationUserGroupId: "g1", UserIds: []string{"u1", "u3", "ghost"}})
		if err != nil {
			t.Fatal(err)
		}
		if del.GetStatus() != "success" || del.GetMessage() != "User(s) processed successfully." {
			t.Fatalf("response %v", del)
		}
		wantItem(t, del.GetData(), "u1", true, "User removed from group.")
		wantItem(t, del.GetData(), "u3", false, "User is not in the group.")
		wantItem(t, del.GetData(), "ghost", false, "User does not exist.")
		if got, _ := h.store.GroupMembers(bg, "k1", "o", []string{"g1"}, nil); !slices.Equal(got, []string{"u2"}) {
			t.Fatalf("g1 after delete %v", got)
		}
		if got, _ := h.store.Members(bg, "k1", "o", nil, 0); !slices.Equal(got, []string{"u1", "u2", "u3"}) {
			t.Fatalf("leaving a group left the organization: %v", got)
		}
	})

	step(t, "a missing group or organization is refused and nothing changes", func(t *testing.T) {
		before := dump(h.store)
		for _, c := range []struct {
			name string
			call func() error
			msg  string
		}{
			{"add to a missing group", func() error {
				_, err := h.srv.AddUsersToGroup(k1, &usersv1.AddUsersToGroupRequest{OrganizationId: "o", OrganizationUserGroupId: "nope", UserIds: []string{"u1"}})
				return err
			}, "Group does not exist."},
			{"delete from a missing group", func() error {
				_, err := h.srv.DeleteUsersFromGroup(k1, &usersv1.DeleteUsersFromGroupRequest{OrganizationId: "o", OrganizationUserGroupId: "nope", UserIds: []string{"u1"}})
				return err
			}, "Group does not exist."},
			{"add in a missing organization", func() error {
				_, err := h.srv.AddUsersToGroup(k1, &usersv1.AddUsersToGroupRequest{OrganizationId: "nope", OrganizationUserGroupId: "g1", UserIds: []string{"u1"}})
				return err
			}, "Organization does not exist."},
		} {
			t.Run(c.name, func(t *testing.T) {
				wantStatus(t, c.name, c.call(), codes.NotFound, c.msg)
			})
		}
		if dump(h.store) != before {
			t.Fatal("a refused group call changed something")
		}
	})
}

// Every refusal of bad input is INVALID_ARGUMENT with its message, and happens before anything
// is written or any service called.
func TestBadInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.add(t, k1, "o", "d1", "u1")
	h.group(t, k1, "o", "g1", "u1")
	h.docs.addFolder("k1", "o", "f1")
	h.access.take()
	before, docCalls := dump(h.store), h.docs.callCount()

	long := strings.Repeat("x", 201)
	many := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("u%d", i)
		}
		return out
	}
	manyUsers := func(n int) []*usersv1.User { return usersOf(many(n)...) }
	manyUpdates := func(n int) []*usersv1.UserUpdate {
		var out []*usersv1.UserUpdate
		for _, id := range many(n) {
			out = append(out, &usersv1.UserUpdate{UserId: id})
		}
		return out
	}
	manyGroups := func(n int) []*usersv1.UserGroup {
		var out []*usersv1.UserGroup
		for _, id := range many(n) {
			out = append(out, &usersv1.UserGroup{GroupId: id})
		}
		return out
	}
	addUsers := func(req *usersv1.AddUsersRequest) func() error {
		return func() error { _, err := h.srv.AddUsers(k1, req); return err }
	}
	getUsers := func(req *usersv1.GetUsersRequest) func() error {
		return func() error { _, err := h.srv.GetUsers(k1, req); return err }
	}
	updateUsers := func(req *usersv1.UpdateUsersRequest) func() error {
		return func() error { _, err := h.srv.UpdateUsers(k1, req); return err }
	}
	deleteUsers := func(req *usersv1.DeleteUsersRequest) func() error {
		return func() error { _, err := h.srv.DeleteUsers(k1, req); return err }
	}
	addGroups := func(req *usersv1.AddUserGroupsRequest) func() error {
		return func() error { _, err := h.srv.AddUserGroups(k1, req); return err }
	}
	toGroup := func(req *usersv1.AddUsersToGroupRequest) func() error {
		return func() error { _, err := h.srv.AddUsersToGroup(k1, req); return err }
	}
	fromGroup := func(req *usersv1.DeleteUsersFromGroupRequest) func() error {
		return func() error { _, err := h.srv.DeleteUsersFromGroup(k1, req); return err }
	}
	withRole := func(r string) *usersv1.User { u := user("u9"); u.AccessRole = r; return u }
	withEmail := func(e string) *usersv1.User { u := user("u9"); u.Email = e; return u }
	withPhoto := func(p string) *usersv1.User { u := user("u9"); u.PhotoUrl = p; return u }

	cases := []struct {
		name string
		call func() error
		msg  string
	}{
		{"add: no organization", addUsers(&usersv1.AddUsersRequest{Users: usersOf("u9"), CreateOrganization: true}), "organizationId is required."},
		{"add: organization with control characters", addUsers(&usersv1.AddUsersRequest{OrganizationId: "o\x00", Users: usersOf("u9")}), "organizationId must not contain control characters."},
		{"add: no users", addUsers(&usersv1.AddUsersRequest{OrganizationId: "o"}), "users must contain at least one user."},
		{"add: 101 users", addUsers(&usersv1.AddUsersRequest{OrganizationId: "o", Users: manyUsers(101)}), "users must contain at most 100 users."},
		{"add: no user id", addUsers(&usersv1.AddUsersRequest{OrganizationId: "o", Users: []*usersv1.User{{Name: "x"}}}), "users[0].userId is required."},
		{"add: user id with spaces", addUsers(&usersv1.AddUsersRequest{OrganizationId: "o", Users: []*usersv1.User{{UserId: " u"}}}), "users[0].userId must not start or end with white space."},
		{"add: same user twice", addUsers(&usersv1.AddUsersRequest{OrganizationId: "o", Users: usersOf("u9", "u8", "u9")}), "users[2].userId repeats users[0].userId: each user may appear once."},
		{"add: long name", addUsers(&usersv1.AddUsersRequest{OrganizationId: "o", Users: []*usersv1.User{{UserId: "u9", Name: long}}}), "users[0].name must be at most 200 characters."},
		{"add: name with a line break", addUsers(&usersv1.AddUsersRequest{OrganizationId: "o", Users: []*usersv1.User{{UserId: "u9", Name: "Ann\r\nBcc: x@example.com"}}}), "users[0].name must not contain control characters."},
		{"add: name with a C1 control", addUsers(&usersv1.AddUsersRequest{OrganizationId: "o", Users: []*usersv1.User{user("u8"), {UserId: "u9", Name: "Ann\u009bx"}}}), "users[1].name must not contain control characters."},
		{"add: name with a bidi override", addUsers(&usersv1.AddUsersRequest{OrganizationId: "o", Users: []*usersv1.User{{UserId: "u9", Name: "admin\u202Enimda"}}}), "users[0].name must not contain control characters."},
		{"add: display-name email", addUsers(&usersv1.AddUsersRequest{OrganizationId: "o", Users: []*usersv1.User{withEmail("Ann <ann@example.com>")}}), "users[0].email must be a valid email address."},
		{"add: not an email", addUsers(&usersv1.AddUsersRequest{OrganizationId: "o", Users: []*usersv1.User{withEmail("ann")}}), "users[0].email must be a valid email address."},
		{"add: ftp photo", addUsers(&usersv1.AddUsersRequest{OrganizationId: "o", Users: []*usersv1.User{withPhoto("ftp://x.example/p.png")}}), "users[0].photoUrl must be a valid http(s) URL."},
		{"add: relative photo", addUsers(&usersv1.AddUsersRequest{OrganizationId: "o", Users: []*usersv1.User{withPhoto("/p.png")}}), "users[0].photoUrl must be a valid http(s) URL."},
		{"add: admin role", addUsers(&usersv1.AddUsersRequest{OrganizationId: "o", Users: []*usersv1.User{withRole("admin")}}), "users[0].accessRole must be one of viewer, editor."},
		{"add: bad second user", addUsers(&usersv1.AddUsersRequest{OrganizationId: "o", Users: []*usersv1.User{user("u8"), withRole("owner")}}), "users[1].accessRole must be one of viewer, editor."},
		{"add: document and folder", addUsers(&usersv1.AddUsersRequest{OrganizationId: "o", DocumentId: "d1", FolderId: "f1", Users: usersOf("u9")}), "Provide either documentId or folderId, not both."},
		{"add: bad document id", addUsers(&usersv1.AddUsersRequest{OrganizationId: "o", DocumentId: "d1 ", Users: usersOf("u9")}), "documentId must not start or end with white space."},
		{"add: bad folder id", addUsers(&usersv1.AddUsersRequest{OrganizationId: "o", FolderId: "f\x01", Users: usersOf("u9")}), "folderId must not contain control characters."},

		{"get: no organization", getUsers(&usersv1.GetUsersRequest{}), "organizationId is required."},
		{"get: bad document id", getUsers(&usersv1.GetUsersRequest{OrganizationId: "o", DocumentId: " d"}), "documentId must not start or end with white space."},
		{"get: 101 user ids", getUsers(&usersv1.GetUsersRequest{OrganizationId: "o", UserIds: many(101)}), "userIds must contain at most 100 ids."},
		{"get: empty user id", getUsers(&usersv1.GetUsersRequest{OrganizationId: "o", UserIds: []string{"u1", ""}}), "userIds[1] must not be empty."},
		{"get: 31 group ids", getUsers(&usersv1.GetUsersRequest{OrganizationId: "o", OrganizationUserGroupIds: many(31)}), "organizationUserGroupIds must contain at most 30 ids."},

		{"update: no organization", updateUsers(&usersv1.UpdateUsersRequest{Users: []*usersv1.UserUpdate{{UserId: "u1"}}}), "organizationId is required."},
		{"update: no users", updateUsers(&usersv1.UpdateUsersRequest{OrganizationId: "o"}), "users must contain at least one user."},
		{"update: 101 users", updateUsers(&usersv1.UpdateUsersRequest{OrganizationId: "o", Users: manyUpdates(101)}), "users must contain at most 100 users."},
		{"update: no user id", updateUsers(&usersv1.UpdateUsersRequest{OrganizationId: "o", Users: []*usersv1.UserUpdate{{Name: ptr("x")}}}), "users[0].userId is required."},
		{"update: same user twice", updateUsers(&usersv1.UpdateUsersRequest{OrganizationId: "o", Users: []*usersv1.UserUpdate{{UserId: "u1"}, {UserId: "u1"}}}), "users[1].userId repeats users[0].userId: each user may appear once."},
		{"update: owner role", updateUsers(&usersv1.UpdateUsersRequest{OrganizationId: "o", Users: []*usersv1.UserUpdate{{UserId: "u1", AccessRole: ptr("owner")}}}), "users[0].accessRole must be one of viewer, editor."},
		{"update: bad email", updateUsers(&usersv1.UpdateUsersRequest{OrganizationId: "o", Users: []*usersv1.UserUpdate{{UserId: "u1", Email: ptr("a@b@c")}}}), "users[0].email must be a valid email address."},
		{"update: long name", updateUsers(&usersv1.UpdateUsersRequest{OrganizationId: "o", Users: []*usersv1.UserUpdate{{UserId: "u1"}, {UserId: "u2", Name: ptr(long)}}}), "users[1].name must be at most 200 characters."},
		{"update: name with a tab", updateUsers(&usersv1.UpdateUsersRequest{OrganizationId: "o", Users: []*usersv1.UserUpdate{{UserId: "u1", Name: ptr("A\tB")}}}), "users[0].name must not contain control characters."},
		{"update: name with a line separator", updateUsers(&usersv1.UpdateUsersRequest{OrganizationId: "o", Users: []*usersv1.UserUpdate{{UserId: "u1"}, {UserId: "u2", Name: ptr("A\u2028B")}}}), "users[1].name must not contain control characters."},
		{"update: bad photo", updateUsers(&usersv1.UpdateUsersRequest{OrganizationId: "o", Users: []*usersv1.UserUpdate{{UserId: "u1", PhotoUrl: ptr("javascript:alert(1)")}}}), "users[0].photoUrl must be a valid http(s) URL."},
		{"update: document and folder", updateUsers(&usersv1.UpdateUsersRequest{OrganizationId: "o", DocumentId: "d1", FolderId: "f1", Users: []*usersv1.UserUpdate{{UserId: "u1", AccessRole: ptr("viewer")}}}), "Provide either documentId or folderId, not both."},

		{"delete: no organization", deleteUsers(&usersv1.DeleteUsersRequest{UserIds: []string{"u1"}}), "organizationId is required."},
		{"delete: no user ids", deleteUsers(&usersv1.DeleteUsersRequest{OrganizationId: "o"}), "userIds must contain at least one id."},
		{"delete: 101 user ids", deleteUsers(&usersv1.DeleteUsersRequest{OrganizationId: "o", UserIds: many(101)}), "userIds must contain at most 100 ids."},
		{"delete: empty user id", deleteUsers(&usersv1.DeleteUsersRequest{OrganizationId: "o", UserIds: []string{""}}), "userIds[0] must not be empty."},
		{"delete: document and folder", deleteUsers(&usersv1.DeleteUsersRequest{OrganizationId: "o", DocumentId: "d1", FolderId: "f1", UserIds: []string{"u1"}}), "Provide either documentId or folderId, not both."},

		{"groups: no organization", addGroups(&usersv1.AddUserGroupsRequest{OrganizationUserGroups: manyGroups(1)}), "organizationId is required."},
		{"groups: none", addGroups(&usersv1.AddUserGroupsRequest{OrganizationId: "o"}), "organizationUserGroups must contain at least one group."},
		{"groups: 101", addGroups(&usersv1.AddUserGroupsRequest{OrganizationId: "o", OrganizationUserGroups: manyGroups(101)}), "organizationUserGroups must contain at most 100 groups."},
		{"groups: no id", addGroups(&usersv1.AddUserGroupsRequest{OrganizationId: "o", OrganizationUserGroups: []*usersv1.UserGroup{{GroupName: "x"}}}), "organizationUserGroups[0].groupId is required."},
		{"groups: same id twice", addGroups(&usersv1.AddUserGroupsRequest{OrganizationId: "o", OrganizationUserGroups: []*usersv1.UserGroup{{GroupId: "g9"}, {GroupId: "g9"}}}), "organizationUserGroups[1].groupId repeats organizationUserGroups[0].groupId: each group may appear once."},
		{"groups: name with a NUL", addGroups(&usersv1.AddUserGroupsRequest{OrganizationId: "o", OrganizationUserGroups: []*usersv1.UserGroup{{GroupId: "g9", GroupName: "Team\x00B"}}}), "organizationUserGroups[0].groupName must not contain control characters."},
		{"groups: renaming to a DEL", addGroups(&usersv1.AddUserGroupsRequest{OrganizationId: "o", OrganizationUserGroups: []*usersv1.UserGroup{{GroupId: "g1", GroupName: "Team\x7fB"}}}), "organizationUserGroups[0].groupName must not contain control characters."},
		{"groups: long name", addGroups(&usersv1.AddUserGroupsRequest{OrganizationId: "o", OrganizationUserGroups: []*usersv1.UserGroup{{GroupId: "g9", GroupName: long}}}), "organizationUserGroups[0].groupName must be at most 200 characters."},

		{"to group: no organization", toGroup(&usersv1.AddUsersToGroupRequest{OrganizationUserGroupId: "g1", UserIds: []string{"u1"}}), "organizationId is required."},
		{"to group: no group", toGroup(&usersv1.AddUsersToGroupRequest{OrganizationId: "o", UserIds: []string{"u1"}}), "organizationUserGroupId is required."},
		{"to group: no users", toGroup(&usersv1.AddUsersToGroupRequest{OrganizationId: "o", OrganizationUserGroupId: "g1"}), "userIds must contain at least one id."},
		{"to group: 101 users", toGroup(&usersv1.AddUsersToGroupRequest{OrganizationId: "o", OrganizationUserGroupId: "g1", UserIds: many(101)}), "userIds must contain at most 100 ids."},
		{"from group: no organization", fromGroup(&usersv1.DeleteUsersFromGroupRequest{OrganizationUserGroupId: "g1", UserIds: []string{"u1"}}), "organizationId is required."},
		{"from group: no group", fromGroup(&usersv1.DeleteUsersFromGroupRequest{OrganizationId: "o", UserIds: []string{"u1"}}), "organizationUserGroupId is required."},
		{"from group: no users", fromGroup(&usersv1.DeleteUsersFromGroupRequest{OrganizationId: "o", OrganizationUserGroupId: "g1"}), "userIds must contain at least one id."},
		{"from group: bad user id", fromGroup(&usersv1.DeleteUsersFromGroupRequest{OrganizationId: "o", OrganizationUserGroupId: "g1", UserIds: []string{"u1", "u\x01"}}), "userIds[1] must not contain control characters."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantStatus(t, c.name, c.call(), codes.InvalidArgument, c.msg)
			if dump(h.store) != before {
				t.Fatalf("%s: the store changed", c.name)
			}
			if n := h.docs.callCount(); n != docCalls {
				t.Fatalf("%s: the documents service was called", c.name)
			}
			if calls := h.access.take(); len(calls) != 0 {
				t.Fatalf("%s: the access service was called: %v", c.name, calls)
			}
			if n := len(h.events.events()); n != 0 {
				t.Fatalf("%s: %d events published", c.name, n)
			}
		})
	}
}

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	k2 := as("k2")
	h.add(t, k1, "o", "d1", "u1")
	h.group(t, k1, "o", "g1", "u1")
	mine := dump(h.store)

	step(t, "another key has no organization of that id", func(t *testing.T) {
		// k2 has no organization "o": everything about it is NOT_FOUND.
		_, err := h.srv.GetUsers(k2, &usersv1.GetUsersRequest{OrganizationId: "o"})
		wantStatus(t, "k2 reads k1's organization", err, codes.NotFound, "Organization does not exist.")
		_, err = h.srv.DeleteUsers(k2, &usersv1.DeleteUsersRequest{OrganizationId: "o", UserIds: []string{"u1"}})
		wantStatus(t, "k2 deletes in k1's organization", err, codes.NotFound, "Organization does not exist.")
		if dump(h.store) != mine {
			t.Fatal("k2 changed k1's data")
		}
	})

	step(t, "another key's own organization of that id is another world", func(t *testing.T) {
		// k2's own organization "o", with the same user and group ids, is another world.
		h.add(t, k2, "o", "d1", "u2")
		h.access.take()
		if got := h.get(t, k2, &usersv1.GetUsersRequest{OrganizationId: "o"}); !slices.Equal(got, []string{"u2"}) {
			t.Fatalf("k2 sees %v", got)
		}
		if got := h.get(t, k2, &usersv1.GetUsersRequest{OrganizationId: "o", UserIds: []string{"u1"}}); len(got) != 0 {
			t.Fatalf("k2 sees k1's user %v", got)
		}
		up, err := h.srv.UpdateUsers(k2, &usersv1.UpdateUsersRequest{OrganizationId: "o", Users: []*usersv1.UserUpdate{{UserId: "u1", Name: ptr("Hijacked"), AccessRole: ptr("viewer")}}})
		if err != nil {
			t.Fatal(err)
		}
		wantItem(t, up.GetData(), "u1", false, "User does not exist.")
		del, err := h.srv.DeleteUsers(k2, &usersv1.DeleteUsersRequest{OrganizationId: "o", DocumentId: "d1", UserIds: []string{"u1"}})
		if err != nil || del.GetData()["u1"].GetSuccess() {
			t.Fatalf("k2 deletes k1's user: %v %v", del, err)
		}
		_, err = h.srv.AddUsersToGroup(k2, &usersv1.AddUsersToGroupRequest{OrganizationId: "o", OrganizationUserGroupId: "g1", UserIds: []string{"u2"}})
		wantStatus(t, "k2 uses k1's group", err, codes.NotFound, "Group does not exist.")
		if len(h.access.take()) != 0 {
			t.Fatal("k2's refused update reached access")
		}
	})

	step(t, "the first key's data is unchanged", func(t *testing.T) {
		if got := h.get(t, k1, &usersv1.GetUsersRequest{OrganizationId: "o", DocumentId: "d1", OrganizationUserGroupIds: []string{"g1"}}); !slices.Equal(got, []string{"u1"}) {
			t.Fatalf("k1 after k2's calls: %v", got)
		}
		if u, _ := h.store.Users(bg, "k1", []string{"u1"}); u[0].Name != "Name u1" {
			t.Fatalf("k1's user renamed: %+v", u[0])
		}
	})
	step(t, "calls to other services name the caller's key", func(t *testing.T) {
		// k2's calls to other services name k2.
		if c := h.docs.lastCall(); c.GetApiKey() != "k1" {
			t.Fatalf("last EnsureResources %v", c)
		}
		h.add(t, k2, "o", "", "u3")
		for _, c := range h.access.take() {
			if c.GetApiKey() != "k2" {
				t.Fatalf("k2's grant sent as %v", c)
			}
		}
	})
}

func TestPeerFailures(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, c := range []struct {
		name    string
		docsErr error
		call    func() error
		code    codes.Code
		msg     string
	}{
		{"documents unavailable", status.Error(codes.Unavailable, "documents restarting"), func() error {
			_, err := h.srv.GetUsers(k1, &usersv1.GetUsersRequest{OrganizationId: "o"})
			return err
		}, codes.Unavailable, "documents restarting"},
		{"documents broken", status.Error(codes.Internal, "mongo at 10.1.2.3 refused"), func() error {
			_, err := h.srv.AddUsers(k1, &usersv1.AddUsersRequest{OrganizationId: "o", Users: usersOf("u1")})
			return err
		}, codes.Internal, "Internal error."},
		{"documents failing oddly", errors.New("not a status"), func() error {
			_, err := h.srv.DeleteUsers(k1, &usersv1.DeleteUsersRequest{OrganizationId: "o", UserIds: []string{"u1"}})
			return err
		}, codes.Internal, "Internal error."},
	} {
		t.Run(c.name, func(t *testing.T) {
			h.docs.err = c.docsErr
			wantStatus(t, c.name, c.call(), c.code, c.msg)
		})
	}
	t.Run("nothing written", func(t *testing.T) {
		if dump(h.store) != "" {
			t.Fatal("written despite the failure")
		}
	})
}

// Each event is applied twice: the second delivery must change nothing.
func TestHandleEvent(t *testing.T) {
	t.Parallel()
	seed := func(t *testing.T) *harness {
		h := newHarness(t)
		for _, org := range []string{"o", "other"} {
			h.add(t, k1, org, "d1", "u1", "u2")
			h.add(t, k1, org, "d2", "u2", "u3")
			h.group(t, k1, org, "g1", "u1", "u3")
		}
		h.add(t, as("k2"), "o", "d1", "u1")
		return h
	}
	event := func(id string, apiKey string, payload *lifecyclev1.Event) *lifecyclev1.Event {
		payload.Id, payload.ApiKey, payload.OrganizationId = id, apiKey, "o"
		return payload
	}
	twice := func(t *testing.T, h *harness, e *lifecyclev1.Event) {
		t.Helper()
		for i := range 2 {
			if err := h.srv.HandleEvent(bg, e); err != nil {
				t.Fatalf("delivery %d: %v", i+1, err)
			}
		}
	}
	list := func(h *harness, apiKey, org string) string {
		var parts []string
		m, _ := h.store.Members(bg, apiKey, org, nil, 0)
		parts = append(parts, "members="+strings.Join(m, ","))
		for _, d := range []string{"d1", "d2", "d3"} {
			c, _ := h.store.DocumentContacts(bg, apiKey, org, d, nil)
			parts = append(parts, d+"="+strings.Join(c, ","))
		}
		g, _ := h.store.GroupMembers(bg, apiKey, org, []string{"g1"}, nil)
		_, gerr := h.store.Group(bg, apiKey, org, "g1")
		parts = append(parts, "g1="+strings.Join(g, ","), fmt.Sprintf("group=%v", gerr == nil))
		return strings.Join(parts, " ")
	}
	const untouched = "members=u1,u2,u3 d1=u1,u2 d2=u2,u3 d3= g1=u1,u3 group=true"
	const k2Untouched = "members=u1 d1=u1 d2= d3= g1= group=false"

	cases := []struct {
		name  string
		event *lifecyclev1.Event
		want  string
	}{
		{"organization.deleted", &lifecyclev1.Event{Type: "organization.deleted", Payload: &lifecyclev1.Event_OrganizationDeleted{OrganizationDeleted: &lifecyclev1.OrganizationDeleted{}}},
			"members= d1= d2= d3= g1= group=false"},
		{"document.deleted", &lifecyclev1.Event{Type: "document.deleted", Payload: &lifecyclev1.Event_DocumentsDeleted{DocumentsDeleted: &lifecyclev1.DocumentsDeleted{DocumentIds: []string{"d1", "nope"}}}},
			"members=u1,u2,u3 d1= d2=u2,u3 d3= g1=u1,u3 group=true"},
		{"document.migrated onto a new document", &lifecyclev1.Event{Type: "document.migrated", Payload: &lifecyclev1.Event_DocumentMigrated{DocumentMigrated: &lifecyclev1.DocumentMigrated{FromDocumentId: "d1", ToDocumentId: "d3", MigrationId: "m"}}},
			"members=u1,u2,u3 d1= d2=u2,u3 d3=u1,u2 g1=u1,u3 group=true"},
		{"document.migrated merging", &lifecyclev1.Event{Type: "document.migrated", Payload: &lifecyclev1.Event_DocumentMigrated{DocumentMigrated: &lifecyclev1.DocumentMigrated{FromDocumentId: "d1", ToDocumentId: "d2", MigrationId: "m"}}},
			"members=u1,u2,u3 d1= d2=u1,u2,u3 d3= g1=u1,u3 group=true"},
		{"users.removed from the organization", &lifecyclev1.Event{Type: "users.removed", Payload: &lifecyclev1.Event_UsersRemoved{UsersRemoved: &lifecyclev1.UsersRemoved{UserIds: []string{"u1", "u2"}}}},
			"members=u3 d1= d2=u3 d3= g1=u3 group=true"},
		{"users.removed from a document", &lifecyclev1.Event{Type: "users.removed", Payload: &lifecyclev1.Event_UsersRemoved{UsersRemoved: &lifecyclev1.UsersRemoved{UserIds: []string{"u1", "u2"}, DocumentId: "d2"}}},
			"members=u1,u2,u3 d1=u1,u2 d2=u3 d3= g1=u1,u3 group=true"},
		{"users.removed from a folder", &lifecyclev1.Event{Type: "users.removed", Payload: &lifecyclev1.Event_UsersRemoved{UsersRemoved: &lifecyclev1.UsersRemoved{UserIds: []string{"u1"}, FolderId: "f1"}}},
			untouched},
		{"folder.deleted", &lifecyclev1.Event{Type: "folder.deleted", Payload: &lifecyclev1.Event_FolderDeleted{FolderDeleted: &lifecyclev1.FolderDeleted{FolderId: "f1"}}},
			untouched},
		{"location.data_deleted", &lifecyclev1.Event{Type: "location.data_deleted", Payload: &lifecyclev1.Event_LocationDataDeleted{LocationDataDeleted: &lifecyclev1.LocationDataDeleted{DocumentId: "d1", LocationId: "l"}}},
			untouched},
		{"an unknown type", &lifecyclev1.Event{Type: "comment.add"}, untouched},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := seed(t)
			if got := list(h, "k1", "o"); got != untouched {
				t.Fatalf("seed: %s", got)
			}
			twice(t, h, event("e1", "k1", c.event))
			if got := list(h, "k1", "o"); got != c.want {
				t.Fatalf("after:\n got %s\nwant %s", got, c.want)
			}
			if got := list(h, "k1", "other"); got != untouched {
				t.Fatalf("another organization changed: %s", got)
			}
			if got := list(h, "k2", "o"); got != k2Untouched {
				t.Fatalf("another tenant changed: %s", got)
			}
			if u, _ := h.store.Users(bg, "k1", []string{"u1", "u2", "u3"}); len(u) != 3 {
				t.Fatalf("identities lost: %v", u)
			}
		})
	}

	// Events this service cannot apply fail for good, not forever.
	t.Run("events that can never apply", func(t *testing.T) {
		h := seed(t)
		for _, c := range []struct {
			name string
			e    *lifecyclev1.Event
		}{
			{"organization.deleted without organization", &lifecyclev1.Event{Id: "x1", Type: "organization.deleted", ApiKey: "k1", Payload: &lifecyclev1.Event_OrganizationDeleted{OrganizationDeleted: &lifecyclev1.OrganizationDeleted{}}}},
			{"users.removed without api key", &lifecyclev1.Event{Id: "x2", Type: "users.removed", OrganizationId: "o", Payload: &lifecyclev1.Event_UsersRemoved{UsersRemoved: &lifecyclev1.UsersRemoved{UserIds: []string{"u1"}}}}},
			{"document.migrated without target", &lifecyclev1.Event{Id: "x3", Type: "document.migrated", ApiKey: "k1", OrganizationId: "o", Payload: &lifecyclev1.Event_DocumentMigrated{DocumentMigrated: &lifecyclev1.DocumentMigrated{FromDocumentId: "d1"}}}},
		} {
			t.Run(c.name+" fails for good", func(t *testing.T) {
				if err := h.srv.HandleEvent(bg, c.e); err == nil || !lifecycle.Permanent(err) {
					t.Fatalf("%s: %v", c.e.GetId(), err)
				}
			})
		}
		if got := list(h, "k1", "o"); got != untouched {
			t.Fatalf("a refused event changed data: %s", got)
		}
	})
}

// A store failure while applying an event is retried: the error is not permanent.
func TestHandleEventStoreFailureIsRetried(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	srv, err := New(failingStore{h.store}, h.docs, h.access, h.events, WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	err = srv.HandleEvent(bg, &lifecyclev1.Event{Id: "e", Type: "organization.deleted", ApiKey: "k1", OrganizationId: "o", Payload: &lifecyclev1.Event_OrganizationDeleted{OrganizationDeleted: &lifecyclev1.OrganizationDeleted{}}})
	if err == nil || lifecycle.Permanent(err) || !errors.Is(err, errStoreDown) {
		t.Fatalf("store failure: %v", err)
	}
	if err := srv.Ping(bg); !errors.Is(err, errStoreDown) {
		t.Fatalf("ping: %v", err)
	}
}

var errStoreDown = errors.New("store down")

type failingStore struct{ Store }

func (failingStore) DeleteOrganization(context.Context, string, string) error { return errStoreDown }
func (failingStore) Ping(context.Context) error                               { return errStoreDown }

// Get Users is not paged: past its cap it refuses and says how to narrow the request, rather
// than building an answer the transport cannot carry.
func TestGetUsersIsBounded(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.docs.addOrg("k1", "o")
	ids := make([]string, maxGetUsers+1)
	for i := range ids {
		ids[i] = fmt.Sprintf("user-%06d", i)
	}
	if err := h.store.AddMembers(bg, "k1", "o", ids); err != nil {
		t.Fatal(err)
	}
	step(t, "over the cap: refused", func(t *testing.T) {
		_, err := h.srv.GetUsers(k1, &usersv1.GetUsersRequest{OrganizationId: "o"})
		wantStatus(t, "over the cap", err, codes.FailedPrecondition, msgTooManyUsers)
	})
	step(t, "narrowed: answers", func(t *testing.T) {
		if got := h.get(t, k1, &usersv1.GetUsersRequest{OrganizationId: "o", UserIds: []string{"user-000007"}}); !slices.Equal(got, []string{"user-000007"}) {
			t.Fatalf("narrowed: %v", got)
		}
	})
	step(t, "at the cap: answers", func(t *testing.T) {
		if err := h.store.RemoveUsers(bg, "k1", "o", ids[:1]); err != nil {
			t.Fatal(err)
		}
		if got := h.get(t, k1, &usersv1.GetUsersRequest{OrganizationId: "o"}); len(got) != maxGetUsers {
			t.Fatalf("at the cap: %d users", len(got))
		}
	})
}

// A document deleted and made again while users are added to it keeps none of them: the add
// answers NOT_FOUND as if the deletion had come first, the new document's contact list is
// empty, and what was written under the old generation is gone too.
func TestContactsAddedDuringDocumentDeletionDoNotSurvive(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.docs.recreate("org", "k1", "o", "", "og")
	h.docs.recreate("document", "k1", "o", "d", "g1")
	h.docs.afterEnsure = func() {
		h.docs.afterEnsure = nil
		h.docs.remove("document", "k1", "o", "d")
		h.docs.recreate("document", "k1", "o", "d", "g2")
	}
	_, err := h.srv.AddUsers(k1, &usersv1.AddUsersRequest{OrganizationId: "o", DocumentId: "d", Users: []*usersv1.User{{UserId: "u1"}}})
	wantStatus(t, "add during deletion", err, codes.NotFound, "Document does not exist.")
	if got := h.get(t, k1, &usersv1.GetUsersRequest{OrganizationId: "o", DocumentId: "d"}); len(got) != 0 {
		t.Fatalf("contacts of the new document: %v", got)
	}
	for _, gen := range []string{"g1", "g2"} {
		if got, _ := h.store.DocumentContacts(bg, "k1", lifecycle.Ref("o", "og"), lifecycle.Ref("d", gen), nil); len(got) != 0 {
			t.Fatalf("contacts left under generation %s: %v", gen, got)
		}
	}
	// The roles asked for name the generations they were checked against.
	for _, c := range h.access.take() {
		if c.GetOrganizationGeneration() != "og" || c.GetResourceType() == "document" && c.GetResourceGeneration() != "g1" {
			t.Fatalf("SetRoles %v", c)
		}
	}
}

// Records are read under the current generations: a list left under an organization or
// document deleted since is never seen, and a late deletion of the old generation leaves the
// new one's records.
func TestRecordsFollowGenerations(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.docs.recreate("org", "k1", "o", "", "og1")
	h.docs.recreate("document", "k1", "o", "d", "dg1")
	h.add(t, k1, "o", "d", "u1")
	step(t, "made again, the organization and the document start empty", func(t *testing.T) {
		// Deleted and made again, the organization and the document start empty.
		h.docs.recreate("org", "k1", "o", "", "og2")
		h.docs.recreate("document", "k1", "o", "d", "dg2")
		if got := h.get(t, k1, &usersv1.GetUsersRequest{OrganizationId: "o"}); len(got) != 0 {
			t.Fatalf("members of the new organization: %v", got)
		}
		h.add(t, k1, "o", "d", "u2")
		if got := h.get(t, k1, &usersv1.GetUsersRequest{OrganizationId: "o", DocumentId: "d"}); !slices.Equal(got, []string{"u2"}) {
			t.Fatalf("contacts of the new document: %v", got)
		}
	})
	step(t, "a late deletion of the old generation spares the new one", func(t *testing.T) {
		for _, e := range []*lifecyclev1.Event{
			{Id: "e1", Type: "document.deleted", ApiKey: "k1", OrganizationId: "o", OrganizationGeneration: "og1",
				Payload: &lifecyclev1.Event_DocumentsDeleted{DocumentsDeleted: &lifecyclev1.DocumentsDeleted{DocumentIds: []string{"d"}, Generations: []string{"dg1"}}}},
			{Id: "e2", Type: "organization.deleted", ApiKey: "k1", OrganizationId: "o", OrganizationGeneration: "og1",
				Payload: &lifecyclev1.Event_OrganizationDeleted{OrganizationDeleted: &lifecyclev1.OrganizationDeleted{}}},
		} {
			if err := h.srv.HandleEvent(bg, e); err != nil {
				t.Fatal(err)
			}
		}
		if got := h.get(t, k1, &usersv1.GetUsersRequest{OrganizationId: "o", DocumentId: "d"}); !slices.Equal(got, []string{"u2"}) {
			t.Fatalf("a late deletion of the old generation took the new one's contacts: %v", got)
		}
		if got, _ := h.store.Members(bg, "k1", lifecycle.Ref("o", "og1"), nil, 0); len(got) != 0 {
			t.Fatalf("the old generation's members stayed after its deletion: %v", got)
		}
	})
}

// listMembers calls ListMembers and returns the ids, the whole answer, and checks no error.
func (h *harness) listMembers(t *testing.T, req *usersv1.ListMembersRequest) ([]string, *usersv1.ListMembersResponse) {
	t.Helper()
	resp, err := h.srv.ListMembers(bg, req)
	if err != nil {
		t.Fatalf("ListMembers(%v): %v", req, err)
	}
	out := []string{}
	for _, m := range resp.GetMembers() {
		out = append(out, m.GetUserId())
	}
	return out, resp
}

// ListMembers pages an organization's contact list in user-id order with names and emails,
// under the organization's current generation, scoped to the API key it names.
func TestListMembers(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.docs.recreate("org", "k1", "o", "", "og1")
	h.add(t, k1, "o", "", "u3", "u1", "u2", "u5", "u4")
	h.add(t, as("k2"), "o", "", "other")
	h.add(t, k1, "o2", "", "elsewhere")

	step(t, "all members in id order with identities", func(t *testing.T) {
		got, resp := h.listMembers(t, &usersv1.ListMembersRequest{ApiKey: "k1", OrganizationId: "o"})
		if !slices.Equal(got, []string{"u1", "u2", "u3", "u4", "u5"}) || resp.GetMore() {
			t.Fatalf("all: %v more=%v", got, resp.GetMore())
		}
		if m := resp.GetMembers()[0]; m.GetName() != "Name u1" || m.GetEmail() != "u1@example.com" {
			t.Fatalf("first member %v", m)
		}
	})
	step(t, "named members only", func(t *testing.T) {
		// Named members only: those who are members, in id order.
		got, resp := h.listMembers(t, &usersv1.ListMembersRequest{ApiKey: "k1", OrganizationId: "o", UserIds: []string{"u4", "nobody", "u2", "other"}})
		if !slices.Equal(got, []string{"u2", "u4"}) || resp.GetMore() || resp.GetMembers()[1].GetEmail() != "u4@example.com" {
			t.Fatalf("named: %v more=%v", got, resp.GetMore())
		}
	})
	step(t, "pages", func(t *testing.T) {
		for _, c := range []struct {
			name  string
			after string
			want  []string
			more  bool
		}{
			{"first page", "", []string{"u1", "u2"}, true},
			{"second page", "u2", []string{"u3", "u4"}, true},
			{"last page", "u4", []string{"u5"}, false},
			{"exactly a page left: no more", "u3", []string{"u4", "u5"}, false},
		} {
			t.Run(c.name, func(t *testing.T) {
				got, resp := h.listMembers(t, &usersv1.ListMembersRequest{ApiKey: "k1", OrganizationId: "o", Limit: 2, After: c.after})
				if !slices.Equal(got, c.want) || resp.GetMore() != c.more {
					t.Fatalf("%s: %v more=%v", c.name, got, resp.GetMore())
				}
			})
		}
	})
	step(t, "after the last: an empty list", func(t *testing.T) {
		got, resp := h.listMembers(t, &usersv1.ListMembersRequest{ApiKey: "k1", OrganizationId: "o", After: "u9"})
		if len(got) != 0 || resp.GetMore() || resp.GetMembers() == nil {
			t.Fatalf("after the last: %v", resp)
		}
	})
	step(t, "a member without a stored identity shows without name or email", func(t *testing.T) {
		// A member without a stored identity still shows, without name or email.
		must(t, h.store.AddMembers(bg, "k1", lifecycle.Ref("o", "og1"), []string{"u0"}))
		_, resp := h.listMembers(t, &usersv1.ListMembersRequest{ApiKey: "k1", OrganizationId: "o", Limit: 1})
		if m := resp.GetMembers()[0]; m.GetUserId() != "u0" || m.GetName() != "" || m.GetEmail() != "" {
			t.Fatalf("identity-less member %v", m)
		}
	})
	step(t, "another key sees its own", func(t *testing.T) {
		got, _ := h.listMembers(t, &usersv1.ListMembersRequest{ApiKey: "k2", OrganizationId: "o"})
		if !slices.Equal(got, []string{"other"}) {
			t.Fatalf("other tenant: %v", got)
		}
	})
	step(t, "made again, the organization starts empty; nothing was created", func(t *testing.T) {
		// Deleted and made again, the organization starts empty.
		h.docs.recreate("org", "k1", "o", "", "og2")
		got, _ := h.listMembers(t, &usersv1.ListMembersRequest{ApiKey: "k1", OrganizationId: "o"})
		if len(got) != 0 {
			t.Fatalf("members of the new generation: %v", got)
		}
		if h.docs.callCount() != 3 { // the three adds
			t.Fatalf("ListMembers created something: %d EnsureResources calls", h.docs.callCount())
		}
	})

	step(t, "refusals", func(t *testing.T) {
		for _, bad := range []struct {
			name string
			req  *usersv1.ListMembersRequest
			code codes.Code
			msg  string
		}{
			{"no api key", &usersv1.ListMembersRequest{OrganizationId: "o"}, codes.InvalidArgument, "apiKey is required."},
			{"no organization", &usersv1.ListMembersRequest{ApiKey: "k1"}, codes.InvalidArgument, "organizationId is required."},
			{"limit -1", &usersv1.ListMembersRequest{ApiKey: "k1", OrganizationId: "o", Limit: -1}, codes.InvalidArgument, "limit must be between 1 and 5000."},
			{"limit 5001", &usersv1.ListMembersRequest{ApiKey: "k1", OrganizationId: "o", Limit: 5001}, codes.InvalidArgument, "limit must be between 1 and 5000."},
			{"after with a NUL", &usersv1.ListMembersRequest{ApiKey: "k1", OrganizationId: "o", After: "a\x00b"}, codes.InvalidArgument, "after must not contain control characters."},
			{"unknown organization", &usersv1.ListMembersRequest{ApiKey: "k1", OrganizationId: "nope"}, codes.NotFound, "Organization does not exist."},
			{"another key's organization", &usersv1.ListMembersRequest{ApiKey: "k3", OrganizationId: "o"}, codes.NotFound, "Organization does not exist."},
		} {
			t.Run(bad.name, func(t *testing.T) {
				_, err := h.srv.ListMembers(bg, bad.req)
				wantStatus(t, fmt.Sprint(bad.req), err, bad.code, bad.msg)
			})
		}
	})
	step(t, "documents unavailable", func(t *testing.T) {
		h.docs.err = status.Error(codes.Unavailable, "documents restarting")
		_, err := h.srv.ListMembers(bg, &usersv1.ListMembersRequest{ApiKey: "k1", OrganizationId: "o"})
		wantStatus(t, "documents unavailable", err, codes.Unavailable, "documents restarting")
	})
}

// CountMembers counts the contact list under the organization's current generation, scoped to
// the API key it names.
func TestCountMembers(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.docs.recreate("org", "k1", "o", "", "og1")
	h.add(t, k1, "o", "", "u3", "u1", "u2")
	h.add(t, as("k2"), "o", "", "other")
	count := func(t *testing.T, what string, req *usersv1.CountMembersRequest, want int64) {
		t.Helper()
		resp, err := h.srv.CountMembers(bg, req)
		if err != nil || resp.GetCount() != want {
			t.Fatalf("%s: %v %v, want %d", what, resp, err, want)
		}
	}
	step(t, "each key counts its own", func(t *testing.T) {
		count(t, "k1", &usersv1.CountMembersRequest{ApiKey: "k1", OrganizationId: "o"}, 3)
		count(t, "k2", &usersv1.CountMembersRequest{ApiKey: "k2", OrganizationId: "o"}, 1)
	})
	step(t, "a new generation counts none", func(t *testing.T) {
		h.docs.recreate("org", "k1", "o", "", "og2")
		count(t, "a new generation", &usersv1.CountMembersRequest{ApiKey: "k1", OrganizationId: "o"}, 0)
	})
	for _, bad := range []struct {
		name string
		req  *usersv1.CountMembersRequest
		code codes.Code
		msg  string
	}{
		{"no api key", &usersv1.CountMembersRequest{OrganizationId: "o"}, codes.InvalidArgument, "apiKey is required."},
		{"no organization", &usersv1.CountMembersRequest{ApiKey: "k1"}, codes.InvalidArgument, "organizationId is required."},
		{"unknown organization", &usersv1.CountMembersRequest{ApiKey: "k1", OrganizationId: "nope"}, codes.NotFound, "Organization does not exist."},
	} {
		t.Run(bad.name, func(t *testing.T) {
			_, err := h.srv.CountMembers(bg, bad.req)
			wantStatus(t, fmt.Sprint(bad.req), err, bad.code, bad.msg)
		})
	}
}

// MembersAmong answers which of the named users are members of the organization, under its
// current generation and the API key it names, in user-id order, each once; it refuses an
// empty or oversized list and an unknown organization.
func TestMembersAmong(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.docs.recreate("org", "k1", "o", "", "og1")
	h.add(t, k1, "o", "", "u3", "u1", "u2")
	h.add(t, as("k2"), "o", "", "other")
	h.add(t, k1, "o2", "", "elsewhere")
	among := func(t *testing.T, what string, req *usersv1.MembersAmongRequest, want ...string) {
		t.Helper()
		resp, err := h.srv.MembersAmong(bg, req)
		if err != nil || !slices.Equal(resp.GetUserIds(), want) {
			t.Fatalf("%s: %v %v, want %v", what, resp.GetUserIds(), err, want)
		}
	}
	step(t, "members among the named, in id order, once each", func(t *testing.T) {
		among(t, "named", &usersv1.MembersAmongRequest{ApiKey: "k1", OrganizationId: "o", UserIds: []string{"u3", "nobody", "other", "elsewhere", "u1", "u3"}}, "u1", "u3")
		among(t, "another key's", &usersv1.MembersAmongRequest{ApiKey: "k2", OrganizationId: "o", UserIds: []string{"u1", "other"}}, "other")
		among(t, "none", &usersv1.MembersAmongRequest{ApiKey: "k1", OrganizationId: "o", UserIds: []string{"nobody"}})
	})
	step(t, "a new generation has none", func(t *testing.T) {
		h.docs.recreate("org", "k1", "o", "", "og2")
		among(t, "a new generation", &usersv1.MembersAmongRequest{ApiKey: "k1", OrganizationId: "o", UserIds: []string{"u1"}})
	})

	many := make([]string, maxMembersAmong+1)
	for i := range many {
		many[i] = fmt.Sprintf("u%d", i)
	}
	for _, bad := range []struct {
		name string
		req  *usersv1.MembersAmongRequest
		code codes.Code
		msg  string
	}{
		{"no api key", &usersv1.MembersAmongRequest{OrganizationId: "o", UserIds: []string{"u1"}}, codes.InvalidArgument, "apiKey is required."},
		{"no organization", &usersv1.MembersAmongRequest{ApiKey: "k1", UserIds: []string{"u1"}}, codes.InvalidArgument, "organizationId is required."},
		{"no user ids", &usersv1.MembersAmongRequest{ApiKey: "k1", OrganizationId: "o"}, codes.InvalidArgument, "userIds must contain at least one id."},
		{"too many user ids", &usersv1.MembersAmongRequest{ApiKey: "k1", OrganizationId: "o", UserIds: many}, codes.InvalidArgument, "userIds must contain at most 1000 ids."},
		{"user id with a NUL", &usersv1.MembersAmongRequest{ApiKey: "k1", OrganizationId: "o", UserIds: []string{"bad\x00id"}}, codes.InvalidArgument, "userIds[0] must not contain control characters."},
		{"unknown organization", &usersv1.MembersAmongRequest{ApiKey: "k1", OrganizationId: "nope", UserIds: []string{"u1"}}, codes.NotFound, "Organization does not exist."},
	} {
		t.Run(bad.name, func(t *testing.T) {
			_, err := h.srv.MembersAmong(bg, bad.req)
			wantStatus(t, fmt.Sprint(bad.req), err, bad.code, bad.msg)
		})
	}
}

// Ten thousand members page by the default limit (1000) and the largest (5000), each once and in
// order; a page of the largest ids, names and emails is cut short to fit a gRPC message and says
// more follow.
func TestListMembersLargeOrganization(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.docs.recreate("org", "k1", "o", "", "og")
	ref := lifecycle.Ref("o", "og")
	ids := make([]string, 10_000)
	for i := range ids {
		ids[i] = fmt.Sprintf("user-%05d", (i*7919)%10_000)
		must(t, h.store.UpsertUser(bg, "k1", UserPatch{UserID: ids[i], Name: ptr("N " + ids[i]), Email: ptr(ids[i] + "@example.com")}))
	}
	must(t, h.store.AddMembers(bg, "k1", ref, ids))
	for _, limit := range []int32{0, 5000} {
		t.Run(fmt.Sprint("limit ", limit), func(t *testing.T) {
			var (
				all   []string
				after string
				pages int
			)
			for {
				got, resp := h.listMembers(t, &usersv1.ListMembersRequest{ApiKey: "k1", OrganizationId: "o", After: after, Limit: limit})
				pages++
				all = append(all, got...)
				if last := resp.GetMembers()[len(got)-1]; last.GetEmail() != last.GetUserId()+"@example.com" {
					t.Fatalf("member %v", last)
				}
				if !resp.GetMore() {
					break
				}
				after = got[len(got)-1]
			}
			want := 10
			if limit == 5000 {
				want = 2
			}
			if len(all) != 10_000 || !slices.IsSorted(all) || pages != want {
				t.Fatalf("limit %d: %d members in %d pages", limit, len(all), pages)
			}
			if len(slices.Compact(slices.Clone(all))) != 10_000 {
				t.Fatalf("limit %d: duplicates", limit)
			}
		})
	}

	step(t, "pages of the longest ids and names fit a message", func(t *testing.T) {
		// 5000 members with the longest ids and names (4-byte characters) do not fit 8 MiB.
		long := func(i int, n int) string { return fmt.Sprintf("%05d", i) + strings.Repeat("😀", n-5) }
		big := make([]string, 5000)
		for i := range big {
			big[i] = long(i, 256)
			must(t, h.store.UpsertUser(bg, "k1", UserPatch{UserID: big[i], Name: ptr(long(i, 200)), Email: ptr(fmt.Sprintf("u%d@example.com", i))}))
		}
		h.docs.recreate("org", "k1", "big", "", "bg")
		must(t, h.store.AddMembers(bg, "k1", lifecycle.Ref("big", "bg"), big))
		var all []string
		after, pages := "", 0
		for {
			got, resp := h.listMembers(t, &usersv1.ListMembersRequest{ApiKey: "k1", OrganizationId: "big", After: after, Limit: 5000})
			pages++
			if proto.Size(resp) > grpcserver.MaxMessageBytes {
				t.Fatalf("a page of %d bytes", proto.Size(resp))
			}
			all = append(all, got...)
			if !resp.GetMore() {
				break
			}
			if len(got) == 5000 || len(got) == 0 {
				t.Fatalf("a page of %d members says more follow", len(got))
			}
			after = got[len(got)-1]
		}
		if !slices.Equal(all, big) || pages < 2 {
			t.Fatalf("paged %d of %d long members in %d pages", len(all), len(big), pages)
		}
	})
}
