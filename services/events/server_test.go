package events

import (
	"context"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	eventsv1 "github.com/collab/collab/proto/collab/events/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/outbox"
)

// fakeDocs knows organizations and documents and their generations.
type fakeDocs struct {
	documentsv1.DocumentsServiceClient
	orgs map[string]string // apiKey/org -> generation
	docs map[string]string // apiKey/org/doc -> generation
}

func (f *fakeDocs) ResolveResources(_ context.Context, in *documentsv1.ResolveResourcesRequest, _ ...grpc.CallOption) (*documentsv1.ResolveResourcesResponse, error) {
	out := &documentsv1.ResolveResourcesResponse{Documents: map[string]*documentsv1.ResolvedResource{}}
	gen, ok := f.orgs[in.GetApiKey()+"/"+in.GetOrganizationId()]
	if !ok {
		return out, nil
	}
	out.OrganizationExists, out.OrganizationGeneration = true, gen
	for _, d := range in.GetDocumentIds() {
		g, ok := f.docs[in.GetApiKey()+"/"+in.GetOrganizationId()+"/"+d]
		out.Documents[d] = &documentsv1.ResolvedResource{Exists: ok, Generation: g}
	}
	return out, nil
}

// collector records what the outbox delivers to each consumer.
type collector struct {
	mu  sync.Mutex
	got map[string][]*lifecyclev1.Event
}

func (c *collector) Deliver(_ context.Context, sub string, e *lifecyclev1.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got[sub] = append(c.got[sub], proto.Clone(e).(*lifecyclev1.Event))
	return nil
}

func (c *collector) delivered(sub string) []*lifecyclev1.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got[sub])
}

var t0 = time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)

