package access

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/clock"
)

// ---- Fakes ----

// fakeDocs answers ResolveResources from an in-memory table of organizations, folders and
// documents per API key, computing effective access types and folder chains as the documents
// service does (docs/permissions.md, "Effective access type"), and counts the calls.
type fakeDocs struct {
	documentsv1.DocumentsServiceClient

	mu      sync.Mutex
	orgs    map[string]bool       // apiKey|org
	folders map[string]fakeFolder // apiKey|org|folder
	docs    map[string]fakeDoc    // apiKey|org|document
	calls   []*documentsv1.ResolveResourcesRequest
	err     error // when set, every call fails with it
	// omitMissing leaves missing ids out of the answer instead of answering exists: false.
	omitMissing bool
	// gens are generations by kind|apiKey|org|id (kind org, folder or document); none: empty.
	gens map[string]string
	// afterCall, when set, runs after each ResolveResources answer with the number of calls
	// so far (a racing deletion in another process).
	afterCall func(n int)
}

// setGen gives a resource a generation, as deleting and making it again would.
func (f *fakeDocs) setGen(kind, apiKey, org, id, gen string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gens[fk(kind, apiKey, org, id)] = gen
}

type fakeFolder struct{ parent, accessType string }
type fakeDoc struct{ folder, accessType string }

func newFakeDocs() *fakeDocs {
	return &fakeDocs{orgs: map[string]bool{}, folders: map[string]fakeFolder{}, docs: map[string]fakeDoc{}, gens: map[string]string{}}
}

func fk(parts ...string) string { return strings.Join(parts, "|") }

func (f *fakeDocs) addOrg(apiKey, org string) *fakeDocs {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.orgs[fk(apiKey, org)] = true
	return f
}

func (f *fakeDocs) addFolder(apiKey, org, id, parent, accessType string) *fakeDocs {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.folders[fk(apiKey, org, id)] = fakeFolder{parent, accessType}
	return f
}

func (f *fakeDocs) addDoc(apiKey, org, id, folder, accessType string) *fakeDocs {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.docs[fk(apiKey, org, id)] = fakeDoc{folder, accessType}
	return f
}

// folderChain returns the folder and its ancestors, nearest first, and its effective type.
func (f *fakeDocs) folderChain(apiKey, org, id string) ([]string, string) {
	var chain []string
	effective := ""
	for id != "" {
		chain = append(chain, id)
		fo := f.folders[fk(apiKey, org, id)]
		if effective == "" {
			effective = fo.accessType
		}
		id = fo.parent
	}
	if effective == "" {
		effective = "public"
	}
	return chain, effective
}

func (f *fakeDocs) ResolveResources(ctx context.Context, in *documentsv1.ResolveResourcesRequest, _ ...grpc.CallOption) (*documentsv1.ResolveResourcesResponse, error) {
	out, err := f.resolve(in)
	if f.afterCall != nil {
		f.afterCall(f.callCount())
	}
	return out, err
}

// chainGens returns the generations of a folder chain.
func (f *fakeDocs) chainGens(apiKey, org string, chain []string) []string {
	out := make([]string, len(chain))
	for i, id := range chain {
		out[i] = f.gens[fk("folder", apiKey, org, id)]
	}
	return out
}

func (f *fakeDocs) resolve(in *documentsv1.ResolveResourcesRequest) (*documentsv1.ResolveResourcesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, proto.Clone(in).(*documentsv1.ResolveResourcesRequest))
	if f.err != nil {
		return nil, f.err
	}
	k, org := in.GetApiKey(), in.GetOrganizationId()
	out := &documentsv1.ResolveResourcesResponse{
		OrganizationExists: f.orgs[fk(k, org)],
		Folders:            map[string]*documentsv1.ResolvedResource{},
		Documents:          map[string]*documentsv1.ResolvedResource{},
	}
	if !out.OrganizationExists {
		return out, nil
	}
	out.OrganizationGeneration = f.gens[fk("org", k, org, "")]
	for _, id := range in.GetFolderIds() {
		fo, ok := f.folders[fk(k, org, id)]
		switch {
		case !ok && f.omitMissing:
		case !ok:
			out.Folders[id] = &documentsv1.ResolvedResource{}
		default:
			ancestors, inherited := f.folderChain(k, org, fo.parent)
			at := fo.accessType
			if at == "" {
				at = inherited
			}
			out.Folders[id] = &documentsv1.ResolvedResource{Exists: true, AccessType: at, FolderChain: ancestors,
				Generation: f.gens[fk("folder", k, org, id)], FolderChainGenerations: f.chainGens(k, org, ancestors)}
		}
	}
	for _, id := range in.GetDocumentIds() {
		d, ok := f.docs[fk(k, org, id)]
		switch {
		case !ok && f.omitMissing:
		case !ok:
			out.Documents[id] = &documentsv1.ResolvedResource{}
		default:
			chain, inherited := f.folderChain(k, org, d.folder)
			at := d.accessType
			if at == "" {
				at = inherited
			}
			out.Documents[id] = &documentsv1.ResolvedResource{Exists: true, AccessType: at, FolderChain: chain,
				Generation: f.gens[fk("document", k, org, id)], FolderChainGenerations: f.chainGens(k, org, chain)}
		}
	}
	return out, nil
}

func (f *fakeDocs) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// countingStore counts the reads Get Permissions makes.
type countingStore struct {
	Store
	grants, grantsOn, contexts, signingKeys atomic.Int32
}

func (s *countingStore) SigningKey(ctx context.Context, id string) (*SigningKey, error) {
	s.signingKeys.Add(1)
	return s.Store.SigningKey(ctx, id)
}

func (s *countingStore) Grants(ctx context.Context, apiKey, orgID string, userIDs []string, now time.Time) ([]Grant, error) {
	s.grants.Add(1)
	return s.Store.Grants(ctx, apiKey, orgID, userIDs, now)
}

func (s *countingStore) GrantsOn(ctx context.Context, apiKey, orgID string, userIDs []string, on []Resource, now time.Time) ([]Grant, error) {
	s.grantsOn.Add(1)
	return s.Store.GrantsOn(ctx, apiKey, orgID, userIDs, on, now)
}

func (s *countingStore) ContextFields(ctx context.Context, apiKey, orgID string, userIDs []string) (map[string][]string, error) {
	s.contexts.Add(1)
	return s.Store.ContextFields(ctx, apiKey, orgID, userIDs)
}

// ---- Harness ----

var (
	// start is one hour into a rotation period of the default 24 hours.
	start  = time.Date(2026, 3, 10, 1, 0, 0, 0, time.UTC)
	k1     = authn.WithCaller(context.Background(), authn.Caller{APIKey: "k1", WorkspaceID: "w"})
	k2     = authn.WithCaller(context.Background(), authn.Caller{APIKey: "k2", WorkspaceID: "w2"})
	secret = []byte("0123456789abcdef0123456789abcdef")
	quiet  = slog.New(slog.DiscardHandler)
)

type harness struct {
	t     *testing.T
	srv   *Server
	store *countingStore
	docs  *fakeDocs
	clock *clock.Fake
	// lastRoles are the roles of the last readers call.
	lastRoles map[string]string
}

