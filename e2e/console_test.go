package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/collab/collab/internal/testkit/browsertest"
)

// apiRefusal is how Chromium logs an answer of the API with a 4xx status: the page shows the
// API's error (the tests check what it shows), so such an entry is not a fault of the page.
// Every other error (a script's, a Content-Security-Policy violation, a console file that did
// not load, a 5xx) still fails the test.
var apiRefusal = regexp.MustCompile(`^network: Failed to load resource: the server responded with a status of 4\d\d \([^)]*\) http://[^/]+/v[12]/`)

// consoleTab opens a headless Chromium tab on the console of s, collecting the page's errors
// (checked at the test's end: a script error or a Content-Security-Policy violation fails it)
// and saving a screenshot if the test fails.
func consoleTab(t *testing.T, s *system, path string) context.Context {
	t.Helper()
	ctx := browsertest.Start(t, 3*time.Minute)
	failOnPageErrors(t, ctx, "console", apiRefusal.MatchString)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800), chromedp.Navigate(s.base+path)); err != nil {
		t.Fatal(err)
	}
	return ctx
}

// failOnPageErrors collects the errors the pages of ctx's tab report and fails t at its end on
// any that expected does not take; a failing t also saves a screenshot of the tab named name.
func failOnPageErrors(t *testing.T, ctx context.Context, name string, expected func(string) bool) {
	t.Helper()
	errs := browsertest.WatchConsole(ctx)
	browsertest.ScreenshotOnFailure(t, ctx, name)
	t.Cleanup(func() {
		var faults []string
		for _, e := range errs.Errors() {
			if !expected(e) {
				faults = append(faults, e)
			}
		}
		if len(faults) != 0 {
			t.Errorf("%s: the page reported errors:\n%s", name, strings.Join(faults, "\n"))
		}
	})
}

