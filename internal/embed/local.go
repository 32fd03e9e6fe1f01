package embed

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"
)

const (
	// LocalName is the Name of the local model: Universal Sentence Encoder lite, 512
	// dimensions, weights stored as int8 (see doc.go).
	LocalName = "use-lite-512-int8"
	// LocalDim is the length of its vectors.
	LocalDim = 512
	// MaxTokens is the most tokens of a text the local model reads: the graph drops the
	// positions from 128 on, so the text's first 128 tokens make its vector.
	MaxTokens = 128
	// MaxBatch is the most texts one Embed call of the local model takes.
	MaxBatch = 256
)

// Shapes of the network (checked against the file when it is loaded).
const (
	embedDim  = 256 // token embedding, layer 0's input
	modelDim  = 512 // layer 0's output, layer 1's width
	ffnDim    = 1536
	numHeads  = 4
	timingDim = 128 // sin and cos halves of the position signal
)

// layer holds the weights of one transformer layer; see forward for how they are used.
type layer struct {
	in, heads      int
	lnG, lnB       []float32 // layer norm before attention, [in]
	qkv            *matrix   // [3*in, in]
	qkvB           []float32
	qScale         float32 // queries are multiplied by it (1/sqrt(head size))
	out            *matrix // [modelDim, in]
	outB           []float32
	res            *matrix // layer 0 only: [modelDim, in], projects the residual to modelDim
	resB           []float32
	ffnLnG, ffnLnB []float32 // layer norm before the feed-forward part, [modelDim]
	ffn1           *matrix   // [ffnDim, modelDim]
	ffn1B          []float32
	ffn2           *matrix // [modelDim, ffnDim]
	ffn2B          []float32
}

// useLite is the loaded network, read-only and shared.
type useLite struct {
	tok     *tokenizer
	emb     *tensor   // [8002, 256], int8 rows dequantized on lookup (or float32)
	timing  []float32 // inverse timescales, [128]
	eps     float32   // layer norm epsilon
	layers  [2]layer
	head    *matrix // [512, 512]
	headB   []float32
	scratch sync.Pool
}

var (
	loadOnce   sync.Once
	loadedNet  *useLite
	loadNetErr error
)

func loadUseLite() (*useLite, error) {
	loadOnce.Do(func() { loadedNet, loadNetErr = buildUseLite(modelBin, vocabJSON) })
	return loadedNet, loadNetErr
}

func buildUseLite(bin, vocab []byte) (*useLite, error) {
	tok, err := newTokenizer(vocab)
	if err != nil {
		return nil, err
	}
	ts, err := readModelFile(bin)
	if err != nil {
		return nil, err
	}
	var missing error
	get := func(name string, dims ...int) *tensor {
		t := ts[name]
		if t == nil {
			if missing == nil {
				missing = fmt.Errorf("embed: use-lite.bin has no tensor %s", name)
			}
			return &tensor{dims: dims, f32: make([]float32, prod(dims)), scales: make([]float32, dims[0]), q: make([]int8, prod(dims))}
		}
		if len(dims) > 0 && !sameDims(t.dims, dims) && missing == nil {
			missing = fmt.Errorf("embed: use-lite.bin: %s has shape %v, want %v", name, t.dims, dims)
		}
		return t
	}
	vec := func(name string, n int) []float32 {
		t := get(name, n)
		if t.f32 == nil && missing == nil {
			missing = fmt.Errorf("embed: use-lite.bin: %s is not float32", name)
		}
		return t.f32
	}
	mat := func(name string, rows, cols int) *matrix {
		t := get(name, rows, cols)
		if t.f32 == nil && t.q == nil {
			return &matrix{rows: rows, cols: cols, q: make([]int8, rows*cols), scale: make([]float32, rows)}
		}
		return t.matrix()
	}
	n := &useLite{tok: tok}
	n.emb = get("emb", len(tok.backLen)+2, embedDim)
	n.timing = vec("timing", timingDim)
	n.eps = vec("ln.eps", 1)[0]
	for i := range n.layers {
		in := embedDim
		if i == 1 {
			in = modelDim
		}
		p := fmt.Sprintf("l%d.", i)
		l := &n.layers[i]
		l.in, l.heads = in, numHeads
		l.lnG, l.lnB = vec(p+"ln.g", in), vec(p+"ln.b", in)
		l.qkv, l.qkvB = mat(p+"qkv.w", 3*in, in), vec(p+"qkv.b", 3*in)
		l.qScale = vec(p+"qscale", 1)[0]
		l.out, l.outB = mat(p+"out.w", modelDim, in), vec(p+"out.b", modelDim)
		if i == 0 {
			l.res, l.resB = mat(p+"res.w", modelDim, in), vec(p+"res.b", modelDim)
		}
		l.ffnLnG, l.ffnLnB = vec(p+"ffn.ln.g", modelDim), vec(p+"ffn.ln.b", modelDim)
		l.ffn1, l.ffn1B = mat(p+"ffn1.w", ffnDim, modelDim), vec(p+"ffn1.b", ffnDim)
		l.ffn2, l.ffn2B = mat(p+"ffn2.w", modelDim, ffnDim), vec(p+"ffn2.b", modelDim)
	}
	n.head, n.headB = mat("head.w", LocalDim, modelDim), vec("head.b", LocalDim)
	if missing != nil {
		return nil, missing
	}
	n.scratch.New = func() any { return newScratch() }
	return n, nil
}

