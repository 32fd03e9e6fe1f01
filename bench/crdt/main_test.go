package main

import "testing"

// The whole program, briefly: one round of the fewest runs bench.mjs takes (5), yjs on Node.js
// and internal/yjs on the same inputs, after run's check that our codec turns the original
// into the edited text as the inputs say. It checks that the benchmark runs, not what it
// measures (about 15 s, most of it yjs).
func TestRun(t *testing.T) {
	if err := run(1, 5); err != nil {
		t.Fatal(err)
	}
}
