package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/collab/collab/internal/testkit/browsertest"
)

// consoleTab opens a headless Chromium tab on the console of s, collecting the page's errors
// (checked at the test's end: a script error or a Content-Security-Policy violation fails it)
// and saving a screenshot if the test fails.
func consoleTab(t *testing.T, s *system, path string) context.Context {
	t.Helper()
	ctx := browsertest.Start(t, 3*time.Minute)
	errs := browsertest.WatchConsole(ctx)
	browsertest.ScreenshotOnFailure(t, ctx, "console")
	t.Cleanup(func() {
		if e := errs.Errors(); len(e) != 0 {
			t.Errorf("the page reported errors:\n%s", strings.Join(e, "\n"))
		}
	})
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800), chromedp.Navigate(s.base+path)); err != nil {
		t.Fatal(err)
	}
	return ctx
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

// TestConsoleDevSignIn: on a local run the sign-in page offers the development workspace, one
// click signs in, and the workspace page shows the workspace as the API answers it.
func TestConsoleDevSignIn(t *testing.T) {
	s := newSystem(t)
	ctx := consoleTab(t, s, "/console/")
	checkPage(t, ctx, "sign-in")
	err := chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("dev-sign-in")),
		chromedp.WaitVisible(chromedp.CSS("main pre")),
	)
	if err != nil {
		t.Fatal(err)
	}
	text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, s.proc.Dev.WorkspaceID) {
		t.Fatalf("the workspace page: %q", text)
	}
	checkPage(t, ctx, "workspace")
}
