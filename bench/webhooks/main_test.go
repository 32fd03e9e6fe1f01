package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// The whole program, briefly, on the memory store: every case runs, delivers everything it
// publishes, and the tables are complete. It checks that the benchmark runs, not what it
// measures: shares of the limit depend on the machine.
func TestRun(t *testing.T) {
	cfg, err := parseFlags([]string{"-events", "200", "-stores", "memory", "-rate", "20", "-limit-for", "200ms", "-repeat", "1"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.rateSeconds = 3
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var out strings.Builder
	rep, err := run(ctx, cfg, &out)
	t.Logf("\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.rows) != 3 || len(rep.rate) != 1 || len(rep.fairness) != 1 {
		t.Fatalf("%d rows, %d rate cases, %d fairness cases; want 3, 1, 1", len(rep.rows), len(rep.rate), len(rep.fairness))
	}
	for _, r := range rep.rows {
		if r.perSec <= 0 || r.limit <= 0 || r.delivered <= 0 {
			t.Errorf("%s: %+v", r.name, r)
		}
	}
	if f := rep.fairness[0].latency; f < 0 || f > 10*time.Second {
		t.Errorf("tenant A's test event took %v", f)
	}
	for _, want := range []string{"| memory | 1 endpoint | 200 |", "| memory | 100 endpoints | 2 | 200 |", "99 endpoints + 1 that never answers",
		"| memory | 20/s | 60 |", "tenant A's test event"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q", want)
		}
	}
}

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-stores", "mongo, memory", "-publish", "http"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.stores, ",") != "mongo,memory" || cfg.publish != "http" || cfg.events != 20000 {
		t.Errorf("parsed %+v", cfg)
	}
	for _, bad := range [][]string{{"-stores", "sqlite"}, {"-publish", "grpc"}, {"-events", "10"}, {"-rate", "-1"}, {"-limit-for", "0s"}, {"-repeat", "0"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
