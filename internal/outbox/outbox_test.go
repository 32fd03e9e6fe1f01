package outbox

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/mongotest"
)

func TestMain(m *testing.M) { os.Exit(mongotest.Run(m)) }

func TestMemoryStore(t *testing.T) {
	runStoreSuite(t, func(t *testing.T) Store { return NewMemoryStore() })
}

func TestMongoStore(t *testing.T) {
	runStoreSuite(t, func(t *testing.T) Store {
		s, err := NewMongoStore(context.Background(), mongotest.Connect(t).Database("producer"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

var t0 = time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)

func rec(id string, created time.Duration) *Record {
	return &Record{ID: id, Event: []byte{1, 2}, APIKey: "k", OrganizationID: "o", Type: "document.deleted",
		Subscribers: []string{"a", "b"}, Delivered: []string{}, NextAttempt: t0.Add(created), CreatedAt: t0.Add(created)}
}

func runStoreSuite(t *testing.T, newStore func(t *testing.T) Store) {
	ctx := context.Background()
	t.Run("add get", func(t *testing.T) {
		s := newStore(t)
		if err := s.Add(ctx, rec("e1", 0)); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, "e1")
		if err != nil || got.Type != "document.deleted" || !slices.Equal(got.Event, []byte{1, 2}) || !slices.Equal(got.Subscribers, []string{"a", "b"}) || !got.CreatedAt.Equal(t0) {
			t.Fatalf("%+v %v", got, err)
		}
		if _, err := s.Get(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("missing: %v", err)
		}
		for _, err := range []error{s.MarkDelivered(ctx, "nope", "a"), s.Retry(ctx, "nope", 1, t0, ""), s.Finish(ctx, "nope", false, "")} {
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("update of a missing event: %v", err)
			}
		}
	})
	t.Run("due order, retry and finish", func(t *testing.T) {
		s := newStore(t)
		_ = s.Add(ctx, rec("late", 2*time.Second))
		_ = s.Add(ctx, rec("early", time.Second))
		_ = s.Add(ctx, rec("future", time.Hour))
		due, err := s.Due(ctx, t0.Add(time.Minute), 10)
		if err != nil {
			t.Fatal(err)
		}
		if ids := idsOf(due); !slices.Equal(ids, []string{"early", "late"}) {
			t.Fatalf("due %v", ids)
		}
		if due, _ := s.Due(ctx, t0.Add(time.Minute), 1); len(due) != 1 {
			t.Fatalf("limit ignored: %v", idsOf(due))
		}
		_ = s.Retry(ctx, "early", 3, t0.Add(2*time.Minute), "boom")
		_ = s.Finish(ctx, "late", false, "")
		if due, _ := s.Due(ctx, t0.Add(time.Minute), 10); len(due) != 0 {
			t.Fatalf("retried/finished still due: %v", idsOf(due))
		}
		r, _ := s.Get(ctx, "early")
		if r.Attempts != 3 || r.LastError != "boom" || !r.NextAttempt.Equal(t0.Add(2*time.Minute)) {
			t.Fatalf("after retry %+v", r)
		}
		_ = s.Finish(ctx, "early", true, "gave up")
		r, _ = s.Get(ctx, "early")
		if !r.Finished || !r.Failed || r.LastError != "gave up" || r.State() != "failed" {
			t.Fatalf("after finish %+v", r)
		}
	})
	t.Run("delivered is a set", func(t *testing.T) {
		s := newStore(t)
		_ = s.Add(ctx, rec("e", 0))
		_ = s.MarkDelivered(ctx, "e", "a")
		_ = s.MarkDelivered(ctx, "e", "a")
		r, _ := s.Get(ctx, "e")
		if !slices.Equal(r.Delivered, []string{"a"}) || !slices.Equal(r.pending(), []string{"b"}) {
			t.Fatalf("delivered %v pending %v", r.Delivered, r.pending())
		}
	})
}

func idsOf(rs []*Record) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

// fakeDeliverer records deliveries and fails as told.
type fakeDeliverer struct {
	mu   sync.Mutex
	got  []string // subscriber:event id
	fail map[string]error
}

func (f *fakeDeliverer) Deliver(_ context.Context, sub string, e *lifecyclev1.Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail[sub]; err != nil {
		return err
	}
	f.got = append(f.got, sub+":"+e.GetId())
	return nil
}

func (f *fakeDeliverer) setFail(sub string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[sub] = err
}

func (f *fakeDeliverer) deliveries() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.got)
}

func newOutbox(store Store, d Deliverer, clk clock.Clock) *Outbox {
	return New(store, d, To("documents", "users", "access"), WithClock(clk), WithLogger(slog.New(slog.DiscardHandler)))
}

