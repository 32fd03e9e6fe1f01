package richtext

import (
	"slices"
	"testing"

	"github.com/collab/collab/internal/testkit/xsstest"
)

// The checker of "no active content" (docs/comments.md, "Content safety") is
// internal/testkit/xsstest's, independent of the policy's code: it parses sanitised HTML as a
// browser would, with golang.org/x/net/html's tree builder (HTML5 parsing, foreign content,
// the adoption agency), both ways a front end places a comment (the innerHTML of a div, and
// inside a page's served HTML), against the documented allow-list. The end-to-end tests hold
// the API's answers to the same check.

// activeContent returns what in out is not allowed, in words; none for inert HTML.
func activeContent(out string) []string { return xsstest.ActiveContent(out) }

// checkedElements and checkedAttributes are the checker's allow-list, for the browser audit.
var (
	checkedElements   = allowedElementsOf(xsstest.Allowed)
	checkedAttributes = xsstest.Allowed
)

func allowedElementsOf(m map[string][]string) []string {
	var out []string
	for e := range m {
		out = append(out, e)
	}
	slices.Sort(out)
	return out
}

// xssVector is a line of testdata/xss.txt.
type xssVector struct {
	line int
	html string
}

// readVectors reads testdata/xss.txt (its format is in its header).
func readVectors(t testing.TB) []xssVector {
	t.Helper()
	vs, err := xsstest.Vectors()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]xssVector, len(vs))
	for i, v := range vs {
		out[i] = xssVector{line: v.Line, html: v.HTML}
	}
	return out
}
