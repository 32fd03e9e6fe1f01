package outbox

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/testkit/mongotest"
)

func tracedOutbox(t *testing.T, store Store, d Deliverer) (*Outbox, *sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	o := New("documents", store, d, To("documents", "users", "access"), WithClock(clock.NewFake(t0)),
		WithLogger(slog.New(slog.DiscardHandler)), WithTracer(tp))
	return o, tp, exp
}

func attr(s tracetest.SpanStub, k attribute.Key) string {
	for _, kv := range s.Attributes {
		if kv.Key == k {
			return kv.Value.String()
		}
	}
	return ""
}

func deliverySpans(exp *tracetest.InMemoryExporter) map[string]tracetest.SpanStub {
	out := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		if s.Name == "deliver document.migrated" {
			out[attr(s, SubscriberKey)] = s
		}
	}
	return out
}

// An event the lanes deliver later, outside any request, gets a delivery span per subscriber in
// a trace of its own, linked to the span that published it.
func TestLaneDeliverySpansLinkToThePublisher(t *testing.T) {
	ctx := context.Background()
	store := NewMemoryStore()
	o, tp, exp := tracedOutbox(t, store, &fakeDeliverer{fail: map[string]error{}})
	pctx, publish := tp.Tracer("test").Start(ctx, "request")
	r, err := o.PublishAsync(pctx, &lifecyclev1.Event{Type: "document.migrated"})
	publish.End()
	if err != nil {
		t.Fatal(err)
	}
	if stored, _ := store.Get(ctx, r.ID); stored.TraceParent == "" {
		t.Fatal("the event was stored without its trace context")
	}
	o.RunDue(ctx)
	spans := deliverySpans(exp)
	if len(spans) != 3 {
		t.Fatalf("delivery spans for %v, want documents, users and access", spans)
	}
	for sub, s := range spans {
		if s.SpanContext.TraceID() == publish.SpanContext().TraceID() || s.Parent.IsValid() {
			t.Errorf("%s: a lane's delivery is not part of the request's trace", sub)
		}
		if len(s.Links) != 1 || s.Links[0].SpanContext.SpanID() != publish.SpanContext().SpanID() || s.Links[0].SpanContext.TraceID() != publish.SpanContext().TraceID() {
			t.Errorf("%s: links %v, want the publishing span", sub, s.Links)
		}
		if attr(s, OutcomeKey) != "delivered" || attr(s, ProducerKey) != "documents" || attr(s, EventTypeKey) != "document.migrated" ||
			attr(s, "messaging.message.id") != r.ID || s.SpanKind != trace.SpanKindProducer {
			t.Errorf("%s: attributes %v", sub, s.Attributes)
		}
	}
}

// Publish delivers at once within the request: those spans are its children; a failure is
// recorded as a retry, with the error status.
func TestPublishDeliverySpansAreChildrenOfTheRequest(t *testing.T) {
	d := &fakeDeliverer{fail: map[string]error{"users": status.Error(codes.Unavailable, "down")}}
	o, tp, exp := tracedOutbox(t, NewMemoryStore(), d)
	pctx, req := tp.Tracer("test").Start(context.Background(), "request")
	if _, err := o.Publish(pctx, &lifecyclev1.Event{Type: "document.migrated"}); err != nil {
		t.Fatal(err)
	}
	req.End()
	spans := deliverySpans(exp)
	if len(spans) != 3 {
		t.Fatalf("delivery spans %v", spans)
	}
	for sub, s := range spans {
		if s.Parent.SpanID() != req.SpanContext().SpanID() || s.SpanContext.TraceID() != req.SpanContext().TraceID() {
			t.Errorf("%s: parent %v, want the request's span", sub, s.Parent.SpanID())
		}
	}
	if u := spans["users"]; attr(u, OutcomeKey) != "retry" || u.Status.Code != otelcodes.Error || attr(u, AttemptKey) != "1" {
		t.Errorf("failed delivery: outcome %q, status %v, attempt %s", attr(u, OutcomeKey), u.Status, attr(u, AttemptKey))
	}
	if a := spans["access"]; attr(a, OutcomeKey) != "delivered" || a.Status.Code == otelcodes.Error {
		t.Errorf("access delivery: %q %v", attr(a, OutcomeKey), a.Status)
	}
}

// Without a tracer nothing of the trace is stored, even under a recording span.
func TestNoTraceContextWithoutTracer(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, span := tp.Tracer("test").Start(context.Background(), "request")
	defer span.End()
	store := NewMemoryStore()
	r, err := newOutbox(store, &fakeDeliverer{fail: map[string]error{}}, clock.NewFake(t0)).PublishAsync(ctx, &lifecyclev1.Event{Type: "document.migrated"})
	if err != nil {
		t.Fatal(err)
	}
	if stored, _ := store.Get(ctx, r.ID); stored.TraceParent != "" {
		t.Fatalf("stored %q without tracing", stored.TraceParent)
	}
}