func TestPublishDeliversInOrderAtOnce(t *testing.T) {
	d := &fakeDeliverer{fail: map[string]error{}}
	o := newOutbox(NewMemoryStore(), d, clock.NewFake(t0))
	r, err := o.Publish(context.Background(), &lifecyclev1.Event{Id: "e1", Type: "document.deleted", ApiKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.deliveries(); !slices.Equal(got, []string{"documents:e1", "users:e1", "access:e1"}) {
		t.Fatalf("deliveries %v", got)
	}
	if r.State() != "completed" {
		t.Fatalf("state %s", r.State())
	}
}

func TestTransientFailuresRetryWithBackoffAndResume(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	store := NewMemoryStore()
	d := &fakeDeliverer{fail: map[string]error{"users": status.Error(codes.Unavailable, "down")}}
	o := newOutbox(store, d, clk)
	r, err := o.Publish(ctx, &lifecyclev1.Event{Type: "document.deleted"})
	if err != nil {
		t.Fatal(err)
	}
	if r.State() != "in_progress" || r.Attempts != 1 || !slices.Equal(r.Delivered, []string{"documents"}) {
		t.Fatalf("after a failed first delivery %+v", r)
	}
	first := r.NextAttempt.Sub(t0)
	if first < 800*time.Millisecond || first > 1200*time.Millisecond {
		t.Fatalf("first retry after %v, want about 1s", first)
	}
	o.RunDue(ctx) // not due yet
	if got := d.deliveries(); len(got) != 1 {
		t.Fatalf("retried before due: %v", got)
	}
	clk.Advance(2 * time.Second)
	o.RunDue(ctx)
	r, _ = store.Get(ctx, r.ID)
	second := r.NextAttempt.Sub(clk.Now())
	if r.Attempts != 2 || second < 1600*time.Millisecond || second > 2400*time.Millisecond {
		t.Fatalf("second retry: attempts %d after %v", r.Attempts, second)
	}

	// A new process on the same store (a restart) finishes the event.
	d.setFail("users", nil)
	restarted := newOutbox(store, d, clk)
	clk.Advance(3 * time.Second)
	restarted.RunDue(ctx)
	r, _ = store.Get(ctx, r.ID)
	if r.State() != "completed" {
		t.Fatalf("after restart %+v", r)
	}
	if got := d.deliveries(); !slices.Equal(got, []string{"documents:" + r.ID, "users:" + r.ID, "access:" + r.ID}) {
		t.Fatalf("each subscriber once: %v", got)
	}
}

func TestPermanentFailureStops(t *testing.T) {
	d := &fakeDeliverer{fail: map[string]error{"documents": status.Error(codes.AlreadyExists, "target exists")}}
	o := newOutbox(NewMemoryStore(), d, clock.NewFake(t0))
	r, err := o.Publish(context.Background(), &lifecyclev1.Event{Type: "document.migrated"})
	if err != nil {
		t.Fatal(err)
	}
	if r.State() != "failed" || len(d.deliveries()) != 0 {
		t.Fatalf("state %s, deliveries %v", r.State(), d.deliveries())
	}
}

func TestBackoffIsBounded(t *testing.T) {
	for attempt := 1; attempt < 40; attempt++ {
		if b := backoff(attempt); b > maxRetry*12/10 || b < firstRetry*8/10 {
			t.Fatalf("backoff(%d) = %v", attempt, b)
		}
	}
}

func TestRunStopsWithContext(t *testing.T) {
	o := newOutbox(NewMemoryStore(), &fakeDeliverer{fail: map[string]error{}}, clock.Real())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { o.Run(ctx); close(done) }()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

func TestPublishAsyncLeavesDeliveryToTheLoop(t *testing.T) {
	ctx := context.Background()
	d := &fakeDeliverer{fail: map[string]error{}}
	o := newOutbox(NewMemoryStore(), d, clock.NewFake(t0))
	r, err := o.PublishAsync(ctx, &lifecyclev1.Event{Type: "document.migrated"})
	if err != nil {
		t.Fatal(err)
	}
	if r.State() != "pending" || len(d.deliveries()) != 0 {
		t.Fatalf("async publish delivered at once: %s %v", r.State(), d.deliveries())
	}
	o.RunDue(ctx)
	if r, _ = o.Get(ctx, r.ID); r.State() != "completed" || len(d.deliveries()) != 3 {
		t.Fatalf("after the loop: %s %v", r.State(), d.deliveries())
	}
}

// Each event goes only to the consumers its type is routed to; a type nobody consumes is done.
func TestEventsGoWhereTheirTypeIsRouted(t *testing.T) {
	d := &fakeDeliverer{fail: map[string]error{}}
	route := func(typ string) []string {
		return map[string][]string{"folder.deleted": {"documents", "access"}, "users.removed": {"users", "access"}}[typ]
	}
	o := New(NewMemoryStore(), d, route, WithClock(clock.NewFake(t0)), WithLogger(slog.New(slog.DiscardHandler)))
	ctx := context.Background()
	for _, e := range []*lifecyclev1.Event{{Id: "f", Type: "folder.deleted"}, {Id: "u", Type: "users.removed"}, {Id: "x", Type: "nobody.cares"}} {
		r, err := o.Publish(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		if r.State() != "completed" || !slices.Equal(r.Subscribers, route(e.GetType())) && len(r.Subscribers)+len(route(e.GetType())) > 0 {
			t.Fatalf("%s: %+v", e.GetType(), r)
		}
	}
	if got := d.deliveries(); !slices.Equal(got, []string{"documents:f", "access:f", "users:u", "access:u"}) {
		t.Fatalf("deliveries %v", got)
	}
}
