//go:build !linux

package notifications

import "time"

// processCPU is unknown here: benchmarks report no CPU per operation.
func processCPU() time.Duration { return 0 }
