package richtext

import (
	"errors"
	"strconv"
	"testing"
)

// TestXSSVectors runs every vector of testdata/xss.txt through Sanitize and holds the output
// to the active-content checker; a refusal (control characters) is an *Error. As a control,
// the checker must see active content in the raw vectors, or it could pass anything.
func TestXSSVectors(t *testing.T) {
	vectors := readVectors(t)
	if len(vectors) < 50 {
		t.Fatalf("testdata/xss.txt has %d vectors, want at least 50", len(vectors))
	}
	refused, rawActive := 0, 0
	for _, v := range vectors {
		if len(activeContent(v.html)) > 0 {
			rawActive++
		}
		out, err := Sanitize(v.html)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Errorf("line %d: %q: error %v is not an *Error", v.line, v.html, err)
			}
			refused++
			continue
		}
		if problems := activeContent(out); len(problems) > 0 {
			t.Errorf("line %d: %q sanitised to %q, still active: %v", v.line, v.html, out, problems)
		}
		if testing.Verbose() {
			t.Logf("line %d: %s\n  -> %s", v.line, strconv.Quote(v.html), strconv.Quote(out))
		}
	}
	t.Logf("%d vectors: %d refused (control characters), %d sanitised; the checker saw active content in %d raw vectors",
		len(vectors), refused, len(vectors)-refused, rawActive)
	if rawActive < len(vectors)*3/4 {
		t.Errorf("the checker saw active content in only %d of %d raw vectors: it cannot be trusted", rawActive, len(vectors))
	}
}
