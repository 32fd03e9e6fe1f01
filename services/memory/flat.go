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
	} else {
		for key, o := range s.orgs {
			if key.apiKey == sc.APIKey {
				collect(o)
			}
		}
	}
	filtered := f != (Filter{})
	total := 0
	const chunk = 4096
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
		fv := b.flats[flatKey{kind, embedder}]
		// Row for row with the bucket (index and unindex keep it so).
		if fv == nil || fv.dim != len(q) || k <= 0 || len(fv.err) != len(b.items) {
			continue
		}
		for lo := 0; lo < len(b.items); lo += chunk {
			hi := min(lo+chunk, len(b.items))
			ranges = append(ranges, &rowRange{b: b, f: fv, lo: lo, hi: hi, upper: make([]float32, hi-lo)})
		}
	}
	if len(ranges) == 0 {
		return nil, total, ctx.Err()
	}
	qn := float32(math.Sqrt(float64(dot(q, q))))
	workers := max(1, min(runtime.GOMAXPROCS(0), len(ranges)))
	// Pass 1: bounds from the codes; each worker keeps its k largest lower bounds.
	lows := make([]lowHeap, workers)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := make(lowHeap, 0, k+1)
			for {
				n := int(next.Add(1)) - 1
				if n >= len(ranges) {
					break
				}
				r := ranges[n]
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
					h.offer(a-bound, k)
				}
			}
			lows[w] = h
		}()
	}
	wg.Wait()
	var all lowHeap
	for _, h := range lows {
		all = append(all, h...)
	}
	if len(all) == 0 {
		return nil, total, ctx.Err()
	}
	slices.Sort(all)
	t := all[max(0, len(all)-k)]
	// Pass 2: exact scores of those that may rank.
	heaps := make([]worstFirst, workers)
	next.Store(0)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := make(worstFirst, 0, k+1)
			for {
				n := int(next.Add(1)) - 1
				if n >= len(ranges) {
					break
				}
				r := ranges[n]
				for i := r.lo; i < r.hi; i++ {
					if r.upper[i-r.lo] >= t {
						j := r.b.items[i]
						h.offer(scored{j, dot(q, j.Vector(kind))}, k)
					}
				}
			}
			heaps[w] = h
		}()
	}
	wg.Wait()
	var out []scored
	for _, h := range heaps {
		out = append(out, h...)
	}
	sortBest(out)
	return out[:min(k, len(out))], total, ctx.Err()
}
