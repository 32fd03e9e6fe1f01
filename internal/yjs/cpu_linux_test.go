package yjs

import (
	"runtime"
	"syscall"
	"time"
)

// cpuOf runs f locked to one OS thread and returns the CPU time that thread spent (user and
// system): what f cost, which a loaded machine does not stretch as it stretches the wall
// clock (tests of the work bounds failed at a load average of 8 on wall time alone).
func cpuOf(f func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := threadCPU()
	f()
	return threadCPU() - before
}

func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