func newServer(t *testing.T) (*Server, *collector) {
	t.Helper()
	docs := &fakeDocs{orgs: map[string]string{"k1/o": "og1", "k2/o": "og2"}, docs: map[string]string{"k1/o/d": "dg1"}}
	c := &collector{got: map[string][]*lifecyclev1.Event{}}
	clk := clock.NewFake(t0)
	quiet := slog.New(slog.DiscardHandler)
	box := outbox.New("events", outbox.NewMemoryStore(), c, outbox.To("activity", "webhooks"), outbox.WithClock(clk), outbox.WithLogger(quiet))
	s, err := New(docs, box, WithClock(clk), WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

func as(apiKey string) context.Context {
	return authn.WithCaller(context.Background(), authn.Caller{APIKey: apiKey, WorkspaceID: "w-" + apiKey})
}

func TestPublishEventReachesEveryConsumerWithItsTenantAndGenerations(t *testing.T) {
	s, c := newServer(t)
	data, _ := structpb.NewStruct(map[string]any{"commentText": "hi", "n": 2})
	resp, err := s.PublishEvent(as("k1"), &eventsv1.PublishEventRequest{
		Id: "e-1", Type: "comment.add", OrganizationId: "o", DocumentId: "d",
		ActionUser: &eventsv1.ActionUser{UserId: "u", Name: "Ada", Email: "ada@example.com"}, TargetEntityId: "c1", Channel: "general", Data: data,
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetStatus() != "success" || resp.GetMessage() != "Event published successfully." || resp.GetData().GetEventId() != "e-1" {
		t.Fatalf("%v", resp)
	}
	want := &eventsv1.Event{
		Id: "e-1", Type: "comment.add", WorkspaceId: "w-k1", ApiKey: "k1", OrganizationId: "o", DocumentId: "d",
		ActionUser: &eventsv1.ActionUser{UserId: "u", Name: "Ada", Email: "ada@example.com"}, Timestamp: float64(t0.UnixMilli()),
		TargetEntityId: "c1", Channel: "general", Data: data, OrganizationGeneration: "og1", DocumentGeneration: "dg1",
	}
	for _, sub := range []string{"activity", "webhooks"} {
		got := c.delivered(sub)
		if len(got) != 1 || !proto.Equal(got[0].GetDomain(), want) || got[0].GetType() != "comment.add" || got[0].GetApiKey() != "k1" || got[0].GetOrganizationGeneration() != "og1" {
			t.Fatalf("%s got %v", sub, got)
		}
	}
}

func TestARepeatedIDPublishesOnceAndIDsArePerTenant(t *testing.T) {
	s, c := newServer(t)
	for range 3 {
		resp, err := s.PublishEvent(as("k1"), &eventsv1.PublishEventRequest{Id: "same", Type: "comment.add", OrganizationId: "o"})
		if err != nil || resp.GetData().GetEventId() != "same" {
			t.Fatalf("%v %v", resp, err)
		}
	}
	if _, err := s.PublishEvent(as("k2"), &eventsv1.PublishEventRequest{Id: "same", Type: "comment.add", OrganizationId: "o"}); err != nil {
		t.Fatal(err)
	}
	got := c.delivered("activity")
	if len(got) != 2 || got[0].GetApiKey() != "k1" || got[1].GetApiKey() != "k2" {
		t.Fatalf("deliveries %v", got)
	}
	if got[1].GetOrganizationGeneration() != "og2" {
		t.Fatalf("generation of k2's organization: %v", got[1])
	}
	// An unknown document is allowed, with no generation; an unknown organization is not.
	if _, err := s.PublishEvent(as("k1"), &eventsv1.PublishEventRequest{Id: "x", Type: "comment.add", OrganizationId: "o", DocumentId: "new"}); err != nil {
		t.Fatal(err)
	}
	if got := c.delivered("activity"); len(got) != 3 || got[2].GetDomain().GetDocumentGeneration() != "" {
		t.Fatalf("%v", got)
	}
	_, err := s.PublishEvent(as("k3"), &eventsv1.PublishEventRequest{Type: "comment.add", OrganizationId: "o"})
	if st := status.Convert(apierr.ToStatus(context.Background(), slog.New(slog.DiscardHandler), err)); st.Code() != codes.NotFound || st.Message() != "Organization does not exist." {
		t.Fatalf("unknown organization: %v", err)
	}
}

func TestGeneratedIDs(t *testing.T) {
	s, _ := newServer(t)
	a, _ := s.PublishEvent(as("k1"), &eventsv1.PublishEventRequest{Type: "crdt.update_data", OrganizationId: "o"})
	b, _ := s.PublishEvent(as("k1"), &eventsv1.PublishEventRequest{Type: "crdt.update_data", OrganizationId: "o"})
	ida, idb := a.GetData().GetEventId(), b.GetData().GetEventId()
	if !strings.HasPrefix(ida, "evt_") || len(ida) != 28 || ida == idb {
		t.Fatalf("%q %q", ida, idb)
	}
}

func TestBadEventsAreRefusedAndNothingIsPublished(t *testing.T) {
	s, c := newServer(t)
	big, _ := structpb.NewStruct(map[string]any{"text": strings.Repeat("x", 300<<10)})
	ok := func() *eventsv1.PublishEventRequest {
		return &eventsv1.PublishEventRequest{Type: "comment.add", OrganizationId: "o"}
	}
	cases := []struct {
		name string
		mod  func(r *eventsv1.PublishEventRequest)
		msg  string
	}{
		{"no type", func(r *eventsv1.PublishEventRequest) { r.Type = "" }, "type is required."},
		{"bad type", func(r *eventsv1.PublishEventRequest) { r.Type = "Comment Add" }, "type must have the form <feature>.<action>: lowercase letters, digits and _, joined by dots (e.g. comment.add)."},
		{"reserved", func(r *eventsv1.PublishEventRequest) { r.Type = "document.deleted" }, "type document.deleted is reserved for collab's own events."},
		{"reserved message", func(r *eventsv1.PublishEventRequest) { r.Type = "message.attempt.exhausted" }, "type message.attempt.exhausted is reserved for collab's own events."},
		{"no org", func(r *eventsv1.PublishEventRequest) { r.OrganizationId = "" }, "organizationId is required."},
		{"bad doc", func(r *eventsv1.PublishEventRequest) { r.DocumentId = "a\nb" }, "documentId must not contain control characters."},
		{"bad id", func(r *eventsv1.PublishEventRequest) { r.Id = "a b" }, "id may contain only letters, digits, _ and -."},
		{"bad channel", func(r *eventsv1.PublishEventRequest) { r.Channel = strings.Repeat("c", 300) }, "channel must be at most 256 characters."},
		{"bad target", func(r *eventsv1.PublishEventRequest) { r.TargetEntityId = "\x00" }, "targetEntityId must not contain control characters."},
		{"bad email", func(r *eventsv1.PublishEventRequest) { r.ActionUser = &eventsv1.ActionUser{Email: "nope"} }, "actionUser.email must be a valid email address."},
		{"bad name", func(r *eventsv1.PublishEventRequest) { r.ActionUser = &eventsv1.ActionUser{Name: "a\u202eb"} }, "actionUser.name must not contain control characters."},
		{"big data", func(r *eventsv1.PublishEventRequest) { r.Data = big }, "data must be at most 256 KiB."},
	}
	for _, tc := range cases {
		r := ok()
		tc.mod(r)
		_, err := s.PublishEvent(as("k1"), r)
		st := status.Convert(apierr.ToStatus(context.Background(), slog.New(slog.DiscardHandler), err))
		if st.Code() != codes.InvalidArgument || st.Message() != tc.msg {
			t.Errorf("%s: %v %q, want %q", tc.name, st.Code(), st.Message(), tc.msg)
		}
	}
	if got := c.delivered("activity"); len(got) != 0 {
		t.Fatalf("published %d refused events", len(got))
	}
}

func TestInternalPublishNamesItsTenantAndCannotForgeGenerations(t *testing.T) {
	s, c := newServer(t)
	ctx := context.Background()
	if _, err := s.Publish(ctx, &eventsv1.PublishRequest{Event: &eventsv1.Event{Type: "comment.add", OrganizationId: "o"}}); status.Code(apierr.ToStatus(ctx, slog.New(slog.DiscardHandler), err)) != codes.InvalidArgument {
		t.Fatalf("no tenant: %v", err)
	}
	if _, err := s.Publish(ctx, &eventsv1.PublishRequest{}); err == nil {
		t.Fatal("no event accepted")
	}
	for _, ts := range []float64{math.NaN(), math.Inf(1), -1, 1e300} {
		_, err := s.Publish(ctx, &eventsv1.PublishRequest{Event: &eventsv1.Event{Type: "comment.add", ApiKey: "k1", WorkspaceId: "w", OrganizationId: "o", Timestamp: ts}})
		if st := status.Convert(apierr.ToStatus(ctx, slog.New(slog.DiscardHandler), err)); st.Message() != "timestamp must be Unix milliseconds." {
			t.Fatalf("timestamp %v: %v", ts, err)
		}
	}
	resp, err := s.Publish(ctx, &eventsv1.PublishRequest{Event: &eventsv1.Event{
		Id: "n1", Type: "huddle.join", ApiKey: "k1", WorkspaceId: "w", OrganizationId: "o", OrganizationGeneration: "forged", Timestamp: 5,
	}})
	if err != nil || resp.GetEventId() != "n1" || resp.GetDuplicate() {
		t.Fatalf("%v %v", resp, err)
	}
	again, _ := s.Publish(ctx, &eventsv1.PublishRequest{Event: &eventsv1.Event{Id: "n1", Type: "huddle.join", ApiKey: "k1", WorkspaceId: "w", OrganizationId: "o"}})
	if !again.GetDuplicate() {
		t.Fatal("repeat not reported")
	}
	got := c.delivered("webhooks")
	if len(got) != 1 || got[0].GetDomain().GetOrganizationGeneration() != "og1" || got[0].GetDomain().GetTimestamp() != 5 {
		t.Fatalf("%v", got)
	}
}
