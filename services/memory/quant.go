package memory

import (
	"math"
)

// Quantized is a vector's int8 codes with its scale and error bound: v ≈ Scale·Codes, and
// |q·v − Scale·(q·Codes)| ≤ Err for every unit query q (Cauchy–Schwarz: Err is the norm of the
// rounding residual, plus a margin for float32 rounding in both sums). The memory store keeps
// the codes of every vector in flat arrays (flat.go), so a search reads a quarter of the bytes
// in its first pass and scores exactly only the judgments that could still be in the top k.
type Quantized struct {
	Codes []int8
	Scale float32
	Err   float32
}

// quantMargin covers the float32 rounding of a 512-term dot product of unit vectors (each
// term's error is below 2^-24 of the running sum, which stays below 1 in magnitude), in both
// the exact and the quantized sums, with room to spare.
const quantMargin = 1e-4

// quantize returns v's int8 form, its codes taken from alloc.
func quantize(v []float32, alloc func(n int) []int8) Quantized {
	if v == nil {
		return Quantized{}
	}
	var m float64
	for _, f := range v {
		m = max(m, math.Abs(float64(f)))
	}
	q := Quantized{Codes: alloc(len(v))}
	if m == 0 {
		q.Err = quantMargin
		return q
	}
	scale := m / 127
	var r2 float64
	for i, f := range v {
		c := math.Round(float64(f) / scale)
		c = max(-127, min(127, c))
		q.Codes[i] = int8(c)
		d := float64(f) - c*float64(float32(scale))
		r2 += d * d
	}
	q.Scale = float32(scale)
	q.Err = float32(math.Sqrt(r2)) + quantMargin
	return q
}

// approx is Scale·(q·Codes).
func (z *Quantized) approx(q []float32) float32 {
	n := min(len(q), len(z.Codes))
	var s float32
	i := 0
	if n32 := n &^ 31; n32 > 0 {
		if d, ok := dotCodesSIMD(q, z.Codes, n32); ok {
			s, i = d, n32
		}
	}
	var s1, s2, s3 float32
	for ; i+4 <= n; i += 4 {
		s += q[i] * float32(z.Codes[i])
		s1 += q[i+1] * float32(z.Codes[i+1])
		s2 += q[i+2] * float32(z.Codes[i+2])
		s3 += q[i+3] * float32(z.Codes[i+3])
	}
	for ; i < n; i++ {
		s += q[i] * float32(z.Codes[i])
	}
	return z.Scale * (s + s1 + s2 + s3)
}
