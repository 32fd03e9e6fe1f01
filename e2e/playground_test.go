package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"

	"github.com/collab/collab/internal/testkit/browsertest"
)

// within is how soon what one window does must show in another (issue 25: "within 1 s").
const within = time.Second

// playgroundTab opens the playground in a new browser context of the browser of parent (its own
// sessionStorage, cookies and BroadcastChannel: another person's browser, as far as the page
// can tell), collecting its errors and saving a screenshot if the test fails.
//
// The page's errors fail the test, but for the browser's own report of an answer with one of
// the HTTP statuses refused ("the server responded with a status of 400"): a test of what the
// page shows of a refusal expects the refusal.
func playgroundTab(t *testing.T, parent context.Context, s *system, name string, refused ...int) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(parent, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatal(err)
	}
	failOnPageErrors(t, ctx, name, func(e string) bool {
		return slices.ContainsFunc(refused, func(status int) bool {
			return strings.HasPrefix(e, "network: Failed to load resource: the server responded with a status of "+strconv.Itoa(status)+" ")
		})
	})
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800), chromedp.Navigate(s.base+"/console/playground")); err != nil {
		t.Fatal(err)
	}
	return ctx
}

// openAs fills the playground's form (organization o, document d, editor e) for user with
// role and waits until the editor is in sync with the server.
func openAs(t *testing.T, ctx context.Context, user, name, role string) {
	t.Helper()
	fill(t, ctx, "o", "d", user, name, role)
	waitFor(t, ctx, `document.getElementById('pg-status')?.textContent.startsWith('Live: in sync')`, 10*time.Second, user+"'s editor in sync")
}

