package embed

import "golang.org/x/sys/cpu"

// haveDot8q reports whether dot8q (AVX2 and FMA) runs here.
var haveDot8q = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// dot8q is in kernel_amd64.s.
//
//go:noescape
func dot8q(q *int8, x0, x1, x2, x3, x4, x5, x6, x7 *float32, n int, s *[8]float32)
