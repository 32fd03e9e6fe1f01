// Command memoryquality measures the search quality of the memory service's default embedder
// (internal/embed.NewLocal, Universal Sentence Encoder lite) on a labelled set written for the
// project, against a lexical baseline (issue 12, "Quality and speed"):
//
//   - testdata/judgments.json: review judgments {id, decision, reasoning, content};
//   - testdata/queries.json: queries {query, relevant: [ids]}, each a paraphrase of the
//     reasoning of the judgments it names.
//
// Each judgment's review text is embedded as the service embeds it for its review vector
// (decision + ": " + reasoning, services/memory reviewText), and each query is ranked over all
// judgments by cosine (a dot product: the vectors are unit length). The baseline is BM25
// (k1 1.2, b 0.75) over lowercased word tokens without a small list of stopwords; a judgment
// sharing no token with the query is not retrieved by it. The hybrid fuses the two rankings by
// reciprocal rank (1/(60+rank) summed). For each method it reports recall@5 (the fraction of a
// query's relevant judgments in its first 5, averaged over the queries) and MRR (1/rank of the
// first relevant judgment, 0 when none is retrieved), over all queries and split by how many of
// the query's words its relevant judgments share. Ties rank in the file's order, so every run
// gives the same figures.
//
// It then times the embedder: one query per call (the median of 200 calls, the queries in
// turn, after 20 calls of warm-up) and batches of 16 queries (the median of 30 calls).
//
//	go run ./bench/memoryquality [-data bench/memoryquality/testdata] [-calls 200]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/collab/collab/internal/embed"
)

func main() {
	data := flag.String("data", "bench/memoryquality/testdata", "directory holding judgments.json and queries.json")
	calls := flag.Int("calls", 200, "single-query embedding calls timed")
	verbose := flag.Bool("v", false, "print each query's first 5 ids by each method")
	flag.Parse()
	if err := run(*data, *calls, *verbose); err != nil {
		log.Fatal(err)
	}
}

