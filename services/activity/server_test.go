package activity

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	activityv1 "github.com/collab/collab/proto/collab/activity/v1"
	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	eventsv1 "github.com/collab/collab/proto/collab/events/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/lifecycle"
)

// fakeDocs knows organizations and documents and their generations.
type fakeDocs struct {
	documentsv1.DocumentsServiceClient
	orgs map[string]string // org -> generation (tenant k1)
	docs map[string]string // org/doc -> generation
}

func (f *fakeDocs) ResolveResources(_ context.Context, in *documentsv1.ResolveResourcesRequest, _ ...grpc.CallOption) (*documentsv1.ResolveResourcesResponse, error) {
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

var t0 = time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)

type harness struct {
	srv   *Server
	store *MemoryStore
	docs  *fakeDocs
	clock *clock.Fake
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{store: NewMemoryStore(), docs: &fakeDocs{orgs: map[string]string{"o": "g1"}, docs: map[string]string{"o/d": "dg1"}}, clock: clock.NewFake(t0)}
	srv, err := New(h.store, h.docs, make([]byte, 32), WithClock(h.clock), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	h.srv = srv
	return h
}

var k1 = authn.WithCaller(context.Background(), authn.Caller{APIKey: "k1", WorkspaceID: "w"})

func (h *harness) configure(t *testing.T, req *activityv1.UpdateActivityConfigRequest) {
	t.Helper()
	if _, err := h.srv.UpdateActivityConfig(k1, req); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) deliver(t *testing.T, e *lifecyclev1.Event) {
	t.Helper()
	if err := h.srv.HandleEvent(context.Background(), e); err != nil {
		t.Fatal(err)
	}
}

func domain(id, typ, doc string) *lifecyclev1.Event {
	e := &eventsv1.Event{Id: id, Type: typ, ApiKey: "k1", WorkspaceId: "w", OrganizationId: "o", OrganizationGeneration: "g1", DocumentId: doc, Timestamp: float64(t0.UnixMilli())}
	if doc == "d" {
		e.DocumentGeneration = "dg1"
	}
	return lifecycle.Domain(e)
}

func (h *harness) ids(t *testing.T, req *activityv1.GetActivityLogsRequest) []string {
	t.Helper()
	if req.OrganizationId == "" {
		req.OrganizationId = "o"
	}
	resp, err := h.srv.GetActivityLogs(k1, req)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range resp.GetData() {
		out = append(out, r.GetId())
	}
	return out
}

func on(b bool) *bool { return &b }

func TestEventsAreRecordedOnlyAsTheConfigSays(t *testing.T) {
	h := newHarness(t)
	h.deliver(t, domain("never-configured", "comment.add", ""))
	h.configure(t, &activityv1.UpdateActivityConfigRequest{Triggers: mustStruct(t, map[string]any{"comment": map[string]any{"delete": true}})})
	h.deliver(t, domain("configured-but-off", "comment.add", ""))
	h.configure(t, &activityv1.UpdateActivityConfigRequest{IsEnabled: on(true), Triggers: mustStruct(t, map[string]any{"comment": map[string]any{"comment.delete": false}})})
	h.deliver(t, domain("recorded", "comment.add", "d"))
	h.deliver(t, domain("recorded", "comment.add", "d")) // again: idempotent
	h.deliver(t, domain("switched-off", "comment.delete", ""))
	h.deliver(t, domain("not-a-feature", "huddle.create", ""))
	h.deliver(t, domain("reaction", "reaction.add", ""))
	if got := h.ids(t, &activityv1.GetActivityLogsRequest{Order: "asc"}); !slices.Equal(got, []string{"reaction", "recorded"}) && !slices.Equal(got, []string{"recorded", "reaction"}) {
		t.Fatalf("recorded %v", got)
	}
	if n := len(h.ids(t, &activityv1.GetActivityLogsRequest{ActivityIds: []string{"recorded"}})); n != 1 {
		t.Fatalf("one event made %d records", n)
	}
}

// A record whose organization or document was deleted while it was being written is swept.
func TestRecordsOfDeletedGenerationsDoNotSurvive(t *testing.T) {
	h := newHarness(t)
	h.configure(t, &activityv1.UpdateActivityConfigRequest{IsEnabled: on(true)})
	h.deliver(t, domain("kept-before", "comment.add", "d"))
	h.deliver(t, &lifecyclev1.Event{Id: "del", Type: lifecycle.DocumentDeleted, ApiKey: "k1", OrganizationId: "o", OrganizationGeneration: "g1",
		Payload: &lifecyclev1.Event_DocumentsDeleted{DocumentsDeleted: &lifecyclev1.DocumentsDeleted{DocumentIds: []string{"d"}, Generations: []string{"dg1"}}}})
	if got := h.ids(t, &activityv1.GetActivityLogsRequest{}); len(got) != 0 {
		t.Fatalf("records of a deleted document: %v", got)
	}
	// A late event of the deleted document (published before the deletion).
	h.deliver(t, domain("late", "comment.add", "d"))
	if got := h.ids(t, &activityv1.GetActivityLogsRequest{}); len(got) != 0 {
		t.Fatalf("late record of a deleted document: %v", got)
	}
	// Add Activities racing the organization's deletion: the writer sweeps and answers NOT_FOUND.
	h.deliver(t, &lifecyclev1.Event{Id: "odel", Type: lifecycle.OrganizationDeleted, ApiKey: "k1", OrganizationId: "o", OrganizationGeneration: "g1",
		Payload: &lifecyclev1.Event_OrganizationDeleted{OrganizationDeleted: &lifecyclev1.OrganizationDeleted{}}})
	_, err := h.srv.AddActivities(k1, &activityv1.AddActivitiesRequest{OrganizationId: "o", Activities: []*activityv1.NewActivity{{Id: "racer", FeatureType: "custom", ActionType: "custom.x"}}})
	if st := status.Convert(apierr.ToStatus(context.Background(), slog.New(slog.DiscardHandler), err)); st.Code() != codes.NotFound || st.Message() != "Organization does not exist." {
		t.Fatalf("add under a buried generation: %v", err)
	}
	if got := h.ids(t, &activityv1.GetActivityLogsRequest{}); len(got) != 0 {
		t.Fatalf("records after the organization's deletion: %v", got)
	}
	// The organization created again (a new generation) takes records.
	h.docs.orgs["o"] = "g2"
	if _, err := h.srv.AddActivities(k1, &activityv1.AddActivitiesRequest{OrganizationId: "o", Activities: []*activityv1.NewActivity{{Id: "new", FeatureType: "custom", ActionType: "custom.x"}}}); err != nil {
		t.Fatal(err)
	}
	if got := h.ids(t, &activityv1.GetActivityLogsRequest{}); !slices.Equal(got, []string{"new"}) {
		t.Fatalf("after re-creation %v", got)
	}
}

func TestMigrationMovesRecords(t *testing.T) {
	h := newHarness(t)
	h.configure(t, &activityv1.UpdateActivityConfigRequest{IsEnabled: on(true)})
	h.deliver(t, domain("c", "comment.add", "d"))
	mig := &lifecyclev1.Event{Id: "m", Type: lifecycle.DocumentMigrated, ApiKey: "k1", OrganizationId: "o", OrganizationGeneration: "g1",
		Payload: &lifecyclev1.Event_DocumentMigrated{DocumentMigrated: &lifecyclev1.DocumentMigrated{FromDocumentId: "d", ToDocumentId: "d2", Generation: "dg1"}}}
	h.deliver(t, mig)
	h.deliver(t, mig)
	if got := h.ids(t, &activityv1.GetActivityLogsRequest{DocumentId: "d2"}); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("after migration %v", got)
	}
	if got := h.ids(t, &activityv1.GetActivityLogsRequest{DocumentId: "d"}); len(got) != 0 {
		t.Fatalf("left behind %v", got)
	}
	// A migration naming no new id is refused for good; the records keep their document (they
	// were moved to the empty id).
	for _, ids := range [][2]string{{"d2", ""}, {"", "d3"}} {
		bad := &lifecyclev1.Event{Id: "bad", Type: lifecycle.DocumentMigrated, ApiKey: "k1", OrganizationId: "o", OrganizationGeneration: "g1",
			Payload: &lifecyclev1.Event_DocumentMigrated{DocumentMigrated: &lifecyclev1.DocumentMigrated{FromDocumentId: ids[0], ToDocumentId: ids[1], Generation: "dg1"}}}
		if err := h.srv.HandleEvent(context.Background(), bad); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("migration %q to %q: %v, want InvalidArgument", ids[0], ids[1], err)
		}
	}
	if got := h.ids(t, &activityv1.GetActivityLogsRequest{DocumentId: "d2"}); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("after a migration to no id %v", got)
	}
}

