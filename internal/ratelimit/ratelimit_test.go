package ratelimit

import (
	"fmt"
	"testing"
	"time"

	"github.com/collab/collab/internal/clock"
)

func TestLimiterWindow(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	l := New(3, time.Minute, clk)
	for i := range 3 {
		if !l.Allow("a") {
			t.Fatalf("call %d refused", i+1)
		}
	}
	if l.Allow("a") {
		t.Fatal("fourth call in the window allowed")
	}
	if !l.Allow("b") {
		t.Fatal("another key was limited by a's calls")
	}
	clk.Advance(59 * time.Second)
	if l.Allow("a") {
		t.Fatal("allowed before the window ended")
	}
	clk.Advance(time.Second)
	if !l.Allow("a") {
		t.Fatal("refused after the window ended")
	}
}

func TestLimiterOff(t *testing.T) {
	l := New(0, time.Minute, clock.Real())
	for range 100 {
		if !l.Allow("a") {
			t.Fatal("limit 0 refused a call")
		}
	}
	var nilLimiter *Limiter
	if !nilLimiter.Allow("a") {
		t.Fatal("nil limiter refused a call")
	}
}

func TestLimiterSweepsStaleKeys(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	l := New(1, time.Minute, clk)
	for i := range sweepAt {
		l.Allow(fmt.Sprint(i))
	}
	clk.Advance(time.Minute)
	l.Allow("fresh")
	if len(l.counts) != 1 {
		t.Fatalf("%d keys kept after sweep, want 1", len(l.counts))
	}
}

// Keys that all live in one window are swept a few times, not once per new key: 100,000 of them
// (one per address a flood makes up) take a bounded number of passes over the map.
func TestLimiterSweepsAreAmortised(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	l := New(1, time.Minute, clk)
	for i := range 100_000 {
		l.Allow(fmt.Sprint(i))
	}
	if l.sweeps > 10 {
		t.Fatalf("%d sweeps for 100,000 live keys", l.sweeps)
	}
	clk.Advance(time.Minute)
	for i := range 2 * l.sweepNext {
		l.Allow(fmt.Sprint("new", i))
	}
	if len(l.counts) > 4*100_000 {
		t.Fatalf("%d keys kept: stale ones were not dropped", len(l.counts))
	}
}