// checkPage requires the page now shown in ctx's tab to have no serious or critical
// accessibility violation (axe-core, e2e/axe) and, with COLLAB_UPDATE_DOCS=1, writes its
// screenshot to docs/console/<name>.png, the picture docs/console.md shows.
func checkPage(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	found, err := browsertest.Axe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range found {
		t.Errorf("%s: accessibility: %s", name, v)
	}
	if os.Getenv("COLLAB_UPDATE_DOCS") == "1" {
		if err := browsertest.Screenshot(ctx, filepath.Join("..", "docs", "console", name+".png")); err != nil {
			t.Fatal(err)
		}
	}
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// pageText returns the text the first element matching sel shows ("" when there is none).
func pageText(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%s) || {}).innerText || ''`, jsString(sel))))
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// pageWait waits up to 10 s for the first element matching sel to show want, and fails the
// test with what it shows otherwise.
func pageWait(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	expr := fmt.Sprintf(`(() => { const e = document.querySelector(%s); return !!e && e.innerText.includes(%s); })()`, jsString(sel), jsString(want))
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(10*time.Second), chromedp.WithPollingInterval(20*time.Millisecond)))
	if err != nil {
		t.Fatalf("waiting for %q in %s: %v; it shows:\n%s", want, sel, err, pageText(t, ctx, sel))
	}
}

// pageForm selects the console's form of that accessible name (ui.js form's label).
func pageForm(label string) string { return fmt.Sprintf(`form[aria-label=%s]`, jsString(label)) }

// pageSubmit fills the fields of the form labelled label (values by field name: strings, or
// booleans for checkboxes) and clicks its submit button.
func pageSubmit(t *testing.T, ctx context.Context, label string, values map[string]any) {
	t.Helper()
	v, err := json.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	fill := fmt.Sprintf(`(() => {
		const f = document.querySelector(%s);
		if (!f) return 'no form';
		for (const [k, x] of Object.entries(%s)) {
			const c = f.elements.namedItem(k);
			if (!c) return 'no field ' + k;
			if (c.type === 'checkbox') c.checked = x; else c.value = x;
		}
		return '';
	})()`, jsString(pageForm(label)), v)
	problem, err := chromedp.Run(ctx, chromedp.Evaluate[string](fill))
	if err == nil && problem != "" {
		err = fmt.Errorf("%s", problem)
	}
	if err == nil {
		err = chromedp.Do(ctx, chromedp.Click(chromedp.CSS(pageForm(label)+` button[type="submit"]`)))
	}
	if err != nil {
		t.Fatalf("form %q: %v", label, err)
	}
}

// pageClick clicks the first element matching sel.
func pageClick(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
		t.Fatalf("clicking %s: %v", sel, err)
	}
}

// pagePress presses the button matching sel from the keyboard (focus, then Enter). A pointer's
// click is aimed where the button was when it was scrolled into view, and misses it when a
// block of rows that came into view with the scroll took its real height (the pager's
// content-visibility) and moved the button.
func pagePress(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Focus(chromedp.CSS(sel)), chromedp.KeyEvent(kb.Enter)); err != nil {
		t.Fatalf("pressing %s: %v", sel, err)
	}
}

// pageSignInDev signs in with the development workspace's one click and waits for the pages.
func pageSignInDev(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("dev-sign-in")), chromedp.WaitVisible(chromedp.CSS(`nav a[href="#/workspace"]`))); err != nil {
		t.Fatal(err)
	}
}

// pageOpen shows the console's page at hash and waits for its heading.
func pageOpen(t *testing.T, ctx context.Context, hash, heading string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](`location.hash = `+jsString(hash)+`; 0`)); err != nil {
		t.Fatal(err)
	}
	pageWait(t, ctx, "main h1", heading)
}

// TestConsoleDevSignIn: on a local run the sign-in page offers the development workspace, one
// pageClick signs in, and the workspace page shows the workspace as the API answers it.
func TestConsoleDevSignIn(t *testing.T) {
	s := newSystem(t)
	ctx := consoleTab(t, s, "/console/")
	checkPage(t, ctx, "sign-in")
	pageSignInDev(t, ctx)
	pageWait(t, ctx, `section[aria-label="Details"] table`, s.proc.Dev.WorkspaceID)
	pageWait(t, ctx, `section[aria-label="Details"] table`, "dev@localhost")
}

// focusPath describes the focused element: its tag, and its accessible text (a link's or
// button's text, a control's label).
const focusPath = `(() => {
	const e = document.activeElement;
	if (!e || e === document.body) return 'body';
	const label = e.labels && e.labels.length ? e.labels[0].innerText : (e.getAttribute('aria-label') || e.innerText);
	return e.tagName.toLowerCase() + ':' + label.trim();
})()`

// tabOrder presses Tab n times from the top of the page and returns what each press focused.
func tabOrder(t *testing.T, ctx context.Context, n int) []string {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](`document.activeElement && document.activeElement.blur(); window.getSelection().removeAllRanges(); 0`)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for range n {
		if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.Tab)); err != nil {
			t.Fatal(err)
		}
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](focusPath))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, got)
	}
	return out
}

// TestConsoleSignIn: a wrong token shows the API's error and keeps nothing; workspace
// credentials alone open the workspace's sections and say which need an API key; sign-out
// forgets the credentials; the keyboard reaches the navigation and the sign-in form in order.
func TestConsoleSignIn(t *testing.T) {
	s := newSystem(t)
	ctx := consoleTab(t, s, "/console/")
	dev := s.proc.Dev

	t.Run("keyboard reaches the sign-in form in order", func(t *testing.T) {
		pageWait(t, ctx, "main", "Sign in")
		got := tabOrder(t, ctx, 7)
		want := []string{"a:collab console", "button:Sign in to the development workspace", "input:Workspace id",
			"input:Workspace auth token", "input:API key", "input:Auth token (of the API key)", "button:Sign in"}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("Tab went through\n%q, want\n%q", got, want)
		}
	})

	t.Run("a wrong workspace token shows the API's error", func(t *testing.T) {
		// Typed with real key events, as a user would.
		err := chromedp.Do(ctx,
			chromedp.SendKeys(chromedp.CSS(pageForm("Sign in")+` [name="workspaceId"]`), dev.WorkspaceID),
			chromedp.SendKeys(chromedp.CSS(pageForm("Sign in")+` [name="workspaceAuthToken"]`), "not-the-token"+kb.Enter))
		if err != nil {
			t.Fatal(err)
		}
		pageWait(t, ctx, pageForm("Sign in")+" .form-result", "401 UNAUTHENTICATED: Invalid auth token for workspace.")
		if c := pageText(t, ctx, "nav"); c != "" {
			t.Fatalf("signed in after a refusal: nav shows %q", c)
		}
	})

	t.Run("a wrong auth token shows the API's error", func(t *testing.T) {
		pageSubmit(t, ctx, "Sign in", map[string]any{"workspaceId": "", "workspaceAuthToken": "", "apiKey": dev.APIKey, "authToken": "nope"})
		pageWait(t, ctx, pageForm("Sign in")+" .form-result", "400 INVALID_ARGUMENT: Auth token not found.")
	})

	t.Run("workspace credentials alone say what needs an API key", func(t *testing.T) {
		pageSubmit(t, ctx, "Sign in", map[string]any{"workspaceId": dev.WorkspaceID, "workspaceAuthToken": dev.WorkspaceToken, "apiKey": "", "authToken": ""})
		pageWait(t, ctx, `section[aria-label="Details"] table`, dev.WorkspaceID)
		pageWait(t, ctx, `section[aria-label="Allowed domains"]`, "This section needs an API key and its auth token")
		pageWait(t, ctx, `section[aria-label="API keys"] table`, "Development key")
		pageOpen(t, ctx, "#/organizations", "Organizations")
		pageWait(t, ctx, "main", "This section needs an API key and its auth token")
	})

	t.Run("keyboard reaches the navigation in order", func(t *testing.T) {
		links, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('nav a')].map(a => 'a:' + a.innerText.trim())`))
		if err != nil {
			t.Fatal(err)
		}
		for _, page := range []string{"a:Workspace", "a:Organizations", "a:Activity log", "a:Notifications"} {
			if !slices.Contains(links, page) {
				t.Fatalf("the navigation %q lacks %s", links, page)
			}
		}
		want := append(append([]string{"a:collab console"}, links...), "button:Sign out")
		got := tabOrder(t, ctx, len(want))
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("Tab went through\n%q, want\n%q", got, want)
		}
	})

	t.Run("sign-out forgets the credentials", func(t *testing.T) {
		pageClick(t, ctx, "nav button.link")
		pageWait(t, ctx, "main h1", "Sign in")
		kept, err := chromedp.Run(ctx, chromedp.Evaluate[string](`sessionStorage.getItem('collab.console.credentials') || ''`))
		if err != nil || kept != "" {
			t.Fatalf("after sign-out the session holds %q (%v)", kept, err)
		}
	})
}

