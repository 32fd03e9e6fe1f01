package yjs

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// Updates of 2 to 5 clients editing concurrently (with partial syncs between them), applied
// in any order, one at a time or a few merged, with and without the work limit, leave nothing
// pending and read as in order: drain never loses the wake-up of a struct whose dependency
// arrived. (The fuzz targets hold drain to terminating; this holds it to finishing.)
func TestShuffledUpdatesLeaveNothingPending(t *testing.T) {
	for seed := range 300 {
		rng := rand.New(rand.NewPCG(uint64(seed), 99))
		n := 2 + rng.IntN(4)
		docs := make([]*Doc, n)
		for i := range docs {
			docs[i] = NewDocWithClient(uint64(10 + i))
		}
		var all [][]byte
		for step := 0; step < 40; step++ {
			i := rng.IntN(n)
			d := docs[i]
			switch rng.IntN(4) {
			case 0, 1:
				cur, _ := d.JSON("t", Text).(string)
				pos := 0
				if len(cur) > 0 {
					pos = rng.IntN(len(cur) + 1)
				}
				ins := string(rune('a' + rng.IntN(26)))
				next := cur[:pos] + ins + cur[pos:]
				if len(cur) > 3 && rng.IntN(3) == 0 {
					next = cur[:pos/2] + cur[pos:]
				}
				u, err := d.Replace("t", Text, next)
				if err != nil {
					t.Fatal(err)
				}
				if len(u) > 0 {
					all = append(all, u)
				}
			case 2:
				m := map[string]any{}
				for k := 0; k < 3; k++ {
					if rng.IntN(2) == 0 {
						m[string(rune('k'+k))] = []any{float64(rng.IntN(5)), strings.Repeat("x", rng.IntN(3))}
					}
				}
				u, err := d.Replace("m", Map, m)
				if err != nil {
					t.Fatal(err)
				}
				if len(u) > 0 {
					all = append(all, u)
				}
			case 3:
				// A sync: a peer receives a random subset of the updates so far.
				j := rng.IntN(n)
				for _, u := range all {
					if rng.IntN(2) == 0 {
						_ = docs[j].Apply(u)
					}
				}
			}
		}
		ref := NewDocWithClient(1)
		for _, u := range all {
			if err := ref.Apply(u); err != nil {
				t.Fatal(err)
			}
		}
		if ref.Pending() {
			t.Fatalf("seed %d: in order, pending", seed)
		}
		want := shuffleView(t, ref)
		for round := 0; round < 5; round++ {
			d := NewDocWithClient(2)
			perm := rng.Perm(len(all))
			for k := 0; k < len(perm); {
				g := 1 + rng.IntN(3)
				var grp [][]byte
				for ; g > 0 && k < len(perm); g-- {
					grp = append(grp, all[perm[k]])
					k++
				}
				u := grp[0]
				if len(grp) > 1 {
					var err error
					if u, err = Merge(grp...); err != nil {
						t.Fatal(err)
					}
				}
				var err error
				if round%2 == 1 {
					_, err = d.ApplyUntrusted(context.Background(), u, Limits{})
				} else {
					err = d.Apply(u)
				}
				if err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
			}
			if d.Pending() {
				t.Fatalf("seed %d round %d: shuffled, pending", seed, round)
			}
			if got := shuffleView(t, d); got != want {
				t.Fatalf("seed %d round %d: %s want %s", seed, round, got, want)
			}
		}
	}
}

// shuffleView is what the test compares: the text and the map, as JSON.
func shuffleView(t *testing.T, d *Doc) string {
	b, err := json.Marshal([]any{d.JSON("t", Text), d.JSON("m", Map)})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
