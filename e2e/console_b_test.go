package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/tracing"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/collab/collab/internal/testkit/webhooktest"
)

// The console's webhooks, comments, CRDT and memory pages (docs/console.md), driven in
// headless Chromium against a running system, the data made through the API.

// goTo shows the console's page of hash and waits for sel.
func goTo(t *testing.T, ctx context.Context, hash, sel string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void]("location.hash = "+jsString(hash)), chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
		t.Fatalf("%s: %v", hash, err)
	}
}

// seeText waits until the text of the first element matching sel contains want, and returns
// that text.
func seeText(t *testing.T, ctx context.Context, sel, want string) string {
	t.Helper()
	expr := fmt.Sprintf(`(() => { const e = document.querySelector(%s); return e && e.textContent.includes(%s) ? e.textContent : ''; })()`, jsString(sel), jsString(want))
	got, err := chromedp.Run(ctx, chromedp.Poll[string](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second)))
	if err != nil {
		now, _ := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%s) || document.querySelector('main')).textContent`, jsString(sel))))
		t.Fatalf("waiting for %q in %s: %v; it shows %q", want, sel, err, now)
	}
	return got
}

// submitForm sets the form's fields (by name) and submits it.
func submitForm(t *testing.T, ctx context.Context, formSel string, values map[string]string) {
	t.Helper()
	var steps []chromedp.Action[chromedp.Void]
	for name, v := range values {
		sel := jsString(formSel + ` [name="` + name + `"]`)
		steps = append(steps, chromedp.Evaluate[chromedp.Void](`document.querySelector(`+sel+`).value = `+jsString(v)))
	}
	steps = append(steps, chromedp.Click(chromedp.CSS(formSel+` button[type="submit"]`)))
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", formSel, err)
	}
}

func evalJS[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// TestConsoleBWebhooks: an endpoint is created and edited through the console (a refused URL
// and rate limit show the API's error; an emptied field is cleared), its secret revealed and
// rotated, test events reach a real Standard Webhooks receiver signed with the secret the page
// showed, their attempts appear with status and response code, the chart counts them, and the
// endpoint is disabled, enabled and deleted.
func TestConsoleBWebhooks(t *testing.T) {
	rcv := webhooktest.Start(t)
	s := realClockSystem(t)
	k := s.devKey()
	s.call("/v2/workspace/settings/update", s.devWorkspace(), map[string]any{"advancedWebhooks": true}).ok(t)
	ctx := consoleTab(t, s, "/console/")
	pageSignInDev(t, ctx)

	goTo(t, ctx, "#/webhooks", `form[aria-label="Advanced webhook configuration"]`)
	pageClick(t, ctx, `form[aria-label="Advanced webhook configuration"] [name="isEnabled"]`)
	pageClick(t, ctx, `form[aria-label="Advanced webhook configuration"] button[type="submit"]`)
	seeText(t, ctx, `form[aria-label="Advanced webhook configuration"] .form-result`, "Saved: deliveries are on.")

	// A URL the API refuses: its error, as it answered it.
	submitForm(t, ctx, "#create-endpoint", map[string]string{"url": "not a url"})
	seeText(t, ctx, "#create-endpoint .error", "400 INVALID_ARGUMENT: url must be a valid http(s) URL.")
	submitForm(t, ctx, "#create-endpoint", map[string]string{"url": rcv.URL("/console"), "description": "The console's test",
		"filterTypes": "test.event, ping.check", "rateLimit": "10"})
	created := seeText(t, ctx, "#create-endpoint .form-result", "Created ep_")
	id := strings.TrimSuffix(strings.TrimPrefix(created, "Created "), ".")
	seeText(t, ctx, "table.grid tbody", rcv.URL("/console"))
	checkPage(t, ctx, "webhooks")

	// The endpoint's page: edit (an emptied field is cleared with null; a refused value shows
	// the API's error).
	pageClick(t, ctx, `a[href="#/webhooks/`+id+`"]`)
	seeText(t, ctx, "#endpoint-details", "The console's test")
	submitForm(t, ctx, "#edit-endpoint", map[string]string{"rateLimit": "0"})
	seeText(t, ctx, "#edit-endpoint .error", "400 INVALID_ARGUMENT: rateLimit must be a positive integer (at most 10000).")
	submitForm(t, ctx, "#edit-endpoint", map[string]string{"description": "", "rateLimit": "", "channels": "general"})
	seeText(t, ctx, "#endpoint-details", "Channelsgeneral")
	ep := s.call("/v2/workspace/advancedwebhook/endpoints/get", k, map[string]any{}).data(t, "")["endpoints"].([]any)[0].(map[string]any)
	if ep["description"] != nil || ep["rateLimit"] != nil || fmt.Sprint(ep["channels"]) != "[general]" || fmt.Sprint(ep["filterTypes"]) != "[test.event ping.check]" {
		t.Fatalf("the endpoint after the edit: %v", ep)
	}
	if d := seeText(t, ctx, "#endpoint-details", "Rate limitnone"); !strings.Contains(d, "Description(none)") {
		t.Fatalf("details after clearing: %q", d)
	}

	// Reveal: the secret shown is the one that signs (the receiver verifies with it alone).
	pageClick(t, ctx, "#reveal-secret")
	secret := seeText(t, ctx, "#endpoint-secret", "whsec_")
	if want := s.call("/v2/workspace/advancedwebhook/endpoints/secret/get", k, map[string]any{"endpointId": id}).data(t, "")["secret"]; secret != want {
		t.Fatalf("the page shows secret %q, the API %q", secret, want)
	}
	rcv.Configure(t, "/console", []string{secret})
	pageClick(t, ctx, "#test-event button[type=submit]")
	seeText(t, ctx, "#test-event .form-result", "attempt success, response 200")
	row := seeText(t, ctx, "#attempts tbody tr", "success")
	if !strings.Contains(row, "200") {
		t.Fatalf("the attempt's row: %q", row)
	}
	if d := rcv.WaitFor(t, "/console", 1, 10*time.Second)[0]; !d.Verified || payloadOf(t, d)["event"] != "test.event" {
		t.Fatalf("the test delivery: %+v", d)
	}

	// Rotate: the new secret shown signs the next delivery.
	pageClick(t, ctx, "#rotate-secret")
	seeText(t, ctx, "#endpoint-secret", "whsec_")
	fresh := evalJS[string](t, ctx, `document.querySelector('#endpoint-secret').textContent`)
	if fresh == secret || !strings.HasPrefix(fresh, "whsec_") {
		t.Fatalf("rotated secret %q (was %q)", fresh, secret)
	}
	rcv.Configure(t, "/console", []string{fresh})
	submitForm(t, ctx, "#test-event", map[string]string{"eventType": "ping.check"})
	seeText(t, ctx, "#test-event .form-result", "attempt success, response 200")
	if d := rcv.WaitFor(t, "/console", 2, 10*time.Second)[1]; !d.Verified || payloadOf(t, d)["event"] != "ping.check" {
		t.Fatalf("the delivery after the rotation: %+v", d)
	}

	// The chart: the two successful attempts, named and described for assistive technology.
	seeText(t, ctx, "#attempts-chart figcaption", "2 attempts in the last 24 hours: 2 succeeded")
	chart := evalJS[map[string]any](t, ctx, `(() => { const s = document.querySelector('#attempts-chart svg');
		const [t, d] = s.getAttribute('aria-labelledby').split(' ').map((id) => document.getElementById(id).textContent);
		return {role: s.getAttribute('role'), title: t, desc: d, bars: s.querySelectorAll('rect.bar-success').length,
			fill: getComputedStyle(s.querySelector('rect.bar-success')).fill}; })()`)
	if chart["role"] != "img" || chart["title"] != "Webhook attempts per hour by outcome (UTC)" || !strings.Contains(chart["desc"].(string), "2 succeeded") ||
		chart["bars"].(float64) < 1 || chart["fill"] != "rgb(26, 127, 55)" { // one bar, two if the hour turned between the events
		t.Fatalf("the chart: %v", chart)
	}
	pageClick(t, ctx, `section[aria-label="Signing secret"] .form-result button`) // hide it
	checkPage(t, ctx, "webhook-attempts")

	// Messages: both, newest first; a resend is queued.
	seeText(t, ctx, "section[aria-label=Messages] tbody", "ping.check")
	pageClick(t, ctx, `section[aria-label=Messages] tbody tr:first-child button[aria-label^="Resend"]`)
	seeText(t, ctx, "section[aria-label=Messages] .form-result", "queued again")

	// Disable: a test event is refused with the API's words; enable again.
	pageClick(t, ctx, "#toggle-endpoint")
	seeText(t, ctx, "#endpoint-details", "Statedisabled")
	pageClick(t, ctx, "#test-event button[type=submit]")
	seeText(t, ctx, "#test-event .error", "400 FAILED_PRECONDITION: The endpoint is disabled: enable it to send it a test event.")
	pageClick(t, ctx, "#toggle-endpoint")
	seeText(t, ctx, "#endpoint-details", "Stateenabled")

	// Delete, confirmed on the page.
	pageClick(t, ctx, "#delete-endpoint")
	pageClick(t, ctx, "#confirm-delete")
	seeText(t, ctx, "main", "Endpoint "+id+" deleted.")
	if n := len(s.call("/v2/workspace/advancedwebhook/endpoints/get", k, map[string]any{}).data(t, "")["endpoints"].([]any)); n != 0 {
		t.Fatalf("%d endpoints after the delete", n)
	}
}

// TestConsoleBPages: the comments, CRDT and memory pages on one system and browser, and a
// list of 10,000 threads paged through without blocking the page.
func TestConsoleBPages(t *testing.T) {
	s := newSystem(t)
	k := s.devKey()
	ctx := consoleTab(t, s, "/console/")
	pageSignInDev(t, ctx)

	t.Run("comments", func(t *testing.T) {
		s.call("/v2/commentannotations/add", k, map[string]any{"organizationId": "o", "documentId": "d", "createOrganization": true, "createDocument": true,
			"commentAnnotations": []any{
				map[string]any{"annotationId": "t1", "from": map[string]any{"userId": "u1", "name": "Ann"}, "priority": map[string]any{"id": "P1", "name": "High"},
					"commentData": []any{
						map[string]any{"commentText": "The <img src=x onerror=alert(1)> caption is too light", "from": map[string]any{"userId": "u1", "name": "Ann"}},
						map[string]any{"commentHtml": "<p>Agreed, <b>fix</b> it <script>alert(2)</script></p>", "from": map[string]any{"userId": "u2", "name": "Bo"}},
					}},
				map[string]any{"annotationId": "t2", "from": map[string]any{"userId": "u2", "name": "Bo"}, "status": map[string]any{"id": "DONE", "name": "Done", "type": "terminal"},
					"commentData": []any{map[string]any{"commentText": "Looks good", "from": map[string]any{"userId": "u2", "name": "Bo"}}}},
			}}).data(t, "Comment annotation(s) added successfully.")
		goTo(t, ctx, "#/comments/o/d", "#threads tbody tr")
		rows := seeText(t, ctx, "#threads tbody", "t2")
		if !strings.Contains(rows, "t1OpenHighAnn") || !strings.Contains(rows, "t2Done") {
			t.Fatalf("threads: %q", rows)
		}
		pageClick(t, ctx, `button[aria-label="Comments of t1"]`)
		text := seeText(t, ctx, "#thread-comments ol", "Bo")
		checkPage(t, ctx, "comments")
		// Stored content is text on the page: the markup shows as markup, nothing of it runs or
		// becomes an element.
		if !strings.Contains(text, "The <img src=x onerror=alert(1)> caption is too light") || !strings.Contains(text, "<b>fix</b>") {
			t.Fatalf("comments: %q", text)
		}
		if n := evalJS[float64](t, ctx, `document.querySelectorAll('#thread-comments img, #thread-comments b, #thread-comments script').length`); n != 0 {
			t.Fatalf("%v elements made from stored content", n)
		}
		// Without a document id: the API's error.
		submitForm(t, ctx, "#comments-query", map[string]string{"documentId": ""})
		seeText(t, ctx, "#threads .error", "400 INVALID_ARGUMENT: documentId or documentIds is required.")
	})

	t.Run("crdt", func(t *testing.T) {
		s.docs("o", "", "c")
		at := func(m map[string]any) map[string]any { m["organizationId"], m["documentId"] = "o", "c"; return m }
		s.call("/v2/crdt/add", k, at(map[string]any{"editorId": "notes", "data": "Hello <b>there</b>", "type": "text"})).data(t, "CRDT data added successfully.")
		s.call("/v2/crdt/add", k, at(map[string]any{"editorId": "board", "type": "map", "contentKey": "default",
			"data": map[string]any{"title": "Plan", "items": []any{"a", map[string]any{"done": true}}, "n": 2}})).data(t, "CRDT data added successfully.")
		goTo(t, ctx, "#/crdt/o/c", "#crdt-editors tbody tr")
		if rows := seeText(t, ctx, "#crdt-editors tbody", "notes"); !regexp.MustCompile(`^board.*Zmap\d+notes.*Ztext or xml\d+$`).MatchString(rows) {
			t.Fatalf("editors: %q", rows)
		}
		pageClick(t, ctx, `#crdt-editors a[href="#/crdt/o/c/board"]`)
		seeText(t, ctx, "#crdt-content", "Content of board")
		var got any
		if err := json.Unmarshal([]byte(evalJS[string](t, ctx, `document.querySelector('#crdt-content pre').textContent`)), &got); err != nil {
			t.Fatal(err)
		}
		if want := `map[items:[a map[done:true]] n:2 title:Plan]`; fmt.Sprint(got) != want {
			t.Fatalf("content %v, want %s", got, want)
		}
		checkPage(t, ctx, "crdt")
		submitForm(t, ctx, "#crdt-editor", map[string]string{"editorId": "nobody"})
		seeText(t, ctx, "#crdt-editor .error", "404 NOT_FOUND: No CRDT data found for this editor ID.")

		// An editor's content read while another document's editors are asked for: its answer,
		// arriving last, does not show under the other document.
		s.docs("o", "", "empty")
		held, release := holdRequests(t, ctx, "*/v2/crdt/get", fetch.RequestStageRequest)
		submitForm(t, ctx, "#crdt-editor", map[string]string{"editorId": "board"})
		board := nextHeld(t, held, "the editor's content")
		submitForm(t, ctx, "#crdt-document", map[string]string{"documentId": "empty"})
		editors := nextHeld(t, held, "the other document's editors")
		release(editors)
		seeText(t, ctx, "#crdt-editors", "This document has no CRDT data.")
		release(board)
		time.Sleep(300 * time.Millisecond) // the board's answer arrives, and is dropped
		if _, err := chromedp.Call(ctx, fetch.Disable, cdp.Empty{}); err != nil {
			t.Fatal(err)
		}
		if shown := evalJS[string](t, ctx, `document.querySelector('#crdt-content').textContent + document.querySelector('#crdt-editor .form-result').textContent`); shown != "" {
			t.Fatalf("the other document shows %q", shown)
		}
	})

	t.Run("memory", func(t *testing.T) {
		s.call("/v2/memory/judgments/add", k, map[string]any{"organizationId": "o", "judgments": []any{
			map[string]any{"recordId": "contrast", "decision": "reject", "reasoning": "The grey caption has very low contrast on the light photo.",
				"confidence": 0.8, "actionUser": map[string]any{"userId": "u1", "name": "Ada"}, "judgeType": "agent",
				"agent": map[string]any{"agentId": "a1", "agentName": "Accessibility", "agentVersion": 2}},
			map[string]any{"recordId": "invoice", "decision": "approve", "reasoning": "The invoice total matches the purchase order."},
			map[string]any{"recordId": "logo", "decision": "approve", "reasoning": "Logo placement follows the brand guidelines."},
		}}).data(t, "Judgment(s) recorded successfully.")
		for i := range 3 {
			x := s.call("/v2/agents/execution/start", k, map[string]any{"agentId": "a1", "agentName": "Accessibility", "trigger": fmt.Sprint("run ", i)}).data(t, "")
			s.call("/v2/agents/execution/complete", k, map[string]any{"executionId": x["id"], "status": "passed", "message": "ok"}).data(t, "")
		}
		const query = "text is hard to read against the background"
		want := s.call("/v2/memory/search", k, map[string]any{"query": query, "organizationId": "o"}).ok(t)["results"].([]any)
		goTo(t, ctx, "#/memory", "#memory-search")
		submitForm(t, ctx, "#memory-search", map[string]string{"query": query, "organizationId": "o"})
		seeText(t, ctx, "#memory-summary", "3 of 3 judgments in scope")
		for i, r := range want {
			r := r.(map[string]any)
			row := evalJS[string](t, ctx, fmt.Sprintf(`document.querySelectorAll('#memory-results tbody tr')[%d].textContent`, i))
			score := strconv.FormatFloat(r["similarity"].(float64), 'f', 4, 64)
			if !strings.HasPrefix(row, score) || !strings.HasSuffix(row, r["recordId"].(string)) {
				t.Fatalf("result %d: %q, want score %s and %s", i, row, score, r["recordId"])
			}
		}
		if top := evalJS[string](t, ctx, `document.querySelector('#memory-results tbody tr').textContent`); !strings.Contains(top, "contrast") || !strings.Contains(top, "Accessibility v2") {
			t.Fatalf("best result: %q", top)
		}
		checkPage(t, ctx, "memory")
		submitForm(t, ctx, "#memory-search", map[string]string{"limit": "51"})
		seeText(t, ctx, "#memory-search .error", "400 INVALID_ARGUMENT: limit must be between 1 and 50.")

		// Executions, two a page.
		submitForm(t, ctx, "#executions-query", map[string]string{"pageSize": "2"})
		seeText(t, ctx, "#executions .pager > p", "2 rows")
		pagePress(t, ctx, "#executions button.more")
		seeText(t, ctx, "#executions .pager > p", "3 rows, the end")
		if rows := evalJS[string](t, ctx, `[...document.querySelectorAll('#executions tbody')].map((b) => b.textContent).join('')`); strings.Count(rows, "Accessibility v0passed") != 3 {
			t.Fatalf("executions: %q", rows)
		}
	})

	t.Run("ten thousand threads", func(t *testing.T) {
		addThreads(t, s, "o", "big", 10000)
		goTo(t, ctx, "#/comments", "#comments-query")
		wall, cpu, parts := mainThreadTasks(t, ctx, func() {
			submitForm(t, ctx, "#comments-query", map[string]string{"organizationId": "o", "documentId": "big", "pageSize": "1000"})
			for n := 1000; n < 10000; n += 1000 {
				seeText(t, ctx, "#threads .pager > p", fmt.Sprintf("%d rows", n))
				// By keyboard: the button is reachable and works without a pointer.
				if err := chromedp.Do(ctx, chromedp.Focus(chromedp.CSS("#threads button.more")), chromedp.KeyEvent(kb.Enter)); err != nil {
					t.Fatal(err)
				}
			}
			seeText(t, ctx, "#threads .pager > p", "10000 rows, the end")
		})
		t.Logf("10,000 threads in 10 pages: the page's longest main-thread task took %v of CPU (%v of wall time, load included): %s", cpu, wall, parts)
		if cpu > 200*time.Millisecond {
			t.Errorf("the page's main thread was busy %v at once (at most 200 ms): %s", cpu, parts)
		}
		if n := evalJS[float64](t, ctx, `new Set([...document.querySelectorAll('#threads tbody tr td:first-child')].map((td) => td.textContent)).size`); n != 10000 {
			t.Fatalf("%v distinct threads listed, want 10000", n)
		}
	})
}

