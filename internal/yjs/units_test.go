package yjs

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// Units hold what []uint16 holds, one byte a unit while they can: the same units, the same
// UTF-8, and concatenation and cutting (surrogate pairs included) agree with []uint16's.
func TestUnitsAgreeWithUTF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", "Zz ", "é", "ÿ", "\u0100", "€", "😀", "\xff", "\xc3", "\ufffd", "\n"}
	for range 2000 {
		var s, s2 string
		for range rng.IntN(8) {
			s += pieces[rng.IntN(len(pieces))]
		}
		for range rng.IntN(8) {
			s2 += pieces[rng.IntN(len(pieces))]
		}
		u, want := unitsOf(s), u16(s)
		if !slices.Equal(u.u16(), want) || u.len() != len(want) {
			t.Fatalf("unitsOf(%q) = %x, want %x", s, u.u16(), want)
		}
		if narrow := !u.wide; narrow != !slices.ContainsFunc(want, func(c uint16) bool { return c > 0xff }) {
			t.Fatalf("unitsOf(%q) wide %v", s, u.wide)
		}
		if got := string(u.appendUTF8(nil)); got != utf8Of(want) || u.utf8Len() != len(got) {
			t.Fatalf("utf8 of %q: %q (%d), want %q", s, got, u.utf8Len(), utf8Of(want))
		}
		both := append(slices.Clone(want), u16(s2)...)
		if got := u.concat(unitsOf(s2)); !slices.Equal(got.u16(), both) {
			t.Fatalf("%q + %q = %x, want %x", s, s2, got.u16(), both)
		}
		if len(want) > 1 {
			k := 1 + rng.IntN(len(want)-1)
			c := textContent(unitsOf(s))
			r := c.splice(uint64(k))
			joined := append(c.text().u16(), r.text().u16()...)
			if len(joined) != len(want) || utf8Of(joined) != utf8Of(append(append([]uint16(nil), fixCut(want[:k], true)...), fixCut(want[k:], false)...)) {
				t.Fatalf("splitting %q at %d: %x", s, k, joined)
			}
		}
	}
}

// fixCut is what cutting a surrogate pair at a side leaves, as yjs does: U+FFFD for its half.
func fixCut(u []uint16, left bool) []uint16 {
	u = slices.Clone(u)
	if left && len(u) > 0 && u[len(u)-1] >= 0xd800 && u[len(u)-1] <= 0xdbff {
		u[len(u)-1] = 0xfffd
	}
	return u
}