// A product's event type is its own text (/v2/events/publish takes any <feature>.<action>):
// naming spans by it would make span names unbounded, so only collab's own types name a span.
func TestDeliverySpanNamesAreBounded(t *testing.T) {
	o, _, exp := tracedOutbox(t, NewMemoryStore(), &fakeDeliverer{fail: map[string]error{}})
	const custom = "custom.order_12345_shipped"
	if _, err := o.Publish(context.Background(), &lifecyclev1.Event{Type: custom}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Publish(context.Background(), &lifecyclev1.Event{Type: "document.migrated"}); err != nil {
		t.Fatal(err)
	}
	names := map[string]int{}
	for _, s := range exp.GetSpans() {
		names[s.Name]++
		if strings.Contains(s.Name, "12345") {
			t.Errorf("span %q is named by a product's event type", s.Name)
		}
		if s.Name == "deliver domain event" && attr(s, EventTypeKey) != custom {
			t.Errorf("span %q: event type attribute %q, want %q", s.Name, attr(s, EventTypeKey), custom)
		}
	}
	if names["deliver domain event"] != 3 || names["deliver document.migrated"] != 3 {
		t.Errorf("span names %v, want 3 deliveries of each", names)
	}
}

// storeWriting stores every event with the given traceparent, whatever the outbox made: what a
// damaged record, or one another version wrote, holds.
type storeWriting struct {
	Store
	traceParent string
}

func (s storeWriting) Add(ctx context.Context, r *Record) error {
	c := *r
	c.TraceParent = TraceContext(s.traceParent)
	return s.Store.Add(ctx, &c)
}

// checkDeliveredUnlinked publishes under a span on a store holding damaged trace context, and
// checks that every subscriber still gets the event, its delivery span without a link.
func checkDeliveredUnlinked(t *testing.T, store Store, damage func(id string)) {
	t.Helper()
	d := &fakeDeliverer{fail: map[string]error{}}
	o, tp, exp := tracedOutbox(t, store, d)
	ctx, span := tp.Tracer("test").Start(context.Background(), "request")
	r, err := o.PublishAsync(ctx, &lifecyclev1.Event{Type: "document.migrated"})
	span.End()
	if err != nil {
		t.Fatal(err)
	}
	if damage != nil {
		damage(r.ID)
	}
	o.RunDue(context.Background())
	if len(d.got) != 3 {
		t.Fatalf("delivered %v, want documents, users and access", d.got)
	}
	spans := deliverySpans(exp)
	if len(spans) != 3 {
		t.Fatalf("delivery spans %v", spans)
	}
	for sub, s := range spans {
		if len(s.Links) != 0 || attr(s, OutcomeKey) != "delivered" {
			t.Errorf("%s: links %v, outcome %q", sub, s.Links, attr(s, OutcomeKey))
		}
	}
}

var damagedTraceParents = map[string]string{
	"garbage":        "garbage",
	"all-zero trace": "00-00000000000000000000000000000000-b7ad6b7169203331-01",
	"bad version":    "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	"huge":           "00-" + strings.Repeat("a", 64<<10),
}

// A stored traceparent that is not one is ignored: the event is delivered, without a link.
func TestDamagedTraceContextDoesNotStopDelivery(t *testing.T) {
	for name, v := range damagedTraceParents {
		t.Run("memory/"+name, func(t *testing.T) {
			checkDeliveredUnlinked(t, storeWriting{NewMemoryStore(), v}, nil)
		})
		t.Run("mongo/"+name, func(t *testing.T) {
			s, err := NewMongoStore(context.Background(), mongotest.Connect(t).Database("producer"))
			if err != nil {
				t.Fatal(err)
			}
			checkDeliveredUnlinked(t, storeWriting{s, v}, nil)
		})
	}
	// A value of another BSON type must not make the record unreadable.
	for name, v := range map[string]any{"number": 42, "document": bson.M{"traceparent": "x"}, "array": bson.A{"x"}, "null": nil} {
		t.Run("mongo/"+name, func(t *testing.T) {
			db := mongotest.Connect(t).Database("producer")
			s, err := NewMongoStore(context.Background(), db)
			if err != nil {
				t.Fatal(err)
			}
			checkDeliveredUnlinked(t, s, func(id string) {
				if _, err := db.Collection("outbox").UpdateOne(context.Background(), bson.M{"_id": id}, bson.M{"$set": bson.M{"traceparent": v}}); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}
