package yjs

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestDiffText checks that the edits of diffText turn the old text into the new one, on
// short texts (diffed by character) and long ones (by line first), with characters of one to
// four bytes.
func TestDiffText(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", "c", " ", "\n", "é", "ß", "€", "😀", "\uFFFD"}
	text := func(n int) string {
		var sb strings.Builder
		for range n {
			sb.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return sb.String()
	}
	mutate := func(s string) string {
		rs := []rune(s)
		for range 1 + rng.IntN(20) {
			i := rng.IntN(len(rs) + 1)
			switch rng.IntN(3) {
			case 0:
				rs = append(rs[:i:i], append([]rune(text(1+rng.IntN(5))), rs[i:]...)...)
			case 1:
				if i < len(rs) {
					rs = append(rs[:i:i], rs[i+1:]...)
				}
			default:
				if i < len(rs) {
					rs[i] = []rune(alphabet[rng.IntN(len(alphabet))])[0]
				}
			}
		}
		return string(rs)
	}
	for k := range 300 {
		n := 1 + rng.IntN(40)
		if k%3 == 0 {
			n = 2000 + rng.IntN(8000)
		}
		a := text(n)
		b := mutate(a)
		if k%10 == 0 {
			b = text(rng.IntN(50))
		}
		edits := diffText(a, b)
		var sb strings.Builder
		pos := 0
		for _, e := range edits {
			if e.at < pos || e.at+e.del > len(a) {
				t.Fatalf("case %d: edit %+v out of order or range", k, e)
			}
			sb.WriteString(a[pos:e.at])
			sb.WriteString(e.ins)
			pos = e.at + e.del
		}
		sb.WriteString(a[pos:])
		if got := sb.String(); got != b {
			t.Fatalf("case %d: the edits of %q to %q give %q", k, a, b, got)
		}
		if a == b && len(edits) != 0 {
			t.Fatalf("case %d: %d edits of equal texts", k, len(edits))
		}
	}
}
