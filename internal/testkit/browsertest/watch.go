package browsertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// EnvScreenshots names an environment variable that, when set, is the folder screenshots of
// failed tests go to; otherwise they go to a folder under the system's temporary directory.
const EnvScreenshots = "COLLAB_SCREENSHOTS"

// ScreenshotOnFailure makes a failing t save a screenshot of ctx's tab (the whole page) named
// for the test and name, and log where it is: a browser test's failure shows what the page
// showed. Call it right after the tab is opened.
func ScreenshotOnFailure(t testing.TB, ctx context.Context, name string) {
	t.Helper()
	t.Cleanup(func() {
		if !t.Failed() || ctx.Err() != nil {
			return
		}
		dir := os.Getenv(EnvScreenshots)
		if dir == "" {
			dir = filepath.Join(os.TempDir(), "collab-screenshots")
		}
		file := filepath.Join(dir, safeName(t.Name()+"-"+name)+".png")
		if err := Screenshot(ctx, file); err != nil {
			t.Logf("browsertest: no screenshot of %s: %v", name, err)
			return
		}
		t.Logf("browsertest: screenshot of %s at failure: %s", name, file)
	})
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func safeName(s string) string { return unsafeChars.ReplaceAllString(s, "_") }

// Screenshot writes a PNG of the whole page of ctx's tab to file, making its folder.
func Screenshot(ctx context.Context, file string) error {
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		return fmt.Errorf("screenshot: %w", err)
	}
	// The file is the test's own choice (a test name under a chosen folder), not outside input.
	if err := os.MkdirAll(filepath.Dir(file), 0o750); err != nil { //nolint:gosec // a test's own path
		return err
	}
	return os.WriteFile(file, png, 0o600) //nolint:gosec // a test's own path
}

// Console collects what a tab's pages report as errors: uncaught exceptions, console.error
// calls and the browser's own error log entries (a Content-Security-Policy violation, a failed
// load), so that a test can require a page to have run cleanly.
type Console struct {
	mu   sync.Mutex
	errs []string
}

// WatchConsole starts collecting the errors of ctx's tab until ctx ends; call it before
// navigating. A failure to watch is itself reported as an error.
func WatchConsole(ctx context.Context) *Console {
	c := &Console{}
	err := chromedp.Listen(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			msg := ev.ExceptionDetails.Text
			if ev.ExceptionDetails.Exception != nil {
				msg += " " + ev.ExceptionDetails.Exception.Description
			}
			c.add("exception: " + msg)
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				var parts []string
				for _, a := range ev.Args {
					parts = append(parts, strings.Trim(string(a.Value), `"`)+a.Description)
				}
				c.add("console.error: " + strings.Join(parts, " "))
			}
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.EntryLevelError {
				c.add(string(ev.Entry.Source) + ": " + ev.Entry.Text + " " + ev.Entry.URL)
			}
		}
	})
	if err == nil {
		_, err = chromedp.Call(ctx, log.Enable, cdp.Empty{})
	}
	if err == nil {
		_, err = chromedp.Call(ctx, runtime.Enable, cdp.Empty{})
	}
	if err != nil {
		c.add("browsertest: watching the console: " + err.Error())
	}
	return c
}

func (c *Console) add(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, s)
}

// Errors returns the errors collected so far.
func (c *Console) Errors() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.errs...)
}