// fill fills the playground's form (editor e) and submits it.
func fill(t *testing.T, ctx context.Context, org, doc, user, name, role string) {
	t.Helper()
	f := `form[aria-label="Open a document"] `
	err := chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.CSS(f+`[name=org]`)),
		chromedp.SetValue(chromedp.CSS(f+`[name=org]`), org),
		chromedp.SetValue(chromedp.CSS(f+`[name=doc]`), doc),
		chromedp.SetValue(chromedp.CSS(f+`[name=editor]`), "e"),
		chromedp.SetValue(chromedp.CSS(f+`[name=user]`), user),
		chromedp.SetValue(chromedp.CSS(f+`[name=name]`), name),
		chromedp.SetValue(chromedp.CSS(f+`[name=role]`), role),
		chromedp.Click(chromedp.CSS(f+`button[type=submit]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
}

// axeClean requires the page to have no serious or critical accessibility violation.
func axeClean(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	found, err := browsertest.Axe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range found {
		t.Errorf("%s: accessibility: %s", what, v)
	}
}

// waitFor waits until the page's expression is true, at most d, and fails naming what.
func waitFor(t *testing.T, ctx context.Context, expr string, d time.Duration, what string) {
	t.Helper()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(10*time.Millisecond), chromedp.WithPollingTimeout(d)))
	if err != nil {
		t.Fatalf("%s, within %v: %v", what, d, err)
	}
}

func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// typeAtEnd types text at the end of the editor's text, as a person does: the caret put there,
// then key by key.
func typeAtEnd(t *testing.T, ctx context.Context, text string) {
	t.Helper()
	if err := chromedp.Do(ctx, typing(text, false)); err != nil {
		t.Fatal(err)
	}
}

// typing puts the caret at the start or the end of the editor's text, then types text.
func typing(text string, atStart bool) chromedp.Action[chromedp.Void] {
	at := "t.value.length"
	if atStart {
		at = "0"
	}
	return chromedp.Steps(
		chromedp.Focus(chromedp.ID("pg-text")),
		chromedp.Evaluate[chromedp.Void](`(t => { t.setSelectionRange(`+at+`, `+at+`); })(document.getElementById('pg-text'))`),
		chromedp.SendKeys(chromedp.ID("pg-text"), text),
	)
}

func editorText(t *testing.T, ctx context.Context) string {
	t.Helper()
	return eval[string](t, ctx, `document.getElementById('pg-text').value`)
}

// holdRequests pauses the requests of ctx's tab whose URL matches pattern (a Fetch domain
// pattern, * any characters) at stage (before they are sent, or once their answer is in): each
// one paused is given on the channel, and release(id) lets it go on. Releasing every paused
// request and turning the interception off is left to the caller.
func holdRequests(t *testing.T, ctx context.Context, pattern string, stage fetch.RequestStage) (<-chan fetch.RequestID, func(fetch.RequestID)) {
	t.Helper()
	paused := make(chan fetch.RequestID, 16)
	listen, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	if err := chromedp.Listen(listen, func(ev any) {
		if e, ok := ev.(*fetch.EventRequestPaused); ok {
			select {
			case paused <- e.RequestID:
			default:
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: pattern, RequestStage: stage}}}); err != nil {
		t.Fatal(err)
	}
	release := func(id fetch.RequestID) {
		t.Helper()
		if _, err := chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: id}); err != nil {
			t.Fatal(err)
		}
	}
	return paused, release
}

// nextHeld waits up to 5 s for the next request holdRequests paused.
func nextHeld(t *testing.T, paused <-chan fetch.RequestID, what string) fetch.RequestID {
	t.Helper()
	select {
	case id := <-paused:
		return id
	case <-time.After(5 * time.Second):
		t.Fatalf("no request held: %s", what)
		return ""
	}
}

// TestPlayground: two people in two browsers (separate browser contexts, so separate
// sessionStorage and no BroadcastChannel between them) open one document of the playground;
// what each types shows in the other's window within 1 s, also when both type at once (the
// windows converge); each sees the other in "Here now" and the other's caret; a comment added
// in one window, and a reply in the other, show in the other within 1 s (the comments' live
// stream); a viewer cannot type, and an edit forced past the read-only textarea changes neither
// the others' text nor the server's (Get CRDT Data). Collabd runs on the real clock: the
// tokens' expiry is checked against it.
func TestPlayground(t *testing.T) {
	s := realClockSystem(t, "--dev-workspace=true")
	browser := browsertest.Start(t, 4*time.Minute)
	alice := playgroundTab(t, browser, s, "alice")
	bob := playgroundTab(t, browser, s, "bob")
	// Without credentials in the tab: the way to the console's sign-in, and the development
	// workspace as one click.
	if err := chromedp.Do(alice, chromedp.WaitVisible(chromedp.ID("dev-sign-in"))); err != nil {
		t.Fatal(err)
	}
	axeClean(t, alice, "the sign-in prompt")
	for _, ctx := range []context.Context{alice, bob} {
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("dev-sign-in")), chromedp.WaitVisible(chromedp.CSS(`form[aria-label="Open a document"]`))); err != nil {
			t.Fatal(err)
		}
	}
	checkPage(t, alice, "playground-open")
	openAs(t, alice, "alice", "Alice", "editor")
	openAs(t, bob, "bob", "Bob", "editor")

	t.Run("each sees the other's typing", func(t *testing.T) {
		typeAtEnd(t, alice, "Hello from Alice.")
		waitFor(t, bob, `document.getElementById('pg-text').value === 'Hello from Alice.'`, within, "Bob sees Alice's text")
		typeAtEnd(t, bob, " And Bob.")
		waitFor(t, alice, `document.getElementById('pg-text').value === 'Hello from Alice. And Bob.'`, within, "Alice sees Bob's text")
	})

	t.Run("typing at once converges", func(t *testing.T) {
		// Alice at the start, Bob at the end, at the same time.
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, w := range []struct {
			ctx     context.Context
			text    string
			atStart bool
		}{{alice, "[alice 1 2 3] ", true}, {bob, " [bob 4 5 6]", false}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = chromedp.Do(w.ctx, typing(w.text, w.atStart))
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		const same = `document.getElementById('pg-text').value === '[alice 1 2 3] Hello from Alice. And Bob. [bob 4 5 6]'`
		waitFor(t, alice, same, within, "Alice's window holds both")
		waitFor(t, bob, same, within, "Bob's window holds both")
	})

	t.Run("presence", func(t *testing.T) {
		waitFor(t, alice, `document.getElementById('pg-people').textContent.includes('Bob, editor')`, within, "Alice sees Bob here")
		waitFor(t, bob, `document.getElementById('pg-people').textContent.includes('Bob (you), editor')`, within, "Bob's list holds himself")
		waitFor(t, bob, `document.getElementById('pg-people').textContent.includes('Alice, editor')`, within, "Bob sees Alice here")
		// Bob's caret, at the end where he typed, drawn in Alice's window with his name.
		waitFor(t, alice, `[...document.querySelectorAll('.pg-caret-name')].some(n => n.textContent === 'Bob')`, within, "Alice sees Bob's caret")
	})

	t.Run("comments", func(t *testing.T) {
		err := chromedp.Do(alice, chromedp.SendKeys(chromedp.ID("pg-new"), "Is the first line right?"),
			chromedp.Click(chromedp.CSS(`form.pg-new button[type=submit]`)))
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, alice, `document.getElementById('pg-threads').textContent.includes('Alice: Is the first line right?')`, 5*time.Second, "Alice's thread in her list")
		waitFor(t, bob, `document.getElementById('pg-threads').textContent.includes('Alice: Is the first line right?')`, within, "Bob sees Alice's thread")
		err = chromedp.Do(bob, chromedp.SendKeys(chromedp.CSS(`.pg-thread input[name=reply]`), "It is."),
			chromedp.Click(chromedp.CSS(`.pg-thread form.pg-reply button`)))
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, alice, `document.getElementById('pg-threads').textContent.includes('Bob: It is.')`, within, "Alice sees Bob's reply")
		checkPage(t, alice, "playground")
	})

	carol := playgroundTab(t, browser, s, "carol", 400)
	if err := chromedp.Do(carol, chromedp.Click(chromedp.ID("dev-sign-in"))); err != nil {
		t.Fatal(err)
	}

	t.Run("refusals show the API's answer", func(t *testing.T) {
		// An organization id past the id rules: the API's error, with its status.
		fill(t, carol, strings.Repeat("o", 300), "d", "carol", "Carol", "editor")
		waitFor(t, carol, `(document.querySelector('form[aria-label="Open a document"] .error')?.textContent || '').startsWith('400 INVALID_ARGUMENT: ')`,
			5*time.Second, "the form shows the refusal")
		// A restricted document and no grant: Get Permissions' reason, and live sync's refusal
		// (its close code and reason).
		k := s.devKey()
		s.call("/v2/organizations/documents/add", k, map[string]any{"organizationId": "o", "documents": []any{map[string]any{"documentId": "secret", "documentName": "Secret"}}}).data(t, "")
		s.call("/v1/organizations/documents/access/update", k, map[string]any{"organizationId": "o", "documentIds": []string{"secret"}, "accessType": "restricted"}).data(t, "")
		fill(t, carol, "o", "secret", "carol", "Carol", "")
		waitFor(t, carol, `(document.getElementById('pg-status')?.textContent || '').startsWith('Live sync closed by the server: 4403 You do not have access to this document.')`,
			5*time.Second, "live sync's refusal shown")
		if got := eval[string](t, carol, `document.getElementById('pg-role').textContent`); !strings.Contains(got, "User does not have access to document") {
			t.Errorf("the role line reads %q", got)
		}
		if err := chromedp.Do(carol, chromedp.Click(chromedp.CSS(`.pg-bar button`)), chromedp.WaitVisible(chromedp.CSS(`form[aria-label="Open a document"]`))); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a viewer cannot type", func(t *testing.T) {
		before := editorText(t, alice)
		openAs(t, carol, "carol", "Carol", "viewer")
		waitFor(t, carol, fmt.Sprintf(`document.getElementById('pg-text').value === %q`, before), within, "Carol reads the text")
		if !eval[bool](t, carol, `document.getElementById('pg-text').readOnly`) {
			t.Fatal("the viewer's textarea is not read-only")
		}
		typeAtEnd(t, carol, "Carol was here.")
		if got := editorText(t, carol); got != before {
			t.Fatalf("the viewer typed into the text: %q", got)
		}
		// Past the read-only textarea (as a page script or a modified page could): the edit
		// reaches the viewer's own copy and the server, which drops it.
		eval[bool](t, carol, `document.getElementById('pg-text').readOnly = false`)
		typeAtEnd(t, carol, " Forced by Carol.")
		if got := editorText(t, carol); !strings.Contains(got, "Forced by Carol.") {
			t.Fatalf("the forced edit did not reach the viewer's own copy: %q", got)
		}
		// What Alice types after it still reaches Carol: her connection is alive and in order.
		typeAtEnd(t, alice, " Still Alice.")
		waitFor(t, carol, `document.getElementById('pg-text').value.includes('Still Alice.')`, within, "Carol sees Alice's later edit")
		time.Sleep(within) // as long as an edit is given to arrive
		want := before + " Still Alice."
		for _, w := range []struct {
			who string
			ctx context.Context
		}{{"alice", alice}, {"bob", bob}} {
			if got := editorText(t, w.ctx); got != want {
				t.Errorf("%s's text %q, want %q", w.who, got, want)
			}
		}
		rows := s.crdtRows(t, s.devKey(), map[string]any{"organizationId": "o", "documentId": "d", "editorId": "e"})
		if got := rows["e"]["data"]; got != want {
			t.Errorf("the server's text %q, want %q", got, want)
		}
	})

	t.Run("threads page", func(t *testing.T) {
		// 55 threads on another document: the sidebar shows the first 50, "More threads" the rest.
		k := s.devKey()
		s.call("/v2/organizations/documents/add", k, map[string]any{"organizationId": "o", "documents": []any{map[string]any{"documentId": "many", "documentName": "Many"}}}).data(t, "")
		for n := 0; n < 55; n += 30 {
			var anns []any
			for i := n; i < min(n+30, 55); i++ {
				anns = append(anns, map[string]any{"annotationId": fmt.Sprintf("t%02d", i), "from": map[string]any{"userId": "u1"},
					"commentData": []any{map[string]any{"commentText": fmt.Sprintf("thread %02d", i), "from": map[string]any{"userId": "u1"}}}})
			}
			s.call("/v2/commentannotations/add", k, map[string]any{"organizationId": "o", "documentId": "many", "commentAnnotations": anns}).data(t, "")
		}
		if err := chromedp.Do(carol, chromedp.Click(chromedp.CSS(`.pg-bar button`))); err != nil {
			t.Fatal(err)
		}
		fill(t, carol, "o", "many", "carol", "Carol", "viewer")
		waitFor(t, carol, `document.querySelectorAll('.pg-thread').length === 50 && !document.querySelector('.pg-side button.more').hidden`, 5*time.Second, "the first page of threads")
		if err := chromedp.Do(carol, chromedp.Click(chromedp.CSS(`.pg-side button.more`))); err != nil {
			t.Fatal(err)
		}
		waitFor(t, carol, `document.querySelectorAll('.pg-thread').length === 55 && document.querySelector('.pg-side button.more').hidden`, 5*time.Second, "every thread, once")
	})

	// The sidebar reads the threads and follows the stream from where it starts: a change made
	// between the two must show, and a change the stream brings while the read is on its way
	// must not be undone by the read's older answer.
	t.Run("comments made while the sidebar opens", func(t *testing.T) {
		dave := playgroundTab(t, browser, s, "dave")
		if err := chromedp.Do(dave, chromedp.Click(chromedp.ID("dev-sign-in")), chromedp.WaitVisible(chromedp.CSS(`form[aria-label="Open a document"]`))); err != nil {
			t.Fatal(err)
		}
		k := s.devKey()
		thread := func(id, text string) map[string]any {
			return map[string]any{"annotationId": id, "from": map[string]any{"userId": "erin", "name": "Erin"},
				"commentData": []any{map[string]any{"commentText": text, "from": map[string]any{"userId": "erin", "name": "Erin"}}}}
		}
		shows := func(id string) string {
			return fmt.Sprintf(`!!document.querySelector('.pg-thread[data-annotation=%q]')`, id)
		}

		// The stream connects slowly: its request is held until a thread was added.
		held, release := holdRequests(t, dave, "*/v2/commentannotations/stream/*", fetch.RequestStageRequest)
		fill(t, dave, "o", "race", "dave", "Dave", "editor")
		streamReq := nextHeld(t, held, "the comments stream")
		time.Sleep(500 * time.Millisecond) // a read the page made meanwhile has its answer
		s.call("/v2/commentannotations/add", k, map[string]any{"organizationId": "o", "documentId": "race",
			"commentAnnotations": []any{thread("early", "Said while the stream connected.")}}).data(t, "")
		release(streamReq)
		waitFor(t, dave, shows("early"), 2*time.Second, "the thread added while the stream connected")

		// The first read's answer is held until the stream brought the thread's deletion.
		if _, err := chromedp.Call(dave, fetch.Disable, cdp.Empty{}); err != nil {
			t.Fatal(err)
		}
		if err := chromedp.Do(dave, chromedp.Click(chromedp.CSS(`.pg-bar button`))); err != nil {
			t.Fatal(err)
		}
		held, release = holdRequests(t, dave, "*/v2/commentannotations/get", fetch.RequestStageResponse)
		fill(t, dave, "o", "race", "dave", "Dave", "editor")
		getReq := nextHeld(t, held, "the first read of the threads")
		waitFor(t, dave, `(document.querySelector('.pg-stream')?.textContent || '').startsWith('Live:')`, 5*time.Second, "the stream open")
		s.call("/v2/commentannotations/delete", k, map[string]any{"organizationId": "o", "documentId": "race", "annotationIds": []string{"early"}}).data(t, "")
		time.Sleep(time.Second) // the deletion's event reaches the page meanwhile
		release(getReq)
		waitFor(t, dave, `!document.querySelector('.pg-side button.more').disabled`, 2*time.Second, "the read's answer taken")
		if eval[bool](t, dave, shows("early")) {
			t.Fatal("the deleted thread shows: the read's older answer undid the stream's deletion")
		}
		if _, err := chromedp.Call(dave, fetch.Disable, cdp.Empty{}); err != nil {
			t.Fatal(err)
		}
	})

	// What others wrote (comments, their HTML, names, presence) is text in the playground too:
	// the sidebar shows a comment's text, or the text of its sanitised HTML, never its markup as
	// elements; a name in the awareness state of another window is text (docs/console.md,
	// "Playground"; docs/comments.md, "Content safety").
	t.Run("stored markup shows as text", func(t *testing.T) {
		dialogs := browsertest.AcceptDialogs(alice)
		from := func(name string) map[string]any { return map[string]any{"userId": "mal", "name": name} }
		s.call("/v2/commentannotations/add", s.devKey(), map[string]any{"organizationId": "o", "documentId": "d",
			"commentAnnotations": []any{map[string]any{"annotationId": "markup", "from": from(active[0]), "commentData": []any{
				map[string]any{"commentText": active[1] + " " + active[3], "from": from(active[2])},
				map[string]any{"commentHtml": "<p>Made <b>bold</b>, " + active[0] + "</p>", "from": from(active[0])},
			}}}}).data(t, "")
		eve := playgroundTab(t, browser, s, "eve")
		if err := chromedp.Do(eve, chromedp.Click(chromedp.ID("dev-sign-in")), chromedp.WaitVisible(chromedp.CSS(`form[aria-label="Open a document"]`))); err != nil {
			t.Fatal(err)
		}
		openAs(t, eve, "eve", active[2], "viewer")
		if err := chromedp.Do(eve, chromedp.Focus(chromedp.ID("pg-text"))); err != nil { // publishes her caret
			t.Fatal(err)
		}
		thread := `document.querySelector('.pg-thread[data-annotation="markup"]')?.textContent || ''`
		waitFor(t, alice, "("+thread+").includes("+jsString(active[2]+": "+active[1]+" "+active[3])+")", 5*time.Second, "the comment's text as text")
		waitFor(t, alice, "("+thread+").includes('Made bold, ')", within, "the HTML comment's text")
		waitFor(t, alice, `document.getElementById('pg-people').textContent.includes(`+jsString(active[2]+", viewer")+`)`, 5*time.Second, "Eve's name as text in Here now")
		waitFor(t, alice, `[...document.querySelectorAll('.pg-caret-name')].some(n => n.textContent === `+jsString(active[2])+`)`, 5*time.Second, "Eve's caret named as text")
		for _, w := range []struct {
			name string
			ctx  context.Context
		}{{"alice", alice}, {"eve", eve}} {
			if n := eval[float64](t, w.ctx, `document.querySelectorAll('main b, main p p').length`); n != 0 {
				t.Errorf("%s: %v elements made of a comment's HTML", w.name, n)
			}
		}
		checkInert(t, alice, dialogs)
		checkInert(t, eve, browsertest.AcceptDialogs(eve))
	})

	t.Run("a document deleted while open ends the editing", func(t *testing.T) {
		if err := chromedp.Do(carol, chromedp.Click(chromedp.CSS(`.pg-bar button`))); err != nil {
			t.Fatal(err)
		}
		fill(t, carol, "o", "doomed", "carol", "Carol", "editor")
		waitFor(t, carol, `document.getElementById('pg-status')?.textContent.startsWith('Live: in sync')`, 10*time.Second, "Carol's editor in sync")
		typeAtEnd(t, carol, "Soon gone.")
		waitFor(t, carol, `!document.getElementById('pg-text').readOnly`, within, "Carol, an editor, can type")
		s.call("/v2/organizations/documents/delete", s.devKey(), map[string]any{"organizationId": "o", "documentIds": []string{"doomed"}}).data(t, "")
		waitFor(t, carol, `(document.getElementById('pg-status')?.textContent || '').startsWith('Live sync closed by the server: 4410 ')`, 5*time.Second, "live sync's close shown")
		// Live sync will not reconnect: what she types would go nowhere, so she cannot type.
		if !eval[bool](t, carol, `document.getElementById('pg-text').readOnly`) {
			t.Fatal("the textarea still takes typing after live sync ended")
		}
		if got := eval[string](t, carol, `document.getElementById('pg-role').textContent`); !strings.Contains(got, "no longer sent") {
			t.Errorf("the role line reads %q", got)
		}
		axeClean(t, carol, "the editor after live sync ended")
	})
}