func newHarness(t *testing.T, opts ...Option) *harness {
	t.Helper()
	h := &harness{t: t, store: &countingStore{Store: NewMemoryStore()}, docs: newFakeDocs(), clock: clock.NewFake(start)}
	srv, err := New(h.store, secret, h.docs, append([]Option{WithClock(h.clock), WithLogger(quiet)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	h.srv = srv
	return h
}

// st is the status a caller would see for err.
func st(err error) *status.Status {
	return status.Convert(apierr.ToStatus(context.Background(), quiet, err))
}

func wantStatus(t *testing.T, err error, code codes.Code, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v %q", code, msg)
	}
	s := st(err)
	if s.Code() != code || (msg != "" && s.Message() != msg) {
		t.Fatalf("got %v %q, want %v %q", s.Code(), s.Message(), code, msg)
	}
}

type res = map[string]any

// resource builds an Add Permissions resource: type, id, organizationId, then optional
// accessRole and expiresAt.
func resource(typ, id, org string, more ...any) *accessv1.Resource {
	r := &accessv1.Resource{Type: typ, Id: id, OrganizationId: org}
	for _, m := range more {
		switch v := m.(type) {
		case string:
			r.AccessRole = v
		case float64:
			r.ExpiresAt = proto.Float64(v)
		case time.Time:
			r.ExpiresAt = proto.Float64(float64(v.Unix()))
		}
	}
	return r
}

func (h *harness) add(ctx context.Context, user string, rs ...*accessv1.Resource) {
	h.t.Helper()
	resp, err := h.srv.AddPermissions(ctx, &accessv1.AddPermissionsRequest{User: &accessv1.UserRef{UserId: user}, Permissions: &accessv1.Permissions{Resources: rs}})
	if err != nil {
		h.t.Fatalf("add permissions: %v", st(err))
	}
	if resp.GetStatus() != "success" || resp.GetMessage() != "Permissions added successfully." || resp.Data != nil {
		h.t.Fatalf("add permissions answered %v", resp)
	}
}

func (h *harness) get(ctx context.Context, org string, users, folders, docs []string) map[string]*accessv1.UserPermissions {
	h.t.Helper()
	resp, err := h.srv.GetPermissions(ctx, &accessv1.GetPermissionsRequest{OrganizationId: org, UserIds: users, FolderIds: folders, DocumentIds: docs})
	if err != nil {
		h.t.Fatalf("get permissions: %v", st(err))
	}
	if resp.GetStatus() != "success" || resp.GetMessage() != "User permissions retrieved successfully." {
		h.t.Fatalf("get permissions answered %q %q", resp.GetStatus(), resp.GetMessage())
	}
	return resp.GetData()
}

func (h *harness) doc(ctx context.Context, org, user, doc string) *accessv1.PermissionEntry {
	h.t.Helper()
	return h.get(ctx, org, []string{user}, nil, []string{doc})[user].GetDocuments()[doc]
}

func (h *harness) folder(ctx context.Context, org, user, folder string) *accessv1.PermissionEntry {
	h.t.Helper()
	return h.get(ctx, org, []string{user}, []string{folder}, nil)[user].GetFolders()[folder]
}

// entry is the expected form of a permission entry; empty strings and a zero expiry mean the
// field must be absent.
type entry struct {
	role, accessType string
	expiresAt        float64
	err, code        string
}

func checkEntry(t *testing.T, what string, got *accessv1.PermissionEntry, want entry) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: no entry", what)
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		if *p == "" {
			return "<empty but set>"
		}
		return *p
	}
	exp := 0.0
	if got.ExpiresAt != nil {
		exp = *got.ExpiresAt
		if exp == 0 {
			exp = -1 // set to zero: never right
		}
	}
	g := entry{str(got.AccessRole), str(got.AccessType), exp, str(got.Error), str(got.ErrorCode)}
	if g != want {
		t.Fatalf("%s: entry %+v, want %+v", what, g, want)
	}
}

// wantEntry checks a permission entry as a subtest named what, so that a failure names the
// case; got is read by the caller, in the test (or step) that owns the harness.
func (h *harness) wantEntry(what string, got *accessv1.PermissionEntry, want entry) {
	h.t.Helper()
	h.t.Run(what, func(t *testing.T) {
		checkEntry(t, what, got, want)
	})
}

// step runs one step of a scenario on h as a subtest, so that a failure names the step. The
// harness's helpers report to the step while it runs. Steps share h and run in order: a step
// after a failed one is skipped, since it would start from a state the story did not reach.
func (h *harness) step(name string, f func(t *testing.T)) {
	parent := h.t
	parent.Run(name, func(t *testing.T) {
		if parent.Failed() {
			t.Skip("an earlier step failed")
		}
		h.t = t
		defer func() { h.t = parent }()
		f(t)
	})
}

func denied(accessType, kind string) entry {
	return entry{accessType: accessType, err: "User does not have access to " + kind, code: "permission_denied"}
}

// ---- Resolution: one test per row of docs/permissions.md ----

// world: organization o with
//
//	f1 (restricted) > f2 (inherits) > f3 (organizationPrivate)
//	fp (public), fo (organizationPrivate), fr (restricted), fnone (no type: public)
//
// and documents in them and at the root.
func world(h *harness, apiKey string) {
	h.docs.addOrg(apiKey, "o").
		addFolder(apiKey, "o", "f1", "", "restricted").
		addFolder(apiKey, "o", "f2", "f1", "").
		addFolder(apiKey, "o", "f3", "f2", "organizationPrivate").
		addFolder(apiKey, "o", "fp", "", "public").
		addFolder(apiKey, "o", "fo", "", "organizationPrivate").
		addFolder(apiKey, "o", "fr", "", "restricted").
		addFolder(apiKey, "o", "fnone", "", "").
		addDoc(apiKey, "o", "root", "", "").
		addDoc(apiKey, "o", "public", "", "public").
		addDoc(apiKey, "o", "private", "", "organizationPrivate").
		addDoc(apiKey, "o", "restricted", "", "restricted").
		addDoc(apiKey, "o", "in-f2", "f2", "").
		addDoc(apiKey, "o", "in-f3", "f3", "").
		addDoc(apiKey, "o", "open-in-f1", "f1", "public").
		addDoc(apiKey, "o", "in-fo", "fo", "")
}

func TestRow1DoesNotExist(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	world(h, "k1")
	for _, c := range []struct {
		name          string
		folders, docs []string
	}{{"missing document", nil, []string{"ghost"}}, {"missing folder", []string{"ghost"}, nil}} {
		t.Run(c.name, func(t *testing.T) {
			_, err := h.srv.GetPermissions(k1, &accessv1.GetPermissionsRequest{OrganizationId: "o", UserIds: []string{"u"}, FolderIds: c.folders, DocumentIds: c.docs})
			wantStatus(t, err, codes.NotFound, "Folder or document does not exist")
		})
	}
}

func TestRow2GrantOnTheResource(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	world(h, "k1")
	exp := start.Add(2 * time.Hour)
	h.add(k1, "member", resource("organization", "o", "o", "editor"),
		resource("document", "restricted", "o", "viewer"),
		resource("document", "public", "o", "viewer"), // narrows an editor member
		resource("folder", "fr", "o", "editor", exp))
	h.wantEntry("restricted document", h.doc(k1, "o", "member", "restricted"), entry{role: "viewer", accessType: "restricted"})
	h.wantEntry("narrowed document", h.doc(k1, "o", "member", "public"), entry{role: "viewer", accessType: "public"})
	h.wantEntry("temporary folder", h.folder(k1, "o", "member", "fr"), entry{role: "editor", accessType: "restricted", expiresAt: float64(exp.Unix())})
	// A document grant wins over a folder grant of its chain.
	h.add(k1, "guest", resource("folder", "f2", "o", "editor"), resource("document", "in-f2", "o", "viewer"))
	h.wantEntry("document over folder", h.doc(k1, "o", "guest", "in-f2"), entry{role: "viewer", accessType: "restricted"})
}

func TestRow3NearestFolderGrant(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	world(h, "k1")
	h.add(k1, "u", resource("folder", "f1", "o", "editor"))
	// in-f3 is in f3 > f2 > f1: the grant on f1 reaches it.
	h.wantEntry("grant two levels up", h.doc(k1, "o", "u", "in-f3"), entry{role: "editor", accessType: "organizationPrivate"})
	h.wantEntry("folder below", h.folder(k1, "o", "u", "f3"), entry{role: "editor", accessType: "organizationPrivate"})
	// A nearer folder's grant wins: the document's own folder first, then upwards.
	h.add(k1, "u", resource("folder", "f2", "o", "viewer"))
	h.wantEntry("nearest folder", h.doc(k1, "o", "u", "in-f3"), entry{role: "viewer", accessType: "organizationPrivate"})
	h.wantEntry("nearest ancestor", h.folder(k1, "o", "u", "f3"), entry{role: "viewer", accessType: "organizationPrivate"})
	h.add(k1, "u", resource("folder", "f3", "o", "editor"))
	h.wantEntry("own folder", h.doc(k1, "o", "u", "in-f3"), entry{role: "editor", accessType: "organizationPrivate"})
	// A folder grant also reaches a document whose own access type differs.
	h.wantEntry("public document in f1", h.doc(k1, "o", "u", "open-in-f1"), entry{role: "editor", accessType: "public"})
	// A folder's grant is the folder's own answer (row 2), not its parent's.
	h.wantEntry("folder's own grant", h.folder(k1, "o", "u", "f2"), entry{role: "viewer", accessType: "restricted"})
}

func TestRow4PublicMember(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	world(h, "k1")
	h.add(k1, "editor", resource("organization", "o", "o", "editor"))
	h.add(k1, "viewer", resource("organization", "o", "o", "viewer"))
	h.wantEntry("editor, public document", h.doc(k1, "o", "editor", "public"), entry{role: "editor", accessType: "public"})
	h.wantEntry("editor, root document without type", h.doc(k1, "o", "editor", "root"), entry{role: "editor", accessType: "public"})
	h.wantEntry("viewer, public document", h.doc(k1, "o", "viewer", "public"), entry{role: "viewer", accessType: "public"})
	h.wantEntry("editor, public folder", h.folder(k1, "o", "editor", "fp"), entry{role: "editor", accessType: "public"})
	h.wantEntry("editor, folder without type", h.folder(k1, "o", "editor", "fnone"), entry{role: "editor", accessType: "public"})
	// A document's own type wins over its folder's.
	h.wantEntry("public document in a restricted folder", h.doc(k1, "o", "editor", "open-in-f1"), entry{role: "editor", accessType: "public"})
	if got := h.get(k1, "o", []string{"editor"}, nil, nil)["editor"].GetOrganization(); len(got) != 1 || got["o"].GetAccessRole() != "editor" {
		t.Fatalf("member's organization %v", got)
	}
}

