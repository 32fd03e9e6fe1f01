package memory

import (
	"context"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// flatVectors holds, for one bucket of the memory store, the int8 codes of one kind of vector
// ("review", "content") of one embedder, row i for the bucket's judgment i: codes in one flat
// array, so a search streams through them without touching the judgments. Err < 0 marks a row
// whose judgment has no such vector (another model, no content).
type flatVectors struct {
	dim   int
	valid int
	codes []int8
	scale []float32
	err   []float32
}

type flatKey struct{ kind, embedder string }

func (f *flatVectors) grow(n int) {
	for len(f.err) < n {
		f.codes = append(f.codes, make([]int8, f.dim)...)
		f.scale = append(f.scale, 0)
		f.err = append(f.err, -1)
	}
}

// set writes row i: z when it is a vector of this index, else an empty row.
func (f *flatVectors) set(i int, z *Quantized) {
	f.grow(i + 1)
	if f.err[i] >= 0 {
		f.valid--
	}
	if z == nil || len(z.Codes) != f.dim {
		f.err[i] = -1
		return
	}
	copy(f.codes[i*f.dim:(i+1)*f.dim], z.Codes)
	f.scale[i], f.err[i] = z.Scale, z.Err
	f.valid++
}

// moveLast moves the last row to row i (i may be the last) and drops the last.
func (f *flatVectors) moveLast(i int) {
	last := len(f.err) - 1
	if f.err[i] >= 0 {
		f.valid--
	}
	if i != last {
		copy(f.codes[i*f.dim:(i+1)*f.dim], f.codes[last*f.dim:])
		f.scale[i], f.err[i] = f.scale[last], f.err[last]
	}
	f.codes, f.scale, f.err = f.codes[:last*f.dim], f.scale[:last], f.err[:last]
}

// index updates the bucket's flat indexes for its judgment at row i.
func (b *bucket) index(i int, j *Judgment) {
	if b.flats == nil {
		b.flats = map[flatKey]*flatVectors{}
	}
	for _, kind := range []string{EmbedReview, EmbedContent} {
		v := j.Vector(kind)
		if v == nil {
			continue
		}
		k := flatKey{kind, j.Embedder}
		if b.flats[k] == nil {
			b.flats[k] = &flatVectors{dim: len(v)}
		}
	}
	for k, f := range b.flats {
		var z *Quantized
		if k.embedder == j.Embedder {
			q := quantize(j.Vector(k.kind), func(n int) []int8 { return make([]int8, n) })
			if q.Codes != nil {
				z = &q
			}
		}
		f.grow(len(b.items))
		f.set(i, z)
		if f.valid == 0 {
			delete(b.flats, k)
		}
	}
}

// unindex mirrors bucket.remove's swap of the last row into row i.
func (b *bucket) unindex(i int) {
	for k, f := range b.flats {
		f.grow(len(b.items) + 1)
		f.moveLast(i)
		if f.valid == 0 {
			delete(b.flats, k)
		}
	}
}

// rowRange is a stretch of one bucket's rows a worker scans.
type rowRange struct {
	b      *bucket
	f      *flatVectors
	lo, hi int
	upper  []float32 // per row of the range: the score's upper bound, -Inf when not a candidate
}

// SearchVectors is ScanJudgments and topK in one, on the store's flat int8 indexes: the k
// judgments of the scope passing f whose `kind` vectors come from embedder, most similar to q,
// best first, exactly as topK would rank them, and how many judgments of the scope pass f
// (of any model). A first pass reads only the codes (and the judgments, when there are
// filters); the second scores in float32 only the judgments whose upper bound reaches the
// k-th best lower bound.
//
//nolint:revive // unexported-return: only this package's server calls it (vectorSearcher)
func (s *MemoryStore) SearchVectors(ctx context.Context, sc Scope, f Filter, kind, embedder string, q []float32, k int) ([]scored, int, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ranges, total := scanRanges(s.scopeBuckets(sc), f, flatKey{kind, embedder}, len(q), k)
	if len(ranges) == 0 {
		return nil, total, ctx.Err()
	}
	workers := max(1, min(runtime.GOMAXPROCS(0), len(ranges)))
	all := lowerBounds(ranges, f, q, k, workers)
	if len(all) == 0 {
		return nil, total, ctx.Err()
	}
	slices.Sort(all)
	out := exactScores(ranges, q, kind, all[max(0, len(all)-k)], k, workers)
	sortBest(out)
	return out[:min(k, len(out))], total, ctx.Err()
}

// scopeBuckets returns the buckets of the scope's judgments: the document's, or every
// document's of the organization, or of the API key. Under s.mu.
func (s *MemoryStore) scopeBuckets(sc Scope) []*bucket {
	var buckets []*bucket
	collect := func(o *orgJudgments) {
		if sc.DocumentID != "" {
			if b := o.docs[sc.DocumentID]; b != nil {
				buckets = append(buckets, b)
			}
			return
		}
		for _, b := range o.docs {
			buckets = append(buckets, b)
		}
	}
	if sc.OrganizationID != "" {
		if o := s.org(sc.APIKey, sc.OrganizationID, false); o != nil {
			collect(o)
		}
		return buckets
	}
	for key, o := range s.orgs {
		if key.apiKey == sc.APIKey {
			collect(o)
		}
	}
	return buckets
}

// scanRanges cuts the buckets' rows indexed for key (vectors of dim) into the stretches the
// workers scan, and counts the judgments passing f (of any model).
func scanRanges(buckets []*bucket, f Filter, key flatKey, dim, k int) ([]*rowRange, int) {
	const chunk = 4096
	filtered := f != (Filter{})
	total := 0
	var ranges []*rowRange
	for _, b := range buckets {
		if !filtered {
			total += len(b.items)
		} else {
			for _, j := range b.items {
				if f.Match(j) {
					total++
				}
			}
		}
		fv := b.flats[key]
		// Row for row with the bucket (index and unindex keep it so).
		if fv == nil || fv.dim != dim || k <= 0 || len(fv.err) != len(b.items) {
			continue
		}
		for lo := 0; lo < len(b.items); lo += chunk {
			hi := min(lo+chunk, len(b.items))
			ranges = append(ranges, &rowRange{b: b, f: fv, lo: lo, hi: hi, upper: make([]float32, hi-lo)})
		}
	}
	return ranges, total
}

// inParallel runs work on workers goroutines, each taking the ranges one at a time; w is the
// worker's number.
func inParallel(ranges []*rowRange, workers int, work func(w int, r *rowRange)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for {
				n := int(next.Add(1)) - 1
				if n >= len(ranges) {
					return
				}
				work(w, ranges[n])
			}
		})
	}
	wg.Wait()
}