// TestConsoleWorkspace: the workspace page creates an API key and lists it, resets its token
// (shown once, the old one refused), shows the API's error for a bad allowed domain, turns a
// console switch off and checks the owner email's status.
func TestConsoleWorkspace(t *testing.T) {
	s := newSystem(t)
	ctx := consoleTab(t, s, "/console/")
	dialogs := browsertest.AcceptDialogs(ctx)
	pageSignInDev(t, ctx)
	pageWait(t, ctx, `section[aria-label="API keys"] table`, "Development key")
	checkPage(t, ctx, "workspace")

	var apiKey, token string
	t.Run("create an API key", func(t *testing.T) {
		pageSubmit(t, ctx, "Create API key", map[string]any{"apiKeyName": "Staging", "type": "production", "allowedDomains": "https://staging.example.com/app"})
		pageWait(t, ctx, pageForm("Create API key")+" .once", "shown this once")
		secrets, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('form[aria-label="Create API key"] code.secret')].map(e => e.innerText)`))
		if err != nil || len(secrets) != 2 {
			t.Fatalf("the key and token shown: %q (%v)", secrets, err)
		}
		apiKey, token = secrets[0], secrets[1]
		pageWait(t, ctx, `section[aria-label="API keys"] table`, apiKey)
		pageWait(t, ctx, `section[aria-label="API keys"] table`, "Staging")
		// The token shown is the key's: it works, with the domains given.
		got := s.call("/v2/workspace/domains/get", keyHeaders(apiKey, token), map[string]any{}).data(t, "")
		if fmt.Sprint(got["allowedDomains"]) != "[staging.example.com]" {
			t.Fatalf("the new key's domains: %v", got)
		}
	})

	t.Run("reset its auth token", func(t *testing.T) {
		before := dialogs.Count()
		pageClick(t, ctx, `button[aria-label="Reset the auth token of `+apiKey+`"]`)
		pageWait(t, ctx, `section[aria-label="API keys"] .key-result`, "The new auth token is shown this once")
		if dialogs.Count() != before+1 {
			t.Fatalf("the reset asked no confirmation: %v", dialogs.Messages())
		}
		fresh := pageText(t, ctx, `section[aria-label="API keys"] .key-result p:nth-of-type(2) code`)
		if fresh == "" || fresh == token {
			t.Fatalf("new token %q (old %q)", fresh, token)
		}
		s.call("/v2/workspace/domains/get", keyHeaders(apiKey, token), map[string]any{}).fails(t, 400, "INVALID_ARGUMENT", "Auth token not found.")
		s.call("/v2/workspace/domains/get", keyHeaders(apiKey, fresh), map[string]any{}).ok(t)
		// Shown once: the list of tokens masks it.
		pageClick(t, ctx, `button[aria-label="Show the auth tokens of `+apiKey+`"]`)
		pageWait(t, ctx, `section[aria-label="API keys"] .key-result`, "********"+fresh[len(fresh)-4:])
		if strings.Contains(pageText(t, ctx, "main"), fresh) {
			t.Fatal("the token is still shown after the list of tokens replaced it")
		}
	})

	t.Run("a bad allowed domain shows the API's error", func(t *testing.T) {
		pageSubmit(t, ctx, "Update allowed domains", map[string]any{"allowedDomains": "example.org javascript:alert(1)"})
		pageWait(t, ctx, pageForm("Update allowed domains")+" .form-result",
			`400 INVALID_ARGUMENT: allowedDomains[1] "javascript:alert(1)" is not a valid domain: only http and https URLs are accepted.`)
		pageSubmit(t, ctx, "Update allowed domains", map[string]any{"allowedDomains": "https://www.Example.org/x\n*.example.net"})
		pageWait(t, ctx, `section[aria-label="Allowed domains"]`, "Now: example.org, *.example.net")
	})

	t.Run("turn a console switch off", func(t *testing.T) {
		pageSubmit(t, ctx, "Console switches", map[string]any{"advancedQueries": false})
		pageWait(t, ctx, pageForm("Console switches")+" .form-result", "Advanced queries off, notifications on, advanced webhooks on.")
		settings := s.call("/v2/workspace/get", s.devWorkspace(), map[string]any{}).data(t, "")["settings"].(map[string]any)
		if settings["advancedQueries"] != false || settings["notifications"] != true {
			t.Fatalf("settings after the switch: %v", settings)
		}
		pageSubmit(t, ctx, "Slack webhook", map[string]any{"slackWebhookUrl": "not a url"})
		pageWait(t, ctx, pageForm("Slack webhook")+" .form-result", "400 INVALID_ARGUMENT: slackWebhookUrl must be a valid http(s) URL.")
	})

	t.Run("resetting the signed-in key's token keeps the tab signed in", func(t *testing.T) {
		pageClick(t, ctx, `button[aria-label="Reset the auth token of `+s.proc.Dev.APIKey+`"]`)
		pageWait(t, ctx, `section[aria-label="API keys"] .key-result`, "This tab signs its calls with the new token from now on.")
		if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
			t.Fatal(err)
		}
		pageWait(t, ctx, `section[aria-label="Allowed domains"]`, "Now: example.org, *.example.net")
		s.call("/v2/workspace/domains/get", s.devKey(), map[string]any{}).fails(t, 400, "INVALID_ARGUMENT", "Auth token not found.")
	})

	t.Run("owner email verification", func(t *testing.T) {
		pageSubmit(t, ctx, "Get email verification status", map[string]any{})
		pageWait(t, ctx, pageForm("Get email verification status")+" .form-result", "Email verified and workspace reactivated (verified: yes)")
		pageSubmit(t, ctx, "Get email verification status", map[string]any{"ownerEmail": "not-an-email"})
		pageWait(t, ctx, pageForm("Get email verification status")+" .form-result", "400 INVALID_ARGUMENT: ownerEmail must be a valid email address.")
		pageSubmit(t, ctx, "Verify owner email", map[string]any{"token": "forged"})
		pageWait(t, ctx, pageForm("Verify owner email")+" .form-result", "400 INVALID_ARGUMENT: The verification link is invalid or has already been used.")
	})
}

// TestConsoleOrganizations: organizations are added, listed and deleted; an organization's
// folders, documents and users are added; a grant shows in the permissions table; 31 ids and a
// missing document show the API's errors; with advanced queries off, documents come from v1.
func TestConsoleOrganizations(t *testing.T) {
	s := newSystem(t)
	ctx := consoleTab(t, s, "/console/")
	browsertest.AcceptDialogs(ctx)
	pageSignInDev(t, ctx)
	pageOpen(t, ctx, "#/organizations", "Organizations")

	t.Run("add organizations", func(t *testing.T) {
		pageSubmit(t, ctx, "Add organization", map[string]any{"organizationId": "acme", "organizationName": "Acme Corp"})
		pageWait(t, ctx, pageForm("Add organization")+" .form-result", "Organization added.")
		pageSubmit(t, ctx, "Add organization", map[string]any{"organizationId": "acme", "organizationName": "Again"})
		pageWait(t, ctx, pageForm("Add organization")+" .form-result", "1 of 1 failed.")
		pageWait(t, ctx, pageForm("Add organization")+" .form-result", "Organization already exists.")
		pageSubmit(t, ctx, "Add organization", map[string]any{"organizationId": "gone", "organizationName": ""})
		pageWait(t, ctx, `section[aria-label="All organizations"] table`, "Acme Corp")
		pageWait(t, ctx, `section[aria-label="All organizations"] table`, "gone")
		checkPage(t, ctx, "organizations")
	})

	t.Run("delete an organization", func(t *testing.T) {
		pageClick(t, ctx, `button[aria-label="Delete organization gone"]`)
		pageWait(t, ctx, `section[aria-label="All organizations"]`, "Organization deleted.")
		pageWait(t, ctx, `section[aria-label="All organizations"] .pager .muted`, "1 row, the end")
		left := s.call("/v2/organizations/get", s.devKey(), map[string]any{"organizationIds": []string{"gone", "acme"}}).ok(t)["data"]
		if n := len(left.([]any)); n != 1 {
			t.Fatalf("organizations gone and acme after the deletion: %v", left)
		}
	})

	t.Run("folders, documents and users", func(t *testing.T) {
		pageClick(t, ctx, `a[href="#/organizations/acme"]`)
		pageWait(t, ctx, "main h2.org", "Organization acme")
		pageSubmit(t, ctx, "Add folder", map[string]any{"folderId": "plans", "folderName": "Plans"})
		pageWait(t, ctx, `section[aria-label="Folders"] table`, "Plans")
		pageSubmit(t, ctx, "Add document", map[string]any{"documentId": "roadmap", "documentName": "Roadmap 2026", "folderId": "plans"})
		pageWait(t, ctx, pageForm("Add document")+" .form-result", "Document added.")
		pageWait(t, ctx, `section[aria-label="Documents"] table`, "Roadmap 2026")
		pageSubmit(t, ctx, "Add user", map[string]any{"userId": "ann", "name": "Ann Lee", "email": "ann@example.com"})
		pageWait(t, ctx, pageForm("Add user")+" .form-result", "User added.")
		pageWait(t, ctx, `section[aria-label="Users"] table`, "ann@example.com")
	})

	t.Run("a grant shows in the permissions table", func(t *testing.T) {
		pageSubmit(t, ctx, "Add permission", map[string]any{"userId": "bob", "type": "document", "id": "roadmap", "accessRole": "viewer"})
		pageWait(t, ctx, pageForm("Add permission")+" .form-result", "Permissions added successfully.")
		pageSubmit(t, ctx, "Get permissions", map[string]any{"userIds": "ann bob", "folderIds": "plans", "documentIds": "roadmap"})
		pageWait(t, ctx, `section[aria-label="Permissions"] table`, "bob")
		rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
			`[...document.querySelectorAll('section[aria-label="Permissions"] table tbody tr')].map(r => [...r.cells].map(c => c.innerText).join('|'))`))
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Join(rows, "\n")
		for _, want := range []string{
			"ann|organization|acme|editor|||", "ann|document|roadmap|editor|public||",
			"bob|organization||not a member|||", "bob|document|roadmap|viewer|public||",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("the permissions table lacks %q:\n%s", want, got)
			}
		}
		checkPage(t, ctx, "permissions")
	})

	t.Run("31 ids and a missing document show the API's errors", func(t *testing.T) {
		many := make([]string, 31)
		for i := range many {
			many[i] = fmt.Sprintf("d%d", i)
		}
		pageSubmit(t, ctx, "Get permissions", map[string]any{"userIds": "ann", "folderIds": "", "documentIds": strings.Join(many, ", ")})
		pageWait(t, ctx, pageForm("Get permissions")+" .form-result", "400 INVALID_ARGUMENT: documentIds must contain at most 30 ids.")
		pageSubmit(t, ctx, "Get permissions", map[string]any{"userIds": "ann", "folderIds": "", "documentIds": "roadmap nope"})
		pageWait(t, ctx, pageForm("Get permissions")+" .form-result", "404 NOT_FOUND: Folder or document does not exist")
		pageWait(t, ctx, `section[aria-label="Permissions"] table`, "Document does not exist (does_not_exist)")
	})

	t.Run("with advanced queries off documents come from v1", func(t *testing.T) {
		s.call("/v2/workspace/settings/update", s.devWorkspace(), map[string]any{"advancedQueries": false}).data(t, "")
		if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
			t.Fatal(err)
		}
		pageWait(t, ctx, `section[aria-label="Documents"]`, "400 FAILED_PRECONDITION: Advanced queries are not enabled")
		pageWait(t, ctx, `section[aria-label="Documents"] table`, "Roadmap 2026")
	})

	// A list read again (after an addition) while its first read is on its way: the earlier
	// answer is dropped, and the Next page button stays disabled until the new read is in,
	// or pressing it would read the first page a second time below the first.
	t.Run("a list read again while it loads lists each row once", func(t *testing.T) {
		pageOpen(t, ctx, "#/activity", "Activity log") // a page that reads nothing before its form is sent
		held, release := holdRequests(t, ctx, "*/v2/organizations/get", fetch.RequestStageRequest)
		pageOpen(t, ctx, "#/organizations", "Organizations")
		first := nextHeld(t, held, "the list's first read")
		pageSubmit(t, ctx, "Add organization", map[string]any{"organizationId": "beta", "organizationName": "Beta"})
		again := nextHeld(t, held, "the list read again after the addition")
		release(first)
		pageWait(t, ctx, pageForm("Add organization")+" .form-result", "Organization added.")
		time.Sleep(200 * time.Millisecond) // the first answer is taken (and dropped) meanwhile
		// Clicked (a disabled button takes no click, nor the keyboard's focus).
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](`document.querySelector('section[aria-label="All organizations"] button.more').click(); 0`)); err != nil {
			t.Fatal(err)
		}
		select { // a read the click started
		case id := <-held:
			release(id)
		case <-time.After(500 * time.Millisecond):
		}
		release(again)
		pageWait(t, ctx, `section[aria-label="All organizations"] .pager > p`, ", the end")
		if _, err := chromedp.Call(ctx, fetch.Disable, cdp.Empty{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond) // a read still on its way
		listed, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('section[aria-label="All organizations"] tbody tr')].map(r => r.cells[0].textContent)`))
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, o := range s.call("/v2/organizations/get", s.devKey(), map[string]any{}).ok(t)["data"].([]any) {
			want = append(want, o.(map[string]any)["organizationId"].(string))
		}
		if strings.Join(listed, ",") != strings.Join(want, ",") {
			t.Fatalf("the organizations listed: %q, want %q", listed, want)
		}
	})

	// The users (Get Users v1, read whole) likewise: the first read's answer, older than the
	// one that followed the addition, does not replace it when it comes last.
	t.Run("a user added while the users load is listed", func(t *testing.T) {
		pageOpen(t, ctx, "#/activity", "Activity log")
		held, release := holdRequests(t, ctx, "*/v1/users/get", fetch.RequestStageResponse)
		pageOpen(t, ctx, "#/organizations/acme", "Organizations")
		first := nextHeld(t, held, "the users' first read")
		pageSubmit(t, ctx, "Add user", map[string]any{"userId": "cleo", "name": "Cleo Park", "email": "cleo@example.com"})
		pageWait(t, ctx, pageForm("Add user")+" .form-result", "User added.")
		release(nextHeld(t, held, "the users read again after the addition"))
		pageWait(t, ctx, `section[aria-label="Users"] table`, "cleo@example.com")
		release(first)
		if _, err := chromedp.Call(ctx, fetch.Disable, cdp.Empty{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond) // the first answer is taken meanwhile
		if got := pageText(t, ctx, `section[aria-label="Users"] table`); !strings.Contains(got, "cleo@example.com") {
			t.Fatalf("the users listed after the first read's answer came: %q", got)
		}
	})
}

