package documents

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/outbox"
)

var quiet = slog.New(slog.DiscardHandler)

// deliverFunc adapts a function to outbox.Deliverer.
type deliverFunc func(ctx context.Context, subscriber string, e *lifecyclev1.Event) error

func (f deliverFunc) Deliver(ctx context.Context, subscriber string, e *lifecyclev1.Event) error {
	return f(ctx, subscriber, e)
}

// recordingPublisher is the real outbox, remembering what was published.
type recordingPublisher struct {
	*outbox.Outbox
	mu     sync.Mutex
	events []*lifecyclev1.Event
}

func (p *recordingPublisher) record(e *lifecyclev1.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, e)
}

func (p *recordingPublisher) Publish(ctx context.Context, e *lifecyclev1.Event) (*outbox.Record, error) {
	p.record(e)
	return p.Outbox.Publish(ctx, e)
}

func (p *recordingPublisher) PublishAsync(ctx context.Context, e *lifecyclev1.Event) (*outbox.Record, error) {
	p.record(e)
	return p.Outbox.PublishAsync(ctx, e)
}

func (p *recordingPublisher) published() []*lifecyclev1.Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.events)
}

// harness is a Server on a memory store with a real outbox whose only subscriber is the server
// itself, delivered to directly (as the lifecycle dispatcher would, errors mapped to statuses).
type harness struct {
	t      *testing.T
	store  Store
	mem    *MemoryStore
	box    outbox.Store
	clock  *clock.Fake
	srv    *Server
	ob     *outbox.Outbox
	pub    *recordingPublisher
	mu     sync.Mutex
	fail   []error // returned by the next deliveries instead of delivering, one each
	served int     // deliveries that reached the handler
}

func newHarness(t *testing.T) *harness {
	mem := NewMemoryStore()
	h := &harness{t: t, store: mem, mem: mem, box: outbox.NewMemoryStore(), clock: clock.NewFake(t0)}
	h.start()
	return h
}

