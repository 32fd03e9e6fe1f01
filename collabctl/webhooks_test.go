package collabctl

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode/utf8"
)

// tail prints an attempt made after it started (and, with --last 0, none made before), then ends
// cleanly when its context does, as on Ctrl-C.
func TestWebhookAttemptsTail(t *testing.T) {
	p := startProcess(t)
	var received atomic.Int32
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()
	ctx := context.Background()
	env := devEnv(p)
	run(ctx, env, `{"isEnabled": true}`, "call", "/v2/workspace/advancedwebhookconfig/update", "-f", "-").ok(t)
	ep := run(ctx, env, `{"url": "`+receiver.URL+`/hook"}`, "-o", "json", "call", "/v2/workspace/advancedwebhook/endpoints/create", "-f", "-").ok(t).json(t)
	endpoint, _ := ep["data"].(map[string]any)["id"].(string)
	sendTest := func() string {
		res := run(ctx, env, `{"endpointId": "`+endpoint+`"}`, "-o", "json", "call", "/v2/workspace/advancedwebhook/endpoints/test", "-f", "-").ok(t).json(t)
		return res["data"].(map[string]any)["messageId"].(string)
	}
	attempts := func(message string) int {
		_, got := post(t, p, "/v2/workspace/advancedwebhook/attempts/get", keyHeaders(p.Dev.APIKey, p.Dev.AuthToken), map[string]any{"messageId": message})
		list, _ := got["result"].(map[string]any)["data"].(map[string]any)["attempts"].([]any)
		return len(list)
	}
	before := sendTest()
	eventually(t, "the first test event's attempt", func() bool { return attempts(before) == 1 })

	// The tail reaches the gateway through a proxy that says when its first poll was answered,
	// so the second event is certainly made after the tail started.
	target, _ := url.Parse("http://" + p.HTTPAddr)
	var firstPoll sync.Once
	polled := make(chan struct{})
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(r *http.Response) error {
		if r.Request.URL.Path == "/v2/workspace/advancedwebhook/attempts/get" && r.StatusCode == http.StatusOK {
			firstPoll.Do(func() { close(polled) })
		}
		return nil
	}
	front := httptest.NewServer(proxy)
	defer front.Close()
	tailEnv := devEnv(p)
	tailEnv["COLLABCTL_URL"] = front.URL

	tailCtx, stop := context.WithCancel(ctx)
	defer stop()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(tailCtx, []string{"-o", "json", "webhooks", "attempts", "tail", "--endpoint", endpoint, "--interval", "100ms", "--last", "0"},
			strings.NewReader(""), &out, &errOut, func(k string) string { return tailEnv[k] })
	}()
	select {
	case <-polled:
	case code := <-done:
		t.Fatalf("tail ended at once: exit %d: %s", code, errOut.String())
	}
	after := sendTest()
	eventually(t, "tail printing the attempt of the event sent after it started", func() bool { return strings.Contains(out.String(), after) })
	stop()
	if code := <-done; code != ExitOK {
		t.Fatalf("tail ended with %d: %s", code, errOut.String())
	}
	var lines []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var a map[string]any
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		lines = append(lines, a)
	}
	if len(lines) != 1 || lines[0]["messageId"] != after || lines[0]["endpointId"] != endpoint || lines[0]["status"] != "success" || lines[0]["responseStatusCode"] != float64(204) {
		t.Fatalf("tail printed %v (want only the attempt of %s)", lines, after)
	}
	if received.Load() != 2 {
		t.Fatalf("the receiver got %d deliveries", received.Load())
	}

	// With --last, the earlier attempts come first, as a table, oldest first.
	lastCtx, stopLast := context.WithCancel(ctx)
	var table syncBuffer
	go func() {
		done <- Main(lastCtx, []string{"webhooks", "attempts", "tail", "--endpoint", endpoint, "--last", "5"},
			strings.NewReader(""), &table, &errOut, func(k string) string { return env[k] })
	}()
	eventually(t, "tail --last printing both attempts", func() bool { return strings.Contains(table.String(), after) })
	stopLast()
	if code := <-done; code != ExitOK {
		t.Fatalf("tail --last ended with %d", code)
	}
	rows := strings.Split(strings.TrimSpace(table.String()), "\n")
	if len(rows) != 3 || !strings.HasPrefix(rows[0], "TIME") || !strings.Contains(rows[1], before) || !strings.Contains(rows[2], after) || !strings.Contains(rows[2], "success") {
		t.Fatalf("tail --last table:\n%s", table.String())
	}

	if o := run(ctx, env, "", "webhooks", "attempts", "tail"); o.code != ExitUsage || !strings.Contains(o.stderr, "--endpoint or --message") {
		t.Fatalf("tail without a filter: %+v", o)
	}
	// A refusal of the API ends the tail with it.
	if o := run(ctx, env, "", "webhooks", "attempts", "tail", "--endpoint", endpoint, "--status", "lost"); o.code != ExitFailed || !strings.Contains(o.stderr, "status must be one of success, pending, failed.") {
		t.Fatalf("tail with a bad status: %+v", o)
	}
}