func TestConfigPartialUpdates(t *testing.T) {
	h := newHarness(t)
	get := func() *activityv1.ActivityServiceConfig {
		resp, err := h.srv.GetActivityConfig(k1, &activityv1.GetActivityConfigRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetData().GetActivityServiceConfig()
	}
	if c := get(); c.GetIsEnabled() || c.Immutable != nil || c.Triggers != nil {
		t.Fatalf("default %v", c)
	}
	h.configure(t, &activityv1.UpdateActivityConfigRequest{Immutable: on(true)})
	h.configure(t, &activityv1.UpdateActivityConfigRequest{IsEnabled: on(true)})
	if c := get(); !c.GetIsEnabled() || !c.GetImmutable() || c.Triggers != nil {
		t.Fatalf("after two partial updates %v", c)
	}
	// Records written now are immutable.
	if _, err := h.srv.AddActivities(k1, &activityv1.AddActivitiesRequest{OrganizationId: "o", Activities: []*activityv1.NewActivity{{Id: "i", FeatureType: "custom", ActionType: "custom.x"}}}); err != nil {
		t.Fatal(err)
	}
	resp, err := h.srv.UpdateActivityLogs(k1, &activityv1.UpdateActivityLogsRequest{OrganizationId: "o", Activities: []*activityv1.ActivityUpdate{{Id: "i", ActionIcon: new("x")}}})
	if err != nil || resp.GetData()["i"].GetSuccess() || resp.GetData()["i"].GetMessage() != "Activity is immutable and cannot be updated." {
		t.Fatalf("%v %v", resp, err)
	}
}

// Pages follow each other by position, and an expired token is refused as such.
func TestPagesByPosition(t *testing.T) {
	h := newHarness(t)
	for i := range 7 {
		h.clock.Advance(time.Millisecond)
		if _, err := h.srv.AddActivities(k1, &activityv1.AddActivitiesRequest{OrganizationId: "o", Activities: []*activityv1.NewActivity{{Id: string(rune('a' + i)), FeatureType: "custom", ActionType: "custom.x"}}}); err != nil {
			t.Fatal(err)
		}
	}
	size := int32(3)
	var seen []string
	tok := ""
	for {
		resp, err := h.srv.GetActivityLogs(k1, &activityv1.GetActivityLogsRequest{OrganizationId: "o", PageSize: &size, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range resp.GetData() {
			seen = append(seen, r.GetId())
		}
		if resp.PageToken == nil {
			break
		}
		tok = resp.GetPageToken()
	}
	if !slices.Equal(seen, []string{"g", "f", "e", "d", "c", "b", "a"}) {
		t.Fatalf("pages %v", seen)
	}
	// An expired token is refused as such.
	resp, _ := h.srv.GetActivityLogs(k1, &activityv1.GetActivityLogsRequest{OrganizationId: "o", PageSize: &size})
	h.clock.Advance(25 * time.Hour)
	_, err := h.srv.GetActivityLogs(k1, &activityv1.GetActivityLogsRequest{OrganizationId: "o", PageSize: &size, PageToken: resp.GetPageToken()})
	if st := status.Convert(apierr.ToStatus(context.Background(), slog.New(slog.DiscardHandler), err)); st.Message() != "pageToken has expired; request the first page again." {
		t.Fatalf("expired token: %v", err)
	}
}

// flakyBuried fails the first Buried check, as a timeout would.
type flakyBuried struct {
	*MemoryStore
	failed bool
}

func (f *flakyBuried) Buried(ctx context.Context, k, o, kind, id, g string) (bool, error) {
	if !f.failed {
		f.failed = true
		return false, errors.New("transient")
	}
	return f.MemoryStore.Buried(ctx, k, o, kind, id, g)
}

// A redelivery after a failed check still sweeps the record of a deleted document.
func TestRedeliveryAfterAFailedCheckSweeps(t *testing.T) {
	h := newHarness(t)
	h.srv.store = &flakyBuried{MemoryStore: h.store}
	h.configure(t, &activityv1.UpdateActivityConfigRequest{IsEnabled: on(true)})
	h.deliver(t, &lifecyclev1.Event{Id: "del", Type: lifecycle.DocumentDeleted, ApiKey: "k1", OrganizationId: "o", OrganizationGeneration: "g1",
		Payload: &lifecyclev1.Event_DocumentsDeleted{DocumentsDeleted: &lifecyclev1.DocumentsDeleted{DocumentIds: []string{"d"}, Generations: []string{"dg1"}}}})
	late := domain("late", "comment.add", "d")
	if err := h.srv.HandleEvent(context.Background(), late); err == nil {
		t.Fatal("the failed check was not reported")
	}
	h.deliver(t, late)
	if got := h.ids(t, &activityv1.GetActivityLogsRequest{}); len(got) != 0 {
		t.Fatalf("survived the redelivery: %v", got)
	}
}

// An event published before a migration and delivered after it files its record under the new
// id, through chains of migrations too.
func TestALateEventFollowsMigrations(t *testing.T) {
	h := newHarness(t)
	h.configure(t, &activityv1.UpdateActivityConfigRequest{IsEnabled: on(true)})
	migrate := func(from, to string) {
		h.deliver(t, &lifecyclev1.Event{Id: "m-" + from, Type: lifecycle.DocumentMigrated, ApiKey: "k1", OrganizationId: "o", OrganizationGeneration: "g1",
			Payload: &lifecyclev1.Event_DocumentMigrated{DocumentMigrated: &lifecyclev1.DocumentMigrated{FromDocumentId: from, ToDocumentId: to, Generation: "dg1"}}})
	}
	migrate("d", "d2")
	migrate("d2", "d3")
	h.deliver(t, domain("late", "comment.add", "d"))
	if got := h.ids(t, &activityv1.GetActivityLogsRequest{DocumentId: "d3"}); !slices.Equal(got, []string{"late"}) {
		t.Fatalf("d3 has %v", got)
	}
	if got := h.ids(t, &activityv1.GetActivityLogsRequest{DocumentId: "d"}); len(got) != 0 {
		t.Fatalf("left under d: %v", got)
	}
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