// addThreads adds n threads of one comment each to a document, 30 a request, 4 requests at a
// time.
func addThreads(t *testing.T, s *system, org, doc string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	next := make(chan int)
	for range 4 {
		wg.Go(func() {
			for first := range next {
				var items []any
				for i := first; i < min(first+30, n); i++ {
					items = append(items, map[string]any{"annotationId": fmt.Sprintf("big-%05d", i), "from": map[string]any{"userId": "u1", "name": "Ann"},
						"commentData": []any{map[string]any{"commentText": fmt.Sprintf("Thread %d", i), "from": map[string]any{"userId": "u1", "name": "Ann"}}}})
				}
				st, body, err := s.concurrentCall("/v2/commentannotations/add", s.devKey(), map[string]any{"organizationId": org, "documentId": doc,
					"createOrganization": true, "createDocument": true, "commentAnnotations": items})
				if err == nil && st != 200 {
					err = fmt.Errorf("status %d: %v", st, body)
				}
				if err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for first := 0; first < n; first += 30 {
		next <- first
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

// mainThreadTasks traces the browser while run runs and returns the longest task of a page's
// main thread (Chromium's RunTask on CrRendererMain: script, style, layout and paint alike,
// garbage collection included): its wall time, its thread (CPU) time, and the steps that took
// most of it. The CPU time is what the page costs whatever the machine's load; the wall time
// also holds the time the thread waited for a CPU.
func mainThreadTasks(t *testing.T, ctx context.Context, run func()) (wall, cpu time.Duration, parts string) {
	t.Helper()
	type event struct {
		Name string  `json:"name"`
		Ph   string  `json:"ph"`
		Pid  int     `json:"pid"`
		Tid  int     `json:"tid"`
		Ts   float64 `json:"ts"`   // µs
		Dur  float64 `json:"dur"`  // µs
		Tdur float64 `json:"tdur"` // µs of thread time
		Args struct {
			Name string `json:"name"`
		} `json:"args"`
	}
	var mu sync.Mutex
	var events []event
	done := make(chan struct{})
	var once sync.Once
	if err := chromedp.Listen(ctx, func(ev any) {
		switch e := ev.(type) {
		case *tracing.EventDataCollected:
			mu.Lock()
			defer mu.Unlock()
			for _, v := range e.Value {
				var x event
				if json.Unmarshal(v, &x) == nil && (x.Ph == "X" || x.Ph == "M") {
					events = append(events, x)
				}
			}
		case *tracing.EventTracingComplete:
			once.Do(func() { close(done) })
		}
	}); err != nil {
		t.Fatal(err)
	}
	cfg := &tracing.TraceConfig{IncludedCategories: []string{"toplevel", "__metadata", "devtools.timeline"}, ExcludedCategories: []string{"*"}}
	if _, err := chromedp.Call(ctx, tracing.Start, tracing.StartParams{TransferMode: tracing.StartTransferModeReportEvents, TraceConfig: cfg}); err != nil {
		t.Fatal(err)
	}
	run()
	if _, err := chromedp.Call(ctx, tracing.End, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the trace did not complete")
	}
	mu.Lock()
	defer mu.Unlock()
	main := map[[2]int]bool{}
	for _, e := range events {
		if e.Ph == "M" && e.Name == "thread_name" && e.Args.Name == "CrRendererMain" {
			main[[2]int{e.Pid, e.Tid}] = true
		}
	}
	var top *event
	for i, e := range events {
		if e.Ph == "X" && main[[2]int{e.Pid, e.Tid}] && e.Name == "ThreadControllerImpl::RunTask" && (top == nil || e.Tdur > top.Tdur) {
			top = &events[i]
		}
	}
	if top == nil {
		t.Fatalf("the trace holds no task of a page's main thread (%d events, %d main threads)", len(events), len(main))
	}
	var steps []string
	for _, e := range events {
		if e.Ph == "X" && e.Pid == top.Pid && e.Tid == top.Tid && e.Ts >= top.Ts && e.Ts < top.Ts+top.Dur && !strings.HasSuffix(e.Name, "RunTask") && e.Tdur >= 5000 {
			steps = append(steps, fmt.Sprintf("%s %.0f ms", e.Name, e.Tdur/1000))
		}
	}
	return time.Duration(top.Dur) * time.Microsecond, time.Duration(top.Tdur) * time.Microsecond, strings.Join(steps, ", ")
}
