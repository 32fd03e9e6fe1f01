package wakeup_test

import (
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/collab/collab/internal/testkit/natstest"
	"github.com/collab/collab/internal/wakeup"
)

// recv subscribes and returns the channel of payloads received.
func recv(t *testing.T, b wakeup.Bus, subject string) (<-chan string, func()) {
	t.Helper()
	ch := make(chan string, 100)
	unsub, err := b.Subscribe(subject, func(p []byte) { ch <- string(p) })
	if err != nil {
		t.Fatal(err)
	}
	return ch, unsub
}

func expect(t *testing.T, ch <-chan string, want string) {
	t.Helper()
	select {
	case got := <-ch:
		if got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no message %q", want)
	}
}

func nothing(t *testing.T, ch <-chan string) {
	t.Helper()
	select {
	case got := <-ch:
		t.Fatalf("unexpected message %q", got)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestInProcessDeliversInItsProcess(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := wakeup.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	b := wakeup.NewInProcess(m)
	a, unsubA := recv(t, b, "room.a")
	other, _ := recv(t, b, "room.b")
	b.Publish("room.a", []byte("1"))
	expect(t, a, "1")
	nothing(t, other)
	unsubA()
	b.Publish("room.a", []byte("2"))
	nothing(t, a)
	if got := testutil.ToFloat64(m.Published); got != 2 {
		t.Fatalf("published %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.Received); got != 1 {
		t.Fatalf("received %v, want 1", got)
	}
}

func dial(t *testing.T, cfg wakeup.NATSConfig) (*wakeup.NATS, *wakeup.Metrics) {
	t.Helper()
	m, err := wakeup.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	b, err := wakeup.DialNATS(cfg, m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b, m
}

// A wake-up published through one node of a cluster reaches subscribers connected to the
// others, and the publisher's own.
func TestNATSClusterDelivers(t *testing.T) {
	ss := natstest.Cluster(t, 3)
	a, _ := dial(t, wakeup.NATSConfig{URL: ss[0].ClientURL()})
	b, mb := dial(t, wakeup.NATSConfig{URL: ss[1].ClientURL()})
	c, _ := dial(t, wakeup.NATSConfig{URL: ss[2].ClientURL()})
	chA, _ := recv(t, a, "room.x")
	chB, _ := recv(t, b, "room.x")
	chC, unsubC := recv(t, c, "room.x")
	// Subscriptions propagate between the nodes asynchronously: publish until one arrives.
	deadline := time.Now().Add(5 * time.Second)
	for {
		a.Publish("room.x", []byte("ping"))
		select {
		case <-chC:
		case <-time.After(50 * time.Millisecond):
			if time.Now().Before(deadline) {
				continue
			}
			t.Fatal("no wake-up crossed the cluster")
		}
		break
	}
	unsubC()
	for len(chA) > 0 || len(chB) > 0 {
		select {
		case <-chA:
		case <-chB:
		}
	}
	time.Sleep(100 * time.Millisecond)
	for len(chA) > 0 || len(chB) > 0 {
		select {
		case <-chA:
		case <-chB:
		}
	}
	a.Publish("room.x", []byte("edit"))
	expect(t, chA, "edit")
	expect(t, chB, "edit")
	nothing(t, chC)
	if testutil.ToFloat64(mb.Received) == 0 || testutil.ToFloat64(mb.Up) != 1 {
		t.Fatal("b's metrics do not show its receipts and its connection")
	}
}

// With the engine down, dialing succeeds, publishing neither blocks nor fails (what does not
// fit is dropped and counted), and once a server is back on the address, wake-ups flow again.
func TestNATSEngineDownThenBack(t *testing.T) {
	port := freePort(t)
	url := "nats://127.0.0.1:" + port
	b, m := dial(t, wakeup.NATSConfig{URL: url, Queue: 8, ReconnectBuffer: 64})
	if b.Connected() || testutil.ToFloat64(m.Up) != 0 {
		t.Fatal("connected to no server")
	}
	ch, _ := recv(t, b, "room.y")
	start := time.Now()
	for range 10000 {
		b.Publish("room.y", []byte("lost"))
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("publishing with the engine down took %v", d)
	}
	if testutil.ToFloat64(m.Dropped) == 0 {
		t.Fatal("nothing dropped with the engine down")
	}
	s := natstest.ServerOn(t, natstest.Options{}, port)
	deadline := time.Now().Add(10 * time.Second)
	for !b.Connected() {
		if time.Now().After(deadline) {
			t.Fatal("did not reconnect")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for len(ch) > 0 {
		<-ch
	}
	b.Publish("room.y", []byte("back"))
	for {
		select {
		case got := <-ch:
			if got == "back" {
				goto shut
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no wake-up after the engine came back")
		}
	}
shut:
	s.Shutdown()
	deadline = time.Now().Add(10 * time.Second)
	for b.Connected() || testutil.ToFloat64(m.Up) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the gauge still says up with the engine shut down")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A server that requires a token refuses a bus without it and serves one with it.
func TestNATSToken(t *testing.T) {
	s := natstest.Server(t, natstest.Options{Token: "s3cret"})
	good, _ := dial(t, wakeup.NATSConfig{URL: s.ClientURL(), Token: "s3cret"})
	bad, _ := dial(t, wakeup.NATSConfig{URL: s.ClientURL(), Token: "wrong"})
	ch, _ := recv(t, good, "room.z")
	_, _ = recv(t, bad, "room.z")
	if bad.Connected() {
		t.Fatal("a wrong token connected")
	}
	waitInterest(t, s, "room.z")
	good.Publish("room.z", []byte("ok"))
	expect(t, ch, "ok")
	bad.Publish("room.z", []byte("forged"))
	nothing(t, ch)
}

// waitInterest waits until the server has a subscriber of subject (a client's; the server's
// own subscriptions, some sixty of its system account, are not on it).
func waitInterest(t *testing.T, s *server.Server, subject string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !s.GlobalAccount().SubscriptionInterest(subject) {
		if time.Now().After(deadline) {
			t.Fatalf("no subscriber of %s", subject)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}
