package embed

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
)

// TestDot8q holds the assembly kernel to the Go dot product.
func TestDot8q(t *testing.T) {
	if !haveDot8q {
		t.Skip("no AVX2 and FMA here")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{8, 16, 64, 256, 512, 1536} {
		q := make([]int8, n)
		for i := range q {
			q[i] = int8(rng.IntN(255) - 127)
		}
		var xs [8][]float32
		for k := range xs {
			xs[k] = make([]float32, n)
			for i := range xs[k] {
				xs[k][i] = rng.Float32()*4 - 2
			}
		}
		var s, s16 [8]float32
		dot8q(&q[0], &xs[0][0], &xs[1][0], &xs[2][0], &xs[3][0], &xs[4][0], &xs[5][0], &xs[6][0], &xs[7][0], n, &s)
		wide := haveDot8q16 && n%16 == 0
		if wide {
			dot8q16(&q[0], &xs[0][0], &xs[1][0], &xs[2][0], &xs[3][0], &xs[4][0], &xs[5][0], &xs[6][0], &xs[7][0], n, &s16)
		}
		for k := range xs {
			want := dotq(q, xs[k])
			tol := 1e-3 * math.Max(1, math.Abs(float64(want)))
			if math.Abs(float64(s[k]-want)) > tol {
				t.Errorf("n %d, row %d: %v, Go says %v", n, k, s[k], want)
			}
			if wide && math.Abs(float64(s16[k]-want)) > tol {
				t.Errorf("n %d, row %d: AVX-512 %v, Go says %v", n, k, s16[k], want)
			}
		}
	}
}

// TestLocalGoKernel: the Go products (machines without AVX2 and FMA) give the vectors the
// assembly gives.
func TestLocalGoKernel(t *testing.T) {
	if !haveDot8q {
		t.Skip("the Go products already ran")
	}
	g := readGolden(t)
	e := newLocal(t)
	texts := []string{g.Sentences[3].Text, g.Sentences[9].Text, g.Sentences[33].Text}
	asm, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	saved := haveDot8q16
	haveDot8q, haveDot8q16 = false, false
	defer func() { haveDot8q, haveDot8q16 = true, saved }()
	goVecs, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range texts {
		if c := cosine(asm[i], goVecs[i]); c < 0.99999 {
			t.Errorf("%q: cosine %v between the assembly and the Go products", texts[i], c)
		}
	}
}

// BenchmarkEmbedOneGoKernel is BenchmarkEmbedOne with the Go products.
func BenchmarkEmbedOneGoKernel(b *testing.B) {
	saved8, saved16 := haveDot8q, haveDot8q16
	haveDot8q, haveDot8q16 = false, false
	defer func() { haveDot8q, haveDot8q16 = saved8, saved16 }()
	BenchmarkEmbedOne(b)
}

// BenchmarkEmbedOneAVX2 is BenchmarkEmbedOne with the AVX2 kernel where AVX-512 would run.
func BenchmarkEmbedOneAVX2(b *testing.B) {
	if !haveDot8q {
		b.Skip("no AVX2 and FMA here")
	}
	saved := haveDot8q16
	haveDot8q16 = false
	defer func() { haveDot8q16 = saved }()
	BenchmarkEmbedOne(b)
}
