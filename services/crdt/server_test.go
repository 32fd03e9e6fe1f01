package crdt

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	crdtv1 "github.com/collab/collab/proto/collab/crdt/v1"
	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	eventsv1 "github.com/collab/collab/proto/collab/events/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/outbox"
)

// The tests in this file need nothing of the Yjs codec beyond a document that accepts what it
// made itself; those that read content back are in server_yjs_test.go.

// fakeDocs knows organizations and documents of tenant k1 and their generations.
type fakeDocs struct {
	documentsv1.DocumentsServiceClient
	mu   sync.Mutex
	orgs map[string]string // org -> generation
	docs map[string]string // org/doc -> generation
}

func (f *fakeDocs) ResolveResources(_ context.Context, in *documentsv1.ResolveResourcesRequest, _ ...grpc.CallOption) (*documentsv1.ResolveResourcesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &documentsv1.ResolveResourcesResponse{Documents: map[string]*documentsv1.ResolvedResource{}}
	gen, ok := f.orgs[in.GetOrganizationId()]
	if !ok || in.GetApiKey() != "k1" {
		return out, nil
	}
	out.OrganizationExists, out.OrganizationGeneration = true, gen
	for _, d := range in.GetDocumentIds() {
		g, ok := f.docs[in.GetOrganizationId()+"/"+d]
		out.Documents[d] = &documentsv1.ResolvedResource{Exists: ok, Generation: g}
	}
	return out, nil
}

func (f *fakeDocs) set(key, gen string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if gen == "" {
		delete(f.docs, key)
	} else {
		f.docs[key] = gen
	}
}

// recorder keeps the events published.
type recorder struct {
	mu     sync.Mutex
	events []*eventsv1.Event
}

func (r *recorder) PublishAsync(_ context.Context, e *lifecyclev1.Event) (*outbox.Record, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, proto.Clone(e.GetDomain()).(*eventsv1.Event))
	return &outbox.Record{ID: e.GetId()}, nil
}

func (r *recorder) all() []*eventsv1.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*eventsv1.Event(nil), r.events...)
}

// broadcastCall is one call of the Broadcast hook.
type broadcastCall struct {
	editor string
	seq    int64
	update []byte
}

var t0 = time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)

type harness struct {
	srv        *Server
	store      Store
	docs       *fakeDocs
	events     *recorder
	clock      *clock.Fake
	mu         sync.Mutex
	broadcasts []broadcastCall
}

func newHarness(t *testing.T, opts ...Option) *harness {
	t.Helper()
	return newHarnessOn(t, NewMemoryStore(), opts...)
}

func newHarnessOn(t *testing.T, store Store, opts ...Option) *harness {
	t.Helper()
	h := &harness{store: store, events: &recorder{}, clock: clock.NewFake(t0),
		docs: &fakeDocs{orgs: map[string]string{"o": "g1", "o2": "g2"}, docs: map[string]string{"o/d": "dg1", "o/d2": "dg2", "o2/d": "dg3"}}}
	opts = append([]Option{WithClock(h.clock), WithLogger(slog.New(slog.DiscardHandler)), WithOrigin("test"),
		WithBroadcast(func(m *Meta, seq int64, update []byte) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.broadcasts = append(h.broadcasts, broadcastCall{m.EditorID, seq, update})
		})}, opts...)
	srv, err := New(h.store, h.docs, h.events, opts...)
	if err != nil {
		t.Fatal(err)
	}
	h.srv = srv
	return h
}

var k1 = authn.WithCaller(context.Background(), authn.Caller{APIKey: "k1", WorkspaceID: "w1"})

var quiet = slog.New(slog.DiscardHandler)

func wantStatus(t *testing.T, what string, err error, code codes.Code, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want %v %q", what, code, msg)
	}
	s := status.Convert(apierr.ToStatus(context.Background(), quiet, err))
	if s.Code() != code || s.Message() != msg {
		t.Fatalf("%s: got %v %q, want %v %q", what, s.Code(), s.Message(), code, msg)
	}
}

