package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/testkit/mongotest"
	"github.com/collab/collab/internal/wakeup"
)

func TestMain(m *testing.M) { os.Exit(mongotest.Run(m)) }

func TestMemoryStore(t *testing.T) {
	runStoreSuite(t, func(t *testing.T) Store { return NewMemoryStore() })
}

// The memory store drops a finished event's payload and keeps what its retention is for: a
// repeated id is refused, the state and scope read back.
func TestMemoryStoreDropsFinishedPayloads(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore()
	if err := s.Add(ctx, rec("e1", 0)); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"a", "b"} {
		if r, _ := s.Get(ctx, "e1"); len(r.Event) == 0 {
			t.Fatal("a pending event lost its payload")
		}
		if err := s.Delivered(ctx, "e1", sub, nil, t0); err != nil {
			t.Fatal(err)
		}
	}
	r, err := s.Get(ctx, "e1")
	if err != nil || r.Event != nil || r.Type != "document.deleted" || r.State() != "completed" {
		t.Fatalf("finished: %+v %v", r, err)
	}
	if err := s.Add(ctx, rec("e1", 0)); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("a repeated id: %v", err)
	}
}

// Events stored by the outbox before lanes are converted when the store starts.
func TestMongoStoreConvertsEventsOfTheOldFormat(t *testing.T) {
	ctx := context.Background()
	db := mongotest.Connect(t).Database("documents")
	old := db.Collection("outbox")
	for _, doc := range []bson.M{
		{"_id": "mig_failed", "event": []byte{}, "type": "document.migrated", "subscribers": []string{"documents", "users", "access"},
			"delivered": []string{}, "attempts": 0, "nextAttempt": t0, "finished": true, "failed": true, "lastError": "exists", "createdAt": t0},
		{"_id": "del_pending", "event": []byte{}, "type": "document.deleted", "subscribers": []string{"documents", "users", "access"},
			"delivered": []string{"documents"}, "attempts": 2, "nextAttempt": t0, "finished": false, "failed": false, "createdAt": t0},
		{"_id": "done", "event": []byte{}, "type": "document.deleted", "subscribers": []string{"documents"},
			"delivered": []string{"documents"}, "finished": true, "failed": false, "createdAt": t0},
	} {
		if _, err := old.InsertOne(ctx, doc); err != nil {
			t.Fatal(err)
		}
	}
	s, err := NewMongoStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"mig_failed": "failed", "del_pending": "in_progress", "done": "completed"} {
		if r, err := s.Get(ctx, id); err != nil || r.State() != want {
			t.Errorf("%s: %v %v, want %s", id, r, err, want)
		}
	}
	for _, sub := range []string{"users", "access"} {
		if due, _ := s.Due(ctx, sub, t0.Add(time.Hour), 10); !slices.Equal(idsOf(due), []string{"del_pending"}) {
			t.Errorf("due for %s: %v", sub, idsOf(due))
		}
	}
	if due, _ := s.Due(ctx, "documents", t0.Add(time.Hour), 10); len(due) != 0 {
		t.Errorf("due again for documents: %v", idsOf(due))
	}
	if n, err := s.Prune(ctx, time.Now().Add(time.Hour), time.Now()); err != nil || n != 2 {
		t.Errorf("converted finished events not pruned: %d %v", n, err)
	}
	if _, err := NewMongoStore(ctx, db); err != nil { // converting again finds nothing to do
		t.Fatal(err)
	}
}