func TestRow5PublicNotMember(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	world(h, "k1")
	h.wantEntry("public document", h.doc(k1, "o", "stranger", "public"), entry{role: "viewer", accessType: "public"})
	h.wantEntry("root document", h.doc(k1, "o", "stranger", "root"), entry{role: "viewer", accessType: "public"})
	h.wantEntry("public folder", h.folder(k1, "o", "stranger", "fp"), entry{role: "viewer", accessType: "public"})
	if got := h.get(k1, "o", []string{"stranger"}, nil, nil)["stranger"]; got.GetOrganization() == nil || len(got.GetOrganization()) != 0 || got.Context != nil {
		t.Fatalf("non-member answer %v", got)
	}
}

func TestRow6OrganizationPrivateMember(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	world(h, "k1")
	exp := start.Add(3 * time.Hour)
	h.add(k1, "member", resource("organization", "o", "o", "viewer"))
	h.add(k1, "temp", resource("organization", "o", "o", "editor", exp))
	h.wantEntry("document", h.doc(k1, "o", "member", "private"), entry{role: "viewer", accessType: "organizationPrivate"})
	h.wantEntry("document inheriting its folder's type", h.doc(k1, "o", "member", "in-fo"), entry{role: "viewer", accessType: "organizationPrivate"})
	h.wantEntry("folder", h.folder(k1, "o", "member", "fo"), entry{role: "viewer", accessType: "organizationPrivate"})
	h.wantEntry("temporary member", h.doc(k1, "o", "temp", "private"), entry{role: "editor", accessType: "organizationPrivate", expiresAt: float64(exp.Unix())})
}

func TestRow7OrganizationPrivateNotMember(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	world(h, "k1")
	h.wantEntry("document", h.doc(k1, "o", "stranger", "private"), denied("organizationPrivate", "document"))
	h.wantEntry("document inheriting", h.doc(k1, "o", "stranger", "in-fo"), denied("organizationPrivate", "document"))
	h.wantEntry("folder", h.folder(k1, "o", "stranger", "fo"), denied("organizationPrivate", "folder"))
	// A grant on another document or folder is no membership.
	h.add(k1, "stranger", resource("document", "public", "o"), resource("folder", "fp", "o"))
	h.wantEntry("with unrelated grants", h.doc(k1, "o", "stranger", "private"), denied("organizationPrivate", "document"))
}

func TestRow8Restricted(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	world(h, "k1")
	h.add(k1, "member", resource("organization", "o", "o", "editor"))
	for _, user := range []string{"member", "stranger"} {
		h.wantEntry(user+" document", h.doc(k1, "o", user, "restricted"), denied("restricted", "document"))
		h.wantEntry(user+" document inheriting", h.doc(k1, "o", user, "in-f2"), denied("restricted", "document"))
		h.wantEntry(user+" folder", h.folder(k1, "o", user, "fr"), denied("restricted", "folder"))
		h.wantEntry(user+" folder inheriting", h.folder(k1, "o", user, "f2"), denied("restricted", "folder"))
	}
}

func TestUnknownAccessTypeIsDenied(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.docs.addOrg("k1", "o").addDoc("k1", "o", "d", "", "someday")
	h.add(k1, "member", resource("organization", "o", "o", "editor"))
	h.wantEntry("unknown type", h.doc(k1, "o", "member", "d"), denied("someday", "document"))
}

// ---- Get Permissions: the whole answer ----

func TestNotFoundCarriesDetails(t *testing.T) {
	t.Parallel()
	for _, omit := range []bool{false, true} {
		t.Run(fmt.Sprintf("omitted=%v", omit), func(t *testing.T) {
			h := newHarness(t)
			world(h, "k1")
			h.docs.omitMissing = omit
			h.add(k1, "member", resource("organization", "o", "o", "editor"))
			_, err := h.srv.GetPermissions(k1, &accessv1.GetPermissionsRequest{
				OrganizationId: "o", UserIds: []string{"member", "stranger"},
				FolderIds: []string{"fr", "nofolder"}, DocumentIds: []string{"public", "ghost"},
			})
			wantStatus(t, err, codes.NotFound, "Folder or document does not exist")
			details := st(err).Details()
			if len(details) != 1 {
				t.Fatalf("details %v", details)
			}
			d, ok := details[0].(*structpb.Struct)
			if !ok {
				t.Fatalf("detail of type %T", details[0])
			}
			m := d.AsMap()
			user := func(u string) res { return m[u].(res) }
			want := map[string]res{
				"member": {
					"documents":    res{"ghost": res{"error": "Document does not exist", "errorCode": "does_not_exist"}, "public": res{"accessRole": "editor", "accessType": "public"}},
					"folders":      res{"nofolder": res{"error": "Folder does not exist", "errorCode": "does_not_exist"}, "fr": res{"accessType": "restricted", "error": "User does not have access to folder", "errorCode": "permission_denied"}},
					"organization": res{"o": res{"accessRole": "editor"}},
				},
				"stranger": {
					"documents":    res{"ghost": res{"error": "Document does not exist", "errorCode": "does_not_exist"}, "public": res{"accessRole": "viewer", "accessType": "public"}},
					"folders":      res{"nofolder": res{"error": "Folder does not exist", "errorCode": "does_not_exist"}, "fr": res{"accessType": "restricted", "error": "User does not have access to folder", "errorCode": "permission_denied"}},
					"organization": res{},
				},
			}
			if len(m) != 2 {
				t.Fatalf("details users %v", m)
			}
			for u, w := range want {
				if got := fmt.Sprint(user(u)); got != fmt.Sprint(w) {
					t.Fatalf("details of %s:\n got %s\nwant %s", u, got, fmt.Sprint(w))
				}
			}
		})
	}
}

func TestOrganizationMustExist(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, err := h.srv.GetPermissions(k1, &accessv1.GetPermissionsRequest{OrganizationId: "nope", UserIds: []string{"u"}})
	wantStatus(t, err, codes.NotFound, "Organization does not exist.")
	if d := st(err).Details(); len(d) != 0 {
		t.Fatalf("details %v", d)
	}
}

func TestGetPermissionsShape(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	world(h, "k1")
	data := h.get(k1, "o", []string{"a", "b", "a"}, nil, nil)
	if len(data) != 2 {
		t.Fatalf("users %v", data)
	}
	for u, p := range data {
		if p.GetFolders() == nil || p.GetDocuments() == nil || p.GetOrganization() == nil || p.Context != nil {
			t.Fatalf("%s: %v", u, p)
		}
	}
}

func TestTemporaryAccess(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	world(h, "k1")
	exp := start.Add(time.Hour)
	h.add(k1, "u", resource("document", "restricted", "o", "editor", exp), resource("folder", "f1", "o", "viewer"),
		resource("document", "in-f2", "o", "editor", exp), resource("organization", "o", "o", "editor", exp))
	h.step("before expiry", func(t *testing.T) {
		h.wantEntry("temporary", h.doc(k1, "o", "u", "restricted"), entry{role: "editor", accessType: "restricted", expiresAt: float64(exp.Unix())})
		h.wantEntry("temporary over folder", h.doc(k1, "o", "u", "in-f2"), entry{role: "editor", accessType: "restricted", expiresAt: float64(exp.Unix())})
		h.wantEntry("public, temporary member", h.doc(k1, "o", "u", "public"), entry{role: "editor", accessType: "public", expiresAt: float64(exp.Unix())})
		if got := h.get(k1, "o", []string{"u"}, nil, nil)["u"].GetOrganization(); len(got) != 1 {
			t.Fatalf("temporary member's organization %v", got)
		}
	})

	h.step("at expiry: lapsed", func(t *testing.T) {
		h.clock.Advance(time.Hour) // exactly at expiry: lapsed
		h.wantEntry("lapsed", h.doc(k1, "o", "u", "restricted"), denied("restricted", "document"))
		h.wantEntry("lapsed: folder grant again", h.doc(k1, "o", "u", "in-f2"), entry{role: "viewer", accessType: "restricted"})
		h.wantEntry("lapsed membership", h.doc(k1, "o", "u", "public"), entry{role: "viewer", accessType: "public"})
		if got := h.get(k1, "o", []string{"u"}, nil, nil)["u"].GetOrganization(); len(got) != 0 {
			t.Fatalf("lapsed member's organization %v", got)
		}
	})

	h.step("a fractional expiry keeps its milliseconds", func(t *testing.T) {
		h.add(k1, "v", resource("document", "restricted", "o", "viewer", float64(start.Unix())+7200.25))
		h.wantEntry("fraction", h.doc(k1, "o", "v", "restricted"), entry{role: "viewer", accessType: "restricted", expiresAt: float64(start.Unix()) + 7200.25})
	})
}

