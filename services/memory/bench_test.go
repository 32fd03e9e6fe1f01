package memory

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	memoryv1 "github.com/collab/collab/proto/collab/memory/v1"
)

// benchWords make the judgments' texts: random sentences of 12 words out of 2,000.
var benchWords = func() []string {
	w := make([]string, 2000)
	for i := range w {
		w[i] = fmt.Sprintf("w%d", i)
	}
	return w
}()

func benchSentence(r *rand.Rand) string {
	var b strings.Builder
	for i := range 12 {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(benchWords[r.IntN(len(benchWords))])
	}
	return b.String()
}

// benchHarness is a server on the memory store holding n judgments in one organization, with
// 512-dimensional vectors (the local model's size) of the test embedder.
func benchHarness(b *testing.B, n int) *harness {
	emb := newBag(512)
	store := NewMemoryStore()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		j := &Judgment{APIKey: "k1", OrganizationID: "o", RecordID: fmt.Sprint("j", i), DocumentID: fmt.Sprint("d", i%100),
			Decision: "approve", Reasoning: benchSentence(r), JudgeType: JudgeHuman, CreatedAt: int64(i), Embedder: emb.Name(), Dim: 512}
		j.ReviewVector = bagVector(reviewText(j), 512)
		if _, err := store.PutJudgment(bg, j); err != nil {
			b.Fatal(err)
		}
	}
	t := &testing.T{}
	return newHarnessOn(t, store, emb)
}

func benchSearch(b *testing.B, n int) {
	h := benchHarness(b, n)
	r := rand.New(rand.NewPCG(3, 4))
	queries := make([]string, 64)
	for i := range queries {
		queries[i] = benchSentence(r)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		resp, err := h.srv.SearchJudgments(k1, &memoryv1.SearchJudgmentsRequest{Query: queries[i%len(queries)], OrganizationId: "o"})
		lat = append(lat, time.Since(start))
		if err != nil || len(resp.GetResults()) != 10 || resp.GetTotalInScope() != float64(n) {
			b.Fatalf("search: %v %v", resp, err)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

func BenchmarkSearch10k(b *testing.B)  { benchSearch(b, 10_000) }
func BenchmarkSearch100k(b *testing.B) { benchSearch(b, 100_000) }

// The memory store's two-pass search (int8 bounds, then float32) gives exactly what scoring
// every candidate with dot gives (topK), whatever the data: sparse (bag) and dense vectors, a
// tight top of near-duplicates, two models side by side, judgments without content, updates,
// deletions and moves between documents, filters.
func TestSearchVectorsIsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	s := NewMemoryStore()
	qd := randomUnit(r, 512)
	for i := range 12_000 {
		j := &Judgment{APIKey: "k1", OrganizationID: "o", RecordID: fmt.Sprint("j", i%11_000), DocumentID: fmt.Sprint("d", i%7),
			CreatedAt: int64(i % 13), Decision: []string{"approve", "reject"}[i%2], Embedder: "dense", Dim: 512}
		switch {
		case i%5 == 0:
			j.ReviewVector = bagVector(benchSentence(r), 512)
		case i < 60: // near-duplicates of the query: a tight top
			v := slices.Clone(qd)
			v[i] += 0.01 * float32(i%4)
			j.ReviewVector = v
		default:
			j.ReviewVector = randomUnit(r, 512)
		}
		if i%3 != 0 {
			j.ContentVector = randomUnit(r, 512)
		}
		if i%17 == 0 {
			j.Embedder = "other"
		}
		put(t, s, j)
	}
	if _, err := s.DeleteJudgments(bg, "k1", "o", []string{"j1", "j2", "j3", "j500"}); err != nil {
		t.Fatal(err)
	}
	if err := s.MoveDocument(bg, "k1", "o", "d3", "d4", ""); err != nil {
		t.Fatal(err)
	}
	checkFlat(t, s)
	for _, c := range []struct {
		sc   Scope
		f    Filter
		kind string
		q    []float32
	}{
		{Scope{APIKey: "k1"}, Filter{}, EmbedReview, qd},
		{Scope{APIKey: "k1", OrganizationID: "o"}, Filter{Decision: "reject"}, EmbedReview, qd},
		{Scope{APIKey: "k1", OrganizationID: "o", DocumentID: "d4"}, Filter{}, EmbedContent, randomUnit(r, 512)},
		{Scope{APIKey: "k1"}, Filter{Since: i64(3), Until: i64(9)}, EmbedReview, bagVector(benchSentence(r), 512)},
		{Scope{APIKey: "k2"}, Filter{}, EmbedReview, qd},
	} {
		var cands []*Judgment
		total := 0
		_ = s.ScanJudgments(bg, c.sc, c.f, c.kind, func(j *Judgment) bool {
			total++
			if j.Embedder == "dense" && j.Vector(c.kind) != nil {
				cands = append(cands, j)
			}
			return true
		})
		for _, k := range []int{1, 10, 50} {
			want := topK(c.q, cands, c.kind, k)
			got, n, err := s.SearchVectors(bg, c.sc, c.f, c.kind, "dense", c.q, k)
			if err != nil || n != total || len(got) != len(want) {
				t.Fatalf("%+v k=%d: %d results of %d, want %d of %d (%v)", c.sc, k, len(got), n, len(want), total, err)
			}
			for i := range got {
				if got[i].j != want[i].j || got[i].score != want[i].score {
					t.Fatalf("%+v k=%d: result %d is %s (%v), want %s (%v)", c.sc, k, i, got[i].j.RecordID, got[i].score, want[i].j.RecordID, want[i].score)
				}
			}
		}
	}
	// The quantized dot stays within its bound, and dot agrees with a plain loop, including
	// lengths that are not a multiple of 8 or 32.
	for _, n := range []int{1, 7, 8, 13, 33, 512} {
		a, b := bagVector("alpha beta gamma", n), randomUnit(r, n)
		var want float32
		for i := range a {
			want += a[i] * b[i]
		}
		if got := dot(a, b); got-want > 1e-5 || want-got > 1e-5 {
			t.Fatalf("dot over %d: %v, want %v", n, got, want)
		}
		z := quantize(b, func(n int) []int8 { return make([]int8, n) })
		if got := z.approx(a); got-want > z.Err || want-got > z.Err {
			t.Fatalf("quantized dot over %d: %v, want %v ± %v", n, got, want, z.Err)
		}
	}
}

func randomUnit(r *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	var n float64
	for i := range v {
		f := r.NormFloat64()
		v[i], n = float32(f), n+f*f
	}
	for i := range v {
		v[i] /= float32(math.Sqrt(n))
	}
	return v
}
