package live

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/collab/collab/internal/testkit/natstest"
	"github.com/collab/collab/internal/wakeup"
	"github.com/collab/collab/internal/yjs"
)

// countingLog counts the log reads of rooms following it (Since).
type countingLog struct {
	memLog
	reads atomic.Int64
}

func (l *countingLog) Since(ctx context.Context, key string, at Cursor) ([]Entry, bool, error) {
	l.reads.Add(1)
	return l.memLog.Since(ctx, key, at)
}

// replica is a hub on a bus, served over HTTP.
type replica struct {
	hub *Hub
	url string
	m   *wakeup.Metrics
}

// newReplica serves a hub that ticks every poll and reads the log at safety (with bus).
func newReplica(t testing.TB, log Log, bus wakeup.Bus, m *wakeup.Metrics, poll, safety time.Duration) replica {
	t.Helper()
	h := New(Config{Log: log, Authorize: authorize, Prefix: "/v2/crdt/sync/", Poll: poll, Idle: time.Minute,
		Wakeup: bus, SafetyPoll: safety})
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.Close() })
	return replica{hub: h, url: "ws" + strings.TrimPrefix(srv.URL, "http") + "/v2/crdt/sync/", m: m}
}

// natsReplica is a replica with its own connection to the engine at url.
func natsReplica(t testing.TB, log Log, url string, poll, safety time.Duration) replica {
	t.Helper()
	m, err := wakeup.NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	bus, err := wakeup.DialNATS(wakeup.NATSConfig{URL: url}, m)
	if err != nil {
		t.Fatal(err)
	}
	r := newReplica(t, log, bus, m, poll, safety)
	t.Cleanup(bus.Close) // after the hub's Close (cleanups run last first)
	return r
}

// waitSynced waits for the client's first answer from its room: the room is loaded (and
// subscribed to its wake-ups).
func waitSynced(t testing.TB, c *client) {
	t.Helper()
	select {
	case <-c.got:
	case <-time.After(5 * time.Second):
		t.Fatal("no greeting from the room")
	}
}

