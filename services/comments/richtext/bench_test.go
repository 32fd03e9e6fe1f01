package richtext

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// adversarialInputs are commentHtml bodies built to make the sanitiser work hard, size bytes
// each: deep nesting, many or huge attributes, entities, long URLs, many links. With bounded,
// a shape repeats only as far as MaxHTMLTags and MaxHTMLLinks allow and plain text fills the
// rest, so that Sanitize accepts it: the worst the limits let through.
func adversarialInputs(size int, bounded bool) map[string]string {
	// repeat repeats unit as often as size (and with bounded, the limits) allow.
	repeat := func(unit string, room int) string {
		n := room / len(unit)
		if tags, links := countTags(unit); bounded && tags > 0 {
			n = min(n, MaxHTMLTags/tags)
			if links > 0 {
				n = min(n, MaxHTMLLinks/links)
			}
		}
		return strings.Repeat(unit, n)
	}
	pad := func(s string) string { return s + strings.Repeat("x", size-len(s)) }
	fill := func(unit string) string { return pad(repeat(unit, size)) }
	// oneTag is one tag whose attributes (or one attribute's value) fill size: units, then
	// padding bytes.
	oneTag := func(open, unit string, padding byte, close string) string {
		s := open + strings.Repeat(unit, (size-len(open)-len(close))/len(unit))
		return s + strings.Repeat(string(padding), size-len(s)-len(close)) + close
	}
	return map[string]string{
		"plain-text":     fill("comment text "),
		"nested-allowed": fill("<b>"),
		"nested-closed":  pad(repeat("<i></i>", size)),
		"nested-then-closed": pad(strings.Repeat("<i>", len(repeat("<i></i>", size))/7) +
			strings.Repeat("</i>", len(repeat("<i></i>", size))/7)),
		"nested-disallowed": fill("<div>"),
		"anchors-no-href":   fill("<a >"),
		"skip-content":      fill("<object>"),
		"attrs-kept":        oneTag("<span", ` dir=rtl`, ' ', ">x</span>"),
		"attrs-dropped":     oneTag("<span", ` onclick=x`, ' ', ">x</span>"),
		"attrs-unknown-tag": oneTag("<xx", ` a=b`, ' ', ">"),
		"huge-attr-value":   oneTag(`<span data-user-id="`, "u", 'u', `">x</span>`),
		"unclosed-attr":     oneTag(`<b title="`, "x", 'x', ""),
		"entities-named":    fill("&NotEqualTilde;"),
		"entities-numeric":  fill("&#x0000000000041;"),
		"entity-long-name":  oneTag("&", "a", 'a', ""),
		"escapes":           fill(`"'>&`),
		"long-url":          oneTag(`<a href="https://example.com/`, "a", 'a', `">x</a>`),
		"long-url-query":    oneTag(`<a href="https://example.com/?`, "a=b&", 'a', `">x</a>`),
		"many-links":        fill(`<a href=http://x>`),
		"many-mailto":       fill(`<a href=mailto:a>x</a>`),
		"comments":          fill("<!--x-->"),
		"lt-signs":          fill("<"),
		"mentions":          fill(`<span data-user-id="user-123">@Ann</span> `),
		"javascript-urls":   fill(`<a href="jav&#x09;ascript:alert(1)">x</a>`),
		"foreign-content":   fill("<svg><math>"),
		"raw-text-unclosed": pad("<textarea>" + repeat("<b>", size-10)[3:]),
	}
}

// BenchmarkSanitizeAdversarial measures Sanitize on adversarial inputs at MaxHTMLBytes and at
// a quarter of it, so a superlinear case shows as a ratio far above 4 between the two
// (docs/comments.md, "Content safety"; docs/benchmarks.md). "policy" runs the bluemonday
// policy alone on the same shapes without the tag and link bounds: what the bounds avoid.
// Reported: time, bytes and allocations per call, input MB/s, output bytes per input byte.
func BenchmarkSanitizeAdversarial(b *testing.B) {
	for _, bounded := range []bool{true, false} {
		for _, size := range []int{MaxHTMLBytes / 4, MaxHTMLBytes} {
			inputs := adversarialInputs(size, bounded)
			for _, name := range sortedKeys(inputs) {
				in := inputs[name]
				run := func(s string) (string, error) { return sanitize(s), nil }
				prefix := "policy/"
				if bounded {
					run, prefix = Sanitize, "Sanitize/"
				}
				b.Run(prefix+name+"/"+strconv.Itoa(size>>10)+"KiB", func(b *testing.B) {
					if len(in) != size {
						b.Fatalf("input is %d bytes, want %d", len(in), size)
					}
					b.ReportAllocs()
					b.SetBytes(int64(len(in)))
					var out string
					for b.Loop() {
						var err error
						if out, err = run(in); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(len(out))/float64(len(in)), "out/in")
				})
			}
		}
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
