package memory

import "golang.org/x/sys/cpu"

// useFMA: AVX2 and FMA, for dotFMA (dot_amd64.s).
var useFMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// dotFMA is the dot product of a[:n] and b[:n] with AVX2 and FMA, n a multiple of 32
// (dot_amd64.s).
//
//go:noescape
func dotFMA(a, b *float32, n int) float32

// dotSIMD computes the dot product of the first n32 elements (a multiple of 32) with AVX2,
// reporting false when the CPU lacks it.
func dotSIMD(a, b []float32, n32 int) (float32, bool) {
	if !useFMA || n32 == 0 {
		return 0, false
	}
	return dotFMA(&a[0], &b[0], n32), true
}

// dotI8 is the dot product of q[:n] and the int8 codes c[:n] with AVX2 and FMA, n a multiple
// of 32 (dot_amd64.s).
//
//go:noescape
func dotI8(q *float32, c *int8, n int) float32

// dotCodesSIMD is q·c over the first n32 elements (a multiple of 32) with AVX2.
func dotCodesSIMD(q []float32, c []int8, n32 int) (float32, bool) {
	if !useFMA || n32 == 0 {
		return 0, false
	}
	return dotI8(&q[0], &c[0], n32), true
}
