// Package racetest runs calls at the same instant, for the tests that prove an invariant holds
// under concurrent requests (docs/architecture.md, "Invariants without transactions"): the
// goroutines are started first and released together, so the calls overlap as much as the
// scheduler allows instead of running one after the other as they were started.
package racetest

import "sync"

// Together runs every call in a goroutine of its own, releases them at once, and returns when
// all have returned.
func Together(calls ...func()) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, call := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			call()
		}()
	}
	close(start)
	wg.Wait()
}

// N runs call(0) ... call(n-1) together, as Together does.
func N(n int, call func(i int)) {
	calls := make([]func(), n)
	for i := range calls {
		calls[i] = func() { call(i) }
	}
	Together(calls...)
}