func TestContextFields(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	world(h, "k1")
	h.docs.addOrg("k1", "o2")
	var want []string
	addWithContext := func(t *testing.T, user, org string, access map[string]any) {
		t.Helper()
		s, err := structpb.NewStruct(access)
		if err != nil {
			t.Fatal(err)
		}
		_, err = h.srv.AddPermissions(k1, &accessv1.AddPermissionsRequest{User: &accessv1.UserRef{UserId: user}, Permissions: &accessv1.Permissions{
			Resources: []*accessv1.Resource{resource("organization", org, org)},
			Context:   &accessv1.ContextAccess{Access: s},
		}})
		if err != nil {
			t.Fatal(st(err))
		}
	}
	fields := func(t *testing.T, user, org string) []string {
		t.Helper()
		p := h.get(k1, org, []string{user}, nil, nil)[user]
		if p.Context == nil {
			return nil
		}
		return p.GetContext().GetAccessFields()
	}
	h.step("fields are sorted type:value pairs", func(t *testing.T) {
		addWithContext(t, "u", "o", map[string]any{"projectId": []any{"p2", "p1", 7, "p1"}, "region": "eu", "score": 2.5, "zero": 0, "neg": -3, "big": 1e21})
		want = []string{"big:1000000000000000000000", "neg:-3", "projectId:7", "projectId:p1", "projectId:p2", "region:eu", "score:2.5", "zero:0"}
		if got := fields(t, "u", "o"); !slices.Equal(got, want) {
			t.Fatalf("fields %q, want %q", got, want)
		}
	})
	h.step("a grant without context leaves it, one with context replaces it", func(t *testing.T) {
		// Add Permissions without a context leaves it; with one it replaces it.
		h.add(k1, "u", resource("document", "public", "o"))
		if got := fields(t, "u", "o"); !slices.Equal(got, want) {
			t.Fatalf("fields after a grant without context %q", got)
		}
		addWithContext(t, "u", "o", map[string]any{"region": "us"})
		if got := fields(t, "u", "o"); !slices.Equal(got, []string{"region:us"}) {
			t.Fatalf("replaced fields %q", got)
		}
	})
	h.step("the context belongs to the resources' organization", func(t *testing.T) {
		if got := fields(t, "u", "o2"); got != nil {
			t.Fatalf("context in another organization %q", got)
		}
		addWithContext(t, "u", "o2", map[string]any{"team": "x"})
		if got := fields(t, "u", "o"); !slices.Equal(got, []string{"region:us"}) {
			t.Fatalf("o's fields after o2's %q", got)
		}
	})
	h.step("an empty access object clears the fields", func(t *testing.T) {
		addWithContext(t, "u", "o", map[string]any{})
		if got := fields(t, "u", "o"); got != nil {
			t.Fatalf("cleared fields %q", got)
		}
	})
}

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	world(h, "k1")
	world(h, "k2") // the same ids under another API key
	h.add(k1, "u", resource("organization", "o", "o", "editor"), resource("document", "restricted", "o", "editor"), resource("folder", "fr", "o", "editor"))
	s, _ := structpb.NewStruct(map[string]any{"region": "eu"})
	if _, err := h.srv.AddPermissions(k1, &accessv1.AddPermissionsRequest{User: &accessv1.UserRef{UserId: "u"}, Permissions: &accessv1.Permissions{
		Resources: []*accessv1.Resource{resource("organization", "o", "o")}, Context: &accessv1.ContextAccess{Access: s},
	}}); err != nil {
		t.Fatal(err)
	}
	h.step("another key with the same ids has none of the grants", func(t *testing.T) {
		p := h.get(k2, "o", []string{"u"}, []string{"fr"}, []string{"restricted", "private", "public"})["u"]
		h.wantEntry("k2 restricted", p.GetDocuments()["restricted"], denied("restricted", "document"))
		h.wantEntry("k2 private", p.GetDocuments()["private"], denied("organizationPrivate", "document"))
		h.wantEntry("k2 public", p.GetDocuments()["public"], entry{role: "viewer", accessType: "public"})
		h.wantEntry("k2 folder", p.GetFolders()["fr"], denied("restricted", "folder"))
		if len(p.GetOrganization()) != 0 || p.Context != nil {
			t.Fatalf("k2 sees k1's membership or context: %v", p)
		}
	})
	h.step("another key removing the same grants leaves them", func(t *testing.T) {
		// k2 removing the same grants leaves k1's.
		if _, err := h.srv.RemovePermissions(k2, &accessv1.RemovePermissionsRequest{UserId: "u", Permissions: &accessv1.Permissions{Resources: []*accessv1.Resource{resource("document", "restricted", "o")}}}); err != nil {
			t.Fatal(err)
		}
		h.wantEntry("k1 after k2's removal", h.doc(k1, "o", "u", "restricted"), entry{role: "editor", accessType: "restricted"})
	})
	h.step("the documents service is asked with the caller's key", func(t *testing.T) {
		// And the documents service was asked with the caller's key.
		for _, c := range h.docs.calls {
			if c.GetApiKey() != "k1" && c.GetApiKey() != "k2" {
				t.Fatalf("resolve with api key %q", c.GetApiKey())
			}
		}
		if last := h.docs.calls[len(h.docs.calls)-2]; last.GetApiKey() != "k2" {
			t.Fatalf("k2's Get Permissions resolved with %q", last.GetApiKey())
		}
	})
}

func TestGetPermissionsHotPath(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.docs.addOrg("k1", "o").addFolder("k1", "o", "f0", "", "restricted").addFolder("k1", "o", "f1", "f0", "").addFolder("k1", "o", "f2", "f1", "organizationPrivate")
	docs := make([]string, 30)
	for i := range docs {
		docs[i] = fmt.Sprintf("doc-%02d", i)
		h.docs.addDoc("k1", "o", docs[i], fmt.Sprintf("f%d", i%3), "")
	}
	users := make([]string, 100)
	for i := range users {
		users[i] = fmt.Sprintf("user-%03d", i)
		rs := []*accessv1.Resource{resource("organization", "o", "o", "viewer")}
		if i%2 == 0 {
			rs = append(rs, resource("document", docs[i%30], "o", "editor"), resource("folder", "f1", "o", "editor"))
		}
		h.add(k1, users[i], rs...)
	}
	before := h.docs.callCount()
	h.store.grants.Store(0)
	h.store.contexts.Store(0)
	data := h.get(k1, "o", users, nil, docs)
	if n := h.docs.callCount() - before; n != 1 {
		t.Fatalf("%d ResolveResources calls, want 1", n)
	}
	if g, c := h.store.grants.Load(), h.store.contexts.Load(); g != 1 || c != 1 {
		t.Fatalf("store reads: %d grant queries, %d context queries; want 1 each", g, c)
	}
	call := h.docs.calls[len(h.docs.calls)-1]
	if call.GetApiKey() != "k1" || call.GetOrganizationId() != "o" || len(call.GetDocumentIds()) != 30 || len(call.GetFolderIds()) != 0 {
		t.Fatalf("resolve request %v", call)
	}
	if len(data) != 100 {
		t.Fatalf("%d users answered", len(data))
	}
	// Spot checks: user-000 has a document grant on doc-00 (in f0, restricted) and a folder
	// grant on f1; user-001 is a viewer member only.
	h.wantEntry("doc grant", data["user-000"].GetDocuments()["doc-00"], entry{role: "editor", accessType: "restricted"})
	h.wantEntry("folder grant reaches f2", data["user-000"].GetDocuments()["doc-02"], entry{role: "editor", accessType: "organizationPrivate"})
	h.wantEntry("restricted without grant", data["user-001"].GetDocuments()["doc-00"], denied("restricted", "document"))
	h.wantEntry("member in private folder", data["user-001"].GetDocuments()["doc-02"], entry{role: "viewer", accessType: "organizationPrivate"})
}

func TestGetPermissionsBadInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	world(h, "k1")
	many := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("id%d", i)
		}
		return out
	}
	cases := []struct {
		req *accessv1.GetPermissionsRequest
		msg string
	}{
		{&accessv1.GetPermissionsRequest{UserIds: []string{"u"}}, "organizationId is required."},
		{&accessv1.GetPermissionsRequest{OrganizationId: "o"}, "userIds must contain at least one id."},
		{&accessv1.GetPermissionsRequest{OrganizationId: "o", UserIds: many(101)}, "userIds must contain at most 100 ids."},
		{&accessv1.GetPermissionsRequest{OrganizationId: "o", UserIds: []string{"u", ""}}, "userIds[1] must not be empty."},
		{&accessv1.GetPermissionsRequest{OrganizationId: "o", UserIds: []string{"u"}, FolderIds: many(31)}, "folderIds must contain at most 30 ids."},
		{&accessv1.GetPermissionsRequest{OrganizationId: "o", UserIds: []string{"u"}, DocumentIds: many(31)}, "documentIds must contain at most 30 ids."},
		{&accessv1.GetPermissionsRequest{OrganizationId: " o", UserIds: []string{"u"}}, "organizationId must not start or end with white space."},
	}
	for _, c := range cases {
		t.Run(c.msg, func(t *testing.T) {
			_, err := h.srv.GetPermissions(k1, c.req)
			wantStatus(t, err, codes.InvalidArgument, c.msg)
		})
	}
	h.step("refused requests call no other service", func(t *testing.T) {
		if n := h.docs.callCount(); n != 0 {
			t.Fatalf("refused requests called the documents service %d times", n)
		}
	})
	h.step("a full request and no caller", func(t *testing.T) {
		// 30 of each is fine.
		h.get(k1, "o", many(100), nil, nil)
		if _, err := h.srv.GetPermissions(context.Background(), &accessv1.GetPermissionsRequest{OrganizationId: "o", UserIds: []string{"u"}}); st(err).Code() != codes.Internal {
			t.Fatalf("without a caller: %v", err)
		}
	})
}

func TestDocumentsServiceErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	req := &accessv1.GetPermissionsRequest{OrganizationId: "o", UserIds: []string{"u"}}
	for _, c := range []struct {
		name    string
		docsErr error
		code    codes.Code
		msg     string
	}{
		{"not a status", errors.New("connection reset"), codes.Internal, "Internal error."},
		{"unavailable passes through", status.Error(codes.Unavailable, "documents are away"), codes.Unavailable, "documents are away"},
		{"unauthenticated is internal", status.Error(codes.Unauthenticated, "bad internal token"), codes.Internal, "Internal error."},
	} {
		t.Run(c.name, func(t *testing.T) {
			h.docs.err = c.docsErr
			_, err := h.srv.GetPermissions(k1, req)
			wantStatus(t, err, c.code, c.msg)
		})
	}
}

// ---- Add / Remove Permissions, Set Roles ----

func TestAddPermissionsDefaultsAndExistence(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	world(h, "k1")
	h.docs.addOrg("k1", "o2").addDoc("k1", "o2", "d", "", "restricted")
	before := h.docs.callCount()
	h.add(k1, "u", resource("document", "restricted", "o"), resource("folder", "fr", "o"), resource("document", "d", "o2"), resource("document", "private", "o"))
	// One call per organization to check before writing, one to confirm after.
	if n := h.docs.callCount() - before; n != 4 {
		t.Fatalf("%d ResolveResources calls for two organizations, want 2 × 2", n)
	}
	h.wantEntry("default role", h.doc(k1, "o", "u", "restricted"), entry{role: "editor", accessType: "restricted"})
	h.wantEntry("other organization", h.doc(k1, "o2", "u", "d"), entry{role: "editor", accessType: "restricted"})
	// The same resource twice: the later one wins.
	h.add(k1, "v", resource("document", "restricted", "o", "editor"), resource("document", "restricted", "o", "viewer"))
	h.wantEntry("later wins", h.doc(k1, "o", "v", "restricted"), entry{role: "viewer", accessType: "restricted"})
}

func TestAddPermissionsBadInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	world(h, "k1")
	past := float64(start.Add(-time.Second).Unix())
	future := float64(start.Add(time.Hour).Unix())
	good := resource("document", "restricted", "o", "viewer")
	perms := func(rs ...*accessv1.Resource) *accessv1.Permissions { return &accessv1.Permissions{Resources: rs} }
	withContext := func(p *accessv1.Permissions, access map[string]any) *accessv1.Permissions {
		s, err := structpb.NewStruct(access)
		if err != nil {
			t.Fatal(err)
		}
		p.Context = &accessv1.ContextAccess{Access: s}
		return p
	}
	hundredOne := make([]*accessv1.Resource, 101)
	for i := range hundredOne {
		hundredOne[i] = good
	}
	cases := []struct {
		user  string
		perms *accessv1.Permissions
		code  codes.Code
		msg   string
	}{
		{"", perms(good), codes.InvalidArgument, "user.userId is required."},
		{"u", nil, codes.InvalidArgument, "permissions.resources must contain at least one resource."},
		{"u", perms(hundredOne...), codes.InvalidArgument, "permissions.resources must contain at most 100 resources."},
		{"u", perms(good, resource("page", "d", "o")), codes.InvalidArgument, "permissions.resources[1].type must be one of organization, folder, document."},
		{"u", perms(resource("", "d", "o")), codes.InvalidArgument, "permissions.resources[0].type is required."},
		{"u", perms(resource("document", "", "o")), codes.InvalidArgument, "permissions.resources[0].id is required."},
		{"u", perms(resource("document", "d", "")), codes.InvalidArgument, "permissions.resources[0].organizationId is required."},
		{"u", perms(resource("organization", "o2", "o")), codes.InvalidArgument, "permissions.resources[0].id must equal permissions.resources[0].organizationId for type organization."},
		{"u", perms(resource("document", "restricted", "o", "owner")), codes.InvalidArgument, "permissions.resources[0].accessRole must be one of viewer, editor."},
		{"u", perms(resource("document", "restricted", "o", past)), codes.InvalidArgument, "permissions.resources[0].expiresAt must be in the future."},
		{"u", perms(resource("document", "restricted", "o", float64(start.Unix()))), codes.InvalidArgument, "permissions.resources[0].expiresAt must be in the future."},
		{"u", perms(resource("document", "restricted", "o", 1e300)), codes.InvalidArgument, "permissions.resources[0].expiresAt must be a time in Unix seconds."},
		{"u", withContext(perms(good, resource("organization", "o2", "o2")), map[string]any{"a": "b"}), codes.InvalidArgument, "permissions.context needs resources of one organization."},
		{"u", withContext(perms(good), map[string]any{"flag": true}), codes.InvalidArgument, "permissions.context.access.flag must be a string, a number, or an array of them."},
		{"u", withContext(perms(good), map[string]any{"obj": map[string]any{"x": 1}}), codes.InvalidArgument, "permissions.context.access.obj must be a string, a number, or an array of them."},
		{"u", withContext(perms(good), map[string]any{"none": nil}), codes.InvalidArgument, "permissions.context.access.none must be a string, a number, or an array of them."},
		{"u", withContext(perms(good), map[string]any{"list": []any{"a", []any{"b"}}}), codes.InvalidArgument, "permissions.context.access.list[1] must be a string or a number."},
		{"u", withContext(perms(good), map[string]any{"": "x"}), codes.InvalidArgument, "permissions.context.access field names must be 1 to 256 characters without control characters."},
		// Existence, after every syntactic check passed; earlier resources exist.
		{"u", perms(good, resource("document", "ghost", "o", future)), codes.NotFound, "Document ghost does not exist in organization o."},
		{"u", perms(good, resource("folder", "nofolder", "o")), codes.NotFound, "Folder nofolder does not exist in organization o."},
		{"u", perms(good, resource("organization", "nope", "nope")), codes.NotFound, "Organization nope does not exist."},
		{"u", perms(good, resource("document", "restricted", "nope")), codes.NotFound, "Organization nope does not exist."},
		{"u", withContext(perms(good, resource("document", "ghost", "o")), map[string]any{"a": "b"}), codes.NotFound, "Document ghost does not exist in organization o."},
	}
	for _, c := range cases {
		t.Run(c.msg, func(t *testing.T) {
			_, err := h.srv.AddPermissions(k1, &accessv1.AddPermissionsRequest{User: &accessv1.UserRef{UserId: c.user}, Permissions: c.perms})
			wantStatus(t, err, c.code, c.msg)
		})
	}
	h.step("refused requests wrote nothing", func(t *testing.T) {
		if got, _ := h.store.Grants(context.Background(), "k1", "o", []string{"u", ""}, start); len(got) != 0 {
			t.Fatalf("refused requests wrote %+v", got)
		}
		if got, _ := h.store.ContextFields(context.Background(), "k1", "o", []string{"u"}); len(got) != 0 {
			t.Fatalf("refused requests wrote contexts %v", got)
		}
		h.wantEntry("after refusals", h.doc(k1, "o", "u", "restricted"), denied("restricted", "document"))
	})
}

