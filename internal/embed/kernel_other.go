//go:build !amd64

package embed

var haveDot8q, haveDot8q16 = false, false

func dot8q(q *int8, x0, x1, x2, x3, x4, x5, x6, x7 *float32, n int, s *[8]float32) {
	panic("embed: dot8q without assembly")
}

func dot8q16(q *int8, x0, x1, x2, x3, x4, x5, x6, x7 *float32, n int, s *[8]float32) {
	panic("embed: dot8q16 without assembly")
}