func str(s string) *structpb.Value { return structpb.NewStringValue(s) }

func mustValue(t *testing.T, v any) *structpb.Value {
	t.Helper()
	out, err := structpb.NewValue(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (h *harness) add(t *testing.T, editor string, data *structpb.Value, typ string) {
	t.Helper()
	resp, err := h.srv.AddCrdtData(k1, &crdtv1.AddCrdtDataRequest{OrganizationId: "o", DocumentId: "d", EditorId: editor, Data: data, Type: typ})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetStatus() != "success" || resp.GetMessage() != "CRDT data added successfully." || resp.Data != nil {
		t.Fatalf("add answered %v", resp)
	}
}

func (h *harness) deliver(t *testing.T, e *lifecyclev1.Event) {
	t.Helper()
	if err := h.srv.HandleEvent(context.Background(), e); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) editorIDs(t *testing.T, doc Editor) []string {
	t.Helper()
	ms, err := h.store.List(context.Background(), doc, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range ms {
		out = append(out, m.EditorID)
	}
	return out
}

func docIn(org, orgGen, doc, docGen string) Editor {
	return Editor{APIKey: "k1", OrganizationID: org, OrgGen: orgGen, DocumentID: doc, DocGen: docGen}
}

// Every refusal of a request, with the status and message the caller sees.
func TestRefusals(t *testing.T) {
	h := newHarness(t)
	h.add(t, "exists", str("x"), "text")
	long := strings.Repeat("e", 257)
	big := str(strings.Repeat("x", 4<<20+1))
	add := func(mod func(r *crdtv1.AddCrdtDataRequest)) error {
		r := &crdtv1.AddCrdtDataRequest{OrganizationId: "o", DocumentId: "d", EditorId: "e", Data: str("x"), Type: "text"}
		mod(r)
		_, err := h.srv.AddCrdtData(k1, r)
		return err
	}
	update := func(mod func(r *crdtv1.UpdateCrdtDataRequest)) error {
		r := &crdtv1.UpdateCrdtDataRequest{OrganizationId: "o", DocumentId: "d", EditorId: "exists", Data: str("x"), Type: "text"}
		mod(r)
		_, err := h.srv.UpdateCrdtData(k1, r)
		return err
	}
	get := func(mod func(r *crdtv1.GetCrdtDataRequest)) error {
		r := &crdtv1.GetCrdtDataRequest{OrganizationId: "o", DocumentId: "d"}
		mod(r)
		_, err := h.srv.GetCrdtData(k1, r)
		return err
	}
	apply := func(mod func(r *crdtv1.ApplyCrdtUpdateRequest)) error {
		r := &crdtv1.ApplyCrdtUpdateRequest{OrganizationId: "o", DocumentId: "d", EditorId: "e", Update: "AAA="}
		mod(r)
		_, err := h.srv.ApplyCrdtUpdate(k1, r)
		return err
	}
	del := func(mod func(r *crdtv1.DeleteCrdtDataRequest)) error {
		r := &crdtv1.DeleteCrdtDataRequest{OrganizationId: "o", DocumentId: "d"}
		mod(r)
		_, err := h.srv.DeleteCrdtData(k1, r)
		return err
	}
	invalid, notFound := codes.InvalidArgument, codes.NotFound
	for _, c := range []struct {
		what string
		err  error
		code codes.Code
		msg  string
	}{
		{"add without organization", add(func(r *crdtv1.AddCrdtDataRequest) { r.OrganizationId = "" }), invalid, "organizationId is required."},
		{"add without document", add(func(r *crdtv1.AddCrdtDataRequest) { r.DocumentId = "" }), invalid, "documentId is required."},
		{"add without editor", add(func(r *crdtv1.AddCrdtDataRequest) { r.EditorId = "" }), invalid, "editorId is required."},
		{"add with a long editor id", add(func(r *crdtv1.AddCrdtDataRequest) { r.EditorId = long }), invalid, "editorId must be at most 256 characters."},
		{"add with a control character", add(func(r *crdtv1.AddCrdtDataRequest) { r.EditorId = "a\nb" }), invalid, "editorId must not contain control characters."},
		{"add without type", add(func(r *crdtv1.AddCrdtDataRequest) { r.Type = "" }), invalid, "type is required."},
		{"add with an unknown type", add(func(r *crdtv1.AddCrdtDataRequest) { r.Type = "richtext" }), invalid, "type must be one of text, map, array, xml."},
		{"add without data", add(func(r *crdtv1.AddCrdtDataRequest) { r.Data = nil }), invalid, "data is required."},
		{"text from a number", add(func(r *crdtv1.AddCrdtDataRequest) { r.Data = structpb.NewNumberValue(1) }), invalid, "Data must be a string for type text."},
		{"text from an object", add(func(r *crdtv1.AddCrdtDataRequest) { r.Data = mustValue(t, map[string]any{"a": 1}) }), invalid, "Data must be a string for type text."},
		{"xml from an object", add(func(r *crdtv1.AddCrdtDataRequest) { r.Type, r.Data = "xml", mustValue(t, map[string]any{}) }), invalid, "Data must be a string for type xml."},
		{"map from an array", add(func(r *crdtv1.AddCrdtDataRequest) { r.Type, r.Data = "map", mustValue(t, []any{1}) }), invalid, "Data must be an object for type map."},
		{"map from null", add(func(r *crdtv1.AddCrdtDataRequest) { r.Type, r.Data = "map", structpb.NewNullValue() }), invalid, "Data must be an object for type map."},
		{"array from a string", add(func(r *crdtv1.AddCrdtDataRequest) { r.Type = "array" }), invalid, "Data must be an array for type array."},
		{"array from an object", add(func(r *crdtv1.AddCrdtDataRequest) { r.Type, r.Data = "array", mustValue(t, map[string]any{}) }), invalid, "Data must be an array for type array."},
		{"data too large", add(func(r *crdtv1.AddCrdtDataRequest) { r.Data = big }), invalid, "data must be at most 4 MiB."},
		{"content key with a control character", add(func(r *crdtv1.AddCrdtDataRequest) { r.ContentKey = "a\tb" }), invalid, "contentKey must not contain control characters."},
		{"content key too long", add(func(r *crdtv1.AddCrdtDataRequest) { r.ContentKey = long }), invalid, "contentKey must be at most 256 characters."},
		{"add in an unknown organization", add(func(r *crdtv1.AddCrdtDataRequest) { r.OrganizationId = "nope" }), notFound, "Organization does not exist."},
		{"add in an unknown document", add(func(r *crdtv1.AddCrdtDataRequest) { r.DocumentId = "nope" }), notFound, "Document does not exist."},
		{"add twice", add(func(r *crdtv1.AddCrdtDataRequest) { r.EditorId = "exists" }), codes.AlreadyExists, "CRDT data already exists for this editor ID."},

		{"update without editor", update(func(r *crdtv1.UpdateCrdtDataRequest) { r.EditorId = "" }), invalid, "editorId is required."},
		{"update text from an array", update(func(r *crdtv1.UpdateCrdtDataRequest) { r.Data = mustValue(t, []any{}) }), invalid, "Data must be a string for type text."},
		{"update map from a string", update(func(r *crdtv1.UpdateCrdtDataRequest) { r.Type = "map" }), invalid, "Data must be an object for type map."},
		{"update with an unknown type", update(func(r *crdtv1.UpdateCrdtDataRequest) { r.Type = "Text" }), invalid, "type must be one of text, map, array, xml."},
		{"update without data", update(func(r *crdtv1.UpdateCrdtDataRequest) { r.Data = nil }), invalid, "data is required."},
		{"update of an editor without data", update(func(r *crdtv1.UpdateCrdtDataRequest) { r.EditorId = "nobody" }), notFound, "No CRDT data found for this editor ID."},
		{"update in an unknown document", update(func(r *crdtv1.UpdateCrdtDataRequest) { r.DocumentId = "nope" }), notFound, "Document does not exist."},

		{"get without organization", get(func(r *crdtv1.GetCrdtDataRequest) { r.OrganizationId = "" }), invalid, "organizationId is required."},
		{"get without document", get(func(r *crdtv1.GetCrdtDataRequest) { r.DocumentId = "" }), invalid, "documentId is required."},
		{"get with an unknown format", get(func(r *crdtv1.GetCrdtDataRequest) { r.Format = "binary" }), invalid, "format must be json or yjs."},
		{"get with an unknown type", get(func(r *crdtv1.GetCrdtDataRequest) { r.Type = "list" }), invalid, "type must be one of text, map, array, xml."},
		{"state vector with json", get(func(r *crdtv1.GetCrdtDataRequest) { r.StateVector = "AA==" }), invalid, "stateVector is only allowed with format yjs."},
		{"state vector not base64", get(func(r *crdtv1.GetCrdtDataRequest) { r.Format, r.StateVector = "yjs", "%%%" }), invalid, "stateVector must be base64."},
		{"get of an editor without data", get(func(r *crdtv1.GetCrdtDataRequest) { r.EditorId = "nobody" }), notFound, "No CRDT data found for this editor ID."},

		{"apply without editor", apply(func(r *crdtv1.ApplyCrdtUpdateRequest) { r.EditorId = "" }), invalid, "editorId is required."},
		{"apply without update", apply(func(r *crdtv1.ApplyCrdtUpdateRequest) { r.Update = "" }), invalid, "update is required."},
		{"apply of no base64", apply(func(r *crdtv1.ApplyCrdtUpdateRequest) { r.Update = "not base64!" }), invalid, "update must be base64."},
		{"apply of a large update", apply(func(r *crdtv1.ApplyCrdtUpdateRequest) {
			r.Update = base64.StdEncoding.EncodeToString(make([]byte, 4<<20+1))
		}), invalid, "update must be at most 4 MiB."},
		{"apply in an unknown document", apply(func(r *crdtv1.ApplyCrdtUpdateRequest) { r.DocumentId = "nope" }), notFound, "Document does not exist."},

		{"delete without document", del(func(r *crdtv1.DeleteCrdtDataRequest) { r.DocumentId = "" }), invalid, "documentId is required."},
		{"delete with a long editor id", del(func(r *crdtv1.DeleteCrdtDataRequest) { r.EditorId = long }), invalid, "editorId must be at most 256 characters."},
		{"delete of an editor without data", del(func(r *crdtv1.DeleteCrdtDataRequest) { r.EditorId = "nobody" }), notFound, "No CRDT data found for this editor ID."},
		{"delete in an unknown organization", del(func(r *crdtv1.DeleteCrdtDataRequest) { r.OrganizationId = "nope" }), notFound, "Organization does not exist."},
	} {
		wantStatus(t, c.what, c.err, c.code, c.msg)
	}
	// Another tenant's organization does not exist for the caller.
	k2 := authn.WithCaller(context.Background(), authn.Caller{APIKey: "k2", WorkspaceID: "w2"})
	_, err := h.srv.GetCrdtData(k2, &crdtv1.GetCrdtDataRequest{OrganizationId: "o", DocumentId: "d", EditorId: "exists"})
	wantStatus(t, "get of another tenant's organization", err, notFound, "Organization does not exist.")
	// Without a caller (an interceptor bug), nothing runs.
	if _, err := h.srv.GetCrdtData(context.Background(), &crdtv1.GetCrdtDataRequest{OrganizationId: "o", DocumentId: "d"}); err == nil {
		t.Fatal("answered without a caller")
	}
}

// Base64 is read with or without padding, in either alphabet.
func TestDecodeBase64(t *testing.T) {
	want := []byte{0xfb, 0xff, 0x01}
	for _, in := range []string{"+/8B", "-_8B", "+/8B\n"} {
		got, err := decodeBase64(in)
		if err != nil || string(got) != string(want) {
			t.Errorf("%q: %x %v", in, got, err)
		}
	}
	got, err := decodeBase64("AQ==")
	if err != nil || string(got) != "\x01" {
		t.Errorf("padded: %x %v", got, err)
	}
	if _, err := decodeBase64("A"); err == nil {
		t.Error("a lone character decoded")
	}
}

// A document without editors answers an empty list; deleting all of nothing succeeds.
func TestEmptyDocument(t *testing.T) {
	h := newHarness(t)
	resp, err := h.srv.GetCrdtData(k1, &crdtv1.GetCrdtDataRequest{OrganizationId: "o", DocumentId: "d"})
	if err != nil || resp.GetMessage() != "CRDT data retrieved successfully." || resp.GetData() == nil || len(resp.GetData()) != 0 {
		t.Fatalf("%v %v", resp, err)
	}
	del, err := h.srv.DeleteCrdtData(k1, &crdtv1.DeleteCrdtDataRequest{OrganizationId: "o", DocumentId: "d"})
	if err != nil || del.GetMessage() != "CRDT data deleted successfully." {
		t.Fatalf("%v %v", del, err)
	}
	if n := len(h.events.all()); n != 0 {
		t.Fatalf("%d events for nothing", n)
	}
}

// Add stores the record with its type and content key, and announces it; Delete removes it
// and announces that; both reach the broadcast hook.
func TestAddAndDeleteAnnounce(t *testing.T) {
	h := newHarness(t)
	if _, err := h.srv.AddCrdtData(k1, &crdtv1.AddCrdtDataRequest{OrganizationId: "o", DocumentId: "d", EditorId: "e1", Data: str("hi"), Type: "text", ContentKey: "default"}); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(time.Second)
	h.add(t, "e2", mustValue(t, map[string]any{"a": "b"}), "map")
	m, err := h.store.Meta(context.Background(), Editor{APIKey: "k1", OrganizationID: "o", OrgGen: "g1", DocumentID: "d", DocGen: "dg1", EditorID: "e1"})
	if err != nil || m.Type != "text" || m.ContentKey != "default" || m.CreatedAt != t0.UnixMilli() {
		t.Fatalf("stored %+v %v", m, err)
	}
	if _, err := h.srv.DeleteCrdtData(k1, &crdtv1.DeleteCrdtDataRequest{OrganizationId: "o", DocumentId: "d", EditorId: "e1"}); err != nil {
		t.Fatal(err)
	}
	if got := h.editorIDs(t, docIn("o", "g1", "d", "dg1")); len(got) != 1 || got[0] != "e2" {
		t.Fatalf("left %v", got)
	}
	evs := h.events.all()
	if len(evs) != 3 {
		t.Fatalf("%d events", len(evs))
	}
	first := evs[0]
	if !strings.HasPrefix(first.GetId(), "crdt_") || first.GetType() != "crdt.update_data" || first.GetApiKey() != "k1" || first.GetWorkspaceId() != "w1" ||
		first.GetOrganizationId() != "o" || first.GetDocumentId() != "d" || first.GetTargetEntityId() != "e1" ||
		first.GetOrganizationGeneration() != "g1" || first.GetDocumentGeneration() != "dg1" || first.GetTimestamp() != float64(t0.UnixMilli()) {
		t.Fatalf("event %v", first)
	}
	for i, want := range []map[string]string{
		{"editorId": "e1", "action": "add", "type": "text", "contentKey": "default"},
		{"editorId": "e2", "action": "add", "type": "map", "contentKey": "content"},
		{"editorId": "e1", "action": "delete", "type": "text", "contentKey": "default"},
	} {
		f := evs[i].GetData().GetFields()
		for k, v := range want {
			if f[k].GetStringValue() != v {
				t.Errorf("event %d %s = %v, want %s", i, k, f[k], v)
			}
		}
	}
	if _, ok := evs[2].GetData().GetFields()["data"]; ok {
		t.Error("a deletion carries content")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.broadcasts) != 3 || h.broadcasts[0].editor != "e1" || h.broadcasts[2].editor != "e1" || h.broadcasts[2].update != nil {
		t.Fatalf("broadcasts %+v", h.broadcasts)
	}
}

// Delete without an editor id removes every editor of the document, each announced, and only
// that document's.
func TestDeleteEveryEditorOfADocument(t *testing.T) {
	h := newHarness(t)
	for _, e := range []string{"a", "b", "c"} {
		h.add(t, e, str(e), "text")
	}
	if _, err := h.srv.AddCrdtData(k1, &crdtv1.AddCrdtDataRequest{OrganizationId: "o", DocumentId: "d2", EditorId: "a", Data: str("x"), Type: "text"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.srv.DeleteCrdtData(k1, &crdtv1.DeleteCrdtDataRequest{OrganizationId: "o", DocumentId: "d"}); err != nil {
		t.Fatal(err)
	}
	if got := h.editorIDs(t, docIn("o", "g1", "d", "dg1")); len(got) != 0 {
		t.Fatalf("left %v", got)
	}
	if got := h.editorIDs(t, docIn("o", "g1", "d2", "dg2")); len(got) != 1 {
		t.Fatalf("other document: %v", got)
	}
	deletions := 0
	for _, e := range h.events.all() {
		if e.GetData().GetFields()["action"].GetStringValue() == "delete" {
			deletions++
		}
	}
	if deletions != 3 {
		t.Fatalf("%d deletions announced", deletions)
	}
}

// More than 1000 editors are not listed at once.
func TestGetRefusesMoreThanAThousandEditors(t *testing.T) {
	h := newHarness(t)
	for i := range maxEditors + 1 {
		m := &Meta{Editor: Editor{APIKey: "k1", OrganizationID: "o", OrgGen: "g1", DocumentID: "d", DocGen: "dg1", EditorID: fmt.Sprintf("e%04d", i)}}
		if err := h.store.Create(context.Background(), m, nil); err != nil {
			t.Fatal(err)
		}
	}
	_, err := h.srv.GetCrdtData(k1, &crdtv1.GetCrdtDataRequest{OrganizationId: "o", DocumentId: "d"})
	wantStatus(t, "get", err, codes.FailedPrecondition, "The document has more than 1000 editors; ask for one editorId at a time.")
}

// Data follows its organization's and document's lifecycle: deletion removes it (that
// generation's only), a migration finds it under the new id.
func TestLifecycle(t *testing.T) {
	h := newHarness(t)
	h.add(t, "e1", str("a"), "text")
	if _, err := h.srv.AddCrdtData(k1, &crdtv1.AddCrdtDataRequest{OrganizationId: "o", DocumentId: "d2", EditorId: "e1", Data: str("b"), Type: "text"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.srv.AddCrdtData(k1, &crdtv1.AddCrdtDataRequest{OrganizationId: "o2", DocumentId: "d", EditorId: "e1", Data: str("c"), Type: "text"}); err != nil {
		t.Fatal(err)
	}

	// A migration of d to d9: the documents service moved it (same generation), then the event.
	h.docs.set("o/d", "")
	h.docs.set("o/d9", "dg1")
	h.deliver(t, &lifecyclev1.Event{Id: "m1", Type: lifecycle.DocumentMigrated, ApiKey: "k1", OrganizationId: "o", OrganizationGeneration: "g1",
		Payload: &lifecyclev1.Event_DocumentMigrated{DocumentMigrated: &lifecyclev1.DocumentMigrated{FromDocumentId: "d", ToDocumentId: "d9", Generation: "dg1"}}})
	m, err := h.store.Meta(context.Background(), Editor{APIKey: "k1", OrganizationID: "o", OrgGen: "g1", DocumentID: "d9", DocGen: "dg1", EditorID: "e1"})
	if err != nil || m.DocumentID != "d9" {
		t.Fatalf("after the migration: %+v %v", m, err)
	}
	_, err = h.srv.UpdateCrdtData(k1, &crdtv1.UpdateCrdtDataRequest{OrganizationId: "o", DocumentId: "d", EditorId: "e1", Data: str("x"), Type: "text"})
	wantStatus(t, "update under the old id", err, codes.NotFound, "Document does not exist.")
	if _, err := h.srv.DeleteCrdtData(k1, &crdtv1.DeleteCrdtDataRequest{OrganizationId: "o", DocumentId: "d9", EditorId: "e1"}); err != nil {
		t.Fatalf("delete under the new id: %v", err)
	}

	// Deletion of d2 (generation dg2) removes its editors and buries the generation.
	h.deliver(t, &lifecyclev1.Event{Id: "dd", Type: lifecycle.DocumentDeleted, ApiKey: "k1", OrganizationId: "o", OrganizationGeneration: "g1",
		Payload: &lifecyclev1.Event_DocumentsDeleted{DocumentsDeleted: &lifecyclev1.DocumentsDeleted{DocumentIds: []string{"d2"}, Generations: []string{"dg2"}}}})
	if got := h.editorIDs(t, docIn("o", "g1", "d2", "dg2")); len(got) != 0 {
		t.Fatalf("deleted document kept %v", got)
	}
	if buried, _ := h.store.Buried(context.Background(), "k1", "o", KindDocument, "d2", "dg2"); !buried {
		t.Fatal("document generation not buried")
	}
	// Deletion of organization o2 (generation g2): only its data, and twice is as once.
	for range 2 {
		h.deliver(t, &lifecyclev1.Event{Id: "od", Type: lifecycle.OrganizationDeleted, ApiKey: "k1", OrganizationId: "o2", OrganizationGeneration: "g2",
			Payload: &lifecyclev1.Event_OrganizationDeleted{OrganizationDeleted: &lifecyclev1.OrganizationDeleted{}}})
	}
	if got := h.editorIDs(t, docIn("o2", "g2", "d", "dg3")); len(got) != 0 {
		t.Fatalf("deleted organization kept %v", got)
	}
	// An event without its tenant is refused for good.
	err = h.srv.HandleEvent(context.Background(), &lifecyclev1.Event{Id: "x", Type: lifecycle.OrganizationDeleted,
		Payload: &lifecyclev1.Event_OrganizationDeleted{OrganizationDeleted: &lifecyclev1.OrganizationDeleted{}}})
	if !lifecycle.Permanent(apierr.ToStatus(context.Background(), quiet, err)) {
		t.Fatalf("event without tenant: %v", err)
	}
	// Types it takes no action on pass.
	h.deliver(t, &lifecyclev1.Event{Id: "u", Type: lifecycle.UsersRemoved, ApiKey: "k1", OrganizationId: "o"})
	// A migration naming no new id is refused for good; the editors keep their document (they
	// were given the empty id).
	if _, err := h.srv.AddCrdtData(k1, &crdtv1.AddCrdtDataRequest{OrganizationId: "o", DocumentId: "d9", EditorId: "e5", Data: str("e"), Type: "text"}); err != nil {
		t.Fatal(err)
	}
	err = h.srv.HandleEvent(context.Background(), &lifecyclev1.Event{Id: "m2", Type: lifecycle.DocumentMigrated, ApiKey: "k1", OrganizationId: "o", OrganizationGeneration: "g1",
		Payload: &lifecyclev1.Event_DocumentMigrated{DocumentMigrated: &lifecyclev1.DocumentMigrated{FromDocumentId: "d9", Generation: "dg1"}}})
	if status.Code(apierr.ToStatus(context.Background(), quiet, err)) != codes.InvalidArgument {
		t.Fatalf("migration to no id: %v", err)
	}
	if m, err := h.store.Meta(context.Background(), Editor{APIKey: "k1", OrganizationID: "o", OrgGen: "g1", DocumentID: "d9", DocGen: "dg1", EditorID: "e5"}); err != nil || m.DocumentID != "d9" {
		t.Fatalf("after a migration to no id: %+v %v", m, err)
	}
}

// A write that lands after its document's or organization's deletion was applied does not
// survive it: the writer sweeps it and answers NOT_FOUND, as if the deletion had come first.
func TestWritesRacingADeletionAreSwept(t *testing.T) {
	h := newHarness(t)
	// The crdt service applied the deletion while the documents service still answers the old
	// generation (the writer resolved it just before).
	h.deliver(t, &lifecyclev1.Event{Id: "dd", Type: lifecycle.DocumentDeleted, ApiKey: "k1", OrganizationId: "o", OrganizationGeneration: "g1",
		Payload: &lifecyclev1.Event_DocumentsDeleted{DocumentsDeleted: &lifecyclev1.DocumentsDeleted{DocumentIds: []string{"d"}, Generations: []string{"dg1"}}}})
	_, err := h.srv.AddCrdtData(k1, &crdtv1.AddCrdtDataRequest{OrganizationId: "o", DocumentId: "d", EditorId: "e1", Data: str("late"), Type: "text"})
	wantStatus(t, "add after the document's deletion", err, codes.NotFound, "Document does not exist.")
	if got := h.editorIDs(t, docIn("o", "g1", "d", "dg1")); len(got) != 0 {
		t.Fatalf("survived: %v", got)
	}
	h.deliver(t, &lifecyclev1.Event{Id: "od", Type: lifecycle.OrganizationDeleted, ApiKey: "k1", OrganizationId: "o", OrganizationGeneration: "g1",
		Payload: &lifecyclev1.Event_OrganizationDeleted{OrganizationDeleted: &lifecyclev1.OrganizationDeleted{}}})
	_, err = h.srv.AddCrdtData(k1, &crdtv1.AddCrdtDataRequest{OrganizationId: "o", DocumentId: "d2", EditorId: "e1", Data: str("late"), Type: "text"})
	wantStatus(t, "add after the organization's deletion", err, codes.NotFound, "Organization does not exist.")
	if got := h.editorIDs(t, docIn("o", "g1", "d2", "dg2")); len(got) != 0 {
		t.Fatalf("survived: %v", got)
	}
	if n := len(h.events.all()); n != 0 {
		t.Fatalf("%d events for swept writes", n)
	}
}

// Concurrent Adds of one editor: one succeeds, the others are ALREADY_EXISTS, on both stores.
func TestConcurrentAdds(t *testing.T) {
	for name, store := range map[string]func() Store{
		"memory":   func() Store { return NewMemoryStore() },
		"ferretdb": func() Store { return newMongoStore(t) },
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarnessOn(t, store())
			const n = 12
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					_, errs[i] = h.srv.AddCrdtData(k1, &crdtv1.AddCrdtDataRequest{OrganizationId: "o", DocumentId: "d", EditorId: "e1", Data: str("x"), Type: "text"})
				})
			}
			wg.Wait()
			won := 0
			for _, err := range errs {
				if err == nil {
					won++
					continue
				}
				wantStatus(t, "concurrent add", err, codes.AlreadyExists, "CRDT data already exists for this editor ID.")
			}
			if won != 1 || len(h.events.all()) != 1 {
				t.Fatalf("%d adds won, %d events", won, len(h.events.all()))
			}
		})
	}
}

func TestModule(t *testing.T) {
	m := Module()
	if m.Name != "crdt" || m.GRPCService != "collab.crdt.v1.CrdtService" || m.Gateway == nil || m.Setup == nil {
		t.Fatalf("%+v", m)
	}
	if len(m.Publishes) != 1 || m.Publishes[0] != "crdt.update_data" {
		t.Fatalf("publishes %v", m.Publishes)
	}
}
