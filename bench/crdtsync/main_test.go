package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/collab/collab/bench/collabproc"
)

func TestMain(m *testing.M) {
	code := m.Run()
	collabproc.Cleanup()
	os.Exit(code)
}

// The whole program, briefly: every server measured in every part (fan-out, a ladder of one
// step, memory), every fan-out converged with nothing missing, and the tables complete. It
// checks that the benchmark runs, not what it measures: the ladder's p99 bound is a minute, so
// a loaded machine does not fail it.
func TestRun(t *testing.T) {
	cfg := config{
		kinds: allKinds, readers: 5, rates: []float64{50}, ladder: []float64{50}, seconds: 1, warmup: 0.5,
		p99Limit: time.Minute, docs: 5, textBytes: 5000, memoryRuns: 1, settle: 500 * time.Millisecond,
		settleBefore: 200 * time.Millisecond, connectTimeout: 20 * time.Second,
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var out strings.Builder
	rep, err := run(ctx, cfg, &out)
	t.Logf("\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	fanouts := rep.fanout
	for _, l := range rep.ladders {
		fanouts = append(fanouts, l.steps...)
		if len(l.steps) != 1 {
			t.Errorf("ladder of %s: %d steps, want 1", l.kind, len(l.steps))
		}
	}
	if len(rep.fanout) != len(allKinds) || len(rep.ladders) != len(allKinds) || len(rep.memory) != len(allKinds) {
		t.Fatalf("%d fan-outs, %d ladders, %d memory runs; want one of each per server", len(rep.fanout), len(rep.ladders), len(rep.memory))
	}
	for _, r := range fanouts {
		if r.err != nil || !r.done.Converged || r.done.Missing != 0 || r.done.Edits != 50 || r.done.P99 == nil {
			t.Errorf("fan-out %s: %+v, err %v", r.kind, r.done, r.err)
		}
		if r.serverCPU < 0 || r.wall <= 0 {
			t.Errorf("fan-out %s: server CPU %v in %v", r.kind, r.serverCPU, r.wall)
		}
		if r.log != "" {
			t.Errorf("fan-out %s: the server logged %s", r.kind, r.log)
		}
	}
	for _, m := range rep.memory {
		if m.err != nil || m.before <= 0 || m.after <= 0 || m.peak < m.after {
			t.Errorf("memory %s: before %d, after %d, peak %d, err %v", m.kind, m.before, m.after, m.peak, m.err)
		}
	}
	for i, k := range allKinds {
		if rep.fanout[i].kind != k || rep.ladders[i].kind != k || rep.memory[i].kind != k {
			t.Errorf("row %d is not %s's", i, k)
		}
	}
	text := out.String()
	for _, want := range []string{"| 50 |", "| ours | 1 |", "| hocuspocus | 1 |", "| ywebsocket | 1 |", "| 50 | ours |", "| highest rate held",
		"ours p50 / p99", "hocuspocus p50 / p99", "ywebsocket p50 / p99", "No measurement failed", "@hocuspocus/server 4."} {
		if !strings.Contains(text, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
}

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-servers", "ywebsocket,ours", "-rates", "10, 20", "-ladder", ""})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.kinds, ",") != "ywebsocket,ours" || len(cfg.rates) != 2 || cfg.rates[1] != 20 || len(cfg.ladder) != 0 {
		t.Errorf("parsed %+v", cfg)
	}
	for _, bad := range [][]string{{"-servers", "other"}, {"-rates", "0"}, {"-ladder", "x"}, {"-readers", "0"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