// waitInterest waits until each server knows of at least n subscriptions more than base: the
// rooms' wake-up subscriptions have reached every node of the cluster.
func waitInterest(t testing.TB, ss []*server.Server, base []uint32, n uint32) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for i, s := range ss {
		for s.NumSubscriptions() < base[i]+n {
			if time.Now().After(deadline) {
				t.Fatalf("server %d knows %d subscriptions, want %d", i, s.NumSubscriptions(), base[i]+n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

func subsOf(ss []*server.Server) []uint32 {
	out := make([]uint32, len(ss))
	for i, s := range ss {
		out[i] = s.NumSubscriptions()
	}
	return out
}

// An edit through replica A's WebSocket reaches a client of replica B, over a 3-node NATS
// cluster (A and B on different nodes), long before the safety poll (a minute here): the
// wake-up, not the poll, brought it. Idle, the rooms do not read the log. (Without the
// wake-ups this fails: B's client gets the edit only at the poll.)
func TestWakeupsCarryEditsAcrossReplicas(t *testing.T) {
	ss := natstest.Cluster(t, 3)
	log := &countingLog{}
	base := subsOf(ss)
	a := natsReplica(t, log, ss[0].ClientURL(), time.Minute, time.Minute)
	b := natsReplica(t, log, ss[1].ClientURL(), time.Minute, time.Minute)
	ca := dial(t, a.url+"o/d/e", "edit")
	cb := dial(t, b.url+"o/d/e", "edit")
	waitSynced(t, ca)
	waitSynced(t, cb)
	waitInterest(t, ss, base, 2)
	readsBefore := log.reads.Load()

	start := time.Now()
	ca.edit("hello")
	eventually(t, "b sees a's edit", func() bool { return cb.text() == "hello" })
	t.Logf("replica lag %v", time.Since(start))
	cb.edit("hello world")
	eventually(t, "a sees b's edit", func() bool { return ca.text() == "hello world" })
	if got := testutil.ToFloat64(b.m.Received); got == 0 {
		t.Fatal("b received no wake-up")
	}
	// One read per wake-up that brought news: a's own edit's wake-up reaches a too, and is
	// known there.
	if reads := log.reads.Load() - readsBefore; reads > 2 {
		t.Fatalf("%d log reads for 2 edits", reads)
	}
	if testutil.ToFloat64(a.m.Missed)+testutil.ToFloat64(b.m.Missed) != 0 {
		t.Fatal("a safety-poll find with no wake-up lost")
	}
}

// With the engine stopped, an edit still reaches the other replica, by its safety poll, and
// the find is counted as a lost wake-up.
func TestSafetyPollWhenEngineDown(t *testing.T) {
	s := natstest.Server(t, natstest.Options{})
	log := &countingLog{}
	a := natsReplica(t, log, s.ClientURL(), 20*time.Millisecond, 300*time.Millisecond)
	b := natsReplica(t, log, s.ClientURL(), 20*time.Millisecond, 300*time.Millisecond)
	ca := dial(t, a.url+"o/d/e", "edit")
	cb := dial(t, b.url+"o/d/e", "edit")
	waitSynced(t, ca)
	waitSynced(t, cb)
	s.Shutdown()
	eventually(t, "the engine seen down", func() bool { return testutil.ToFloat64(b.m.Up) == 0 })
	ca.edit("still here")
	eventually(t, "b sees a's edit by the safety poll", func() bool { return cb.text() == "still here" })
	eventually(t, "the find counted", func() bool { return testutil.ToFloat64(b.m.Missed) == 1 })
}

// lossy is a bus that drops the publishes of one replica (the engine losing them).
type lossy struct {
	wakeup.Bus
	drop *atomic.Bool
	m    *wakeup.Metrics
}

func (l lossy) Publish(subject string, payload []byte) {
	if l.drop.Load() {
		l.m.Dropped.Inc()
		return
	}
	l.Bus.Publish(subject, payload)
}

func (l lossy) Missed() { l.m.Missed.Inc() }

// A wake-up lost (dropped) is made up for by the safety poll, which counts it; while none is
// lost, the safety poll finds nothing.
func TestLostWakeupFoundBySafetyPoll(t *testing.T) {
	engine := wakeup.NewInProcess(nil) // one bus for both replicas: the engine, in process
	log := &countingLog{}
	var drop atomic.Bool
	ma, _ := wakeup.NewMetrics(nil)
	mb, _ := wakeup.NewMetrics(nil)
	a := newReplica(t, log, lossy{engine, &drop, ma}, ma, 20*time.Millisecond, 400*time.Millisecond)
	b := newReplica(t, log, lossy{engine, new(atomic.Bool), mb}, mb, 20*time.Millisecond, 400*time.Millisecond)
	ca := dial(t, a.url+"o/d/e", "edit")
	cb := dial(t, b.url+"o/d/e", "edit")
	waitSynced(t, ca)
	waitSynced(t, cb)
	start := time.Now()
	ca.edit("one")
	eventually(t, "b sees a's first edit", func() bool { return cb.text() == "one" })
	if d := time.Since(start); d > 200*time.Millisecond {
		t.Fatalf("the woken edit took %v, as long as a poll", d)
	}
	drop.Store(true)
	ca.edit("two")
	eventually(t, "b sees a's second edit by the safety poll", func() bool { return cb.text() == "two" })
	if got := testutil.ToFloat64(mb.Missed); got != 1 {
		t.Fatalf("safety-poll finds %v, want 1", got)
	}
	if testutil.ToFloat64(ma.Dropped) != 1 {
		t.Fatal("the drop was not counted")
	}
}

// Wake-up payloads: a cursor goes and comes back; what is not one is read as "unknown".
func TestWakePayload(t *testing.T) {
	at := Cursor{Version: "v 1", Seq: 42}
	if got, ok := readWake(wakePayload(at)); !ok || got != at {
		t.Fatalf("read back %+v %v", got, ok)
	}
	for _, bad := range []string{"", "x y", "-1 v", "42"} {
		if _, ok := readWake([]byte(bad)); ok {
			t.Fatalf("%q read as a cursor", bad)
		}
	}
	if subject("a.b c*>") == subject("a.b c*") || strings.ContainsAny(strings.TrimPrefix(subject("a.b c*>"), "collab.crdt.room."), ". *>") {
		t.Fatal("subjects")
	}
}

// A REST change stored on replica A (Hub.Publish, as services/crdt's Update and Apply call it)
// wakes replica B, whose client gets it long before the safety poll.
func TestRESTChangesWakeOtherReplicas(t *testing.T) {
	engine := wakeup.NewInProcess(nil)
	log := &countingLog{}
	a := newReplica(t, log, engine, nil, time.Minute, time.Minute)
	b := newReplica(t, log, engine, nil, time.Minute, time.Minute)
	cb := dial(t, b.url+"o/d/e", "edit")
	waitSynced(t, cb)
	d := yjs.NewDoc()
	u, err := d.Replace("content", yjs.Text, "from REST")
	if err != nil {
		t.Fatal(err)
	}
	at, _, err := log.Append(context.Background(), "o/d/e", "v", u)
	if err != nil {
		t.Fatal(err)
	}
	a.hub.Publish("o/d/e", at, u) // A has no room loaded: only the wake-up goes
	eventually(t, "b's client gets the REST change", func() bool { return cb.text() == "from REST" })
}