func TestMongoStore(t *testing.T) {
	runStoreSuite(t, func(t *testing.T) Store {
		s, err := NewMongoStore(context.Background(), mongotest.Connect(t).Database("producer"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
	// Lanes in several processes (two stores on one database, whose per-event locks do not
	// reach each other) lose nothing either (issue 20, finding 1: the embedded server lost
	// their writes).
	t.Run("concurrent lanes across replicas", func(t *testing.T) {
		db := mongotest.Connect(t).Database("producer")
		var replicas []Store
		for range 2 {
			s, err := NewMongoStore(context.Background(), db)
			if err != nil {
				t.Fatal(err)
			}
			replicas = append(replicas, s)
		}
		runConcurrentLanes(t, replicas...)
	})
}

var t0 = time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)

// rec is an event pending for a and b, created at t0+created.
func rec(id string, created time.Duration) *Record {
	at := t0.Add(created)
	return &Record{ID: id, Event: []byte{1, 2}, APIKey: "k", OrganizationID: "o", Type: "document.deleted",
		Subscribers: []string{"a", "b"}, Pending: []string{"a", "b"}, Delivered: []string{}, Refused: []string{},
		Lanes: map[string]Lane{"a": {NextAttempt: at}, "b": {NextAttempt: at}}, CreatedAt: at}
}

func runStoreSuite(t *testing.T, newStore func(t *testing.T) Store) {
	ctx := context.Background()
	t.Run("add get duplicate", func(t *testing.T) {
		s := newStore(t)
		if err := s.Add(ctx, rec("e1", 0)); err != nil {
			t.Fatal(err)
		}
		if err := s.Add(ctx, rec("e1", time.Second)); !errors.Is(err, ErrDuplicate) {
			t.Fatalf("second add of e1: %v", err)
		}
		got, err := s.Get(ctx, "e1")
		if err != nil || got.Type != "document.deleted" || !slices.Equal(got.Event, []byte{1, 2}) || !slices.Equal(got.Pending, []string{"a", "b"}) || !got.CreatedAt.Equal(t0) || got.State() != "pending" {
			t.Fatalf("%+v %v", got, err)
		}
		if _, err := s.Get(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("missing: %v", err)
		}
		for _, err := range []error{s.Delivered(ctx, "nope", "a", nil, t0), s.Retry(ctx, "nope", "a", Lane{}), s.Refuse(ctx, "nope", "a", "x", t0)} {
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("update of a missing event: %v", err)
			}
		}
	})
	t.Run("trace context kept, absent on old events", func(t *testing.T) {
		s := newStore(t)
		const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		traced := rec("traced", 0)
		traced.TraceParent = tp
		if err := s.Add(ctx, traced); err != nil {
			t.Fatal(err)
		}
		_ = s.Add(ctx, rec("plain", 0))
		if r, err := s.Get(ctx, "traced"); err != nil || r.TraceParent != tp {
			t.Fatalf("traced event: %+v %v", r, err)
		}
		if r, err := s.Get(ctx, "plain"); err != nil || r.TraceParent != "" {
			t.Fatalf("event without trace context: %+v %v", r, err)
		}
	})
	t.Run("due per lane, in age order", func(t *testing.T) {
		s := newStore(t)
		_ = s.Add(ctx, rec("late", 2*time.Second))
		_ = s.Add(ctx, rec("early", time.Second))
		_ = s.Add(ctx, rec("future", time.Hour))
		now := t0.Add(time.Minute)
		for _, sub := range []string{"a", "b"} {
			due, err := s.Due(ctx, sub, now, 10)
			if err != nil {
				t.Fatal(err)
			}
			if ids := idsOf(due); !slices.Equal(ids, []string{"early", "late"}) {
				t.Fatalf("due for %s: %v", sub, ids)
			}
		}
		if due, _ := s.Due(ctx, "a", now, 1); len(due) != 1 {
			t.Fatalf("limit ignored: %v", idsOf(due))
		}
		if due, _ := s.Due(ctx, "c", now, 10); len(due) != 0 {
			t.Fatalf("due for a subscriber it is not for: %v", idsOf(due))
		}
		// A retry of a delays a only; b's lane is untouched.
		if err := s.Retry(ctx, "early", "a", Lane{Attempts: 3, NextAttempt: t0.Add(2 * time.Minute), LastError: "boom"}); err != nil {
			t.Fatal(err)
		}
		if due, _ := s.Due(ctx, "a", now, 10); !slices.Equal(idsOf(due), []string{"late"}) {
			t.Fatalf("a after retry: %v", idsOf(due))
		}
		if due, _ := s.Due(ctx, "b", now, 10); !slices.Equal(idsOf(due), []string{"early", "late"}) {
			t.Fatalf("b after a's retry: %v", idsOf(due))
		}
		r, _ := s.Get(ctx, "early")
		if r.Attempts() != 3 || r.LastError() != "a: boom" || r.State() != "in_progress" {
			t.Fatalf("after retry %+v", r)
		}
	})
	t.Run("delivered and refused settle the event", func(t *testing.T) {
		s := newStore(t)
		_ = s.Add(ctx, rec("e", 0))
		_ = s.Delivered(ctx, "e", "a", nil, t0)
		_ = s.Delivered(ctx, "e", "a", nil, t0) // a repeat changes nothing
		r, _ := s.Get(ctx, "e")
		if !slices.Equal(r.Delivered, []string{"a"}) || !slices.Equal(r.Pending, []string{"b"}) || r.DoneAt != nil {
			t.Fatalf("after a: %+v", r)
		}
		_ = s.Refuse(ctx, "e", "b", "gone", t0.Add(time.Second))
		r, _ = s.Get(ctx, "e")
		if !r.Finished() || r.State() != "failed" || !slices.Equal(r.Refused, []string{"b"}) || r.DoneAt == nil || !r.DoneAt.Equal(t0.Add(time.Second)) {
			t.Fatalf("after b refused: %+v", r)
		}
		if due, _ := s.Due(ctx, "b", t0.Add(time.Hour), 10); len(due) != 0 {
			t.Fatalf("refused still due: %v", idsOf(due))
		}
	})
	t.Run("the gate releases the others", func(t *testing.T) {
		s := newStore(t)
		r := rec("g", 0)
		r.Subscribers, r.Gate, r.Pending = []string{"p", "a", "b"}, "p", []string{"p"}
		r.Lanes = map[string]Lane{"p": {NextAttempt: t0}}
		_ = s.Add(ctx, r)
		if due, _ := s.Due(ctx, "a", t0, 10); len(due) != 0 {
			t.Fatalf("due before the gate: %v", idsOf(due))
		}
		if err := s.Delivered(ctx, "g", "p", []string{"a", "b"}, t0.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		for _, sub := range []string{"a", "b"} {
			if due, _ := s.Due(ctx, sub, t0.Add(time.Second), 10); !slices.Equal(idsOf(due), []string{"g"}) {
				t.Fatalf("%s after the gate: %v", sub, idsOf(due))
			}
		}
		got, _ := s.Get(ctx, "g")
		if !slices.Equal(got.Delivered, []string{"p"}) || got.State() != "in_progress" {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("concurrent lanes", func(t *testing.T) { runConcurrentLanes(t, newStore(t)) })
	t.Run("prune removes old finished events only", func(t *testing.T) {
		s := newStore(t)
		for _, id := range []string{"old", "recent", "open"} {
			_ = s.Add(ctx, rec(id, 0))
		}
		for _, sub := range []string{"a", "b"} {
			_ = s.Delivered(ctx, "old", sub, nil, t0)
			_ = s.Delivered(ctx, "recent", sub, nil, t0.Add(48*time.Hour))
		}
		n, err := s.Prune(ctx, t0.Add(24*time.Hour), t0.Add(72*time.Hour))
		if err != nil || n != 1 {
			t.Fatalf("pruned %d, %v", n, err)
		}
		for id, want := range map[string]bool{"old": false, "recent": true, "open": true} {
			if _, err := s.Get(ctx, id); (err == nil) != want {
				t.Fatalf("%s kept=%v", id, err == nil)
			}
		}
	})
}

// Lanes of one event update it at once: none loses another's write. Lane i writes through
// replicas[i % len(replicas)].
func runConcurrentLanes(t *testing.T, replicas ...Store) {
	s := replicas[0]
	ctx := context.Background()
	subs := []string{"a", "b", "c", "d", "e", "f"}
	for i := range 10 {
		r := rec(fmt.Sprint("c", i), 0)
		r.Subscribers, r.Pending = subs, slices.Clone(subs)
		r.Lanes = map[string]Lane{}
		for _, sub := range subs {
			r.Lanes[sub] = Lane{NextAttempt: t0}
		}
		if err := s.Add(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for j, sub := range subs {
		s := replicas[j%len(replicas)]
		wg.Go(func() {
			for i := range 10 {
				if err := s.Retry(ctx, fmt.Sprint("c", i), sub, Lane{Attempts: 1, NextAttempt: t0, LastError: "x"}); err != nil {
					t.Error(err)
				}
				if err := s.Delivered(ctx, fmt.Sprint("c", i), sub, nil, t0); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for i := range 10 {
		r, err := s.Get(ctx, fmt.Sprint("c", i))
		if err != nil || len(r.Pending) != 0 || len(r.Delivered) != len(subs) || r.DoneAt == nil || r.State() != "completed" || r.LastError() != "" {
			t.Fatalf("event %d after concurrent lanes: %+v %v", i, r, err)
		}
	}
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
	return New("documents", store, d, To("documents", "users", "access"), WithClock(clk), WithLogger(slog.New(slog.DiscardHandler)))
}

func TestPublishDeliversToTheGateFirstThenEveryOneAtOnce(t *testing.T) {
	d := &fakeDeliverer{fail: map[string]error{}}
	o := newOutbox(NewMemoryStore(), d, clock.NewFake(t0))
	r, err := o.Publish(context.Background(), &lifecyclev1.Event{Id: "e1", Type: "document.deleted", ApiKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	got := d.deliveries()
	if len(got) != 3 || got[0] != "documents:e1" || !slices.Contains(got, "users:e1") || !slices.Contains(got, "access:e1") {
		t.Fatalf("deliveries %v", got)
	}
	if r.State() != "completed" || r.DoneAt == nil {
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
	// users failing holds nobody else up.
	if r.State() != "in_progress" || r.Lanes["users"].Attempts != 1 || !slices.Equal(r.Pending, []string{"users"}) {
		t.Fatalf("after a failed first delivery %+v", r)
	}
	first := r.Lanes["users"].NextAttempt.Sub(t0)
	if first < 800*time.Millisecond || first > 1200*time.Millisecond {
		t.Fatalf("first retry after %v, want about 1s", first)
	}
	o.RunDue(ctx) // not due yet
	if got := d.deliveries(); len(got) != 2 {
		t.Fatalf("retried before due: %v", got)
	}
	clk.Advance(2 * time.Second)
	o.RunDue(ctx)
	r, _ = store.Get(ctx, r.ID)
	second := r.Lanes["users"].NextAttempt.Sub(clk.Now())
	if r.Lanes["users"].Attempts != 2 || second < 1600*time.Millisecond || second > 2400*time.Millisecond {
		t.Fatalf("second retry: attempts %d after %v", r.Lanes["users"].Attempts, second)
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
	got := d.deliveries()
	slices.Sort(got)
	if want := []string{"access:" + r.ID, "documents:" + r.ID, "users:" + r.ID}; !slices.Equal(got, want) {
		t.Fatalf("each subscriber once: %v", got)
	}
}

// A change the producer refuses (a migration onto a document that exists) reaches nobody.
func TestTheGateRefusingStopsTheEvent(t *testing.T) {
	d := &fakeDeliverer{fail: map[string]error{"documents": status.Error(codes.AlreadyExists, "target exists")}}
	o := newOutbox(NewMemoryStore(), d, clock.NewFake(t0))
	r, err := o.Publish(context.Background(), &lifecyclev1.Event{Type: "document.migrated"})
	if err != nil {
		t.Fatal(err)
	}
	if r.State() != "failed" || len(d.deliveries()) != 0 || !r.Finished() {
		t.Fatalf("state %s, deliveries %v", r.State(), d.deliveries())
	}
	o.RunDue(context.Background())
	if len(d.deliveries()) != 0 {
		t.Fatalf("delivered after the gate refused: %v", d.deliveries())
	}
}

// A consumer that refuses an event for good stops only its own delivery.
func TestAConsumerRefusingLeavesTheOthers(t *testing.T) {
	d := &fakeDeliverer{fail: map[string]error{"users": status.Error(codes.InvalidArgument, "bad")}}
	o := newOutbox(NewMemoryStore(), d, clock.NewFake(t0))
	r, _ := o.Publish(context.Background(), &lifecyclev1.Event{Id: "e", Type: "document.deleted"})
	if r.State() != "failed" || !slices.Equal(r.Refused, []string{"users"}) || !slices.Contains(d.deliveries(), "access:e") {
		t.Fatalf("%+v %v", r, d.deliveries())
	}
}

// blockingDeliverer holds deliveries to one subscriber until released.
type blockingDeliverer struct {
	fakeDeliverer
	slow    string
	release chan struct{}
}

func (b *blockingDeliverer) Deliver(ctx context.Context, sub string, e *lifecyclev1.Event) error {
	if sub == b.slow {
		select {
		case <-b.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return b.fakeDeliverer.Deliver(ctx, sub, e)
}

// One slow consumer does not hold the others up: their lanes deliver every event while it hangs.
func TestASlowConsumerHoldsOnlyItsOwnLane(t *testing.T) {
	d := &blockingDeliverer{fakeDeliverer: fakeDeliverer{fail: map[string]error{}}, slow: "webhooks", release: make(chan struct{})}
	store := NewMemoryStore()
	o := New("events", store, d, To("activity", "webhooks"), WithLogger(slog.New(slog.DiscardHandler)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { o.Run(ctx); close(done) }()
	for i := range 20 {
		if _, err := o.PublishAsync(ctx, &lifecyclev1.Event{Id: fmt.Sprint("e", i), Type: "comment.add"}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := 0
		for _, g := range d.deliveries() {
			if strings.HasPrefix(g, "activity:") {
				n++
			}
		}
		if n == 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("activity got %d of 20 while webhooks hung", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(d.release)
	for {
		due, _ := store.Due(ctx, "webhooks", time.Now().Add(time.Hour), 100)
		if len(due) == 0 {
			break
		}
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatalf("webhooks still has %d pending after release", len(due))
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
}

func TestARepeatedIDIsNotPublishedTwice(t *testing.T) {
	d := &fakeDeliverer{fail: map[string]error{}}
	o := newOutbox(NewMemoryStore(), d, clock.NewFake(t0))
	ctx := context.Background()
	if _, err := o.Publish(ctx, &lifecyclev1.Event{Id: "same", Type: "document.deleted"}); err != nil {
		t.Fatal(err)
	}
	r, err := o.Publish(ctx, &lifecyclev1.Event{Id: "same", Type: "document.deleted"})
	if !errors.Is(err, ErrDuplicate) || r == nil || r.ID != "same" || r.State() != "completed" {
		t.Fatalf("repeat: %+v %v", r, err)
	}
	if got := d.deliveries(); len(got) != 3 {
		t.Fatalf("deliveries %v", got)
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

func TestPublishAsyncLeavesDeliveryToTheLanes(t *testing.T) {
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
	o.RunDue(ctx) // the documents lane delivers and releases; the other lanes run after it
	if r, _ = o.Get(ctx, r.ID); r.State() != "completed" || len(d.deliveries()) != 3 {
		t.Fatalf("after the lanes: %s %v", r.State(), d.deliveries())
	}
}

// Each event goes only to the consumers its type is routed to; a type nobody consumes is done.
func TestEventsGoWhereTheirTypeIsRouted(t *testing.T) {
	d := &fakeDeliverer{fail: map[string]error{}}
	route := func(typ string) []string {
		return map[string][]string{"folder.deleted": {"documents", "access"}, "users.removed": {"users", "access"}}[typ]
	}
	o := New("documents", NewMemoryStore(), d, Routes{For: route, All: []string{"documents", "users", "access"}},
		WithClock(clock.NewFake(t0)), WithLogger(slog.New(slog.DiscardHandler)))
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
	got := d.deliveries()
	slices.Sort(got)
	if want := []string{"access:f", "access:u", "documents:f", "users:u"}; !slices.Equal(got, want) {
		t.Fatalf("deliveries %v", got)
	}
}

// With wake-ups, an event stored by one process's outbox is delivered by the lanes of the same
// producer in another process at once, not at their next poll (a second): here the other
// outbox on the same store and bus delivers each of five events well within it.
func TestWakeupsRunTheLanesOfOtherProcesses(t *testing.T) {
	store := NewMemoryStore()
	bus := wakeup.NewInProcess(nil)
	quiet := WithLogger(slog.New(slog.DiscardHandler))
	// a stores events and runs no lane (a process that only publishes); b's lanes deliver.
	a := New("events", store, &fakeDeliverer{fail: map[string]error{}}, To("activity"), quiet, WithWakeups(bus))
	d := &fakeDeliverer{fail: map[string]error{}}
	b := New("events", store, d, To("activity"), quiet, WithWakeups(bus))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	time.Sleep(50 * time.Millisecond) // b's first round and subscriptions
	for i := range 5 {
		id := fmt.Sprint("w", i)
		start := time.Now()
		if _, err := a.PublishAsync(ctx, &lifecyclev1.Event{Id: id, Type: "comment.add"}); err != nil {
			t.Fatal(err)
		}
		for !slices.Contains(d.deliveries(), "activity:"+id) {
			if time.Since(start) > 300*time.Millisecond {
				t.Fatalf("event %s reached the other process's lane only after %v: no wake-up", id, time.Since(start))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}
