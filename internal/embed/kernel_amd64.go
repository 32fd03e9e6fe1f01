package embed

import "golang.org/x/sys/cpu"

var (
	// haveDot8q reports whether dot8q (AVX2 and FMA) runs here.
	haveDot8q = cpu.X86.HasAVX2 && cpu.X86.HasFMA
	// haveDot8q16 reports whether dot8q16 (AVX-512F) runs here too.
	haveDot8q16 = haveDot8q && cpu.X86.HasAVX512F
)

// dot8q is in kernel_amd64.s.
//
//go:noescape
func dot8q(q *int8, x0, x1, x2, x3, x4, x5, x6, x7 *float32, n int, s *[8]float32)

// dot8q16 is dot8q on 16 lanes, n a multiple of 16; in kernel_amd64.s.
//
//go:noescape
func dot8q16(q *int8, x0, x1, x2, x3, x4, x5, x6, x7 *float32, n int, s *[8]float32)
