package webhooks

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	eventsv1 "github.com/collab/collab/proto/collab/events/v1"
	webhooksv1 "github.com/collab/collab/proto/collab/webhooks/v1"

	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/testkit/webhooktest"
)

// silentListener accepts TCP connections on loopback, reads what comes and never answers: an
// endpoint that takes the connection and then hangs until the attempt times out. It counts the
// connections open at once (the attempts hanging there).
type silentListener struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	open  int
	most  int // the most open at once since the last mark
	wg    sync.WaitGroup
}

func newSilentListener(t *testing.T) *silentListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &silentListener{ln: ln}
	l.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.mu.Lock()
			l.conns = append(l.conns, c)
			l.open++
			l.most = max(l.most, l.open)
			l.mu.Unlock()
			l.wg.Go(func() {
				_, _ = io.Copy(io.Discard, c)
				l.mu.Lock()
				l.open--
				l.mu.Unlock()
			})
		}
	})
	return l
}

func (l *silentListener) url(path string) string { return "http://" + l.ln.Addr().String() + path }

func (l *silentListener) accepted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// mark starts counting the most connections open at once anew, and returns the most so far.
func (l *silentListener) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	most := l.most
	l.most = l.open
	return most
}

// close ends every connection, so the attempts hanging on them fail at once.
func (l *silentListener) close() {
	_ = l.ln.Close()
	l.mu.Lock()
	for _, c := range l.conns {
		_ = c.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
}

func tenantCaller(apiKey, workspaceID string) context.Context {
	return authn.WithCaller(context.Background(), authn.Caller{APIKey: apiKey, WorkspaceID: workspaceID, Settings: authn.Settings{AdvancedWebhooks: true}})
}

// Issue 20, finding 2: tenant B has 20 endpoints that accept the connection and never answer
// and publishes 30 events; tenant A's test event to a healthy receiver (the real Standard
// Webhooks receiver) must still arrive within 2 s. Before the fair queues it waited for every
// worker B held (133 s in the run).
func TestATenantsDeadEndpointsDoNotStarveAnother(t *testing.T) {
	rcv := webhooktest.Start(t)
	dead := newSilentListener(t)
	defer dead.close()

	srv, err := New(NewMemoryStore(), WithLogger(slog.New(slog.DiscardHandler)), WithPrivateTargets(true))
	if err != nil {
		t.Fatal(err)
	}
	a, b := tenantCaller("keyA", "wsA"), tenantCaller("keyB", "wsB")
	for _, c := range []context.Context{a, b} {
		if _, err := srv.UpdateAdvancedWebhookConfig(c, &webhooksv1.UpdateAdvancedWebhookConfigRequest{IsEnabled: new(true)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		if _, err := srv.CreateEndpoint(b, &webhooksv1.CreateEndpointRequest{Url: dead.url(fmt.Sprintf("/b%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	ep, err := srv.CreateEndpoint(a, &webhooksv1.CreateEndpointRequest{Url: rcv.URL("/a")})
	if err != nil {
		t.Fatal(err)
	}
	sec, err := srv.GetEndpointSecret(a, &webhooksv1.GetEndpointSecretRequest{EndpointId: ep.GetData().GetId()})
	if err != nil {
		t.Fatal(err)
	}
	rcv.Configure(t, "/a", []string{sec.GetData().GetSecret()})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.RunDeliveries(ctx); close(done) }()
	defer func() { cancel(); dead.close(); <-done }()

	data, _ := structpb.NewStruct(map[string]any{"text": "hello"})
	for i := range 30 {
		ev := &eventsv1.Event{Id: fmt.Sprintf("b%d", i), Type: "comment.add", ApiKey: "keyB", WorkspaceId: "wsB", OrganizationId: "o",
			Timestamp: float64(time.Now().UnixMilli()), Data: data}
		if err := srv.HandleEvent(context.Background(), lifecycle.Domain(ev)); err != nil {
			t.Fatal(err)
		}
	}
	// B's deliveries are under way: its endpoints hold connections that will not answer.
	deadline := time.Now().Add(5 * time.Second)
	for dead.accepted() < 10 {
		if time.Now().After(deadline) {
			t.Fatalf("B's endpoints got %d connections in 5 s", dead.accepted())
		}
		time.Sleep(5 * time.Millisecond)
	}

	start := time.Now()
	if _, err := srv.SendTestEvent(a, &webhooksv1.SendTestEventRequest{EndpointId: ep.GetData().GetId()}); err != nil {
		t.Fatal(err)
	}
	got := rcv.WaitFor(t, "/a", 1, 2*time.Second)
	t.Logf("A's test event arrived after %v, with %d connections to B's endpoints", time.Since(start).Round(time.Millisecond), dead.accepted())
	if !got[0].Verified {
		t.Errorf("A's delivery did not verify: %s", got[0].VerifyError)
	}
}

// An endpoint whose attempts keep timing out gets one worker at a time (its circuit opens):
// after the first attempts time out, the process never has more than one in flight there.
func TestATimingOutEndpointGetsOneWorker(t *testing.T) {
	dead := newSilentListener(t)
	defer dead.close()
	srv, err := New(NewMemoryStore(), WithLogger(slog.New(slog.DiscardHandler)), WithPrivateTargets(true),
		func(s *Server) { s.timeout = 200 * time.Millisecond })
	if err != nil {
		t.Fatal(err)
	}
	a := tenantCaller("keyA", "wsA")
	if _, err := srv.UpdateAdvancedWebhookConfig(a, &webhooksv1.UpdateAdvancedWebhookConfigRequest{IsEnabled: new(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.CreateEndpoint(a, &webhooksv1.CreateEndpointRequest{Url: dead.url("/hang")}); err != nil {
		t.Fatal(err)
	}
	data, _ := structpb.NewStruct(map[string]any{"text": "hello"})
	for i := range 30 {
		ev := &eventsv1.Event{Id: fmt.Sprintf("a%d", i), Type: "comment.add", ApiKey: "keyA", WorkspaceId: "wsA", Timestamp: float64(time.Now().UnixMilli()), Data: data}
		if err := srv.HandleEvent(context.Background(), lifecycle.Domain(ev)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.RunDeliveries(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	// The first attempts go out 8 at once (the endpoint's cap) and time out together.
	deadline := time.Now().Add(5 * time.Second)
	for dead.accepted() < perEndpoint {
		if time.Now().After(deadline) {
			t.Fatalf("%d attempts started, want %d", dead.accepted(), perEndpoint)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if first := dead.mark(); first < perEndpoint {
		t.Fatalf("%d attempts at once at first, want %d", first, perEndpoint)
	}
	time.Sleep(500 * time.Millisecond) // they have timed out
	// From now on the engine has at most one attempt in flight there.
	most, start := 0, dead.accepted()
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		srv.engine.mu.Lock()
		for _, l := range srv.engine.endpoints {
			most = max(most, l.inflight)
		}
		srv.engine.mu.Unlock()
	}
	if most != 1 {
		t.Fatalf("%d attempts at once after the timeouts, want 1", most)
	}
	if n := dead.accepted() - start; n < 3 {
		t.Fatalf("%d attempts in a second after the timeouts: the endpoint got no worker", n)
	}
}

// Review of issue 20 (finding 3): an endpoint that answers 200 at once and then drips its body
// forever holds a worker until the attempt's deadline, as one that never answers does; its
// attempts must count as timeouts, so that its circuit opens too (one worker at a time).
// Before, the status line counted as an answer and closed the circuit on every attempt: the
// endpoint kept perEndpoint workers, each for the whole timeout.
func TestADrippingAnswerOpensTheCircuit(t *testing.T) {
	stop := make(chan struct{})
	drip := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		for {
			_, _ = w.Write([]byte("x"))
			w.(http.Flusher).Flush()
			select {
			case <-stop:
				return
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}))
	defer drip.Close()
	defer close(stop)
	srv, err := New(NewMemoryStore(), WithLogger(slog.New(slog.DiscardHandler)), WithPrivateTargets(true),
		func(s *Server) { s.timeout = 200 * time.Millisecond })
	if err != nil {
		t.Fatal(err)
	}
	a := tenantCaller("keyA", "wsA")
	if _, err := srv.UpdateAdvancedWebhookConfig(a, &webhooksv1.UpdateAdvancedWebhookConfigRequest{IsEnabled: new(true)}); err != nil {
		t.Fatal(err)
	}
	ep, err := srv.CreateEndpoint(a, &webhooksv1.CreateEndpointRequest{Url: drip.URL})
	if err != nil {
		t.Fatal(err)
	}
	id := ep.GetData().GetId()
	data, _ := structpb.NewStruct(map[string]any{"text": "hello"})
	for i := range 2 * perEndpoint {
		ev := &eventsv1.Event{Id: fmt.Sprintf("a%d", i), Type: "comment.add", ApiKey: "keyA", WorkspaceId: "wsA", Timestamp: float64(time.Now().UnixMilli()), Data: data}
		if err := srv.HandleEvent(context.Background(), lifecycle.Domain(ev)); err != nil {
			t.Fatal(err)
		}
	}
	// The first round sends perEndpoint at once; each is cut at the deadline, mid-answer.
	start := time.Now()
	srv.SendDue(context.Background())
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("a dripping answer held its worker %v, past the attempt's timeout", took)
	}
	srv.engine.mu.Lock()
	cap := endpointCap(srv.engine.endpoints[id], srv.clock.Now())
	srv.engine.mu.Unlock()
	if cap != 1 {
		t.Fatalf("after %d attempts cut mid-answer at the deadline the endpoint may have %d in flight, want 1 (circuit open)", perEndpoint, cap)
	}
	// The next round sends one.
	srv.SendDue(context.Background())
	att, err := srv.ListAttempts(a, &webhooksv1.ListAttemptsRequest{EndpointId: id})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(att.GetData().GetAttempts()); n != perEndpoint+1 {
		t.Fatalf("%d attempts after two rounds, want %d", n, perEndpoint+1)
	}
}

// Review of issue 20 (finding 3): the memory store hands the engine its stored endpoints, so
// every change must store a copy. Under -race (scripts/test runs it), a secret rotated and the
// endpoint updated and marked failing while its deliveries are in flight race with nothing,
// and the real Standard Webhooks receiver accepts every delivery: during the rotation each is
// signed by the old secret too, and once the rotation is stored, by the new one.
func TestEndpointChangesDuringDeliveries(t *testing.T) {
	rcv := webhooktest.Start(t)
	srv, err := New(NewMemoryStore(), WithLogger(slog.New(slog.DiscardHandler)), WithPrivateTargets(true))
	if err != nil {
		t.Fatal(err)
	}
	a := tenantCaller("keyA", "wsA")
	if _, err := srv.UpdateAdvancedWebhookConfig(a, &webhooksv1.UpdateAdvancedWebhookConfigRequest{IsEnabled: new(true)}); err != nil {
		t.Fatal(err)
	}
	ep, err := srv.CreateEndpoint(a, &webhooksv1.CreateEndpointRequest{Url: rcv.URL("/r")})
	if err != nil {
		t.Fatal(err)
	}
	id := ep.GetData().GetId()
	old, err := srv.GetEndpointSecret(a, &webhooksv1.GetEndpointSecretRequest{EndpointId: id})
	if err != nil {
		t.Fatal(err)
	}
	rcv.Configure(t, "/r", []string{old.GetData().GetSecret()})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.RunDeliveries(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	data, _ := structpb.NewStruct(map[string]any{"text": "hello"})
	publish := func(from, n int) {
		for i := from; i < from+n; i++ {
			ev := &eventsv1.Event{Id: fmt.Sprintf("e%d", i), Type: "comment.add", ApiKey: "keyA", WorkspaceId: "wsA", Timestamp: float64(time.Now().UnixMilli()), Data: data}
			if err := srv.HandleEvent(context.Background(), lifecycle.Domain(ev)); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	const events = 120
	var rotated string
	var wg sync.WaitGroup
	wg.Go(func() { publish(0, events) })
	wg.Go(func() {
		time.Sleep(40 * time.Millisecond)
		r, err := srv.RotateEndpointSecret(a, &webhooksv1.RotateEndpointSecretRequest{EndpointId: id})
		if err != nil {
			t.Error(err)
			return
		}
		rotated = r.GetData().GetSecret()
		// The same secrets stored again and again: each store is a change the engine must not see
		// half made.
		e, err := srv.store.Endpoint(context.Background(), "keyA", id)
		if err != nil {
			t.Error(err)
			return
		}
		for range 60 {
			if err := srv.store.SetSecrets(context.Background(), "keyA", id, e.Secrets, time.Now()); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(time.Millisecond)
		}
	})
	wg.Go(func() {
		url := rcv.URL("/r")
		for i := range 60 {
			desc := fmt.Sprintf("change %d", i)
			if _, err := srv.UpdateEndpoint(a, &webhooksv1.UpdateEndpointRequest{EndpointId: id, Description: &desc, Url: &url}); err != nil {
				t.Error(err)
				return
			}
			_ = srv.store.SetFailing(context.Background(), "keyA", id, time.Now())
			_ = srv.store.ClearFailing(context.Background(), "keyA", id)
			time.Sleep(time.Millisecond)
		}
	})
	wg.Wait()
	for _, d := range rcv.WaitFor(t, "/r", events, 20*time.Second) {
		if !d.Verified {
			t.Fatalf("delivery %s during the changes did not verify with the old secret: %s", d.ID, d.VerifyError)
		}
	}
	rcv.Configure(t, "/r", []string{rotated})
	publish(events, 10)
	for _, d := range rcv.WaitFor(t, "/r", events+10, 10*time.Second)[events:] {
		if !d.Verified {
			t.Fatalf("delivery %s after the rotation did not verify with the new secret: %s", d.ID, d.VerifyError)
		}
	}
}