func TestRemovePermissions(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	world(h, "k1")
	h.add(k1, "u", resource("organization", "o", "o"), resource("document", "restricted", "o"), resource("folder", "fr", "o"))
	remove := func(t *testing.T, rs ...*accessv1.Resource) {
		t.Helper()
		resp, err := h.srv.RemovePermissions(k1, &accessv1.RemovePermissionsRequest{UserId: "u", Permissions: &accessv1.Permissions{Resources: rs}})
		if err != nil {
			t.Fatal(st(err))
		}
		if resp.GetStatus() != "success" || resp.GetMessage() != "Permissions removed successfully." || resp.Data != nil {
			t.Fatalf("remove answered %v", resp)
		}
	}
	h.step("removes grants, twice over, existence not required", func(t *testing.T) {
		for range 2 { // idempotent, and existence is not required
			remove(t, resource("document", "restricted", "o"), resource("folder", "fr", "o"), resource("document", "deleted-long-ago", "gone"))
		}
		h.wantEntry("document", h.doc(k1, "o", "u", "restricted"), denied("restricted", "document"))
		h.wantEntry("folder", h.folder(k1, "o", "u", "fr"), denied("restricted", "folder"))
		if got := h.get(k1, "o", []string{"u"}, nil, nil)["u"].GetOrganization(); len(got) != 1 {
			t.Fatalf("membership removed too: %v", got)
		}
	})
	h.step("removes the membership", func(t *testing.T) {
		remove(t, resource("organization", "o", "o"))
		if got := h.get(k1, "o", []string{"u"}, nil, nil)["u"].GetOrganization(); len(got) != 0 {
			t.Fatalf("membership kept: %v", got)
		}
	})

	h.step("refusals remove nothing", func(t *testing.T) {
		h.add(k1, "u", resource("document", "restricted", "o"))
		for _, c := range []struct {
			req *accessv1.RemovePermissionsRequest
			msg string
		}{
			{&accessv1.RemovePermissionsRequest{Permissions: &accessv1.Permissions{Resources: []*accessv1.Resource{resource("document", "restricted", "o")}}}, "userId is required."},
			{&accessv1.RemovePermissionsRequest{UserId: "u"}, "permissions.resources must contain at least one resource."},
			{&accessv1.RemovePermissionsRequest{UserId: "u", Permissions: &accessv1.Permissions{Resources: []*accessv1.Resource{resource("document", "restricted", "o"), resource("doc", "x", "o")}}}, "permissions.resources[1].type must be one of organization, folder, document."},
			{&accessv1.RemovePermissionsRequest{UserId: "u", Permissions: &accessv1.Permissions{Resources: []*accessv1.Resource{resource("document", "restricted", "o"), resource("document", "x", "")}}}, "permissions.resources[1].organizationId is required."},
			{&accessv1.RemovePermissionsRequest{UserId: "u", Permissions: &accessv1.Permissions{Resources: []*accessv1.Resource{resource("document", "restricted", "o"), resource("organization", "a", "b")}}}, "permissions.resources[1].id must equal permissions.resources[1].organizationId for type organization."},
		} {
			t.Run(c.msg, func(t *testing.T) {
				_, err := h.srv.RemovePermissions(k1, c.req)
				wantStatus(t, err, codes.InvalidArgument, c.msg)
			})
		}
		h.wantEntry("refused removals removed nothing", h.doc(k1, "o", "u", "restricted"), entry{role: "editor", accessType: "restricted"})
	})
}

func TestSetRoles(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	world(h, "k1")
	world(h, "k2")
	set := func(t *testing.T, req *accessv1.SetRolesRequest) {
		t.Helper()
		if _, err := h.srv.SetRoles(context.Background(), req); err != nil {
			t.Fatal(st(err))
		}
	}
	org := func(u string) string {
		return h.get(k1, "o", []string{u}, nil, nil)[u].GetOrganization()["o"].GetAccessRole()
	}
	h.step("sets roles for the key in the request, without existence checks", func(t *testing.T) {
		// Internal: no caller on the context, the tenant is in the request; no existence checks.
		set(t, &accessv1.SetRolesRequest{ApiKey: "k1", OrganizationId: "o", UserIds: []string{"a", "b"}, ResourceType: "organization", ResourceId: "o", AccessRole: "viewer"})
		set(t, &accessv1.SetRolesRequest{ApiKey: "k1", OrganizationId: "o", UserIds: []string{"a"}, ResourceType: "document", ResourceId: "restricted", AccessRole: "editor"})
		if h.docs.callCount() != 0 {
			t.Fatal("set roles asked the documents service")
		}
		h.wantEntry("document role", h.doc(k1, "o", "a", "restricted"), entry{role: "editor", accessType: "restricted"})
		h.wantEntry("member role", h.doc(k1, "o", "b", "private"), entry{role: "viewer", accessType: "organizationPrivate"})
	})

	h.step("only_if_absent keeps a role in effect and fills a missing or lapsed one", func(t *testing.T) {
		// only_if_absent keeps a role in effect, and gives one where there is none or it lapsed.
		exp := start.Add(time.Hour)
		h.add(k1, "c", resource("organization", "o", "o", "viewer", exp))
		set(t, &accessv1.SetRolesRequest{ApiKey: "k1", OrganizationId: "o", UserIds: []string{"a", "c", "d"}, ResourceType: "organization", ResourceId: "o", AccessRole: "editor", OnlyIfAbsent: true})
		if org("a") != "viewer" || org("c") != "viewer" || org("d") != "editor" {
			t.Fatalf("only if absent: a=%q c=%q d=%q", org("a"), org("c"), org("d"))
		}
		h.clock.Advance(2 * time.Hour)
		set(t, &accessv1.SetRolesRequest{ApiKey: "k1", OrganizationId: "o", UserIds: []string{"c"}, ResourceType: "organization", ResourceId: "o", AccessRole: "editor", OnlyIfAbsent: true})
		if org("c") != "editor" {
			t.Fatalf("lapsed role not replaced: %q", org("c"))
		}
	})
	h.step("without only_if_absent the role is replaced", func(t *testing.T) {
		// Without the flag the role is replaced, and is permanent.
		set(t, &accessv1.SetRolesRequest{ApiKey: "k1", OrganizationId: "o", UserIds: []string{"a"}, ResourceType: "organization", ResourceId: "o", AccessRole: "editor"})
		if org("a") != "editor" {
			t.Fatalf("role not replaced: %q", org("a"))
		}
	})
	h.step("scoped by the request's key", func(t *testing.T) {
		if got := h.get(k2, "o", []string{"a"}, nil, nil)["a"].GetOrganization(); len(got) != 0 {
			t.Fatalf("k2 sees k1's roles: %v", got)
		}
	})

	h.step("refusals write nothing", func(t *testing.T) {
		for _, c := range []struct {
			req *accessv1.SetRolesRequest
			msg string
		}{
			{&accessv1.SetRolesRequest{OrganizationId: "o", UserIds: []string{"x"}, ResourceType: "organization", ResourceId: "o", AccessRole: "editor"}, "apiKey is required."},
			{&accessv1.SetRolesRequest{ApiKey: "k1", UserIds: []string{"x"}, ResourceType: "document", ResourceId: "d", AccessRole: "editor"}, "organizationId is required."},
			{&accessv1.SetRolesRequest{ApiKey: "k1", OrganizationId: "o", ResourceType: "document", ResourceId: "d", AccessRole: "editor"}, "userIds must contain at least one id."},
			{&accessv1.SetRolesRequest{ApiKey: "k1", OrganizationId: "o", UserIds: []string{"x"}, ResourceType: "group", ResourceId: "d", AccessRole: "editor"}, "type must be one of organization, folder, document."},
			{&accessv1.SetRolesRequest{ApiKey: "k1", OrganizationId: "o", UserIds: []string{"x"}, ResourceType: "document", AccessRole: "editor"}, "id is required."},
			{&accessv1.SetRolesRequest{ApiKey: "k1", OrganizationId: "o", UserIds: []string{"x"}, ResourceType: "document", ResourceId: "d"}, "accessRole is required."},
			{&accessv1.SetRolesRequest{ApiKey: "k1", OrganizationId: "o", UserIds: []string{"x"}, ResourceType: "document", ResourceId: "d", AccessRole: "admin"}, "accessRole must be one of viewer, editor."},
			{&accessv1.SetRolesRequest{ApiKey: "k1", OrganizationId: "o", UserIds: []string{"x"}, ResourceType: "organization", ResourceId: "p", AccessRole: "editor"}, "id must equal organizationId for type organization."},
		} {
			t.Run(c.msg, func(t *testing.T) {
				_, err := h.srv.SetRoles(context.Background(), c.req)
				wantStatus(t, err, codes.InvalidArgument, c.msg)
			})
		}
		if got, _ := h.store.Grants(context.Background(), "k1", "o", []string{"x"}, h.clock.Now()); len(got) != 0 {
			t.Fatalf("refused set roles wrote %+v", got)
		}
	})
}

