package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/collab/collab/internal/embedmongo"
	"github.com/collab/collab/internal/testkit/webhooktest"
	"github.com/collab/collab/internal/testkit/yjstest"
)

// realProc is a program of the test run as a real process (a collabd replica, the NATS
// server), so that it can be killed with SIGKILL and started again with the same arguments, on
// the same ports, as an orchestrator would restart it.
type realProc struct {
	name string
	bin  string
	args []string
	env  []string
	log  *lockedBuffer // its stdout and stderr, every run's

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// start runs the program; it is killed when the test ends.
func (p *realProc) start(t *testing.T) {
	t.Helper()
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	p.mu.Lock()
	first := p.cmd == nil
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
	if first {
		t.Cleanup(func() { p.kill() })
	}
}

// kill sends SIGKILL (no shutdown, nothing flushed) and waits for the process to be gone.
func (p *realProc) kill() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
}

// processEnv is the test's environment without COLLAB_ variables (a developer's shell must not
// configure the replicas), plus extra.
func processEnv(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "COLLAB_") {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}

// goBuild builds a main package into dir and returns the binary's path.
func goBuild(t *testing.T, dir, name, pkg string) string {
	t.Helper()
	bin := filepath.Join(dir, name)
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// replicaProc is one collabd replica: its process and the loopback addresses it always listens
// on.
type replicaProc struct {
	*realProc
	sys               *system // its HTTP API
	httpAddr, metrics string
	grpcAddr          string
}

// readyz answers the replica's /readyz (its metrics listener): the status and body, or an
// error while it does not listen.
func (r *replicaProc) readyz() (int, string, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + r.metrics + "/readyz")
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// waitReadyz waits until /readyz answers 200 and says the wake-up engine is unreachable
// (engineDown) or does not; it returns how long that took.
func (r *replicaProc) waitReadyz(t *testing.T, engineDown bool) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(60 * time.Second)
	var code int
	var body string
	var err error
	for {
		code, body, err = r.readyz()
		if err == nil && code == http.StatusOK {
			var v map[string]any
			if json.Unmarshal([]byte(body), &v) == nil && v["status"] == "ready" {
				_, says := v["wakeup"]
				if says == engineDown {
					return time.Since(start)
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s /readyz: %d %q (%v); want 200 ready, the wakeup field %s", r.name, code, body, err,
				map[bool]string{true: "present", false: "absent"}[engineDown])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// textOf is a client's text of the editor, as its Y.Doc reads it.
func textOf(t *testing.T, c *yjstest.Client) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	v, err := c.View(ctx, contentRoot)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := v.JSON["content"].(string)
	return s
}

// waitContains waits until the client's text holds marker and returns how long that took.
func waitContains(t *testing.T, c *yjstest.Client, who, marker string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		if strings.Contains(textOf(t, c), marker) {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("%s: no %q within %v", who, marker, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// postData posts {"data": data} to base+path from any goroutine: the status and the body, or
// the transport's error (a killed replica).
func postData(base, path string, headers map[string]string, data any) (int, []byte, error) {
	raw, err := json.Marshal(map[string]any{"data": data})
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(raw))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	c := http.Client{Timeout: 15 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// publishLoop publishes comment.add events until stop closes, one every interval, each
// through the next replica; a replica that does not answer (killed) gets the same event id
// again through the next one (a repeated id is a success that publishes nothing). It returns
// the ids acknowledged and the failures.
func publishLoop(bases []string, k map[string]string, interval time.Duration, stop <-chan struct{}) (acked []string, failures []string) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-stop:
			return acked, failures
		case <-tick.C:
		}
		id := fmt.Sprintf("k23-%03d", n)
		event := map[string]any{"id": id, "type": "comment.add", "organizationId": "o", "documentId": "d", "data": map[string]any{"n": n}}
		var last string
		for try := 0; try < 3*len(bases); try++ {
			code, body, err := postData(bases[(n+try)%len(bases)], "/v2/events/publish", k, event)
			if err == nil && code == http.StatusOK {
				acked, last = append(acked, id), ""
				break
			}
			last = fmt.Sprintf("%s: %d %s %v", id, code, body, err)
			time.Sleep(100 * time.Millisecond)
		}
		if last != "" {
			failures = append(failures, last)
		}
	}
}

// editLoop makes the client insert a marker of its own at the start of the text until stop
// closes, one every interval, and returns the markers; concurrent inserts at the same place
// keep each marker whole (Yjs orders them, never interleaves their characters).
func editLoop(c *yjstest.Client, who string, interval time.Duration, stop <-chan struct{}) (markers []string, err error) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-stop:
			return markers, nil
		case <-tick.C:
		}
		m := fmt.Sprintf("<%s%03d>", who, n)
		if err := c.Send(map[string]any{"cmd": "insertText", "root": "content", "index": 0, "text": m}); err != nil {
			return markers, err
		}
		markers = append(markers, m)
	}
}

// pageOf reads every item of a webhooks listing (messages, attempts) in pages of 250.
func pageOf(t *testing.T, s *system, k map[string]string, path, field string, query map[string]any) []map[string]any {
	t.Helper()
	var out []map[string]any
	q := map[string]any{"limit": 250}
	for k, v := range query {
		q[k] = v
	}
	for {
		d := s.call(path, k, q).data(t, "")
		for _, it := range d[field].([]any) {
			out = append(out, it.(map[string]any))
		}
		next, _ := d["iterator"].(string)
		if done, _ := d["done"].(bool); done || next == "" {
			return out
		}
		q["iterator"] = next
	}
}

// Three collabd replicas (the built binary, every service in each) over one MongoDB-wire
// server, waking each other through a real NATS server process; a y-websocket client edits on
// each replica and events are published through all of them, all the time. Mid-run the NATS
// server is SIGKILLed (edits still cross replicas, at the safety poll; /readyz says the engine
// is down), then one replica is SIGKILLed, the engine comes back on its port, and the replica
// comes back on its ports (its client reconnects by itself). Then every client holds every
// edit of every client, the three texts and the stored data are one, and every event reached
// the real Standard Webhooks receiver as exactly one message (one webhook-id; a delivery cut
// by the kill is sent again under the same id). Issue 23, "kill the engine and one replica
// mid-run".
func TestReplicasKillEngineAndReplica(t *testing.T) {
	t.Parallel()
	began := time.Now()
	dir := t.TempDir()
	db, err := embedmongo.Start(filepath.Join(dir, "db"), embedmongo.QuietLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Stop)
	rcv := webhooktest.Start(t)
	collabdBin := goBuild(t, dir, "collabd", "../cmd/collabd")
	natsBin := goBuild(t, dir, "nats-server", "github.com/nats-io/nats-server/v2")

	// The engine: a NATS server process with a token.
	natsAddr := freeAddr(t)
	natsHost, natsPort, _ := net.SplitHostPort(natsAddr)
	natsToken := randomToken(t)
	engine := &realProc{name: "nats-server", bin: natsBin, env: processEnv(), log: &lockedBuffer{},
		args: []string{"-a", natsHost, "-p", natsPort, "--auth", natsToken}}
	engine.start(t)
	waitListening(t, natsAddr)

	// The replicas: every service each, one store, one engine; the development workspace is
	// made by the first (the others find it in the store).
	var replicas []*replicaProc
	for i := range 3 {
		r := &replicaProc{httpAddr: freeAddr(t), grpcAddr: freeAddr(t), metrics: freeAddr(t)}
		r.realProc = &realProc{name: fmt.Sprintf("replica %d", i+1), bin: collabdBin, log: &lockedBuffer{},
			env: processEnv("COLLAB_INTERNAL_TOKEN="+testInternalToken, "COLLAB_WAKEUP_TOKEN="+natsToken),
			args: []string{"--mongo-uri=" + db.URI(), "--http-addr=" + r.httpAddr, "--grpc-addr=" + r.grpcAddr, "--metrics-addr=" + r.metrics,
				"--wakeup-url=nats://" + natsAddr, "--wakeup-safety-poll=2s", "--webhook-private-targets=allow", "--webhook-lease=20s",
				"--rate-limit=off", "--auth-cache-ttl=0s", "--log-level=warn", fmt.Sprintf("--dev-workspace=%v", i == 0)}}
		r.sys = &system{t: t, base: "http://" + r.httpAddr}
		replicas = append(replicas, r)
		r.start(t)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range []*realProc{engine, replicas[0].realProc, replicas[1].realProc, replicas[2].realProc} {
				t.Logf("%s's output:\n%s", p.name, tail(p.log.String(), 4000))
			}
		}
	})
	for _, r := range replicas {
		r.waitReadyz(t, false)
	}
	t.Logf("built and started in %v", time.Since(began))

	s := replicas[0].sys
	k := keyHeaders("dev-api-key", "dev-auth-token")
	s.call("/v2/organizations/documents/add", k, map[string]any{"organizationId": "o", "createOrganization": true,
		"documents": []any{map[string]any{"documentId": "d", "documentName": "D"}}}).data(t, "")
	s.call("/v2/crdt/add", k, map[string]any{"organizationId": "o", "documentId": "d", "editorId": "e", "data": "shared", "type": "text"}).data(t, "CRDT data added successfully.")
	s.call("/v2/workspace/advancedwebhookconfig/update", k, map[string]any{"isEnabled": true}).data(t, "")
	// Answers take a while, so that deliveries are in flight when a replica is killed (a few
	// at any time: events come 5 a second).
	slow := webhooktest.WithResponses(webhooktest.Response{Delay: 1500 * time.Millisecond})
	events := hook(t, s, k, rcv, "/events", map[string]any{"filterTypes": []string{"comment.add"}}, slow)
	// The crdt service's own events of the live edits (a few per room per replica).
	live := hook(t, s, k, rcv, "/live", map[string]any{"filterTypes": []string{"crdt.update_data"}}, slow)

	names := []string{"a", "b", "c"}
	clients := make([]*yjstest.Client, 3)
	for i, r := range replicas {
		clients[i] = yjstest.StartClient(t, r.sys.syncURL(), "o/d/e", s.syncToken(t, k, "u"+names[i], "editor"))
	}
	for i, c := range clients {
		next(t, c, "synced")
		waitContains(t, c, "client "+names[i], "shared", 30*time.Second)
	}

	// The run: every client edits, events go through every replica.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	markers := make([][]string, 3)
	editErrs := make([]error, 3)
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			markers[i], editErrs[i] = editLoop(c, names[i], 250*time.Millisecond, stop)
		}()
	}
	var acked, pubFailures []string
	bases := []string{replicas[0].sys.base, replicas[1].sys.base, replicas[2].sys.base}
	wg.Add(1)
	go func() {
		defer wg.Done()
		acked, pubFailures = publishLoop(bases, k, 200*time.Millisecond, stop)
	}()
	stopOnce := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(stopOnce)

	time.Sleep(2 * time.Second)
	d := waitContains(t, clients[1], "client b", mark(t, clients[0], "{up-a}"), 30*time.Second)
	t.Logf("engine up: a's edit reached b in %v", d)

	// The engine dies: the replicas say so, and edits still cross them (at the safety poll).
	engine.kill()
	t.Logf("engine killed; /readyz of replica 1 says so after %v", replicas[0].waitReadyz(t, true))
	replicas[1].waitReadyz(t, true)
	d = waitContains(t, clients[2], "client c", mark(t, clients[0], "{down-a}"), 30*time.Second)
	t.Logf("engine down: a's edit reached c in %v", d)
	d = waitContains(t, clients[0], "client a", mark(t, clients[2], "{down-c}"), 30*time.Second)
	t.Logf("engine down: c's edit reached a in %v", d)

	// Replica 3 dies, with its client's edits and its deliveries in flight.
	received := len(rcv.Received(t, "/events"))
	replicas[2].kill()
	killedAt := time.Now()
	t.Logf("replica 3 killed (%d deliveries of events received so far)", received)
	time.Sleep(time.Second)

	// The engine comes back on its port, then the replica on its own.
	engine.start(t)
	waitListening(t, natsAddr)
	for _, r := range replicas[:2] {
		t.Logf("engine back: %s's /readyz plain ready after %v", r.name, r.waitReadyz(t, false))
	}
	replicas[2].start(t)
	t.Logf("replica 3 back: /readyz plain ready after %v", replicas[2].waitReadyz(t, false))
	// y-websocket retries with a backoff of at most 2.5 s; the full suite's load may slow it.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	_, err = clients[2].Next(ctx, "synced")
	cancel()
	if err != nil {
		t.Fatalf("replica 3's client: %v", err)
	}
	t.Logf("replica 3's client synced again %v after the kill", time.Since(killedAt))
	d = waitContains(t, clients[0], "client a", mark(t, clients[2], "{back-c}"), 30*time.Second)
	t.Logf("all back: c's edit reached a in %v", d)
	time.Sleep(2 * time.Second)
	stopOnce()
	for i, err := range editErrs {
		if err != nil {
			t.Fatalf("client %s: %v", names[i], err)
		}
	}
	if len(pubFailures) > 0 {
		t.Fatalf("events not acknowledged by any replica: %v", pubFailures)
	}
	t.Logf("the run: %d, %d, %d edits; %d events", len(markers[0]), len(markers[1]), len(markers[2]), len(acked))

	checkConverged(t, s, k, clients, names, markers)
	checkDelivered(t, s, k, rcv, "/events", events, acked, killedAt)
	checkDelivered(t, s, k, rcv, "/live", live, nil, killedAt)
	logWakeupSeries(t, replicas)
	t.Logf("whole test: %v", time.Since(began))
}

