// Package browsertest starts a headless Chromium for tests that check what a real browser does
// with what the server sends (sanitised comment HTML, a console's pages), driven with chromedp:
// the project tests against the real thing where it exists. Chromium comes from the system
// (Debian's chromium package); scripts/ensure-chromium installs it, and scripts/test runs that
// script before go test. A test without Chromium fails, naming the script: it never skips.
package browsertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// EnsureScript installs Chromium when it is missing (run from the repository's root).
const EnsureScript = "scripts/ensure-chromium"

// EnvPath names an environment variable that, when set, is the browser to run instead of the
// one found in PATH.
const EnvPath = "COLLAB_CHROMIUM"

// names are the executables Path looks for in PATH, Debian's first.
var names = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless_shell"}

// Path returns the Chromium to run: $COLLAB_CHROMIUM, or the first of chromium,
// chromium-browser, google-chrome, google-chrome-stable, headless_shell in PATH; the error
// says how to install it.
func Path() (string, error) {
	if p := os.Getenv(EnvPath); p != "" {
		found, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("browsertest: %s=%s: %w (unset it to use the chromium that %s installs)", EnvPath, p, err, EnsureScript)
		}
		return found, nil
	}
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("browsertest: no Chromium in PATH (looked for %s): run %s "+
		"(apt-get install chromium), or set %s to a Chromium or Chrome binary",
		strings.Join(names, ", "), EnsureScript, EnvPath)
}

// Start starts a headless Chromium for t and returns the context of its first tab (pass it
// to chromedp.Run, or chromedp.NewContext for more tabs). The browser runs with a fresh
// temporary profile (chromedp's, removed when the browser ends), without the sandbox only
// when the test runs as root (Chromium refuses to start as root with it, as in a container),
// with /dev/shm unused (small in containers) and no GPU. It ends at t's cleanup, or after
// timeout, which bounds the whole test's use of it. t fails when Chromium is missing or does
// not start.
func Start(t testing.TB, timeout time.Duration) context.Context {
	t.Helper()
	path, err := Path()
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.DisableGPU,
		chromedp.Flag("no-sandbox", os.Geteuid() == 0),
		chromedp.CombinedOutput(&output),
	)
	ctx, cancelTimeout := context.WithTimeout(context.Background(), timeout)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	tabCtx, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc() // waits for the browser to exit and its profile to be removed
		cancelTimeout()
	})
	if err := chromedp.Do(tabCtx); err != nil { // starts the browser and opens the tab
		t.Fatalf("browsertest: starting %s: %v\n%s", path, err, output.tail())
	}
	return tabCtx
}

// output keeps the end of the browsers' output, for the message when one does not start.
var output tailBuffer

type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - 8<<10; over > 0 {
		b.buf = b.buf[over:]
	}
	return len(p), nil
}

func (b *tailBuffer) tail() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// Dialogs counts the JavaScript dialogs (alert, confirm, prompt, beforeunload) of a tab and
// its frames, accepting each as it opens so that none blocks the page.
type Dialogs struct {
	n    atomic.Int64
	mu   sync.Mutex
	msgs []string
}

// AcceptDialogs starts accepting and counting the dialogs of ctx's tab until ctx ends.
func AcceptDialogs(ctx context.Context) *Dialogs {
	d := &Dialogs{}
	events := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range events {
			if err != nil {
				return
			}
			d.n.Add(1)
			d.mu.Lock()
			d.msgs = append(d.msgs, string(ev.Type)+": "+ev.Message)
			d.mu.Unlock()
			_, err := chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
			if err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
				d.mu.Lock()
				d.msgs = append(d.msgs, "accepting it failed: "+err.Error())
				d.mu.Unlock()
			}
		}
	}()
	return d
}

// Count returns how many dialogs opened so far.
func (d *Dialogs) Count() int64 { return d.n.Load() }

// Messages returns the dialogs' types and messages so far.
func (d *Dialogs) Messages() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.msgs...)
}
