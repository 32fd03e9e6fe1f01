package memory

import "golang.org/x/sys/cpu"

// useFMA: AVX2 and FMA, for dotFMA (dot_amd64.s).
var useFMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA

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

//go:noescape
func dotI8(q *float32, c *int8, n int) float32

// dotCodesSIMD is q·c over the first n32 elements (a multiple of 32) with AVX2.
func dotCodesSIMD(q []float32, c []int8, n32 int) (float32, bool) {
	if !useFMA || n32 == 0 {
		return 0, false
	}
	return dotI8(&q[0], &c[0], n32), true
}
