package richtext

import (
	"errors"
	"strings"
	"sync"
	"testing"
)

// What the policy keeps, drops and adds (docs/comments.md, "Content safety"), output byte for
// byte.
func TestSanitize(t *testing.T) {
	const (
		webRel  = ` rel="nofollow noreferrer noopener" target="_blank"`
		mailRel = ` rel="nofollow noreferrer"`
	)
	cases := []struct{ name, in, want string }{
		{"formatting kept", `<p><b>b</b><strong>s</strong><i>i</i><em>e</em><u>u</u><s>s</s><del>d</del><ins>n</ins><mark>m</mark><sub>1</sub><sup>2</sup><code>c</code><br><span>x</span></p>`,
			`<p><b>b</b><strong>s</strong><i>i</i><em>e</em><u>u</u><s>s</s><del>d</del><ins>n</ins><mark>m</mark><sub>1</sub><sup>2</sup><code>c</code><br><span>x</span></p>`},
		{"blocks kept", `<blockquote>q</blockquote><pre>a  b</pre><ul><li>1</li></ul><ol><li>2</li></ol>`,
			`<blockquote>q</blockquote><pre>a  b</pre><ul><li>1</li></ul><ol><li>2</li></ol>`},
		{"text escaped", `a < b & "c" 'd' > e`, `a &lt; b &amp; &#34;c&#34; &#39;d&#39; &gt; e`},
		{"entities kept as text", `&lt;b&gt; &amp;amp; &eacute;`, `&lt;b&gt; &amp;amp; é`},
		{"https link", `<a href="https://example.com/a?b=c&amp;d=e#f">x</a>`, `<a href="https://example.com/a?b=c&amp;d=e#f"` + webRel + `>x</a>`},
		{"http link", `<a href=http://example.com>x</a>`, `<a href="http://example.com"` + webRel + `>x</a>`},
		{"mailto link", `<a href="mailto:ann@example.com">ann</a>`, `<a href="mailto:ann@example.com"` + mailRel + `>ann</a>`},
		{"caller's rel and target replaced", `<a href="https://example.com/" rel="opener" target="_top">x</a>`, `<a href="https://example.com/"` + webRel + `>x</a>`},
		{"link attributes dropped", `<a href="https://example.com/" title="t" ping="https://p/" download>x</a>`, `<a href="https://example.com/"` + webRel + `>x</a>`},
		{"javascript link dropped, text kept", `<a href="javascript:alert(1)">x</a>`, `x`},
		{"relative link dropped", `<a href="/x">x</a><a href="//evil.example/">y</a>`, `xy`},
		{"http without host dropped", `<a href="https:example.com">x</a>`, `x`},
		{"link without href dropped", `<a name="x">x</a>`, `x`},
		{"mention kept", `<span data-user-id="user_1.a@b:c+d-e">@Ann</span>`, `<span data-user-id="user_1.a@b:c+d-e">@Ann</span>`},
		{"mention id out of pattern", `<span data-user-id="a b">@Ann</span>`, `<span>@Ann</span>`},
		{"data-user-id only on span", `<b data-user-id="u1">x</b>`, `<b>x</b>`},
		{"other data attributes dropped", `<span data-user-id="u1" data-mention="x" data-toggle="modal">@A</span>`, `<span data-user-id="u1">@A</span>`},
		{"dir kept", `<p dir="rtl">x</p><span dir=auto>y</span>`, `<p dir="rtl">x</p><span dir="auto">y</span>`},
		{"dir out of pattern", `<p dir="up">x</p>`, `<p>x</p>`},
		{"class, id, style, title dropped", `<span class="c" id="i" style="color:red" title="t">x</span>`, `<span>x</span>`},
		{"event attributes dropped", `<b onclick="alert(1)" onmouseover=x>x</b>`, `<b>x</b>`},
		{"disallowed elements dropped, text kept", `<div><h1>t</h1><table><tr><td>c</td></tr></table></div>`, `tc`},
		{"script and style dropped with content", `a<script>alert(1)</script><style>*{}</style>b`, `ab`},
		{"images and frames dropped", `<img src="https://example.com/x.png"><iframe src="https://example.com/"></iframe>`, ``},
		{"comments dropped", `a<!-- x -->b`, `ab`},
		{"control references dropped", `a&#1;b&#x7f;c&#x81;d&#9;e`, "abcd\te"},
		{"control references dropped from a link's query", `<a href="https://e.com/?a&#x81;b">x</a>`, `<a href="https://e.com/?ab"` + webRel + `>x</a>`},
		{"nul reference replaced", `a&#0;b`, "a\uFFFDb"},
		{"carriage returns normalised", "a\r\nb\rc", "a\nb\nc"},
		{"empty", ``, ``},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Sanitize(c.in)
			if err != nil {
				t.Fatalf("Sanitize(%q): %v", c.in, err)
			}
			if got != c.want {
				t.Errorf("Sanitize(%q)\n got %q\nwant %q", c.in, got, c.want)
			}
			if p := activeContent(got); len(p) > 0 {
				t.Errorf("active content: %v", p)
			}
		})
	}
}

