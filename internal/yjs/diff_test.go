package yjs

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
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
		if k%7 == 0 {
			// Invalid UTF-8 in the new text reads as U+FFFD per byte.
			i := rng.IntN(len(b) + 1)
			b = b[:i] + []string{"\xff", "\xe2\x82", "\x80\x80", "\xf0\x9f"}[rng.IntN(4)] + b[i:]
		}
		edits := diffText(a, b)
		var sb strings.Builder
		pos := 0
		for _, e := range edits {
			if e.at < pos || e.at+e.del > len(a) {
				t.Fatalf("case %d: edit %+v out of order or range", k, e)
			}
			sb.WriteString(a[pos:e.at])
			sb.WriteString(string([]rune(e.ins)))
			pos = e.at + e.del
		}
		sb.WriteString(a[pos:])
		if got := sb.String(); got != string([]rune(b)) {
			t.Fatalf("case %d: the edits of %q to %q give %q", k, a, b, got)
		}
		if a == b && len(edits) != 0 {
			t.Fatalf("case %d: %d edits of equal texts", k, len(edits))
		}
	}
}

// TestUTF8Of holds the UTF-16 to UTF-8 conversions to the plain definition (TextEncoder's:
// pairs join, lone surrogates become U+FFFD), into buffers with and without room, and
// utf16Len to the units u16 makes.
func TestUTF8Of(t *testing.T) {
	plain := func(u []uint16) string {
		var sb strings.Builder
		for i := 0; i < len(u); i++ {
			c := rune(u[i])
			switch {
			case c >= 0xd800 && c < 0xdc00 && i+1 < len(u) && u[i+1] >= 0xdc00 && u[i+1] < 0xe000:
				sb.WriteRune(0x10000 + (c-0xd800)<<10 + rune(u[i+1]) - 0xdc00)
				i++
			case c >= 0xd800 && c < 0xe000:
				sb.WriteRune(0xfffd)
			default:
				sb.WriteRune(c)
			}
		}
		return sb.String()
	}
	rng := rand.New(rand.NewPCG(3, 4))
	units := []uint16{'a', 'b', ' ', 0x7f, 0x80, 0xe9, 0x7ff, 0x800, 0x20ac, 0xd83d, 0xde00, 0xdbff, 0xdc00, 0xfffd, 0xffff}
	for k := range 2000 {
		u := make([]uint16, rng.IntN(60))
		for i := range u {
			if rng.IntN(3) == 0 {
				u[i] = units[rng.IntN(len(units))]
			} else {
				u[i] = 'a' + uint16(rng.IntN(26))
			}
		}
		want := plain(u)
		if got := utf8Of(u); got != want {
			t.Fatalf("case %d: utf8Of(%x) = %q, want %q", k, u, got, want)
		}
		if n := utf8Len(u); n != len(want) {
			t.Fatalf("case %d: utf8Len(%x) = %d, want %d", k, u, n, len(want))
		}
		prefix := []byte("xyz")
		buf := append(make([]byte, 0, 3+rng.IntN(len(want)+2)), prefix...)
		if got := string(appendUTF8(buf, u)); got != "xyz"+want {
			t.Fatalf("case %d: appendUTF8 into cap %d gives %q, want %q", k, cap(buf), got, "xyz"+want)
		}
		if n := utf16Len(want); n != uint64(len(u16(want))) {
			t.Fatalf("case %d: utf16Len(%q) = %d, want %d", k, want, n, len(u16(want)))
		}
		// u16 as JavaScript would hold the string, invalid bytes as U+FFFD each.
		in := want
		if k%3 == 0 {
			i := rng.IntN(len(in) + 1)
			in = in[:i] + []string{"\xff", "\xe2\x82", "\x80", "\xf0\x9f\x98"}[rng.IntN(4)] + in[i:]
		}
		if got, want := u16(in), utf16.Encode([]rune(in)); !slices.Equal(got, want) {
			t.Fatalf("case %d: u16(%q) = %x, want %x", k, in, got, want)
		}
	}
}

// TestMyersSameScripts holds myers to the version that kept a snapshot of every diagonal per
// round (myersRef, below): the same shortest scripts, and the same refusals past maxD.
func TestMyersSameScripts(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	seq := func(n, k int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = rng.IntN(k)
		}
		return out
	}
	for c := range 3000 {
		k := 2 + rng.IntN(6)
		a := seq(rng.IntN(40), k)
		b := seq(rng.IntN(40), k)
		if c%2 == 0 && len(a) > 0 {
			b = append(append([]int(nil), a...), seq(rng.IntN(5), k)...)
			i := rng.IntN(len(b))
			b = append(b[:i], b[min(len(b), i+rng.IntN(4)):]...)
		}
		maxD := 1000
		if c%5 == 0 {
			maxD = rng.IntN(20)
		}
		got, gotOK := myers(a, b, maxD)
		want, wantOK := myersRef(a, b, maxD)
		if gotOK != wantOK || !reflect.DeepEqual(got, want) {
			t.Fatalf("case %d: myers(%v, %v, %d) = %v %v, want %v %v", c, a, b, maxD, got, gotOK, want, wantOK)
		}
	}
}

func myersRef[T comparable](a, b []T, maxD int) ([]seqEdit, bool) {
	n, m := len(a), len(b)
	if n == 0 || m == 0 {
		return []seqEdit{{at: 0, del: n, insAt: 0, ins: m}}, true
	}
	off := n + m
	if maxD > n+m {
		maxD = n + m
	}
	v := make([]int, 2*off+2)
	var trace [][]int
	found := -1
	for dd := 0; dd <= maxD; dd++ {
		// Keep only the diagonals this round can touch.
		lo, hi := off-dd-1, off+dd+2
		if lo < 0 {
			lo = 0
		}
		if hi > len(v) {
			hi = len(v)
		}
		snap := make([]int, hi-lo)
		copy(snap, v[lo:hi])
		trace = append(trace, snap)
		for k := -dd; k <= dd; k += 2 {
			var x int
			if k == -dd || (k != dd && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[off+k] = x
			if x >= n && y >= m {
				found = dd
				break
			}
		}
		if found >= 0 {
			break
		}
	}
	if found < 0 {
		return nil, false
	}
	// Walk back through the saved rounds.
	get := func(dd, k int) int {
		lo := off - dd - 1
		if lo < 0 {
			lo = 0
		}
		return trace[dd][off+k-lo]
	}
	type step struct{ x, y, px, py int }
	var steps []step
	x, y := n, m
	for dd := found; dd > 0; dd-- {
		k := x - y
		var pk int
		if k == -dd || (k != dd && get(dd, k-1) < get(dd, k+1)) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := get(dd, pk)
		py := px - pk
		steps = append(steps, step{x, y, px, py})
		x, y = px, py
	}
	// Each step is one insertion or deletion from (px, py), then a snake.
	var edits []seqEdit
	for i := len(steps) - 1; i >= 0; i-- {
		s := steps[i]
		var e seqEdit
		// Which of the two it was: a deletion moves x by one more than y before the snake.
		if (s.px - s.py) < (s.x - s.y) {
			e = seqEdit{at: s.px, del: 1, insAt: s.py}
		} else {
			e = seqEdit{at: s.px, insAt: s.py, ins: 1}
		}
		if k := len(edits) - 1; k >= 0 && edits[k].at+edits[k].del == e.at && edits[k].insAt+edits[k].ins == e.insAt {
			edits[k].del += e.del
			edits[k].ins += e.ins
			continue
		}
		edits = append(edits, e)
	}
	return edits, true
}