// lowerBounds is pass 1: the score's bounds from the codes of every row passing f. It keeps
// each row's upper bound in its range and returns the k largest lower bounds of each worker.
func lowerBounds(ranges []*rowRange, f Filter, q []float32, k, workers int) lowHeap {
	filtered := f != (Filter{})
	qn := float32(math.Sqrt(float64(dot(q, q))))
	lows := make([]lowHeap, workers)
	for w := range lows {
		lows[w] = make(lowHeap, 0, k+1)
	}
	inParallel(ranges, workers, func(w int, r *rowRange) {
		fv, dim := r.f, r.f.dim
		for i := r.lo; i < r.hi; i++ {
			e := fv.err[i]
			if e < 0 || filtered && !f.Match(r.b.items[i]) {
				r.upper[i-r.lo] = float32(math.Inf(-1))
				continue
			}
			z := Quantized{Codes: fv.codes[i*dim : (i+1)*dim], Scale: fv.scale[i]}
			a, bound := z.approx(q), e*qn+quantMargin
			r.upper[i-r.lo] = a + bound
			lows[w].offer(a-bound, k)
		}
	})
	var all lowHeap
	for _, h := range lows {
		all = append(all, h...)
	}
	return all
}

// exactScores is pass 2: the exact scores of the rows whose upper bound reaches t, the k
// best of each worker.
func exactScores(ranges []*rowRange, q []float32, kind string, t float32, k, workers int) []scored {
	heaps := make([]worstFirst, workers)
	for w := range heaps {
		heaps[w] = make(worstFirst, 0, k+1)
	}
	inParallel(ranges, workers, func(w int, r *rowRange) {
		for i := r.lo; i < r.hi; i++ {
			if r.upper[i-r.lo] >= t {
				j := r.b.items[i]
				heaps[w].offer(scored{j, dot(q, j.Vector(kind))}, k)
			}
		}
	})
	var out []scored
	for _, h := range heaps {
		out = append(out, h...)
	}
	return out
}