// What Sanitize refuses, with the message the API shows after the field's name, and the
// limits' edges.
func TestSanitizeRefuses(t *testing.T) {
	cases := []struct{ name, in, msg string }{
		{"invalid UTF-8", "<b>\xff</b>", "must be valid UTF-8."},
		{"NUL", "<b>a\x00</b>", "must not contain control characters other than tab, line feed and carriage return."},
		{"escape", "a\x1b[31m", "must not contain control characters other than tab, line feed and carriage return."},
		{"form feed", "<svg\x0conload=alert(1)>", "must not contain control characters other than tab, line feed and carriage return."},
		{"C1 control", "a\u0085b", "must not contain control characters other than tab, line feed and carriage return."},
		{"too long", strings.Repeat("a", MaxHTMLBytes+1), "must be at most 65536 bytes."},
		{"too many tags", strings.Repeat("<b>", MaxHTMLTags+1), "must have at most 4096 tags."},
		{"too many stray <", strings.Repeat("<", MaxHTMLTags+1), "must have at most 4096 tags."},
		{"too many links", strings.Repeat(`<a href="https://e.com/">x</a>`, MaxHTMLLinks+1), "must have at most 256 links."},
		{"too many links, upper case", strings.Repeat(`<A>`, MaxHTMLLinks+1), "must have at most 256 links."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := Sanitize(c.in)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Sanitize(%.40q) = %q, %v; want an *Error", c.in, out, err)
			}
			if err.Error() != c.msg {
				t.Errorf("message %q, want %q", err.Error(), c.msg)
			}
		})
	}
	accepted := map[string]string{
		"MaxHTMLBytes":           strings.Repeat("a", MaxHTMLBytes),
		"MaxHTMLTags":            strings.Repeat("<b>", MaxHTMLTags),
		"MaxHTMLLinks":           strings.Repeat(`<a href="https://e.com/">x`, MaxHTMLLinks),
		"tags named a-something": strings.Repeat(`<abbr><audio><aside>`, MaxHTMLLinks),
		"tab and line breaks":    "<p>a\tb\r\nc</p>",
	}
	for name, in := range accepted {
		if _, err := Sanitize(in); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestCheckText(t *testing.T) {
	const control = "must not contain control characters other than tab, line feed and carriage return."
	cases := []struct{ name, in, msg string }{
		{"empty", "", ""},
		{"plain", "Looks good, ship it!", ""},
		{"line breaks and tabs", "a\nb\r\nc\td", ""},
		{"any script", "مرحبا 你好 שלום 👩‍💻", ""},
		{"bidi marks and isolates", "a\u200fb\u2067c\u2069d\u202ee", ""},
		{"markup is text", "<script>alert(1)</script>", ""},
		{"at the limit", strings.Repeat("é", MaxTextBytes/2), ""},
		{"too long", strings.Repeat("é", MaxTextBytes/2) + "a", "must be at most 16384 bytes."},
		{"invalid UTF-8", "a\xc3", "must be valid UTF-8."},
		{"NUL", "a\x00b", control},
		{"bell", "a\x07b", control},
		{"vertical tab", "a\vb", control},
		{"DEL", "a\x7fb", control},
		{"C1 next line", "a\u0085b", control},
		{"C1 CSI", "a\u009bb", control},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckText(c.in)
			switch {
			case c.msg == "" && err != nil:
				t.Errorf("CheckText(%.40q) = %v, want nil", c.in, err)
			case c.msg != "" && (err == nil || err.Error() != c.msg):
				t.Errorf("CheckText(%.40q) = %v, want %q", c.in, err, c.msg)
			}
			var e *Error
			if err != nil && !errors.As(err, &e) {
				t.Errorf("error %v is not an *Error", err)
			}
		})
	}
}

// The one policy serves concurrent calls (go test -race checks it reads only): every vector
// sanitised from 8 goroutines at once gives what it gives alone.
func TestSanitizeConcurrent(t *testing.T) {
	vectors := readVectors(t)
	want := make([]string, len(vectors))
	for i, v := range vectors {
		want[i], _ = Sanitize(v.html)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i, v := range vectors {
				if got, _ := Sanitize(v.html); got != want[i] {
					t.Errorf("line %d: concurrent Sanitize gave %q, alone %q", v.line, got, want[i])
				}
			}
		})
	}
	wg.Wait()
}
