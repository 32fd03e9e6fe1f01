package outbox

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/clock"
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
			return kv.Value.Emit()
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
	defer tp.Shutdown(context.Background())
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