// A poll that fails after the tail started (the gateway answering 503 for a moment) is reported
// and retried; a tail whose first poll fails (nothing listening) ends with exit 1.
func TestWebhookAttemptsTailRetries(t *testing.T) {
	p := startProcess(t)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer receiver.Close()
	ctx := context.Background()
	env := devEnv(p)
	run(ctx, env, `{"isEnabled": true}`, "call", "/v2/workspace/advancedwebhookconfig/update", "-f", "-").ok(t)
	ep := run(ctx, env, `{"url": "`+receiver.URL+`"}`, "-o", "json", "call", "/v2/workspace/advancedwebhook/endpoints/create", "-f", "-").ok(t).json(t)
	endpoint, _ := ep["data"].(map[string]any)["id"].(string)

	// The second poll gets a 503 from the front; the others pass to the gateway.
	target, _ := url.Parse("http://" + p.HTTPAddr)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var polls atomic.Int32
	refused := make(chan struct{})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if polls.Add(1) == 2 {
			http.Error(w, "upstream restarting", http.StatusServiceUnavailable)
			close(refused)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	tailEnv := devEnv(p)
	tailEnv["COLLABCTL_URL"] = front.URL
	tailCtx, stop := context.WithCancel(ctx)
	defer stop()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(tailCtx, []string{"-o", "json", "webhooks", "attempts", "tail", "--endpoint", endpoint, "--interval", "100ms"},
			strings.NewReader(""), &out, &errOut, func(k string) string { return tailEnv[k] })
	}()
	select {
	case <-refused:
	case code := <-done:
		t.Fatalf("tail ended: exit %d: %s", code, errOut.String())
	}
	res := run(ctx, env, `{"endpointId": "`+endpoint+`"}`, "-o", "json", "call", "/v2/workspace/advancedwebhook/endpoints/test", "-f", "-").ok(t).json(t)
	message := res["data"].(map[string]any)["messageId"].(string)
	eventually(t, "the tail printing an attempt after a failed poll", func() bool { return strings.Contains(out.String(), message) })
	stop()
	if code := <-done; code != ExitOK {
		t.Fatalf("tail ended with %d", code)
	}
	if !strings.Contains(errOut.String(), "HTTP 503 (text/plain; charset=utf-8), not the API's JSON envelope") || !strings.Contains(errOut.String(), "trying again") {
		t.Fatalf("stderr: %s", errOut.String())
	}

	tailEnv["COLLABCTL_URL"] = "http://" + closedAddr(t)
	if o := run(ctx, tailEnv, "", "webhooks", "attempts", "tail", "--endpoint", endpoint); o.code != ExitFailed || !strings.Contains(o.stderr, "connection refused") {
		t.Fatalf("tail of nothing: %+v", o)
	}
}