func TestNewRefusesBadConfiguration(t *testing.T) {
	t.Parallel()
	docs := newFakeDocs()
	for _, c := range []struct {
		name   string
		store  Store
		secret []byte
		docs   documentsv1.DocumentsServiceClient
		opts   []Option
	}{
		{"no store", nil, secret, docs, nil},
		{"no secret", NewMemoryStore(), nil, docs, nil},
		{"no documents client", NewMemoryStore(), secret, nil, nil},
		{"rotation too short", NewMemoryStore(), secret, docs, []Option{WithKeyRotation(time.Second)}},
		{"rotation not whole seconds", NewMemoryStore(), secret, docs, []Option{WithKeyRotation(time.Hour + time.Millisecond)}},
		{"empty issuer", NewMemoryStore(), secret, docs, []Option{WithIssuer("")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := New(c.store, c.secret, c.docs, c.opts...); err == nil {
				t.Errorf("%s: accepted", c.name)
			}
		})
	}
	s, err := New(NewMemoryStore(), secret, docs)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkGetPermissions is the benchmarked case: 100 users × 30 documents in nested folders,
// on the memory store.
func BenchmarkGetPermissions(b *testing.B) {
	t := &testing.T{}
	h := newHarness(t)
	h.docs.addOrg("k1", "o").addFolder("k1", "o", "f0", "", "restricted").addFolder("k1", "o", "f1", "f0", "").addFolder("k1", "o", "f2", "f1", "organizationPrivate")
	docs := make([]string, 30)
	for i := range docs {
		docs[i] = fmt.Sprintf("doc-%02d", i)
		h.docs.addDoc("k1", "o", docs[i], fmt.Sprintf("f%d", i%3), "")
	}
	users := make([]string, 100)
	for i := range users {
		users[i] = fmt.Sprintf("user-%03d", i)
		grants := []Grant{orgGrant("o", users[i], "editor")}
		if i%2 == 0 {
			grants = append(grants, docGrant("o", docs[i%30], users[i], "viewer"), folderGrant("o", "f1", users[i], "editor"))
		}
		if err := h.store.PutGrants(context.Background(), "k1", grants); err != nil {
			b.Fatal(err)
		}
	}
	req := &accessv1.GetPermissionsRequest{OrganizationId: "o", UserIds: users, DocumentIds: docs}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.srv.GetPermissions(k1, req); err != nil {
			b.Fatal(err)
		}
	}
}

// Grants are kept under the generations of what they are on: a grant on a document, a folder
// of its chain, or the organization, made before the resource was deleted and made again, is
// not one on the new resource; a late deletion of the old generation leaves the new one's.
func TestGrantsFollowGenerations(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	world(h, "k1")
	h.docs.setGen("org", "k1", "o", "", "og1")
	h.docs.setGen("document", "k1", "o", "restricted", "dg1")
	h.docs.setGen("folder", "k1", "o", "f1", "fg1")
	h.add(k1, "u", resource("document", "restricted", "o", "viewer"), resource("folder", "f1", "o", "viewer"), resource("organization", "o", "o", "editor"))
	h.wantEntry("before", h.doc(k1, "o", "u", "restricted"), entry{role: "viewer", accessType: "restricted"})

	h.step("resources made again have none of the old grants", func(t *testing.T) {
		h.docs.setGen("document", "k1", "o", "restricted", "dg2")
		h.docs.setGen("folder", "k1", "o", "f1", "fg2")
		h.wantEntry("document made again", h.doc(k1, "o", "u", "restricted"), denied("restricted", "document"))
		h.wantEntry("folder made again", h.folder(k1, "o", "u", "f2"), denied("restricted", "folder"))
		h.docs.setGen("org", "k1", "o", "", "og2")
		if got := h.get(k1, "o", []string{"u"}, nil, nil)["u"].GetOrganization(); len(got) != 0 {
			t.Fatalf("membership of the organization made again: %v", got)
		}
	})

	h.step("a late deletion of the old generation spares the new grant", func(t *testing.T) {
		h.add(k1, "u", resource("document", "restricted", "o", "editor"))
		late := &lifecyclev1.Event{Id: "late", Type: "document.deleted", ApiKey: "k1", OrganizationId: "o", OrganizationGeneration: "og1",
			Payload: &lifecyclev1.Event_DocumentsDeleted{DocumentsDeleted: &lifecyclev1.DocumentsDeleted{DocumentIds: []string{"restricted"}, Generations: []string{"dg1"}}}}
		if err := h.srv.HandleEvent(context.Background(), late); err != nil {
			t.Fatal(err)
		}
		h.wantEntry("after a late deletion of the old generation", h.doc(k1, "o", "u", "restricted"), entry{role: "editor", accessType: "restricted"})
	})
}

// A document deleted and made again while permissions are added for it keeps no grant: Add
// Permissions answers NOT_FOUND as if the deletion had come first, and the grant written under
// the old generation is gone.
func TestGrantsAddedDuringDeletionDoNotSurvive(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	world(h, "k1")
	h.docs.setGen("document", "k1", "o", "restricted", "dg1")
	before := h.docs.callCount()
	h.docs.afterCall = func(n int) {
		if n == before+1 { // after the check, before the write lands
			h.docs.setGen("document", "k1", "o", "restricted", "dg2")
		}
	}
	_, err := h.srv.AddPermissions(k1, &accessv1.AddPermissionsRequest{User: &accessv1.UserRef{UserId: "u"},
		Permissions: &accessv1.Permissions{Resources: []*accessv1.Resource{resource("document", "restricted", "o", "editor")}}})
	if s := st(err); s.Code() != codes.NotFound || s.Message() != "Document restricted does not exist in organization o." {
		t.Fatalf("add during deletion: %v", s)
	}
	h.docs.afterCall = nil
	h.wantEntry("the document made again", h.doc(k1, "o", "u", "restricted"), denied("restricted", "document"))
	grants, _ := h.store.Grants(context.Background(), "k1", "o", []string{"u"}, h.clock.Now())
	if len(grants) != 0 {
		t.Fatalf("grants left under the old generation: %+v", grants)
	}
}

// ---- FilterReaders ----

func (h *harness) readers(apiKey, org, doc string, users ...string) []string {
	h.t.Helper()
	resp, err := h.srv.FilterReaders(context.Background(), &accessv1.FilterReadersRequest{ApiKey: apiKey, OrganizationId: org, DocumentId: doc, UserIds: users})
	if err != nil {
		h.t.Fatalf("FilterReaders(%s, %v): %v", doc, users, st(err))
	}
	if resp.GetUserIds() == nil {
		h.t.Fatalf("FilterReaders(%s): nil list", doc)
	}
	h.lastRoles = resp.GetRoles()
	return resp.GetUserIds()
}

