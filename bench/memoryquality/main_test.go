package main

import (
	"context"
	"math"
	"testing"

	"github.com/collab/collab/internal/embed"
)

// TestLocalBeatsLexical runs the evaluation on the labelled set: the local embedder's recall@5
// must be above the BM25 baseline's. It fails if the model, the text embedded or the set
// change so that the semantic search no longer earns its place.
func TestLocalBeatsLexical(t *testing.T) {
	js, qs, err := load("testdata")
	if err != nil {
		t.Fatal(err)
	}
	if len(js) < 150 || len(qs) < 50 {
		t.Fatalf("%d judgments and %d queries, want at least 150 and 50", len(js), len(qs))
	}
	e, err := embed.NewLocal()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := evaluate(context.Background(), e, js, qs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", rep.table())
	if low := rep.buckets[0] + rep.buckets[1]; 2*low < len(qs) {
		t.Errorf("%d of %d queries share at most a quarter of their words with their judgments, want at least half", low, len(qs))
	}
	local, lexical := rep.Recall5(methodLocal), rep.Recall5(methodBM25)
	if local <= lexical {
		t.Errorf("recall@5: local embedder %.3f, not above the lexical baseline's %.3f", local, lexical)
	}
}

func TestBM25(t *testing.T) {
	bm := newBM25([]string{"The contrast is low", "Invoice total is wrong", "contrast contrast on the invoice"})
	s := bm.scores("Low CONTRAST!")
	if s[1] != 0 || s[0] <= s[2] || s[2] <= 0 {
		t.Errorf("scores %v: want the first text first, the third next, the second 0", s)
	}
	// The first text: "low" and "contrast" (df 1 and 2 of 3), tf 1, 2 tokens against an
	// average of 8/3 ("the", "is", "on" are stopwords).
	norm := 2.2 / (1 + 1.2*(0.25+0.75*2/(8.0/3)))
	want := (math.Log(1+2.5/1.5) + math.Log(1+1.5/2.5)) * norm
	if math.Abs(s[0]-want) > 1e-12 {
		t.Errorf("score %v, want %v", s[0], want)
	}
	if got := rank(s, true); len(got) != 2 || got[0] != 0 || got[1] != 2 {
		t.Errorf("ranking %v, want [0 2]", got)
	}
}

func TestMetrics(t *testing.T) {
	ranking := []int{4, 2, 7, 1, 0, 3}
	rel := map[int]bool{7: true, 3: true}
	if r := recallAt(ranking, rel, 5); r != 0.5 {
		t.Errorf("recall@5 %v, want 0.5", r)
	}
	if rr := reciprocalRank(ranking, rel); rr != 1.0/3 {
		t.Errorf("reciprocal rank %v, want 1/3", rr)
	}
	if got := fuse(3, []int{0, 1}, []int{1}); got[0] != 1 || got[1] != 0 || len(got) != 2 {
		t.Errorf("fused %v, want [1 0]", got)
	}
}