func prod(dims []int) int {
	p := 1
	for _, d := range dims {
		p *= d
	}
	return p
}

func sameDims(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// scratch holds the buffers of one forward pass, sized for MaxTokens.
type scratch struct {
	x, h, y, res []float32 // [MaxTokens, modelDim]
	qkv          []float32 // [MaxTokens, 3*modelDim]
	att          []float32 // [MaxTokens, modelDim]
	ffn          []float32 // [MaxTokens, ffnDim]
	probs        []float32 // [MaxTokens]
	pooled       []float32 // [modelDim]
}

func newScratch() *scratch {
	return &scratch{
		x:      make([]float32, MaxTokens*modelDim),
		h:      make([]float32, MaxTokens*modelDim),
		y:      make([]float32, MaxTokens*modelDim),
		res:    make([]float32, MaxTokens*modelDim),
		qkv:    make([]float32, MaxTokens*3*modelDim),
		att:    make([]float32, MaxTokens*modelDim),
		ffn:    make([]float32, MaxTokens*ffnDim),
		probs:  make([]float32, MaxTokens),
		pooled: make([]float32, modelDim),
	}
}

// forward computes the vector of one text's ids (at most MaxTokens) into dst ([LocalDim]),
// step for step as the graph of model.json does it:
//
//	x = 2*emb[id] + timing(pos)      (the graph adds the embeddings to (embeddings + signal))
//	layer 0 (width 256 -> 512), layer 1 (512): pre-norm transformer layers,
//	  h = LN(x); a = Attention(h) W_out + b; y = a + residual(x)   (layer 0: x W_res + b)
//	  x = y + FFN(LN(y)), FFN(z) = relu(z W1 + b1) W2 + b2
//	v = tanh(mean over tokens(x) W_head + b_head); v / sqrt(max(|v|^2, 1e-12))
//
// parallel lets the matrix products use more than one goroutine (one text at a time).
func (n *useLite) forward(ids []int32, dst []float32, parallel bool) {
	s := n.scratch.Get().(*scratch)
	defer n.scratch.Put(s)
	T := len(ids)
	pooled := s.pooled
	clear(pooled)
	if T > 0 {
		// Embedding lookup and the position signal.
		x := s.x[:T*embedDim]
		for p, id := range ids {
			row := x[p*embedDim : (p+1)*embedDim]
			n.embedding(id, row)
			for c, e := range row {
				var sig float32
				if c < timingDim {
					sig = float32(math.Sin(float64(float32(p) * n.timing[c])))
				} else {
					sig = float32(math.Cos(float64(float32(p) * n.timing[c-timingDim])))
				}
				row[c] = e + (e + sig)
			}
		}
		for i := range n.layers {
			n.layers[i].forward(s, T, n.eps, parallel)
		}
		x = s.x[:T*modelDim]
		for p := 0; p < T; p++ {
			for c, v := range x[p*modelDim : (p+1)*modelDim] {
				pooled[c] += v
			}
		}
		for c := range pooled {
			pooled[c] /= float32(T)
		}
	}
	linear(dst, pooled, 1, n.head, n.headB, false)
	var sum float32
	for c, v := range dst {
		v = float32(math.Tanh(float64(v)))
		dst[c] = v
		sum += v * v
	}
	inv := float32(1 / math.Sqrt(float64(max(sum, 1e-12))))
	for c := range dst {
		dst[c] *= inv
	}
}

// embedding writes the embedding of token id into row ([embedDim]).
func (n *useLite) embedding(id int32, row []float32) {
	lo, hi := int(id)*embedDim, (int(id)+1)*embedDim
	if n.emb.f32 != nil {
		copy(row, n.emb.f32[lo:hi])
		return
	}
	scale := n.emb.scales[id]
	for c, q := range n.emb.q[lo:hi] {
		row[c] = float32(q) * scale
	}
}

// forward runs the layer on s.x ([T, l.in]), leaving its output in s.x ([T, modelDim]).
func (l *layer) forward(s *scratch, T int, eps float32, parallel bool) {
	in := l.in
	x := s.x[:T*in]
	h := s.h[:T*in]
	layerNorm(h, x, T, in, l.lnG, l.lnB, eps)
	res := x
	if l.res != nil {
		res = s.res[:T*modelDim]
		linear(res, x, T, l.res, l.resB, parallel)
	}
	qkv := s.qkv[:T*3*in]
	linear(qkv, h, T, l.qkv, l.qkvB, parallel)
	att := s.att[:T*in]
	hd := in / l.heads
	probs := s.probs[:T]
	for head := 0; head < l.heads; head++ {
		qo, ko, vo := head*hd, in+head*hd, 2*in+head*hd
		for i := 0; i < T; i++ {
			q := qkv[i*3*in+qo : i*3*in+qo+hd]
			maxLogit := float32(math.Inf(-1))
			for j := 0; j < T; j++ {
				k := qkv[j*3*in+ko : j*3*in+ko+hd]
				var d float32
				for c, qv := range q {
					d += qv * l.qScale * k[c]
				}
				probs[j] = d
				maxLogit = max(maxLogit, d)
			}
			var sum float32
			for j := range probs {
				e := float32(math.Exp(float64(probs[j] - maxLogit)))
				probs[j] = e
				sum += e
			}
			o := att[i*in+head*hd : i*in+head*hd+hd]
			clear(o)
			for j, p := range probs {
				p /= sum
				v := qkv[j*3*in+vo : j*3*in+vo+hd]
				for c, vv := range v {
					o[c] += p * vv
				}
			}
		}
	}
	y := s.y[:T*modelDim]
	linear(y, att, T, l.out, l.outB, parallel)
	for i := range y {
		y[i] += res[i]
	}
	hn := s.h[:T*modelDim]
	layerNorm(hn, y, T, modelDim, l.ffnLnG, l.ffnLnB, eps)
	f := s.ffn[:T*ffnDim]
	linear(f, hn, T, l.ffn1, l.ffn1B, parallel)
	for i, v := range f {
		f[i] = max(v, 0)
	}
	out := s.x[:T*modelDim]
	linear(out, f, T, l.ffn2, l.ffn2B, parallel)
	for i := range out {
		out[i] += y[i]
	}
}

// layerNorm normalises each of the T rows of x ([T, d]) into dst: g * (x - mean) /
// sqrt(var + eps) + b, the variance being the mean of the squared deviations.
func layerNorm(dst, x []float32, T, d int, g, b []float32, eps float32) {
	for t := 0; t < T; t++ {
		row := x[t*d : (t+1)*d]
		var mean float32
		for _, v := range row {
			mean += v
		}
		mean /= float32(d)
		var variance float32
		for _, v := range row {
			variance += (v - mean) * (v - mean)
		}
		variance /= float32(d)
		r := float32(1 / math.Sqrt(float64(variance+eps)))
		out := dst[t*d : (t+1)*d]
		for c, v := range row {
			out[c] = g[c]*r*(v-mean) + b[c]
		}
	}
}

// parallelWork is the size (multiply-adds) from which a product is split between goroutines.
const parallelWork = 1 << 18

// linear computes dst[t, o] = x[t, :] . w[o, :] + b[o] for T rows of x.
func linear(dst, x []float32, T int, w *matrix, b []float32, parallel bool) {
	workers := 1
	if parallel && T*w.rows*w.cols >= parallelWork {
		workers = min(runtime.GOMAXPROCS(0), 8)
	}
	if workers == 1 {
		linearRows(dst, x, T, w, b, 0, w.rows)
		return
	}
	var wg sync.WaitGroup
	chunk := (w.rows + workers - 1) / workers
	for lo := 0; lo < w.rows; lo += chunk {
		hi := min(lo+chunk, w.rows)
		wg.Add(1)
		go func() {
			defer wg.Done()
			linearRows(dst, x, T, w, b, lo, hi)
		}()
	}
	wg.Wait()
}

// linearRows computes the outputs lo to hi of linear: with dot8q, eight rows of x at a time,
// so that a row of w is read once for eight dot products; else in Go, four at a time.
func linearRows(dst, x []float32, T int, w *matrix, b []float32, lo, hi int) {
	d := w.cols
	out := w.rows
	if haveDot8q && d%8 == 0 && d > 0 {
		var rows [8]*float32
		var s [8]float32
		for t := 0; t < T; t += 8 {
			// A last group of fewer than eight rows repeats its first row; those sums are
			// dropped.
			k := min(8, T-t)
			for i := range rows {
				r := t
				if i < k {
					r = t + i
				}
				rows[i] = &x[r*d]
			}
			wide := haveDot8q16 && d%16 == 0
			for o := lo; o < hi; o++ {
				if wide {
					dot8q16(&w.q[o*d], rows[0], rows[1], rows[2], rows[3], rows[4], rows[5], rows[6], rows[7], d, &s)
				} else {
					dot8q(&w.q[o*d], rows[0], rows[1], rows[2], rows[3], rows[4], rows[5], rows[6], rows[7], d, &s)
				}
				for i := 0; i < k; i++ {
					dst[(t+i)*out+o] = s[i]*w.scale[o] + b[o]
				}
			}
		}
		return
	}
	t := 0
	for ; t+4 <= T; t += 4 {
		x0, x1, x2, x3 := x[t*d:(t+1)*d], x[(t+1)*d:(t+2)*d], x[(t+2)*d:(t+3)*d], x[(t+3)*d:(t+4)*d]
		for o := lo; o < hi; o++ {
			s0, s1, s2, s3 := dot4q(w.row(o), x0, x1, x2, x3)
			dst[t*out+o] = s0*w.scale[o] + b[o]
			dst[(t+1)*out+o] = s1*w.scale[o] + b[o]
			dst[(t+2)*out+o] = s2*w.scale[o] + b[o]
			dst[(t+3)*out+o] = s3*w.scale[o] + b[o]
		}
	}
	for ; t < T; t++ {
		xt := x[t*d : (t+1)*d]
		for o := lo; o < hi; o++ {
			dst[t*out+o] = dotq(w.row(o), xt)*w.scale[o] + b[o]
		}
	}
}

// dotq is the Go dot product of int8 and float32 values.
func dotq(w []int8, x []float32) float32 {
	x = x[:len(w)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(w); i += 4 {
		s0 += float32(w[i]) * x[i]
		s1 += float32(w[i+1]) * x[i+1]
		s2 += float32(w[i+2]) * x[i+2]
		s3 += float32(w[i+3]) * x[i+3]
	}
	for ; i < len(w); i++ {
		s0 += float32(w[i]) * x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func dot4q(w []int8, x0, x1, x2, x3 []float32) (s0, s1, s2, s3 float32) {
	n := len(w)
	x0, x1, x2, x3 = x0[:n], x1[:n], x2[:n], x3[:n]
	for i, q := range w {
		wv := float32(q)
		s0 += wv * x0[i]
		s1 += wv * x1[i]
		s2 += wv * x2[i]
		s3 += wv * x3[i]
	}
	return
}

// local is the Embedder of the local model.
type local struct{ net *useLite }

// NewLocal returns the local model's Embedder: Universal Sentence Encoder lite (512
// dimensions), run in Go from the weights built into the binary. The weights are loaded once
// per process (about 8 MB of memory); the Embedder is safe for concurrent use. Each text's
// first MaxTokens tokens make its vector; an Embed call takes at most MaxBatch texts.
func NewLocal() (Embedder, error) {
	n, err := loadUseLite()
	if err != nil {
		return nil, err
	}
	return &local{net: n}, nil
}

func (l *local) Name() string { return LocalName }
func (l *local) Dim() int     { return LocalDim }

func (l *local) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) > MaxBatch {
		return nil, fmt.Errorf("embed: %d texts in one call, at most %d", len(texts), MaxBatch)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([][]float32, len(texts))
	flat := make([]float32, len(texts)*LocalDim)
	for i := range out {
		out[i] = flat[i*LocalDim : (i+1)*LocalDim : (i+1)*LocalDim]
	}
	workers := min(runtime.GOMAXPROCS(0), len(texts))
	if workers <= 1 {
		for i, t := range texts {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			l.net.forward(l.net.tok.encode(t, MaxTokens), out[i], true)
		}
		return out, nil
	}
	// Several texts: one goroutine per core, each taking the next text.
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		next int
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= len(texts) {
					return
				}
				l.net.forward(l.net.tok.encode(texts[i], MaxTokens), out[i], false)
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