// FilterReaders answers, for every document, the users Get Permissions gives a role there: the
// same resolution, through every row of docs/permissions.md, grants lapsing included.
func TestFilterReadersAgreesWithGetPermissions(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	world(h, "k1")
	h.docs.setGen("org", "k1", "o", "", "og")
	h.docs.setGen("folder", "k1", "o", "f2", "fg")
	h.docs.setGen("document", "k1", "o", "in-f3", "dg")
	exp := start.Add(time.Hour)
	h.add(k1, "member-editor", resource("organization", "o", "o", "editor"))
	h.add(k1, "member-viewer", resource("organization", "o", "o", "viewer"), resource("document", "public", "o", "viewer"))
	h.add(k1, "f1-viewer", resource("folder", "f1", "o", "viewer"))
	h.add(k1, "f2-editor", resource("folder", "f2", "o", "editor"))
	h.add(k1, "doc-grants", resource("document", "restricted", "o", "editor"), resource("document", "in-f3", "o", "viewer"))
	h.add(k1, "temporary", resource("organization", "o", "o", "editor", exp), resource("document", "restricted", "o", "viewer", exp))
	h.add(k1, "fo-viewer", resource("folder", "fo", "o", "viewer"))
	h.docs.addOrg("k1", "o2").addDoc("k1", "o2", "private", "", "organizationPrivate")
	h.add(k1, "unrelated", resource("document", "private", "o2", "editor"), resource("organization", "o2", "o2", "editor"))
	users := []string{"member-editor", "member-viewer", "f1-viewer", "f2-editor", "doc-grants", "temporary", "fo-viewer", "unrelated", "stranger"}
	docs := []string{"root", "public", "private", "restricted", "in-f2", "in-f3", "open-in-f1", "in-fo"}

	check := func(when string) {
		t.Helper()
		perms := h.get(k1, "o", users, nil, docs)
		for _, d := range docs {
			var want []string
			wantRoles := map[string]string{}
			for _, u := range users {
				if r := perms[u].GetDocuments()[d].AccessRole; r != nil {
					want = append(want, u)
					wantRoles[u] = *r
				}
			}
			if got := h.readers("k1", "o", d, users...); !slices.Equal(got, want) {
				t.Errorf("%s, %s: readers %v, Get Permissions gives a role to %v", when, d, got, want)
			}
			if !maps.Equal(h.lastRoles, wantRoles) {
				t.Errorf("%s, %s: roles %v, Get Permissions gives %v", when, d, h.lastRoles, wantRoles)
			}
		}
	}
	check("now")
	// Spot checks of the rows, so the agreement is not an agreement on nothing.
	if got := h.readers("k1", "o", "restricted", users...); !slices.Equal(got, []string{"doc-grants", "temporary"}) {
		t.Fatalf("restricted: %v", got)
	}
	if got := h.readers("k1", "o", "private", users...); !slices.Equal(got, []string{"member-editor", "member-viewer", "temporary"}) {
		t.Fatalf("organizationPrivate: %v", got)
	}
	if got := h.readers("k1", "o", "public", users...); !slices.Equal(got, users) {
		t.Fatalf("public: %v", got)
	}
	h.clock.Advance(time.Hour)
	check("after the temporary grants lapsed")
	if got := h.readers("k1", "o", "restricted", users...); !slices.Equal(got, []string{"doc-grants"}) {
		t.Fatalf("restricted after the lapse: %v", got)
	}
	// Made again, the organization has no members and the folder no grants.
	h.docs.setGen("org", "k1", "o", "", "og2")
	h.docs.setGen("folder", "k1", "o", "f2", "fg2")
	check("after new generations")
	if got := h.readers("k1", "o", "private", users...); len(got) != 0 {
		t.Fatalf("members of the dead generation read the private document: %v", got)
	}
}

func TestFilterReadersOrderAndDuplicates(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	world(h, "k1")
	h.add(k1, "a", resource("organization", "o", "o", "viewer"))
	h.add(k1, "c", resource("organization", "o", "o", "editor"))
	if got := h.readers("k1", "o", "private", "c", "x", "a", "c", "b", "a"); !slices.Equal(got, []string{"c", "a"}) {
		t.Fatalf("in the order asked, once each: %v", got)
	}
	if got := h.readers("k1", "o", "private"); len(got) != 0 {
		t.Fatalf("no users: %v", got)
	}
}

func TestFilterReadersBadInputAndNotFound(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	world(h, "k1")
	many := make([]string, maxReaderUserIDs+1)
	for i := range many {
		many[i] = fmt.Sprintf("u%d", i)
	}
	bad := []struct {
		req  *accessv1.FilterReadersRequest
		code codes.Code
		msg  string
	}{
		{&accessv1.FilterReadersRequest{OrganizationId: "o", DocumentId: "public", UserIds: []string{"u"}}, codes.InvalidArgument, "apiKey is required."},
		{&accessv1.FilterReadersRequest{ApiKey: "k1", DocumentId: "public", UserIds: []string{"u"}}, codes.InvalidArgument, "organizationId is required."},
		{&accessv1.FilterReadersRequest{ApiKey: "k1", OrganizationId: "o", UserIds: []string{"u"}}, codes.InvalidArgument, "documentId is required."},
		{&accessv1.FilterReadersRequest{ApiKey: "k1", OrganizationId: "o", DocumentId: "public", UserIds: many}, codes.InvalidArgument, "userIds must contain at most 10000 ids."},
		{&accessv1.FilterReadersRequest{ApiKey: "k1", OrganizationId: "o", DocumentId: "public", UserIds: []string{"u", ""}}, codes.InvalidArgument, "userIds[1] must not be empty."},
		{&accessv1.FilterReadersRequest{ApiKey: "k1", OrganizationId: "o", DocumentId: "public", UserIds: []string{"u\nv"}}, codes.InvalidArgument, "userIds[0] must not contain control characters."},
	}
	for _, c := range bad {
		t.Run(c.msg, func(t *testing.T) {
			_, err := h.srv.FilterReaders(context.Background(), c.req)
			wantStatus(t, err, c.code, c.msg)
		})
	}
	h.step("refused requests call no other service", func(t *testing.T) {
		if n := h.docs.callCount(); n != 0 {
			t.Fatalf("refused requests called the documents service %d times", n)
		}
	})
	h.step("missing organization or document, with users or without", func(t *testing.T) {
		for _, c := range []struct {
			apiKey, org, doc, msg string
		}{
			{"k1", "nope", "public", "Organization does not exist."},
			{"k2", "o", "public", "Organization does not exist."}, // another tenant's
			{"k1", "o", "nope", "Document does not exist."},
			{"k1", "o", "f1", "Document does not exist."}, // a folder is no document
		} {
			t.Run(c.apiKey+" "+c.org+" "+c.doc, func(t *testing.T) {
				_, err := h.srv.FilterReaders(context.Background(), &accessv1.FilterReadersRequest{ApiKey: c.apiKey, OrganizationId: c.org, DocumentId: c.doc, UserIds: []string{"u"}})
				wantStatus(t, err, codes.NotFound, c.msg)
				// Even without users: the caller learns that the document is gone.
				_, err = h.srv.FilterReaders(context.Background(), &accessv1.FilterReadersRequest{ApiKey: c.apiKey, OrganizationId: c.org, DocumentId: c.doc})
				wantStatus(t, err, codes.NotFound, c.msg)
			})
		}
	})
	h.step("a document left out of the answer is missing", func(t *testing.T) {
		h.docs.omitMissing = true
		_, err := h.srv.FilterReaders(context.Background(), &accessv1.FilterReadersRequest{ApiKey: "k1", OrganizationId: "o", DocumentId: "nope", UserIds: []string{"u"}})
		wantStatus(t, err, codes.NotFound, "Document does not exist.")
	})

	h.step("documents unavailable", func(t *testing.T) {
		h.docs.err = status.Error(codes.Unavailable, "documents are away")
		_, err := h.srv.FilterReaders(context.Background(), &accessv1.FilterReadersRequest{ApiKey: "k1", OrganizationId: "o", DocumentId: "public", UserIds: []string{"u"}})
		wantStatus(t, err, codes.Unavailable, "documents are away")
	})
}

// 10,000 users cost one call to the documents service and one narrowed grant read per
// thousand users, never the per-user path nor a read of every grant they hold.
func TestFilterReadersTenThousandUsers(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.docs.addOrg("k1", "o").addFolder("k1", "o", "f0", "", "restricted").addFolder("k1", "o", "f1", "f0", "").
		addDoc("k1", "o", "d", "f1", "organizationPrivate").addDoc("k1", "o", "other", "", "restricted")
	users := make([]string, maxReaderUserIDs)
	var grants []Grant
	var want []string
	for i := range users {
		users[i] = fmt.Sprintf("user-%05d", (i*7919)%maxReaderUserIDs)
		u := users[i]
		switch i % 5 {
		case 0: // member: reads (organizationPrivate)
			grants = append(grants, orgGrant("o", u, "viewer"))
			want = append(want, u)
		case 1: // folder grant up the chain: reads
			grants = append(grants, folderGrant("o", "f0", u, "editor"))
			want = append(want, u)
		case 2: // a grant elsewhere only: does not
			grants = append(grants, docGrant("o", "other", u, "editor"))
		case 3: // lapsed membership: does not
			grants = append(grants, expiring(orgGrant("o", u, "editor"), start.Add(-time.Minute)))
		}
	}
	if err := h.store.PutGrants(context.Background(), "k1", grants); err != nil {
		t.Fatal(err)
	}
	before := h.docs.callCount()
	h.store.grants.Store(0)
	h.store.grantsOn.Store(0)
	began := time.Now()
	got := h.readers("k1", "o", "d", users...)
	took := time.Since(began)
	if !slices.Equal(got, want) {
		t.Fatalf("%d readers, want %d", len(got), len(want))
	}
	if n := h.docs.callCount() - before; n != 1 {
		t.Fatalf("%d ResolveResources calls, want 1", n)
	}
	if g, on := h.store.grants.Load(), h.store.grantsOn.Load(); g != 0 || on != maxReaderUserIDs/readerBatch {
		t.Fatalf("store reads: %d Grants, %d GrantsOn; want 0 and %d", g, on, maxReaderUserIDs/readerBatch)
	}
	t.Logf("10,000 users on the memory store: %v", took)
}
