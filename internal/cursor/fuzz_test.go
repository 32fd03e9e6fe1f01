package cursor

import (
	"errors"
	"testing"
)

// Tokens sealed once, at t0, by newTimedSealer(t, "fuzz"): the keys derive from a fixed master,
// so they open in every run, and they are the only input that may.
var sealedSeeds = []struct{ token, scope string }{
	{"Atgq_vFCq81xFJah34RNfToeMgstaP-hkPeikumyhdKA42tew3FAwNmRV8OW4mfuap1qDkCzGL7nlIyLpx2jMgc", "workspace\x00w1"},
	{"AkORkonhBzGcRltbHwCIRiTltH7vGxbSvLT4Y6Lg83U5G1LSvmQhLv-ovwdwcrCDLrrw", ""},
}

// expiredSeed was sealed 25 hours before t0; untimedSeed in the first format. Both are ours
// and must be refused as expired, never opened.
const (
	expiredSeed = "AjIMnqA-dlUWqa37_uK0J3-P1AiQ8Jon03wnoc-Xz4ceOtQrhMIKBqlGjKqS4gO7_pZ9AUji"
	untimedSeed = "AQAAAAAAAAAAAAAAAAGL2R2Bs4c10gpLTPoest9k9uws3PkeMsk760e8VxG7"
)

func TestSeedsOpenAsExpected(t *testing.T) {
	s, _ := newTimedSealer(t, "fuzz")
	var got pos
	for _, seed := range sealedSeeds {
		if err := s.Open(seed.token, seed.scope, &got); err != nil {
			t.Errorf("seed %q: %v", seed.token, err)
		}
	}
	for _, tok := range []string{expiredSeed, untimedSeed} {
		if err := s.Open(tok, "workspace\x00w1", &got); !errors.Is(err, ErrExpired) {
			t.Errorf("seed %q: %v", tok, err)
		}
	}
}

// FuzzOpen: page tokens come from callers, so Open must take any string without panicking, and
// must open none but a token this key sealed for that very scope. The seed corpus is in
// testdata/fuzz/FuzzOpen.
func FuzzOpen(f *testing.F) {
	s, _ := newTimedSealer(f, "fuzz")
	for _, seed := range sealedSeeds {
		f.Add(seed.token, seed.scope)
	}
	f.Add(expiredSeed, "workspace\x00w1")
	f.Add(untimedSeed, "workspace\x00w1")
	f.Fuzz(func(t *testing.T, token, scope string) {
		var got pos
		err := s.Open(token, scope, &got)
		if err != nil {
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrExpired) {
				t.Fatalf("Open(%q) = %v: neither invalid nor expired", token, err)
			}
			return
		}
		for _, seed := range sealedSeeds {
			if seed.token == token && seed.scope == scope {
				return
			}
		}
		t.Fatalf("Open(%q, %q) opened a token this key never sealed for that scope", token, scope)
	})
}
