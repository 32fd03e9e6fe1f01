package main

import (
	"testing"
	"time"
)

// The whole program, briefly, on the memory store: it publishes for half a second and checks,
// as it always does, that every published event became one record readable at once (run
// fails otherwise). It checks that the benchmark runs, not what it measures.
func TestRun(t *testing.T) {
	if err := run(500*time.Millisecond, 2, ""); err != nil {
		t.Fatal(err)
	}
}
