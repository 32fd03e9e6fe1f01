package richtext

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// FuzzSanitize holds the sanitiser to "no active content" on any input
// (docs/comments.md, "Content safety"): the output parses, as innerHTML and in a page, to allowed elements and
// attributes only, with http, https or mailto URLs; sanitising it again changes nothing; it is
// at most MaxStoredHTMLFactor times the input; and it passes the checks its input had to. The
// policy is checked on every input, also those Sanitize refuses (invalid UTF-8, controls, too
// long), so that it holds even without those checks. The seed corpus (testdata/fuzz/
// FuzzSanitize) holds the vectors of testdata/xss.txt (TestSeedCorpus keeps it so).
func FuzzSanitize(f *testing.F) {
	f.Add(`<p>Hello <b>bold</b> <i>it</i> <a href="https://example.com/a?b=c&amp;d">link</a></p>`)
	f.Add(`<span data-user-id="u-1">@Ann</span> <a href=mailto:ann@example.com>mail</a>`)
	f.Add(`<ul><li>one<li>two</ul><blockquote dir=rtl>q</blockquote><pre>code</pre>`)
	f.Fuzz(func(t *testing.T, in string) {
		out := sanitize(in)
		got, err := Sanitize(in)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Sanitize(%q): error %v is not an *Error", in, err)
			}
			if len(in) <= MaxHTMLBytes && checkChars(in) == nil {
				t.Fatalf("Sanitize(%q) refused a valid input: %v", in, err)
			}
		} else if got != out {
			t.Fatalf("Sanitize(%q) = %q, the policy alone gives %q", in, got, out)
		}
		if problems := activeContent(out); len(problems) > 0 {
			t.Fatalf("sanitize(%q) = %q: active content: %v", in, out, problems)
		}
		if len(out) > MaxStoredHTMLFactor*len(in) {
			t.Fatalf("sanitize(%q) = %q: %d bytes from %d, more than %d times", in, out, len(out), len(in), MaxStoredHTMLFactor)
		}
		if err != nil {
			return
		}
		if again := sanitize(out); again != out {
			t.Fatalf("not idempotent: sanitize(%q) = %q, sanitised again %q", in, out, again)
		}
		if cerr := checkChars(out); cerr != nil {
			t.Fatalf("sanitize(%q) = %q, which fails the input rule: %v", in, out, cerr)
		}
	})
}

var updateCorpus = flag.Bool("update-corpus", false, "write testdata/xss.txt's vectors to testdata/fuzz/FuzzSanitize")

// TestSeedCorpus checks that FuzzSanitize's seed corpus holds every vector of
// testdata/xss.txt, one file each named for its digest (xss-<sha256 prefix>), and no stale
// one; go test -run TestSeedCorpus -update-corpus rewrites them.
func TestSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzSanitize")
	want := map[string]string{}
	for _, v := range readVectors(t) {
		sum := sha256.Sum256([]byte(v.html))
		want["xss-"+hex.EncodeToString(sum[:8])] = "go test fuzz v1\nstring(" + strconv.Quote(v.html) + ")\n"
	}
	if *updateCorpus {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		old, _ := filepath.Glob(filepath.Join(dir, "xss-*"))
		for _, p := range old {
			if _, ok := want[filepath.Base(p)]; !ok {
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
			}
		}
		for name, body := range want {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	have, err := filepath.Glob(filepath.Join(dir, "xss-*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range have {
		if _, ok := want[filepath.Base(p)]; !ok {
			t.Errorf("%s is not a vector of testdata/xss.txt (go test -run TestSeedCorpus -update-corpus)", p)
		}
	}
	for name, body := range want {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(b) != body {
			t.Errorf("%s: missing or stale, want %q (go test -run TestSeedCorpus -update-corpus)", name, strings.TrimSpace(body))
		}
	}
}
