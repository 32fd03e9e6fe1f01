package outbox

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/mongotest"
)

// gauge returns the value of the series name{producer="documents", subscriber=sub}, or -1.
func gauge(t *testing.T, reg *prometheus.Registry, name, sub string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["producer"] == "documents" && labels["subscriber"] == sub {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

func TestBacklogMetrics(t *testing.T) {
	t.Run("memory", func(t *testing.T) { testBacklogMetrics(t, NewMemoryStore()) })
	t.Run("mongodb", func(t *testing.T) {
		s, err := NewMongoStore(context.Background(), mongotest.Connect(t).Database("producer"))
		if err != nil {
			t.Fatal(err)
		}
		testBacklogMetrics(t, s)
	})
}

// A failing subscriber's lane shows its pending events and the age of the oldest; the others
// show none; once delivered, the backlog is empty.
func testBacklogMetrics(t *testing.T, store Store) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	d := &fakeDeliverer{fail: map[string]error{"users": status.Error(codes.Unavailable, "down")}}
	o := newOutbox(store, d, clk)
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(o))

	if got := gauge(t, reg, "collab_outbox_pending_events", "users"); got != 0 {
		t.Fatalf("empty outbox: %v pending", got)
	}
	for range 2 {
		if _, err := o.Publish(ctx, &lifecyclev1.Event{Type: "document.deleted"}); err != nil {
			t.Fatal(err)
		}
		clk.Advance(30 * time.Second)
	}
	if got := gauge(t, reg, "collab_outbox_pending_events", "users"); got != 2 {
		t.Errorf("users pending %v, want 2", got)
	}
	if got := gauge(t, reg, "collab_outbox_oldest_pending_age_seconds", "users"); got != 60 {
		t.Errorf("oldest age %v, want 60", got)
	}
	if got := gauge(t, reg, "collab_outbox_pending_events", "access"); got != 0 {
		t.Errorf("access pending %v, want 0", got)
	}
	if got := gauge(t, reg, "collab_outbox_backlog_read_errors", "users"); got != 0 {
		t.Errorf("read errors %v", got)
	}

	d.setFail("users", nil)
	clk.Advance(10 * time.Minute)
	o.RunDue(ctx)
	if got := gauge(t, reg, "collab_outbox_pending_events", "users"); got != 0 {
		t.Errorf("after delivery users pending %v", got)
	}
	if got := gauge(t, reg, "collab_outbox_oldest_pending_age_seconds", "users"); got != 0 {
		t.Errorf("after delivery oldest age %v", got)
	}
}