// More attempts than a page: --last reads back as many as asked, and attempts made by
// concurrent deliveries while the tail runs are each printed once, none missed. A receiver's
// long answer is cut by characters in the table.
func TestWebhookAttemptsTailPaging(t *testing.T) {
	p := startProcess(t)
	answer := strings.Repeat("é", 100)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, answer) }))
	defer receiver.Close()
	ctx := context.Background()
	env := devEnv(p)
	run(ctx, env, `{"isEnabled": true}`, "call", "/v2/workspace/advancedwebhookconfig/update", "-f", "-").ok(t)
	ep := run(ctx, env, `{"url": "`+receiver.URL+`"}`, "-o", "json", "call", "/v2/workspace/advancedwebhook/endpoints/create", "-f", "-").ok(t).json(t)
	endpoint, _ := ep["data"].(map[string]any)["id"].(string)
	// send makes n test events from several goroutines at once and returns their message ids.
	send := func(n int) []string {
		var mu sync.Mutex
		var ids []string
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := w; i < n; i += 4 {
					_, got := post(t, p, "/v2/workspace/advancedwebhook/endpoints/test", keyHeaders(p.Dev.APIKey, p.Dev.AuthToken), map[string]any{"endpointId": endpoint})
					id, _ := got["result"].(map[string]any)["data"].(map[string]any)["messageId"].(string)
					mu.Lock()
					ids = append(ids, id)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return ids
	}
	countAttempts := func() int {
		n, iterator := 0, ""
		for {
			data := map[string]any{"endpointId": endpoint, "limit": 250}
			if iterator != "" {
				data["iterator"] = iterator
			}
			_, got := post(t, p, "/v2/workspace/advancedwebhook/attempts/get", keyHeaders(p.Dev.APIKey, p.Dev.AuthToken), data)
			page, _ := got["result"].(map[string]any)["data"].(map[string]any)
			list, _ := page["attempts"].([]any)
			n += len(list)
			if page["done"] == true {
				return n
			}
			iterator, _ = page["iterator"].(string)
		}
	}
	before := send(260)
	eventually(t, "260 attempts", func() bool { return countAttempts() == 260 })

	tailCtx, stop := context.WithCancel(ctx)
	defer stop()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(tailCtx, []string{"-o", "json", "webhooks", "attempts", "tail", "--endpoint", endpoint, "--interval", "100ms", "--last", "300"},
			strings.NewReader(""), &out, &errOut, func(k string) string { return env[k] })
	}()
	during := send(60)
	all := append(before, during...)
	printed := func() map[string]int {
		counts := map[string]int{}
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var a map[string]any
			if err := json.Unmarshal([]byte(line), &a); err == nil {
				id, _ := a["messageId"].(string)
				counts[id]++
			}
		}
		return counts
	}
	eventually(t, "tail printing all 320 attempts", func() bool { return len(printed()) >= len(all) })
	stop()
	if code := <-done; code != ExitOK {
		t.Fatalf("tail ended with %d: %s", code, errOut.String())
	}
	counts := printed()
	for _, id := range all {
		if counts[id] != 1 {
			t.Errorf("message %s printed %d times", id, counts[id])
		}
	}
	if len(counts) != len(all) {
		t.Errorf("%d messages printed, %d sent", len(counts), len(all))
	}

	tableCtx, stopTable := context.WithCancel(ctx)
	defer stopTable()
	var table syncBuffer
	go func() {
		done <- Main(tableCtx, []string{"webhooks", "attempts", "tail", "--endpoint", endpoint, "--last", "1"},
			strings.NewReader(""), &table, &errOut, func(k string) string { return env[k] })
	}()
	eventually(t, "the table's row", func() bool { return strings.Count(table.String(), "\n") == 2 })
	stopTable()
	if code := <-done; code != ExitOK {
		t.Fatalf("tail ended with %d", code)
	}
	if !utf8.ValidString(table.String()) || !strings.HasSuffix(table.String(), "  "+strings.Repeat("é", 77)+"...\n") {
		t.Fatalf("table:\n%q", table.String())
	}
}
