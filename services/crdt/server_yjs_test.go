package crdt

import (
	"context"
	"encoding/base64"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	crdtv1 "github.com/collab/collab/proto/collab/crdt/v1"

	"github.com/collab/collab/internal/yjs"
)

// These tests read content back through the Yjs codec (internal/yjs).

func (h *harness) get(t *testing.T, req *crdtv1.GetCrdtDataRequest) []*crdtv1.CrdtEditorData {
	t.Helper()
	if req.OrganizationId == "" {
		req.OrganizationId, req.DocumentId = "o", "d"
	}
	resp, err := h.srv.GetCrdtData(k1, req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetStatus() != "success" || resp.GetMessage() != "CRDT data retrieved successfully." {
		t.Fatalf("get answered %v", resp)
	}
	return resp.GetData()
}

// content is one editor's content as JSON.
func (h *harness) content(t *testing.T, editor string, more ...func(*crdtv1.GetCrdtDataRequest)) any {
	t.Helper()
	req := &crdtv1.GetCrdtDataRequest{OrganizationId: "o", DocumentId: "d", EditorId: editor}
	for _, m := range more {
		m(req)
	}
	rows := h.get(t, req)
	if len(rows) != 1 || rows[0].GetId() != editor {
		t.Fatalf("rows %v", rows)
	}
	return rows[0].GetData().AsInterface()
}

func (h *harness) update(t *testing.T, editor string, data *structpb.Value, typ string) {
	t.Helper()
	resp, err := h.srv.UpdateCrdtData(k1, &crdtv1.UpdateCrdtDataRequest{OrganizationId: "o", DocumentId: "d", EditorId: editor, Data: data, Type: typ})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetStatus() != "success" || resp.GetMessage() != "CRDT data updated successfully." {
		t.Fatalf("update answered %v", resp)
	}
}

func (h *harness) apply(t *testing.T, editor string, update []byte) {
	t.Helper()
	resp, err := h.srv.ApplyCrdtUpdate(k1, &crdtv1.ApplyCrdtUpdateRequest{OrganizationId: "o", DocumentId: "d", EditorId: editor, Update: base64.StdEncoding.EncodeToString(update)})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetStatus() != "success" || resp.GetMessage() != "CRDT update applied successfully." {
		t.Fatalf("apply answered %v", resp)
	}
}

// yjsState is an editor's whole state through Get with format yjs.
func (h *harness) yjsState(t *testing.T, editor, stateVector string) []byte {
	t.Helper()
	rows := h.get(t, &crdtv1.GetCrdtDataRequest{OrganizationId: "o", DocumentId: "d", EditorId: editor, Format: "yjs", StateVector: stateVector})
	b, err := base64.StdEncoding.DecodeString(rows[0].GetData().GetStringValue())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func docFrom(t *testing.T, updates ...[]byte) *yjs.Doc {
	t.Helper()
	d := yjs.NewDoc()
	for _, u := range updates {
		if err := d.Apply(u); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func same(a, b any) bool { return reflect.DeepEqual(a, b) }

// Add, Get, Update of every type: the content reads back as written.
func TestAddGetUpdateEveryType(t *testing.T) {
	h := newHarness(t)
	h.add(t, "t", str("Hello"), "text")
	h.add(t, "m", mustValue(t, map[string]any{"title": "T", "n": 2.5, "tags": []any{"a", "b"}, "nested": map[string]any{"ok": true}}), "map")
	h.add(t, "a", mustValue(t, []any{"x", 1.0, map[string]any{"k": "v"}, nil}), "array")
	h.add(t, "x", str("<paragraph>Hi <bold>there</bold></paragraph>"), "xml")
	for editor, want := range map[string]any{
		"t": "Hello",
		"m": map[string]any{"title": "T", "n": 2.5, "tags": []any{"a", "b"}, "nested": map[string]any{"ok": true}},
		"a": []any{"x", 1.0, map[string]any{"k": "v"}, nil},
		"x": "<paragraph>Hi <bold>there</bold></paragraph>",
	} {
		if got := h.content(t, editor); !same(got, want) {
			t.Errorf("%s: %#v, want %#v", editor, got, want)
		}
	}
	// Every editor of the document, sorted by id, each with its last change.
	rows := h.get(t, &crdtv1.GetCrdtDataRequest{})
	var ids []string
	for _, r := range rows {
		ids = append(ids, r.GetId())
		if r.GetLastUpdate() != float64(t0.UnixMilli()) {
			t.Errorf("%s lastUpdate %v", r.GetId(), r.GetLastUpdate())
		}
	}
	if strings.Join(ids, ",") != "a,m,t,x" {
		t.Fatalf("editors %v", ids)
	}

	h.clock.Advance(time.Minute)
	h.update(t, "t", str("Goodbye"), "text")
	h.update(t, "m", mustValue(t, map[string]any{"title": "U"}), "map")
	h.update(t, "a", mustValue(t, []any{}), "array")
	h.update(t, "x", str("<p>new</p>"), "xml")
	for editor, want := range map[string]any{"t": "Goodbye", "m": map[string]any{"title": "U"}, "a": []any{}, "x": "<p>new</p>"} {
		if got := h.content(t, editor); !same(got, want) {
			t.Errorf("%s after update: %#v, want %#v", editor, got, want)
		}
	}
	if rows := h.get(t, &crdtv1.GetCrdtDataRequest{EditorId: "t"}); rows[0].GetLastUpdate() != float64(t0.Add(time.Minute).UnixMilli()) {
		t.Fatalf("lastUpdate after update %v", rows[0].GetLastUpdate())
	}
	// An update to the content it holds stores and announces nothing.
	before := len(h.events.all())
	h.update(t, "t", str("Goodbye"), "text")
	if n := len(h.events.all()); n != before {
		t.Fatalf("a no-op update announced: %d events", n-before)
	}
}

// Malformed XML is refused with the codec's reason; an invalid update and state vector too.
func TestCodecRefusals(t *testing.T) {
	h := newHarness(t)
	_, err := h.srv.AddCrdtData(k1, &crdtv1.AddCrdtDataRequest{OrganizationId: "o", DocumentId: "d", EditorId: "x", Data: str("<p>unclosed"), Type: "xml"})
	if err == nil || !strings.HasPrefix(err.Error(), "InvalidArgument: Data is not valid for type xml: ") {
		t.Fatalf("malformed xml: %v", err)
	}
	_, err = h.srv.ApplyCrdtUpdate(k1, &crdtv1.ApplyCrdtUpdateRequest{OrganizationId: "o", DocumentId: "d", EditorId: "e", Update: base64.StdEncoding.EncodeToString([]byte{0xff, 0xff, 0xff, 0xff})})
	wantStatus(t, "garbage update", err, codes.InvalidArgument, "update is not a valid Yjs update.")
	h.add(t, "e", str("x"), "text")
	_, err = h.srv.ApplyCrdtUpdate(k1, &crdtv1.ApplyCrdtUpdateRequest{OrganizationId: "o", DocumentId: "d", EditorId: "e", Update: base64.StdEncoding.EncodeToString([]byte{0x05})})
	wantStatus(t, "garbage update to existing data", err, codes.InvalidArgument, "update is not a valid Yjs update.")
	_, err = h.srv.GetCrdtData(k1, &crdtv1.GetCrdtDataRequest{OrganizationId: "o", DocumentId: "d", EditorId: "e", Format: "yjs", StateVector: base64.StdEncoding.EncodeToString([]byte{0xff, 0xff})})
	wantStatus(t, "garbage state vector", err, codes.InvalidArgument, "stateVector is not a valid Yjs state vector.")
	if got := h.content(t, "e"); got != "x" {
		t.Fatalf("refusals changed the data: %v", got)
	}
}

// Get reads another root or another type when asked; the defaults are what Add stored.
func TestGetRootAndType(t *testing.T) {
	h := newHarness(t)
	if _, err := h.srv.AddCrdtData(k1, &crdtv1.AddCrdtDataRequest{OrganizationId: "o", DocumentId: "d", EditorId: "e", Data: mustValue(t, map[string]any{"a": "b"}), Type: "map", ContentKey: "default"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.srv.UpdateCrdtData(k1, &crdtv1.UpdateCrdtDataRequest{OrganizationId: "o", DocumentId: "d", EditorId: "e", Data: str("side"), Type: "text", ContentKey: "notes"}); err != nil {
		t.Fatal(err)
	}
	if got := h.content(t, "e"); !same(got, map[string]any{"a": "b"}) {
		t.Fatalf("default root: %#v", got)
	}
	if got := h.content(t, "e", func(r *crdtv1.GetCrdtDataRequest) { r.ContentKey = "notes" }); got != "side" {
		t.Fatalf("another root, its type guessed: %#v", got)
	}
	if got := h.content(t, "e", func(r *crdtv1.GetCrdtDataRequest) { r.ContentKey = "notes"; r.Type = "text" }); got != "side" {
		t.Fatalf("another root, its type given: %#v", got)
	}
	if got := h.content(t, "e", func(r *crdtv1.GetCrdtDataRequest) { r.ContentKey = "absent" }); got != "" {
		t.Fatalf("an absent root reads as empty text: %#v", got)
	}
	if got := h.content(t, "e", func(r *crdtv1.GetCrdtDataRequest) { r.ContentKey = "absent"; r.Type = "array" }); !same(got, []any{}) {
		t.Fatalf("an absent root read as array: %#v", got)
	}
}

// Get with format yjs answers the whole state, or with a state vector only what it lacks; a
// real client at that state reaches the same content.
func TestGetAsYjs(t *testing.T) {
	h := newHarness(t)
	h.add(t, "e", str("one"), "text")
	client := docFrom(t, h.yjsState(t, "e", ""))
	if got := client.JSON("content", yjs.Text); got != "one" {
		t.Fatalf("whole state: %#v", got)
	}
	sv := base64.StdEncoding.EncodeToString(client.StateVector())
	h.update(t, "e", str("one two"), "text")
	diff := h.yjsState(t, "e", sv)
	whole := h.yjsState(t, "e", "")
	if len(diff) >= len(whole) {
		t.Fatalf("diff of %d bytes, whole state %d", len(diff), len(whole))
	}
	if err := client.Apply(diff); err != nil {
		t.Fatal(err)
	}
	if got := client.JSON("content", yjs.Text); got != "one two" {
		t.Fatalf("after the diff: %#v", got)
	}
	// Unpadded and URL-safe base64 state vectors are read too.
	raw := strings.TrimRight(strings.NewReplacer("+", "-", "/", "_").Replace(sv), "=")
	if got := h.yjsState(t, "e", raw); len(got) != len(diff) {
		t.Fatalf("unpadded state vector: %d bytes, want %d", len(got), len(diff))
	}
}

// Apply merges a client's update, creating the editor when it has no data; Get guesses the
// type of content Apply made.
func TestApply(t *testing.T) {
	h := newHarness(t)
	client := yjs.NewDoc()
	first, err := client.Replace("content", yjs.Map, map[string]any{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	h.apply(t, "e", first)
	if got := h.content(t, "e"); !same(got, map[string]any{"k": "v"}) {
		t.Fatalf("created by apply: %#v", got)
	}
	second, err := client.Replace("content", yjs.Map, map[string]any{"k": "w", "n": 1.0})
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(time.Second)
	h.apply(t, "e", second)
	h.apply(t, "e", second) // again: Yjs updates are idempotent
	if got := h.content(t, "e"); !same(got, map[string]any{"k": "w", "n": 1.0}) {
		t.Fatalf("after apply: %#v", got)
	}
	// The server's own replacement and the client's edits merge.
	h.update(t, "e", mustValue(t, map[string]any{"k": "server"}), "map")
	if err := client.Apply(h.yjsState(t, "e", base64.StdEncoding.EncodeToString(client.StateVector()))); err != nil {
		t.Fatal(err)
	}
	if got := client.JSON("content", yjs.Map); !same(got, map[string]any{"k": "server"}) {
		t.Fatalf("client after the server's update: %#v", got)
	}
	evs := h.events.all()
	if len(evs) != 3 { // the create, the second update (once: applied again it changes nothing), the server's
		t.Fatalf("%d events", len(evs))
	}
	f := evs[0].GetData().GetFields()
	if f["action"].GetStringValue() != "apply" || f["type"].GetStringValue() != "map" || f["contentKey"].GetStringValue() != "content" ||
		!same(f["data"].AsInterface(), map[string]any{"k": "v"}) {
		t.Fatalf("apply event %v", evs[0].GetData())
	}
}

// A change announces the content when it is small, and says it left it out when not.
func TestEventContent(t *testing.T) {
	h := newHarness(t)
	h.add(t, "small", str("hi"), "text")
	h.add(t, "large", str(strings.Repeat("x", maxEventContentBytes+1)), "text")
	evs := h.events.all()
	if f := evs[0].GetData().GetFields(); f["data"].GetStringValue() != "hi" || f["dataOmitted"] != nil {
		t.Fatalf("small: %v", evs[0].GetData())
	}
	if f := evs[1].GetData().GetFields(); f["data"] != nil || !f["dataOmitted"].GetBoolValue() {
		t.Fatalf("large: %v", evs[1].GetData())
	}
	h.update(t, "small", str("ho"), "text")
	if f := h.events.all()[2].GetData().GetFields(); f["action"].GetStringValue() != "update" || f["data"].GetStringValue() != "ho" {
		t.Fatalf("update: %v", h.events.all()[2].GetData())
	}
}

// An editor's state stays under 5 MiB.
func TestStateLimit(t *testing.T) {
	h := newHarness(t)
	part := strings.Repeat("a", 3<<20)
	h.add(t, "e", str(part), "text")
	client := docFrom(t, h.yjsState(t, "e", ""))
	grow, err := client.Replace("other", yjs.Text, strings.Repeat("b", 3<<20))
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.srv.ApplyCrdtUpdate(k1, &crdtv1.ApplyCrdtUpdateRequest{OrganizationId: "o", DocumentId: "d", EditorId: "e", Update: base64.StdEncoding.EncodeToString(grow)})
	wantStatus(t, "apply past the limit", err, codes.FailedPrecondition, "The editor's CRDT data would be larger than 5 MiB after this change.")
	if got := h.content(t, "e"); got != part {
		t.Fatal("a refused change was stored")
	}
}

// Updates compact as they go; the content and the broadcast numbers stay right.
func TestCompactionThroughTheServer(t *testing.T) {
	h := newHarness(t, WithCompaction(Compaction{MaxUpdates: 2, MaxBytes: 1 << 20}))
	h.add(t, "e", str(""), "text")
	text := ""
	for i := range 7 {
		text += string(rune('a' + i))
		h.update(t, "e", str(text), "text")
	}
	st, err := h.store.Load(context.Background(), Editor{APIKey: "k1", OrganizationID: "o", OrgGen: "g1", DocumentID: "d", DocGen: "dg1", EditorID: "e"})
	if err != nil {
		t.Fatal(err)
	}
	if st.BaseSeq == 0 || len(st.Updates) > 2 {
		t.Fatalf("not compacted: base %d, %d entries", st.BaseSeq, len(st.Updates))
	}
	if got := h.content(t, "e"); got != text {
		t.Fatalf("after compaction %#v", got)
	}
	// Every broadcast update, applied in order to the first, gives the content.
	h.mu.Lock()
	calls := append([]broadcastCall(nil), h.broadcasts...)
	h.mu.Unlock()
	d := yjs.NewDoc()
	// The empty Add made an empty update: not broadcast (a nil update means a deletion).
	for i, c := range calls {
		if c.seq != int64(i+1) || c.update == nil {
			t.Fatalf("broadcast %d has seq %d (update nil: %v)", i, c.seq, c.update == nil)
		}
		if len(c.update) > 0 {
			if err := d.Apply(c.update); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := d.JSON("content", yjs.Text); got != text {
		t.Fatalf("from the broadcasts %#v", got)
	}
}

// deletingStore deletes the editor right after every append, as a concurrent Delete would.
type deletingStore struct{ *MemoryStore }

func (s deletingStore) Append(ctx context.Context, stream string, u Update) (int64, error) {
	n, err := s.MemoryStore.Append(ctx, stream, u)
	if err == nil {
		_, err = s.MemoryStore.DeleteEditor(ctx, Editor{APIKey: "k1", OrganizationID: "o", OrgGen: "g1", DocumentID: "d", DocGen: "dg1", EditorID: "e"})
	}
	return n, err
}

// An update appended while the editor is deleted goes with it: the answer is success (the
// update came first), the orphaned entry is removed, and nothing is announced for it.
func TestAppendRacingADeletion(t *testing.T) {
	mem := NewMemoryStore()
	h := newHarnessOn(t, deletingStore{mem})
	h.add(t, "e", str("a"), "text")
	st, err := mem.Load(context.Background(), Editor{APIKey: "k1", OrganizationID: "o", OrgGen: "g1", DocumentID: "d", DocGen: "dg1", EditorID: "e"})
	if err != nil {
		t.Fatal(err)
	}
	h.update(t, "e", str("b"), "text")
	if us, _, _ := mem.Tail(context.Background(), st.Meta.Stream, 0, 0); len(us) != 0 {
		t.Fatalf("orphan kept: %v", us)
	}
	if n := len(h.events.all()); n != 1 {
		t.Fatalf("%d events, want the add's only", n)
	}
}

// Values JSON cannot hold as yjs keeps them (undefined, a BigInt) read as JSON.stringify would
// write them, and a Get of such data succeeds: a Y.Map set by yjs with {u: undefined, b: 10n,
// x: 1}.
func TestGetReadsValuesJSONCannotHold(t *testing.T) {
	h := newHarness(t)
	u, err := base64.StdEncoding.DecodeString("AQPS5rvZBQAoAQdjb250ZW50AXUBfygBB2NvbnRlbnQBYgF6AAAAAAAAAAooAQdjb250ZW50AXgBfQEA")
	if err != nil {
		t.Fatal(err)
	}
	h.apply(t, "e", u)
	got := h.content(t, "e", func(r *crdtv1.GetCrdtDataRequest) { r.Type = "map" })
	if !same(got, map[string]any{"b": float64(10), "x": float64(1)}) {
		t.Fatalf("read %#v", got)
	}
}

// An update the editor holds already changes nothing: applying it again stores, relays and
// announces nothing (it used to publish a second crdt.update_data), and still answers success.
// Applied again with one more edit, it is stored and announced once more.
func TestReapplyingAnUpdateIsANoOp(t *testing.T) {
	h := newHarness(t)
	d := yjs.NewDoc()
	u, err := d.Replace("content", yjs.Text, "hello")
	if err != nil {
		t.Fatal(err)
	}
	apply := func(u []byte) {
		t.Helper()
		resp, err := h.srv.ApplyCrdtUpdate(k1, &crdtv1.ApplyCrdtUpdateRequest{OrganizationId: "o", DocumentId: "d", EditorId: "e", Update: base64.StdEncoding.EncodeToString(u)})
		if err != nil || resp.GetMessage() != "CRDT update applied successfully." {
			t.Fatalf("apply: %v, %v", resp, err)
		}
	}
	apply(u)
	events, broadcasts := len(h.events.all()), len(h.broadcasts)
	ed := Editor{APIKey: "k1", OrganizationID: "o", OrgGen: "g1", DocumentID: "d", DocGen: "dg1", EditorID: "e"}
	before, err := h.store.Load(context.Background(), ed)
	if err != nil {
		t.Fatal(err)
	}
	apply(u)
	after, err := h.store.Load(context.Background(), ed)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.events.all()) != events || len(h.broadcasts) != broadcasts || len(after.Parts()) != len(before.Parts()) {
		t.Fatalf("a held update published %d events, relayed %d, stored %d parts more",
			len(h.events.all())-events, len(h.broadcasts)-broadcasts, len(after.Parts())-len(before.Parts()))
	}
	more, err := d.Replace("content", yjs.Text, "hello!")
	if err != nil {
		t.Fatal(err)
	}
	apply(more)
	if len(h.events.all()) != events+1 || h.content(t, "e") != "hello!" {
		t.Fatalf("a new edit: %d events more, content %v", len(h.events.all())-events, h.content(t, "e"))
	}
}