// TestConsoleActivity: the activity log pages through more than one page of records with the
// API's page tokens, each row's message rendered from its template, and filters by feature.
func TestConsoleActivity(t *testing.T) {
	s := newSystem(t)
	k := s.devKey()
	s.call("/v2/organizations/add", k, map[string]any{"organizations": []any{map[string]any{"organizationId": "acme"}}}).data(t, "")
	var acts []any
	for i := range 25 {
		acts = append(acts, map[string]any{
			"id": fmt.Sprintf("a%02d", i), "featureType": "custom", "actionType": "custom.edit",
			"actionUser":                 map[string]any{"userId": "ann", "name": "Ann Lee"},
			"displayMessageTemplate":     "{{actionUser.name}} edited {{item}} for {{owner}}",
			"displayMessageTemplateData": map[string]any{"item": fmt.Sprintf("item %d", i), "owner": map[string]any{"userId": "bob", "email": "bob@example.com"}},
		})
	}
	acts = append(acts, map[string]any{"id": "c1", "featureType": "comment", "actionType": "comment.add",
		"actionUser": map[string]any{"userId": "cy", "name": "Cy"}, "displayMessageTemplate": "{{actionUser.name}}: {{actionType}} <b>{{missing}}</b>"})
	s.call("/v2/activities/add", k, map[string]any{"organizationId": "acme", "documentId": "doc", "activities": acts}).data(t, "")

	ctx := consoleTab(t, s, "/console/")
	pageSignInDev(t, ctx)
	pageOpen(t, ctx, "#/activity/acme", "Activity log")
	// The rows' text: textContent, for innerText is empty in a block of rows the browser
	// skipped while it was off screen (the pager's content-visibility).
	rows := func() []string {
		t.Helper()
		got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('main table tbody tr')].map(r => r.cells[1].textContent)`))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	t.Run("pages through the log", func(t *testing.T) {
		pageSubmit(t, ctx, "Activity filters", map[string]any{"pageSize": "10", "order": "asc"})
		pageWait(t, ctx, "main .pager .muted", "10 rows")
		pagePress(t, ctx, "main .pager button.more")
		pageWait(t, ctx, "main .pager .muted", "20 rows")
		pagePress(t, ctx, "main .pager button.more")
		pageWait(t, ctx, "main .pager .muted", "26 rows, the end")
		got := rows()
		if len(got) != 26 || got[0] != "Ann Lee edited item 0 for bob@example.com" || got[24] != "Ann Lee edited item 24 for bob@example.com" {
			t.Fatalf("rows: %q", got)
		}
		// Stored text is shown as text: no markup, and an unknown variable renders as nothing.
		if got[25] != "Cy: comment.add <b></b>" {
			t.Fatalf("the comment's row: %q", got[25])
		}
		checkPage(t, ctx, "activity")
	})

	t.Run("filters by feature", func(t *testing.T) {
		pageSubmit(t, ctx, "Activity filters", map[string]any{"feature:comment": true, "pageSize": "10"})
		pageWait(t, ctx, "main .pager .muted", "1 row, the end")
		if got := rows(); len(got) != 1 || !strings.HasPrefix(got[0], "Cy:") {
			t.Fatalf("rows: %q", got)
		}
	})

	t.Run("a bad page size shows the API's error", func(t *testing.T) {
		pageSubmit(t, ctx, "Activity filters", map[string]any{"feature:comment": false, "pageSize": "0"})
		pageWait(t, ctx, "main .pager", "400 INVALID_ARGUMENT: pageSize")
		// The pager's button now reads that page again, and says so.
		if got := pageText(t, ctx, "main .pager button.more"); got != "Try again" {
			t.Fatalf("the pager's button after an error: %q", got)
		}
	})

	// One page of 10,000 records (the API's largest page size) keeps the page responsive as
	// 10 pages of 1,000 do (TestConsoleBPages): the same budget of 200 ms of CPU for the
	// longest task of the page's main thread.
	t.Run("ten thousand records in one page", func(t *testing.T) {
		for n := 0; n < 10000; n += 100 {
			var batch []any
			for i := n; i < n+100; i++ {
				batch = append(batch, map[string]any{"id": fmt.Sprintf("big%05d", i), "featureType": "custom", "actionType": "custom.bulk",
					"actionUser": map[string]any{"userId": "ann", "name": "Ann Lee"}, "targetEntityId": fmt.Sprintf("thread-%05d", i),
					"displayMessageTemplate":     "{{actionUser.name}} moved {{item}} from {{from}} to {{to}}",
					"displayMessageTemplateData": map[string]any{"item": fmt.Sprintf("record %d", i), "from": "the review column", "to": "the done column"},
					"changes":                    map[string]any{"column": map[string]any{"from": "review", "to": "done"}}})
			}
			s.call("/v2/activities/add", k, map[string]any{"organizationId": "acme", "activities": batch}).data(t, "")
		}
		wall, cpu, parts := mainThreadTasks(t, ctx, func() {
			pageSubmit(t, ctx, "Activity filters", map[string]any{"actionTypes": "custom.bulk", "pageSize": "10000", "order": "asc"})
			seeText(t, ctx, "main .pager > p", "10000 rows, the end")
		})
		t.Logf("10,000 records in one page: the page's longest main-thread task took %v of CPU (%v of wall time, load included): %s", cpu, wall, parts)
		if cpu > 200*time.Millisecond {
			t.Errorf("the page's main thread was busy %v at once (at most 200 ms): %s", cpu, parts)
		}
		if got := rows(); len(got) != 10000 || got[0] != "Ann Lee moved record 0 from the review column to the done column" ||
			got[9999] != "Ann Lee moved record 9999 from the review column to the done column" {
			t.Fatalf("%d rows, from %q to %q", len(got), got[:min(len(got), 2)], got[max(0, len(got)-2):])
		}
	})
}

// TestConsoleNotifications: a notification added through the form reaches the user's inbox,
// where its headline shows rendered; marking it read changes it for the API too.
func TestConsoleNotifications(t *testing.T) {
	s := newSystem(t)
	k := s.devKey()
	s.call("/v2/users/add", k, map[string]any{"organizationId": "acme", "createOrganization": true, "documentId": "plan", "createDocument": true,
		"users": []any{person("ann", "Ann Lee"), person("bob", "Bob Stone")}}).data(t, "")
	ctx := consoleTab(t, s, "/console/")
	pageSignInDev(t, ctx)
	pageOpen(t, ctx, "#/notifications/acme", "Notifications")

	t.Run("add a notification", func(t *testing.T) {
		pageSubmit(t, ctx, "Add notification", map[string]any{
			"documentId": "plan", "actionUserId": "bob", "actionUserName": "Bob Stone",
			"headline": "{{actionUser}} asked {{recipientUser}} about {{topic}}", "templateData": `{"topic": "the plan"}`,
			"body": "Can you <i>review</i> it?", "notifyUsers": "ann", "notificationId": "n1",
		})
		pageWait(t, ctx, pageForm("Add notification")+" .form-result", "Notification added successfully. Id: n1.")
		eventually(t, "ann's entry", func() bool { return len(s.inbox(t, k, "acme", "ann")) == 1 })
	})

	t.Run("bad input shows the API's error", func(t *testing.T) {
		pageSubmit(t, ctx, "Add notification", map[string]any{"notificationId": "bad id!"})
		pageWait(t, ctx, pageForm("Add notification")+" .form-result", "400 INVALID_ARGUMENT: notificationId")
		pageSubmit(t, ctx, "Add notification", map[string]any{"notificationId": "", "templateData": "{nope"})
		pageWait(t, ctx, pageForm("Add notification")+" .form-result", "Error: Template data is not JSON")
	})

	t.Run("the user's inbox", func(t *testing.T) {
		pageSubmit(t, ctx, "Inbox", map[string]any{"userId": "ann"})
		pageWait(t, ctx, "main table", "Bob Stone asked Ann Lee about the plan")
		pageWait(t, ctx, "main table", "Can you <i>review</i> it?")
		checkPage(t, ctx, "notifications")
		pageClick(t, ctx, `main table button[aria-label^="Mark read"]`)
		pageWait(t, ctx, "main table", "Mark unread")
		if n := s.inbox(t, k, "acme", "ann"); n[0]["read"] != true {
			t.Fatalf("after Mark read: %v", n[0])
		}
	})
}
