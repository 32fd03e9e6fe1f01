//go:build !amd64

package memory

func dotSIMD(a, b []float32, n32 int) (float32, bool) { return 0, false }

func dotCodesSIMD(q []float32, c []int8, n32 int) (float32, bool) { return 0, false }
