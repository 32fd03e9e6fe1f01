package memory

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"strings"
	"sync"
	"unicode"

	"github.com/collab/collab/internal/embed"
)

// bagEmbedder is the test double of an embedding model: a hashed bag of words (lower-cased
// letter and digit runs, each hashed to a few signed buckets), L2-normalised. Texts sharing
// words come out similar, which is what the search machinery needs to be tested without a
// model. It has no semantics: paraphrase tests need the real model (TestRealEmbedder*).
type bagEmbedder struct {
	name string
	dim  int

	mu    sync.Mutex
	fail  error // returned by every call while set
	calls int
}

func newBag(dim int) *bagEmbedder { return &bagEmbedder{name: fmt.Sprintf("bag-%d", dim), dim: dim} }

func (b *bagEmbedder) Name() string { return b.name }
func (b *bagEmbedder) Dim() int     { return b.dim }

func (b *bagEmbedder) failWith(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fail = err
}

func (b *bagEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	b.mu.Lock()
	b.calls++
	fail := b.fail
	b.mu.Unlock()
	if fail != nil {
		return nil, fail
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = bagVector(t, b.dim)
	}
	return out, nil
}

func bagVector(text string, dim int) []float32 {
	v := make([]float32, dim)
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		for k := range 3 {
			h := fnv.New64a()
			fmt.Fprintf(h, "%d/%s", k, w)
			x := h.Sum64()
			sign := float32(1)
			if x>>63 == 1 {
				sign = -1
			}
			v[x%uint64(dim)] += sign
		}
	}
	var n float64
	for _, f := range v {
		n += float64(f) * float64(f)
	}
	if n == 0 {
		v[0] = 1
		return v
	}
	inv := float32(1 / math.Sqrt(n))
	for i := range v {
		v[i] *= inv
	}
	return v
}

var errModelDown = fmt.Errorf("connection refused: %w", embed.ErrUnavailable)
