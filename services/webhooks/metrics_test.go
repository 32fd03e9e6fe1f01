package webhooks

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/types/known/structpb"

	webhooksv1 "github.com/collab/collab/proto/collab/webhooks/v1"
)

// Each attempt counts once under its outcome: a 500 is a retry, the next 200 a success, a 410
// a failure.
func TestAttemptMetrics(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	count := func(outcome string) float64 {
		return testutil.ToFloat64(h.srv.metrics.attempts.WithLabelValues(outcome))
	}

	flaky := newReceiver(t, 500, 200)
	h.endpoint(t, &webhooksv1.CreateEndpointRequest{Url: flaky.srv.URL})
	h.publish(t, "e1", "comment.add", "")
	h.srv.SendDue(ctx)
	if count("retry") != 1 || count("success") != 0 {
		t.Fatalf("after a 500: retry %v, success %v", count("retry"), count("success"))
	}
	h.clock.Advance(6 * time.Second)
	h.srv.SendDue(ctx)
	if count("retry") != 1 || count("success") != 1 || count("failed") != 0 {
		t.Fatalf("after a 200: retry %v, success %v, failed %v", count("retry"), count("success"), count("failed"))
	}
	if n := testutil.CollectAndCount(h.srv.metrics.duration); n != 1 {
		t.Fatalf("%d duration series", n)
	}

	gone := newReceiver(t, 410)
	h.endpoint(t, &webhooksv1.CreateEndpointRequest{Url: gone.srv.URL})
	h.publish(t, "e2", "comment.add", "")
	h.srv.SendDue(ctx)
	if count("failed") != 1 {
		t.Fatalf("after a 410: failed %v", count("failed"))
	}
}

// Backlog counts what is pending and says which due delivery has waited longest, on both
// stores.
func TestStoreBacklog(t *testing.T) {
	for name, newStore := range map[string]func(t *testing.T) Store{
		"memory":  func(*testing.T) Store { return NewMemoryStore() },
		"mongodb": func(t *testing.T) Store { return newMongoStore(t) },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := newStore(t)
			b := s.(Backlogger)
			if n, oldest, err := b.Backlog(ctx, t0); err != nil || n != 0 || !oldest.IsZero() {
				t.Fatalf("empty: %d, %v, %v", n, oldest, err)
			}
			d1 := delivery("k1", "m1", "e1", at(2*time.Second))
			d2 := delivery("k1", "m2", "e1", at(time.Minute))
			d3 := delivery("k1", "m3", "e2", t0)
			queue(t, s, d1, d2, d3)
			if !claim(t, s, d3.ID, t0, at(time.Minute)) {
				t.Fatal("claim")
			}
			must(t, s.FinishDelivery(ctx, d3.ID, StateSuccess, 1, t0, at(time.Second)))
			n, oldest, err := b.Backlog(ctx, at(10*time.Second))
			if err != nil || n != 2 || !oldest.Equal(at(2*time.Second)) {
				t.Fatalf("backlog: %d, %v, %v", n, oldest, err)
			}
			if got, err := b.BusiestEndpoints(ctx, 10); err != nil || !slices.Equal(got, []EndpointBacklog{{"e1", 2}}) {
				t.Fatalf("busiest endpoints: %v, %v", got, err)
			}
			// e0 ties with e1 (ids break ties), e3 has one; the limit keeps the first two.
			queue(t, s, delivery("k1", "m4", "e0", t0), delivery("k2", "m5", "e0", t0), delivery("k1", "m6", "e3", t0))
			if got, err := b.BusiestEndpoints(ctx, 10); err != nil || !slices.Equal(got, []EndpointBacklog{{"e0", 2}, {"e1", 2}, {"e3", 1}}) {
				t.Fatalf("busiest endpoints: %v, %v", got, err)
			}
			if got, err := b.BusiestEndpoints(ctx, 2); err != nil || !slices.Equal(got, []EndpointBacklog{{"e0", 2}, {"e1", 2}}) {
				t.Fatalf("busiest two endpoints: %v, %v", got, err)
			}
		})
	}
}

// The queue depth per endpoint is shown for the deepest queues only, at most busiestEndpoints of
// them, labelled by endpoint id: after messages to twelve endpoints, one of them with three
// pending and the others one each, a scrape shows that one with 3 and ten series in all.
func TestEndpointQueueSeries(t *testing.T) {
	h := newHarness(t)
	reg := prometheus.NewRegistry()
	reg.MustRegister(h.srv.Collectors()...)
	if n, err := testutil.GatherAndCount(reg, "collab_webhook_endpoint_pending_deliveries"); err != nil || n != 0 {
		t.Fatalf("an empty queue shows %d endpoint series (%v)", n, err)
	}
	var deep *webhooksv1.Endpoint
	for i := range 12 {
		types := []any{"comment.add"}
		if i == 5 {
			types = append(types, "comment.edit")
		}
		list, _ := structpb.NewList(types)
		ep := h.endpoint(t, &webhooksv1.CreateEndpointRequest{Url: "http://127.0.0.1:9/hook", FilterTypes: list})
		if i == 5 {
			deep = ep
		}
	}
	h.publish(t, "e1", "comment.add", "")  // to every endpoint
	h.publish(t, "e2", "comment.edit", "") // to the deep one only
	h.publish(t, "e3", "comment.edit", "")
	if n, err := testutil.GatherAndCount(reg, "collab_webhook_endpoint_pending_deliveries"); err != nil || n != busiestEndpoints {
		t.Fatalf("%d endpoint series, want %d (%v)", n, busiestEndpoints, err)
	}
	want := "collab_webhook_endpoint_pending_deliveries{endpoint=\"" + deep.GetId() + "\"} 3\n"
	text, err := testutil.CollectAndFormat(queueCollector{h.srv}, expfmt.TypeTextPlain, "collab_webhook_endpoint_pending_deliveries")
	if err != nil || !strings.Contains(string(text), want) {
		t.Fatalf("no %q in\n%s (%v)", want, text, err)
	}
}
