package main

import "testing"

// The whole program, briefly: one notification to an organization of 200 members, its fan-out
// and its emails, which run waits for (it fails when the fan-out or the emails do not finish).
// It checks that the benchmark runs, not what it measures.
func TestRun(t *testing.T) {
	if err := run(200, 1); err != nil {
		t.Fatal(err)
	}
}
