package outbox

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/storeobserve"
	"github.com/collab/collab/internal/testkit/mongotest"
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

// An observed outbox store is timed per operation under "<producer>.outbox" (a failing call as
// an error, a duplicate id as refused), and still reports its backlog: the wrapper keeps
// Backlogger.
func TestStoreObserver(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	obs, err := storeobserve.New("documents.outbox", storeobserve.Config{Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	d := &fakeDeliverer{fail: map[string]error{"users": status.Error(codes.Unavailable, "down")}}
	o := New("documents", NewMemoryStore(), d, To("documents", "users", "access"),
		WithClock(clock.NewFake(t0)), WithLogger(slog.New(slog.DiscardHandler)), WithStoreObserver(obs))
	reg.MustRegister(NewCollector(o))
	if _, err := o.Publish(ctx, &lifecyclev1.Event{Id: "e1", Type: "document.deleted"}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Publish(ctx, &lifecyclev1.Event{Id: "e1", Type: "document.deleted"}); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("a repeated id: %v, want ErrDuplicate", err)
	}
	if got := gauge(t, reg, "collab_outbox_pending_events", "users"); got != 1 {
		t.Fatalf("users pending %v through the observed store, want 1", got)
	}
	counts := map[string]uint64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != storeobserve.MetricName {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["service"] != "documents.outbox" {
				t.Errorf("series of service %q", l["service"])
			}
			counts[l["operation"]+"/"+l["outcome"]] += m.GetHistogram().GetSampleCount()
		}
	}
	for _, k := range []string{"Add/ok", "Add/refused", "Delivered/ok", "Retry/ok", "Backlog/ok"} {
		if counts[k] == 0 {
			t.Errorf("no observation of %s; have %v", k, counts)
		}
	}
}
