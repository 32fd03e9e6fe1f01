package notifications

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the process has used, user and system, all threads: a measure
// that depends on the machine's load less than the time a benchmark takes.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
