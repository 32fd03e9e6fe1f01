//go:build !linux

package yjs

import "time"

// cpuOf runs f and returns the time it took: without a thread's CPU clock, the wall clock.
func cpuOf(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}
