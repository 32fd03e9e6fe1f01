package browsertest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// A started browser loads a page from a loopback server, runs its script, and has its dialogs
// accepted (the page would block on the alert otherwise) and counted.
func TestStartAndDialogs(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!DOCTYPE html><title>t</title><p id=p>before</p><script>
			alert("first"); document.getElementById("p").textContent = confirm("second") ? "accepted" : "dismissed";
		</script>`)
	}))
	defer srv.Close()
	ctx := Start(t, time.Minute)
	dialogs := AcceptDialogs(ctx)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL)); err != nil {
		t.Fatal(err)
	}
	text, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("p")))
	if err != nil {
		t.Fatal(err)
	}
	if text != "accepted" {
		t.Errorf("the page says %q, want accepted (the confirm dialog accepted)", text)
	}
	if n, msgs := dialogs.Count(), dialogs.Messages(); n != 2 || !slices.Equal(msgs, []string{"alert: first", "confirm: second"}) {
		t.Errorf("dialogs: %d %q, want 2: alert first, confirm second", n, msgs)
	}
}

// Without a browser the error names the script that installs one.
func TestPathMissing(t *testing.T) {
	t.Setenv(EnvPath, "/nonexistent/chromium")
	_, err := Path()
	if err == nil || !strings.Contains(err.Error(), EnsureScript) {
		t.Errorf("Path() = %v, want an error naming %s", err, EnsureScript)
	}
	t.Setenv(EnvPath, "")
	t.Setenv("PATH", t.TempDir())
	_, err = Path()
	if err == nil || !strings.Contains(err.Error(), EnsureScript) {
		t.Errorf("Path() with an empty PATH = %v, want an error naming %s", err, EnsureScript)
	}
}

// TestWatchConsoleAndScreenshot: a page's uncaught exception and console.error are collected,
// a clean page leaves nothing, and a screenshot is a PNG.
func TestWatchConsoleAndScreenshot(t *testing.T) {
	ctx := Start(t, time.Minute)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/bad" {
			_, _ = io.WriteString(w, `<p>bad</p><script>console.error("seen"); throw new Error("thrown")</script>`)
			return
		}
		_, _ = io.WriteString(w, `<p>clean</p>`)
	}))
	defer srv.Close()
	c := WatchConsole(ctx)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/clean"), chromedp.Sleep(200*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if errs := c.Errors(); len(errs) != 0 {
		t.Fatalf("a clean page: %q", errs)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/bad"), chromedp.Sleep(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	all := strings.Join(c.Errors(), "\n")
	if !strings.Contains(all, "seen") || !strings.Contains(all, "thrown") {
		t.Fatalf("errors collected: %q", c.Errors())
	}
	file := filepath.Join(t.TempDir(), "shot.png")
	if err := Screenshot(ctx, file); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Fatalf("screenshot: %v %q", err, b[:min(8, len(b))])
	}
}

// TestAxeFindsViolations: axe-core runs in a page under a strict Content-Security-Policy and
// reports a serious violation (an image without text, a control without a label) and none on
// a page without them.
func TestAxeFindsViolations(t *testing.T) {
	ctx := Start(t, time.Minute)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Security-Policy", "default-src 'none'")
		body := `<main><h1>t</h1><label for=i>Name</label><input id=i></main>`
		if r.URL.Path == "/bad" {
			body = `<main><h1>t</h1><input id=i><img src="data:,"></main>`
		}
		_, _ = io.WriteString(w, `<!doctype html><html lang="en"><title>t</title>`+body)
	}))
	defer srv.Close()
	for path, want := range map[string]bool{"/good": false, "/bad": true} {
		if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+path)); err != nil {
			t.Fatal(err)
		}
		found, err := Axe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if (len(found) > 0) != want {
			t.Errorf("%s: %v", path, found)
		}
	}
}