// start builds the outbox and the Server on the harness's stores: called again, it is a
// restarted process.
func (h *harness) start() {
	h.t.Helper()
	deliver := deliverFunc(func(ctx context.Context, sub string, e *lifecyclev1.Event) error {
		h.mu.Lock()
		if len(h.fail) > 0 {
			err := h.fail[0]
			h.fail = h.fail[1:]
			h.mu.Unlock()
			return err
		}
		h.served++
		h.mu.Unlock()
		if sub != "documents" {
			return fmt.Errorf("unexpected subscriber %s", sub)
		}
		return apierr.ToStatus(ctx, quiet, h.srv.HandleEvent(ctx, e))
	})
	h.ob = outbox.New("documents", h.box, deliver, outbox.To("documents"), outbox.WithClock(h.clock), outbox.WithLogger(quiet))
	h.pub = &recordingPublisher{Outbox: h.ob}
	srv, err := New(h.store, []byte("0123456789abcdef0123456789abcdef"), h.pub, WithClock(h.clock), WithLogger(quiet))
	if err != nil {
		h.t.Fatal(err)
	}
	h.srv = srv
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

func (h *harness) failNext(errs ...error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fail = append(h.fail, errs...)
}

func callerCtx(apiKey string, advanced bool) context.Context {
	return authn.WithCaller(context.Background(), authn.Caller{APIKey: apiKey, WorkspaceID: "w-" + apiKey, Settings: authn.Settings{AdvancedQueries: advanced}})
}

var (
	k1 = callerCtx("k1", true)
	k2 = callerCtx("k2", true)
)

func asStatus(err error) *status.Status {
	return status.Convert(apierr.ToStatus(context.Background(), quiet, err))
}

// wantErr checks a handler error's code and, when msg is not empty, its message.
func wantErr(t *testing.T, what string, err error, code codes.Code, msg string) {
	t.Helper()
	st := asStatus(err)
	if st.Code() != code || (msg != "" && st.Message() != msg) {
		t.Errorf("%s: got %v %q, want %v %q", what, st.Code(), st.Message(), code, msg)
	}
}

// wantItems checks an ItemResultsResponse: the overall message and each item, given as
// id → "ok: message" or "fail: message".
func wantItems(t *testing.T, what string, resp *documentsv1.ItemResultsResponse, err error, message string, items map[string]string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if resp.GetStatus() != "success" || resp.GetMessage() != message {
		t.Errorf("%s: status %q message %q, want %q", what, resp.GetStatus(), resp.GetMessage(), message)
	}
	if len(resp.GetData()) != len(items) {
		t.Errorf("%s: %d items, want %d: %v", what, len(resp.GetData()), len(items), resp.GetData())
	}
	for id, want := range items {
		it := resp.GetData()[id]
		got := "fail: " + it.GetMessage()
		if it.GetSuccess() {
			got = "ok: " + it.GetMessage()
		}
		if it == nil || it.GetId() != id || got != want {
			t.Errorf("%s: item %s = %v, want %q", what, id, it, want)
		}
	}
}

// ---- Setup helpers ----

func (h *harness) org(ctx context.Context, id string) {
	h.t.Helper()
	resp, err := h.srv.AddOrganizations(ctx, &documentsv1.AddOrganizationsRequest{Organizations: []*documentsv1.Organization{{OrganizationId: id, OrganizationName: "Org " + id}}})
	if err != nil || !resp.GetData()[id].GetSuccess() {
		h.t.Fatalf("organization %s: %v %v", id, resp, err)
	}
}

func (h *harness) folder(ctx context.Context, org, id, parent, accessType string) {
	h.t.Helper()
	resp, err := h.srv.AddFolders(ctx, &documentsv1.AddFoldersRequest{OrganizationId: org, Folders: []*documentsv1.Folder{{FolderId: id, FolderName: "Folder " + id, ParentFolderId: parent, AccessType: accessType}}})
	if err != nil || !resp.GetData()[id].GetSuccess() {
		h.t.Fatalf("folder %s: %v %v", id, resp, err)
	}
}

// docs adds documents to folder ("" for none), one millisecond apart so creation order is
// their order here.
func (h *harness) docs(ctx context.Context, org, folder string, ids ...string) {
	h.t.Helper()
	for _, id := range ids {
		h.clock.Advance(time.Millisecond)
		resp, err := h.srv.AddDocuments(ctx, &documentsv1.AddDocumentsRequest{OrganizationId: org, Documents: []*documentsv1.DocumentInput{{DocumentId: id, DocumentName: "Doc " + id, FolderId: folder}}})
		if err != nil || !resp.GetData()[id].GetSuccess() {
			h.t.Fatalf("document %s: %v %v", id, resp, err)
		}
	}
}

// document returns the stored record, or nil.
func (h *harness) document(apiKey, org, id string) *Document {
	h.t.Helper()
	docs, err := h.store.ListDocuments(context.Background(), apiKey, org, DocumentFilter{IDs: []string{id}}, nil, 0)
	if err != nil {
		h.t.Fatal(err)
	}
	if len(docs) == 0 {
		return nil
	}
	return docs[0]
}

// v1 returns Get Documents v1's answer as "id:accessType" strings.
func (h *harness) v1(ctx context.Context, org string, ids ...string) []string {
	h.t.Helper()
	resp, err := h.srv.GetDocumentsV1(ctx, &documentsv1.GetDocumentsV1Request{OrganizationId: org, DocumentIds: ids})
	if err != nil {
		h.t.Fatalf("get documents v1: %v", err)
	}
	var out []string
	for _, d := range resp.GetData() {
		out = append(out, d.GetId()+":"+d.GetAccessType())
	}
	return out
}

func docIDsOf(ds []*documentsv1.Document) []string {
	out := []string{}
	for _, d := range ds {
		out = append(out, d.GetId())
	}
	return out
}

// dump prints every record of a memory store, to show that a refused request wrote nothing.
func dump(s *MemoryStore) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var lines []string
	for _, o := range s.orgs {
		lines = append(lines, fmt.Sprintf("org %+v", *o))
	}
	for _, f := range s.folders {
		lines = append(lines, fmt.Sprintf("folder %+v", *f))
	}
	for _, d := range s.documents {
		lines = append(lines, fmt.Sprintf("document %+v", *d))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
