package xsstest

import (
	"strings"
	"testing"
)

// The checker passes what the allow-list keeps and flags the raw vectors (at least three
// quarters of them, as the richtext tests require of their checker), so a test that finds
// nothing with it found nothing because there was nothing.
func TestActiveContent(t *testing.T) {
	for _, inert := range []string{
		"plain text", `<b>bold</b> <a href="https://example.com/x" rel="nofollow noreferrer noopener" target="_blank">link</a>`,
		`<span data-user-id="u1">@Ann</span><p dir="rtl">x</p><a href="mailto:a@example.com">mail</a>`, "&lt;script&gt;",
	} {
		if p := ActiveContent(inert); len(p) > 0 {
			t.Errorf("%q: %v", inert, p)
		}
	}
	for _, active := range []string{
		"<script>alert(1)</script>", `<img src=x onerror=alert(1)>`, `<a href="javascript:alert(1)">x</a>`,
		`<a href=" JaVa&#x09;script:alert(1)">x</a>`, `<b style="x">y</b>`, `<svg><a href="https://e.com">x</a></svg>`,
		`<span class="c">x</span>`, `<a href="/relative">x</a>`,
	} {
		if p := ActiveContent(active); len(p) == 0 {
			t.Errorf("%q passed", active)
		}
	}
	vs, err := Vectors()
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) < 50 {
		t.Fatalf("%d vectors, want at least 50", len(vs))
	}
	flagged := 0
	for _, v := range vs {
		if len(ActiveContent(v.HTML)) > 0 {
			flagged++
		}
		if strings.TrimSpace(v.HTML) == "" {
			t.Errorf("line %d is empty", v.Line)
		}
	}
	t.Logf("%d vectors, %d flagged raw", len(vs), flagged)
	if flagged < len(vs)*3/4 {
		t.Errorf("the checker flags only %d of %d raw vectors", flagged, len(vs))
	}
}
