package ids

import (
	"strings"
	"testing"
)

func TestRandom(t *testing.T) {
	seen := map[string]bool{}
	counts := map[rune]int{}
	for range 2000 {
		s := Random(20)
		if len(s) != 20 || seen[s] {
			t.Fatalf("bad or repeated id %q", s)
		}
		seen[s] = true
		for _, r := range s {
			if !strings.ContainsRune(alphabet, r) {
				t.Fatalf("character %q outside the alphabet", r)
			}
			counts[r]++
		}
	}
	// 40000 draws over 62 symbols: about 645 each; a biased draw would skew the ends.
	for _, r := range alphabet {
		if counts[r] < 450 || counts[r] > 850 {
			t.Fatalf("symbol %q drawn %d times: not uniform", r, counts[r])
		}
	}
}

func TestAppendRandom(t *testing.T) {
	for _, n := range []int{0, 1, 12, 32, 40} { // 40: past the small buffer on the stack
		got := AppendRandom([]byte("pre_"), n)
		if len(got) != 4+n || string(got[:4]) != "pre_" {
			t.Fatalf("AppendRandom(pre_, %d) = %q", n, got)
		}
		for _, r := range string(got[4:]) {
			if !strings.ContainsRune(alphabet, r) {
				t.Fatalf("character %q outside the alphabet", r)
			}
		}
	}
}

func TestHashMatchesMask(t *testing.T) {
	h := Hash("token-1234")
	if h == "token-1234" || len(h) != 64 {
		t.Fatalf("hash %q", h)
	}
	if !Matches("token-1234", h) || Matches("token-1235", h) || Matches("", h) {
		t.Fatal("Matches is wrong")
	}
	if LastFour("token-1234") != "1234" || LastFour("abc") != "" {
		t.Fatal("LastFour is wrong")
	}
	if m := Mask("1234"); !strings.HasSuffix(m, "1234") || len(m) < 8 {
		t.Fatalf("mask %q", m)
	}
}
