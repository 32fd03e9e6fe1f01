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
	h := &harness{}
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
	h = newHarnessOn(t, store, emb)
	return h
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

// The exact top-k is exact: against a full sort of every score.
func TestTopKIsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var cands []*Judgment
	for i := range 20_000 {
		j := &Judgment{RecordID: fmt.Sprint("j", i), CreatedAt: int64(i % 7)}
		j.ReviewVector = bagVector(benchSentence(r), 64)
		cands = append(cands, j)
	}
	q := bagVector(benchSentence(r), 64)
	all := make([]scored, len(cands))
	for i, j := range cands {
		all[i] = scored{j, dot(q, j.ReviewVector)}
	}
	slices.SortFunc(all, func(a, b scored) int {
		if better(a, b) {
			return -1
		}
		return 1
	})
	checkTopK(t, q, cands, all)
	// The same through the int8 first pass, with sparse (bag) and dense vectors: still exact.
	for _, j := range cands {
		j.ReviewQuant = quantize(j.ReviewVector, func(n int) []int8 { return make([]int8, n) })
	}
	checkTopK(t, q, cands, all)
	dense := make([]*Judgment, 0, 20_000)
	for i := range 20_000 {
		dense = append(dense, &Judgment{RecordID: fmt.Sprint("v", i), ReviewVector: randomUnit(r, 512)})
	}
	// Near-duplicates of the query make the top tight.
	for i := range 30 {
		v := slices.Clone(dense[i].ReviewVector)
		for d := range v {
			v[d] = v[d]*0.01 + float32(i%3)*0.001
		}
		dense[i].ReviewVector = v
	}
	qd := randomUnit(r, 512)
	for i := range 40 {
		v := slices.Clone(qd)
		v[i] += 0.01
		dense[100+i].ReviewVector = v
	}
	allDense := make([]scored, len(dense))
	for i, j := range dense {
		allDense[i] = scored{j, dot(qd, j.ReviewVector)}
	}
	slices.SortFunc(allDense, func(a, b scored) int {
		if better(a, b) {
			return -1
		}
		return 1
	})
	for _, j := range dense {
		j.ReviewQuant = quantize(j.ReviewVector, func(n int) []int8 { return make([]int8, n) })
	}
	checkTopK(t, qd, dense, allDense)
	// dot agrees with a plain loop, including lengths that are not a multiple of 8.
	for _, n := range []int{1, 7, 8, 13, 33, 512} {
		a, b := bagVector("alpha beta gamma", n), bagVector("beta gamma delta", n)
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

func checkTopK(t *testing.T, q []float32, cands []*Judgment, all []scored) {
	t.Helper()
	for _, k := range []int{1, 10, 50} {
		got := topK(q, cands, EmbedReview, k)
		if len(got) != k {
			t.Fatalf("k=%d: %d results", k, len(got))
		}
		for i := range got {
			if got[i].j != all[i].j {
				t.Fatalf("k=%d: result %d is %s (%v), want %s (%v)", k, i, got[i].j.RecordID, got[i].score, all[i].j.RecordID, all[i].score)
			}
		}
	}
}