func run(dir string, calls int, verbose bool) error {
	js, qs, err := load(dir)
	if err != nil {
		return err
	}
	e, err := embed.NewLocal()
	if err != nil {
		return err
	}
	ctx := context.Background()
	rep, err := evaluate(ctx, e, js, qs)
	if err != nil {
		return err
	}
	if verbose {
		for _, q := range rep.queries {
			fmt.Printf("%q relevant %v\n", q.query, q.relevant)
			for _, m := range methods {
				fmt.Printf("  recall@5 %.2f  %v  %s\n", q.recall5[m], q.top5[m], m)
			}
		}
		fmt.Println()
	}
	fmt.Printf("%d judgments, %d queries (%d share no word with their judgments, %d share at most a quarter of their words, %d more); embedder %s, GOMAXPROCS %d, %s/%s, %s\n\n",
		len(js), len(qs), rep.buckets[0], rep.buckets[1], rep.buckets[2], e.Name(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version())
	fmt.Print(rep.table())

	one, batch, err := timeEmbedding(ctx, e, qs, calls)
	if err != nil {
		return err
	}
	fmt.Printf("\nembedding one query: median %.2f ms over %d calls; a batch of 16 queries: median %.1f ms (%.2f ms a query) over 30 calls\n",
		ms(one), calls, ms(batch), ms(batch)/16)
	return nil
}

// Judgment is one labelled judgment.
type Judgment struct {
	ID        string `json:"id"`
	Decision  string `json:"decision"`
	Reasoning string `json:"reasoning"`
	Content   string `json:"content"`
}

// Query is one labelled query and the ids of the judgments it should find.
type Query struct {
	Query    string   `json:"query"`
	Relevant []string `json:"relevant"`
}

// load reads and checks the labelled set.
func load(dir string) ([]Judgment, []Query, error) {
	var js []Judgment
	var qs []Query
	if err := readJSON(filepath.Join(dir, "judgments.json"), &js); err != nil {
		return nil, nil, err
	}
	if err := readJSON(filepath.Join(dir, "queries.json"), &qs); err != nil {
		return nil, nil, err
	}
	ids := map[string]bool{}
	for _, j := range js {
		switch {
		case j.ID == "" || ids[j.ID]:
			return nil, nil, fmt.Errorf("judgment id %q empty or repeated", j.ID)
		case j.Decision != "approve" && j.Decision != "reject" && j.Decision != "needs-changes":
			return nil, nil, fmt.Errorf("judgment %s: decision %q", j.ID, j.Decision)
		case j.Reasoning == "" || j.Content == "":
			return nil, nil, fmt.Errorf("judgment %s: empty reasoning or content", j.ID)
		}
		ids[j.ID] = true
	}
	for _, q := range qs {
		if q.Query == "" || len(q.Relevant) == 0 {
			return nil, nil, fmt.Errorf("query %q: empty, or nothing relevant", q.Query)
		}
		for _, id := range q.Relevant {
			if !ids[id] {
				return nil, nil, fmt.Errorf("query %q: unknown judgment %q", q.Query, id)
			}
		}
	}
	return js, qs, nil
}

func readJSON(path string, out any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// reviewText is the text of a judgment's review vector, as services/memory builds it.
func reviewText(j Judgment) string {
	switch {
	case j.Decision == "":
		return j.Reasoning
	case j.Reasoning == "":
		return j.Decision
	}
	return j.Decision + ": " + j.Reasoning
}

// Method names, in the table's order.
const (
	methodLocal  = "local embedder (USE lite, cosine)"
	methodBM25   = "lexical baseline (BM25)"
	methodHybrid = "hybrid (reciprocal rank fusion)"
)

var methods = []string{methodLocal, methodBM25, methodHybrid}

// bucketNames name the queries split by the share of their words found in their relevant
// judgments' review texts (overlap).
var bucketNames = [3]string{"no shared word", "at most 1/4 shared", "more than 1/4 shared"}

// score is a method's figures over a set of queries.
type score struct {
	recall5, mrr float64
	n            int
}

func (s *score) add(recall5, rr float64) { s.recall5 += recall5; s.mrr += rr; s.n++ }

func (s score) mean() (recall5, mrr float64) {
	if s.n == 0 {
		return 0, 0
	}
	return s.recall5 / float64(s.n), s.mrr / float64(s.n)
}

// report holds every method's figures, over all queries and per overlap bucket.
type report struct {
	all     map[string]*score
	bucket  [3]map[string]*score
	buckets [3]int // queries per bucket
	queries []queryResult
}

// queryResult is one query's first 5 ids and recall@5 by each method.
type queryResult struct {
	query    string
	relevant []string
	top5     map[string][]string
	recall5  map[string]float64
}

// Recall5 is a method's recall@5 over all queries.
func (r *report) Recall5(method string) float64 { v, _ := r.all[method].mean(); return v }

// MRR is a method's mean reciprocal rank over all queries.
func (r *report) MRR(method string) float64 { _, v := r.all[method].mean(); return v }

// table is the markdown table of the report.
func (r *report) table() string {
	var b strings.Builder
	b.WriteString("| method | recall@5 | MRR |")
	for i, name := range bucketNames {
		fmt.Fprintf(&b, " recall@5, %s (%d) |", name, r.buckets[i])
	}
	b.WriteString("\n|---|---|---|---|---|---|\n")
	for _, m := range methods {
		rc, mrr := r.all[m].mean()
		fmt.Fprintf(&b, "| %s | %.3f | %.3f |", m, rc, mrr)
		for i := range bucketNames {
			v, _ := r.bucket[i][m].mean()
			fmt.Fprintf(&b, " %.3f |", v)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// evaluate ranks every query over the judgments by each method and scores the rankings.
func evaluate(ctx context.Context, e embed.Embedder, js []Judgment, qs []Query) (*report, error) {
	texts := make([]string, len(js))
	for i, j := range js {
		texts[i] = reviewText(j)
	}
	docVecs, err := embedAll(ctx, e, texts)
	if err != nil {
		return nil, err
	}
	queries := make([]string, len(qs))
	for i, q := range qs {
		queries[i] = q.Query
	}
	queryVecs, err := embedAll(ctx, e, queries)
	if err != nil {
		return nil, err
	}
	bm := newBM25(texts)
	index := map[string]int{}
	for i, j := range js {
		index[j.ID] = i
	}

	r := &report{all: map[string]*score{}}
	for _, m := range methods {
		r.all[m] = &score{}
	}
	for i := range r.bucket {
		r.bucket[i] = map[string]*score{}
		for _, m := range methods {
			r.bucket[i][m] = &score{}
		}
	}
	for qi, q := range qs {
		relevant := map[int]bool{}
		var relTokens []string
		for _, id := range q.Relevant {
			relevant[index[id]] = true
			relTokens = append(relTokens, tokens(texts[index[id]])...)
		}
		b := overlapBucket(tokens(q.Query), relTokens)
		r.buckets[b]++

		cos := make([]float64, len(js))
		for i, v := range docVecs {
			cos[i] = dot(queryVecs[qi], v)
		}
		dense := rank(cos, false)
		lexical := rank(bm.scores(q.Query), true)
		rankings := map[string][]int{
			methodLocal:  dense,
			methodBM25:   lexical,
			methodHybrid: fuse(len(js), dense, lexical),
		}
		qr := queryResult{query: q.Query, relevant: q.Relevant, top5: map[string][]string{}, recall5: map[string]float64{}}
		for m, ranking := range rankings {
			rc, rr := recallAt(ranking, relevant, 5), reciprocalRank(ranking, relevant)
			r.all[m].add(rc, rr)
			r.bucket[b][m].add(rc, rr)
			qr.recall5[m] = rc
			for _, i := range ranking[:min(5, len(ranking))] {
				qr.top5[m] = append(qr.top5[m], js[i].ID)
			}
		}
		r.queries = append(r.queries, qr)
	}
	return r, nil
}

// embedAll embeds texts in batches the embedder accepts.
func embedAll(ctx context.Context, e embed.Embedder, texts []string) ([][]float32, error) {
	var out [][]float32
	for start := 0; start < len(texts); start += embed.MaxBatch {
		vecs, err := e.Embed(ctx, texts[start:min(start+embed.MaxBatch, len(texts))])
		if err != nil {
			return nil, err
		}
		out = append(out, vecs...)
	}
	return out, nil
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// rank orders the indices by score, highest first, ties in index order; with positiveOnly,
// indices of a score of 0 or less are left out (not retrieved).
func rank(scores []float64, positiveOnly bool) []int {
	var idx []int
	for i, s := range scores {
		if !positiveOnly || s > 0 {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case scores[a] > scores[b]:
			return -1
		case scores[a] < scores[b]:
			return 1
		}
		return 0
	})
	return idx
}

// fuse is reciprocal rank fusion of rankings over n items: each item scores the sum of
// 1/(60+rank) (rank from 1) over the rankings it appears in.
func fuse(n int, rankings ...[]int) []int {
	scores := make([]float64, n)
	for _, ranking := range rankings {
		for r, i := range ranking {
			scores[i] += 1 / (60 + float64(r+1))
		}
	}
	return rank(scores, true)
}

func recallAt(ranking []int, relevant map[int]bool, k int) float64 {
	found := 0
	for _, i := range ranking[:min(k, len(ranking))] {
		if relevant[i] {
			found++
		}
	}
	return float64(found) / float64(len(relevant))
}

func reciprocalRank(ranking []int, relevant map[int]bool) float64 {
	for r, i := range ranking {
		if relevant[i] {
			return 1 / float64(r+1)
		}
	}
	return 0
}

// overlapBucket says how many of the query's distinct tokens appear in its relevant
// judgments' tokens: 0 none, 1 at most a quarter, 2 more.
func overlapBucket(query, relevant []string) int {
	have := map[string]bool{}
	for _, t := range relevant {
		have[t] = true
	}
	seen := map[string]bool{}
	shared := 0
	for _, t := range query {
		if seen[t] {
			continue
		}
		seen[t] = true
		if have[t] {
			shared++
		}
	}
	switch {
	case shared == 0:
		return 0
	case 4*shared <= len(seen):
		return 1
	}
	return 2
}

// stopwords are left out of the lexical tokens: articles, pronouns, auxiliaries,
// prepositions and conjunctions.
var stopwords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a an the and or but if then so than of to in on at by for with
		from into over under about as is are was were be been being has have had do does did
		it its this that these those there here their they them we our us you your i he she his
		her not no nor can could will would should may might must shall just only also very
		what which who whom when where why how all any each every some such own same other
		s t re ve ll d`) {
		stopwords[w] = true
	}
}

// tokens lowercases text and splits it into runs of letters and digits, without stopwords.
func tokens(text string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		if !stopwords[f] {
			out = append(out, f)
		}
	}
	return out
}

// bm25 is an Okapi BM25 index (k1 1.2, b 0.75) over the tokens of a set of texts.
type bm25 struct {
	docs  []map[string]int // term frequencies per text
	lens  []float64
	avg   float64
	df    map[string]int
	k1, b float64
}

func newBM25(texts []string) *bm25 {
	x := &bm25{df: map[string]int{}, k1: 1.2, b: 0.75}
	total := 0.0
	for _, t := range texts {
		tf := map[string]int{}
		toks := tokens(t)
		for _, w := range toks {
			tf[w]++
		}
		for w := range tf {
			x.df[w]++
		}
		x.docs = append(x.docs, tf)
		x.lens = append(x.lens, float64(len(toks)))
		total += float64(len(toks))
	}
	x.avg = total / float64(max(len(texts), 1))
	return x
}

// scores is every text's BM25 score for the query (the idf is log(1 + (N-df+0.5)/(df+0.5)),
// never negative); a query term counts once.
func (x *bm25) scores(query string) []float64 {
	out := make([]float64, len(x.docs))
	n := float64(len(x.docs))
	seen := map[string]bool{}
	for _, w := range tokens(query) {
		if seen[w] || x.df[w] == 0 {
			continue
		}
		seen[w] = true
		df := float64(x.df[w])
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		for i, tf := range x.docs {
			f := float64(tf[w])
			if f == 0 {
				continue
			}
			out[i] += idf * f * (x.k1 + 1) / (f + x.k1*(1-x.b+x.b*x.lens[i]/x.avg))
		}
	}
	return out
}

// timeEmbedding is the median time of embedding one query per call (calls calls, after 20
// of warm-up) and of embedding 16 queries per call (30 calls).
func timeEmbedding(ctx context.Context, e embed.Embedder, qs []Query, calls int) (one, batch time.Duration, err error) {
	for i := range 20 {
		if _, err := e.Embed(ctx, []string{qs[i%len(qs)].Query}); err != nil {
			return 0, 0, err
		}
	}
	var ts []time.Duration
	for i := range max(calls, 1) {
		text := []string{qs[i%len(qs)].Query}
		start := time.Now()
		if _, err := e.Embed(ctx, text); err != nil {
			return 0, 0, err
		}
		ts = append(ts, time.Since(start))
	}
	one = median(ts)
	ts = ts[:0]
	for i := range 30 {
		texts := make([]string, 16)
		for k := range texts {
			texts[k] = qs[(i*16+k)%len(qs)].Query
		}
		start := time.Now()
		if _, err := e.Embed(ctx, texts); err != nil {
			return 0, 0, err
		}
		ts = append(ts, time.Since(start))
	}
	return one, median(ts), nil
}

func median(ts []time.Duration) time.Duration {
	s := slices.Clone(ts)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
