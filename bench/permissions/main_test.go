package main

import (
	"testing"
	"time"
)

// The whole program, briefly: both cases through the gateway and over gRPC, every round. It
// checks that both paths answer (a failed call ends the program, and so the test, with an
// error), not what it measures.
func TestRun(t *testing.T) {
	if err := run(20*time.Millisecond, 2); err != nil {
		t.Fatal(err)
	}
}
