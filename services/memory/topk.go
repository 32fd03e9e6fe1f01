package memory

import (
	"cmp"
	"container/heap"
	"runtime"
	"slices"
	"sync"
)

// dot is the dot product of two vectors of equal length; with unit vectors, their cosine
// similarity. On amd64 with AVX2 and FMA the bulk runs 32 floats a step in assembly
// (dot_amd64.s); elsewhere, and for the tail, eight independent sums let the CPU overlap the
// multiplications.
func dot(a, b []float32) float32 {
	n := min(len(a), len(b))
	a, b = a[:n], b[:n]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	if n32 := n &^ 31; n32 > 0 {
		if s, ok := dotSIMD(a, b, n32); ok {
			s0, i = s, n32
		}
	}
	for ; i+8 <= n; i += 8 {
		aa, bb := a[i:i+8:i+8], b[i:i+8:i+8]
		s0 += aa[0] * bb[0]
		s1 += aa[1] * bb[1]
		s2 += aa[2] * bb[2]
		s3 += aa[3] * bb[3]
		s4 += aa[4] * bb[4]
		s5 += aa[5] * bb[5]
		s6 += aa[6] * bb[6]
		s7 += aa[7] * bb[7]
	}
	for ; i < n; i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3) + (s4 + s5) + (s6 + s7)
}

// scored is a judgment and its similarity to the query.
type scored struct {
	j     *Judgment
	score float32
}

// better orders results: higher score first, then newer, then by record id, so that equal
// scores come back in a stable order.
func better(a, b scored) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	if a.j.CreatedAt != b.j.CreatedAt {
		return a.j.CreatedAt > b.j.CreatedAt
	}
	return a.j.RecordID < b.j.RecordID
}

// worstFirst is a bounded min-heap of the k best seen so far: its root is the worst of them.
type worstFirst []scored

func (h worstFirst) Len() int           { return len(h) }
func (h worstFirst) Less(i, j int) bool { return better(h[j], h[i]) }
func (h worstFirst) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *worstFirst) Push(x any)        { *h = append(*h, x.(scored)) }
func (h *worstFirst) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (h *worstFirst) offer(s scored, k int) {
	if len(*h) < k {
		heap.Push(h, s)
		return
	}
	if better(s, (*h)[0]) {
		(*h)[0] = s
		heap.Fix(h, 0)
	}
}

// parallelFrom is the number of candidates from which scoring is split across the CPUs.
const parallelFrom = 4096

// split runs work over [0, n) in parallel chunks (one per CPU when n is large) and waits.
func split(n int, work func(w, lo, hi int)) int {
	workers := 1
	if n >= parallelFrom {
		workers = max(1, min(runtime.GOMAXPROCS(0), n/(parallelFrom/2)))
	}
	chunk := (n + workers - 1) / workers
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := w*chunk, min((w+1)*chunk, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			work(w, lo, hi)
		}()
	}
	wg.Wait()
	return workers
}

func sortBest(all []scored) {
	slices.SortFunc(all, func(a, b scored) int {
		if better(a, b) {
			return -1
		}
		if better(b, a) {
			return 1
		}
		return 0
	})
}

// topK returns the k candidates most similar to q, best first, exactly: every candidate is
// scored with dot, in parallel chunks, each keeping its own bounded heap. (The memory store
// searches its own int8 index instead: SearchVectors.)
func topK(q []float32, cands []*Judgment, kind string, k int) []scored {
	if k <= 0 || len(cands) == 0 {
		return nil
	}
	heaps := make([]worstFirst, runtime.GOMAXPROCS(0))
	workers := split(len(cands), func(w, lo, hi int) {
		h := make(worstFirst, 0, k+1)
		for _, j := range cands[lo:hi] {
			h.offer(scored{j, dot(q, j.Vector(kind))}, k)
		}
		heaps[w] = h
	})
	var all []scored
	for _, h := range heaps[:workers] {
		all = append(all, h...)
	}
	sortBest(all)
	return all[:min(k, len(all))]
}

// lowHeap is a min-heap of floats keeping the k largest.
type lowHeap []float32

func (h lowHeap) Len() int           { return len(h) }
func (h lowHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h lowHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *lowHeap) Push(x any)        { *h = append(*h, x.(float32)) }
func (h *lowHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (h *lowHeap) offer(v float32, k int) {
	if len(*h) < k {
		heap.Push(h, v)
		return
	}
	if v > (*h)[0] {
		(*h)[0] = v
		heap.Fix(h, 0)
	}
}

// newest returns the k candidates latest by CreatedAt (oldest first when asc is true).
func newest(cands []*Judgment, k int, asc bool) []*Judgment {
	order := func(a, b *Judgment) int {
		c := cmp.Compare(b.CreatedAt, a.CreatedAt)
		if asc {
			c = -c
		}
		if c != 0 {
			return c
		}
		return cmp.Compare(a.RecordID, b.RecordID)
	}
	// One pass keeping the k first in order: most candidates lose to the k-th at once.
	top := make([]*Judgment, 0, k+1)
	for _, j := range cands {
		if len(top) == k && order(j, top[k-1]) >= 0 {
			continue
		}
		i, _ := slices.BinarySearchFunc(top, j, order)
		top = slices.Insert(top, i, j)
		if len(top) > k {
			top = top[:k]
		}
	}
	return top
}