// mark makes the client insert marker at the start of its text and returns it.
func mark(t *testing.T, c *yjstest.Client, marker string) string {
	t.Helper()
	if err := c.Send(map[string]any{"cmd": "insertText", "root": "content", "index": 0, "text": marker}); err != nil {
		t.Fatal(err)
	}
	return marker
}

// checkConverged waits until every client reads the same text, holding every marker of every
// client, and the stored data (Get CRDT Data) reads it too.
func checkConverged(t *testing.T, s *system, k map[string]string, clients []*yjstest.Client, names []string, markers [][]string) {
	t.Helper()
	start := time.Now()
	missing := func(text string) []string {
		var out []string
		for _, ms := range markers {
			for _, m := range ms {
				if !strings.Contains(text, m) {
					out = append(out, m)
				}
			}
		}
		return out
	}
	texts := make([]string, len(clients))
	for {
		for i, c := range clients {
			texts[i] = textOf(t, c)
		}
		same := !slices.ContainsFunc(texts, func(x string) bool { return x != texts[0] })
		if same && len(missing(texts[0])) == 0 {
			break
		}
		if time.Since(start) > 60*time.Second {
			for i, x := range texts {
				t.Errorf("client %s: %d bytes, missing %v", names[i], len(x), missing(x))
			}
			t.FailNow()
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("clients converged %v after the edits stopped (%d bytes)", time.Since(start), len(texts[0]))
	deadline := time.Now().Add(30 * time.Second)
	for s.restText(t, k) != texts[0] {
		if time.Now().After(deadline) {
			got := s.restText(t, k)
			t.Fatalf("stored data (%d bytes, missing %v) is not the clients' text (%d bytes)", len(got), missing(got), len(texts[0]))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkDelivered waits until every message of the endpoint (at the receiver's path) has a
// successful attempt recorded, after which no delivery of it is left to send; then it checks
// that the messages are one per event of want (nil: whatever events the messages are of), and
// that each reached the receiver, verified by standardwebhooks, under one webhook-id, and was
// answered. It logs the duplicates: deliveries cut by the kill, sent again under the same id.
func checkDelivered(t *testing.T, s *system, k map[string]string, rcv *webhooktest.Receiver, path, endpoint string, want []string, killedAt time.Time) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(90 * time.Second)
	var msgs []map[string]any
	var received []webhooktest.Delivery
	list := func() []map[string]any {
		return pageOf(t, s, k, "/v2/workspace/advancedwebhook/messages/get", "messages", map[string]any{"endpointId": endpoint})
	}
	for {
		msgs = list()
		ok := pageOf(t, s, k, "/v2/workspace/advancedwebhook/attempts/get", "attempts", map[string]any{"endpointId": endpoint, "status": "success"})
		done := map[string]bool{}
		for _, a := range ok {
			done[a["messageId"].(string)] = true
		}
		if len(msgs) >= len(want) && len(done) == len(msgs) {
			// The receiver's deliveries are of these messages unless one was made meanwhile
			// (the crdt service announces live edits a few seconds after them): read them,
			// then list again.
			received = rcv.Received(t, path)
			if len(list()) == len(msgs) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after 90 s: %d messages for %d events, %d with a successful attempt", path, len(msgs), len(want), len(done))
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("%s: every message sent %v after the edits stopped", path, time.Since(start))
	messageOf := map[string]string{} // event id → message id, as the store holds them
	for _, m := range msgs {
		ev, _ := m["payload"].(map[string]any)["data"].(map[string]any)["eventId"].(string)
		if prev, seen := messageOf[ev]; seen {
			t.Fatalf("%s: event %q is two messages, %s and %s", path, ev, prev, m["id"])
		}
		messageOf[ev] = m["id"].(string)
	}
	if want == nil {
		want = slices.Collect(maps.Keys(messageOf))
	}
	if len(messageOf) != len(want) {
		t.Fatalf("%s: %d messages for %d events", path, len(messageOf), len(want))
	}

	idOf := map[string]string{} // event id → webhook-id, as the receiver got them
	perID := map[string]int{}
	answered := map[string]bool{}
	cut := 0
	for _, dl := range received {
		p := payloadOf(t, dl) // verified by standardwebhooks, or the test fails
		ev, _ := p["data"].(map[string]any)["eventId"].(string)
		if prev, seen := idOf[ev]; seen && prev != dl.ID {
			t.Fatalf("%s: event %s came as two messages: %s and %s", path, ev, prev, dl.ID)
		}
		idOf[ev] = dl.ID
		perID[dl.ID]++
		switch {
		case dl.ClientClosed:
			cut++
		case dl.AnsweredStatus == http.StatusOK:
			answered[dl.ID] = true
		}
	}
	for _, ev := range want {
		switch id, ok := idOf[ev]; {
		case !ok:
			t.Errorf("%s: event %s never reached the receiver", path, ev)
		case id != messageOf[ev]:
			t.Errorf("%s: event %s came as %s, stored as message %q", path, ev, id, messageOf[ev])
		case !answered[id]:
			t.Errorf("%s: event %s (%s) was never answered: only cut deliveries", path, ev, id)
		}
	}
	if len(idOf) != len(want) || len(perID) != len(want) {
		t.Fatalf("%s: %d events, %d event ids and %d webhook-ids received", path, len(want), len(idOf), len(perID))
	}
	dups := 0
	for _, n := range perID {
		dups += n - 1
	}
	t.Logf("%s: %d events, %d distinct webhook-ids, %d duplicate deliveries (%d cut by the kill)", path, len(want), len(perID), dups, cut)
	for _, dl := range received {
		if perID[dl.ID] > 1 {
			at := func(ms int64) string { return time.UnixMilli(ms).Sub(killedAt).Round(time.Millisecond).String() }
			answer := "cut"
			if !dl.ClientClosed {
				answer = fmt.Sprintf("answered %d at %s", dl.AnsweredStatus, at(dl.AnsweredAtMs))
			}
			t.Logf("  %s: received at %s from the kill, %s", dl.ID, at(dl.ReceivedAtMs), answer)
		}
	}
}

// logWakeupSeries logs each replica's wake-up series (docs/operations.md, "Metrics"): what it
// published, received and dropped, and what its safety poll found (lost wake-ups). The third
// replica's count from its restart.
func logWakeupSeries(t *testing.T, replicas []*replicaProc) {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	for _, r := range replicas {
		resp, err := c.Get("http://" + r.metrics + "/metrics")
		if err != nil {
			t.Logf("%s /metrics: %v", r.name, err)
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Logf("%s /metrics: %v", r.name, err)
			continue
		}
		var series []string
		for line := range strings.Lines(string(b)) {
			if strings.HasPrefix(line, "collab_wakeup_") {
				series = append(series, strings.TrimSpace(strings.TrimPrefix(line, "collab_wakeup_")))
			}
		}
		t.Logf("%s: %s", r.name, strings.Join(series, ", "))
	}
}

// waitListening waits until addr takes TCP connections.
func waitListening(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not listen: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
