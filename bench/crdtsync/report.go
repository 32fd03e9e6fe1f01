package main

import (
	"fmt"
	"runtime"
	"strings"
	"time"
)

// markdown writes a run's figures as the tables docs/benchmarks.md holds, with what they ran
// on and every problem seen.
func markdown(cfg config, rep report) string {
	var b strings.Builder
	e := rep.env
	commit := ""
	if e.commit != "" {
		commit = " at " + e.commit
	}
	fmt.Fprintf(&b, "collabd%s (memory store) against @hocuspocus/server and @y/websocket-server, each measurement on a fresh process, all on loopback; "+
		"%d cores (%s), Linux %s, Go %s, Node.js %s; %s; load average %s at the start, %s at the end; the run took %s.\n\n",
		commit, e.cores, e.cpu, e.kernel, runtime.Version(), e.node.NodeVersion, strings.Join(e.packages, ", "),
		e.loadBefore, e.loadAfter, e.took.Round(time.Second))
	if len(rep.fanout) > 0 {
		fanoutTables(&b, cfg, rep.fanout)
	}
	if len(rep.ladders) > 0 {
		ladderTable(&b, cfg, rep.ladders)
	}
	if len(rep.memory) > 0 {
		memoryTable(&b, cfg, rep.memory)
	}
	problems(&b, rep)
	return b.String()
}

func fanoutTables(b *strings.Builder, cfg config, rs []fanoutResult) {
	fmt.Fprintf(b, "Fan-out: 1 writer, %d readers, %s s measured after %s s of warm-up. p50 / p99: delivery latency in ms, "+
		"from the writer's send to a reader seeing the edit; CPU/edit: the server's CPU time (user + system) per edit, ms; "+
		"driver: the load driver's CPU, %% of one core.\n\n", cfg.readers, fmtFloat(cfg.seconds), fmtFloat(cfg.warmup))
	b.WriteString("| edits/s |")
	for _, k := range cfg.kinds {
		fmt.Fprintf(b, " %s p50 / p99 | %s CPU/edit | %s driver |", k, k, k)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|---|---|", len(cfg.kinds)) + "\n")
	for _, rate := range cfg.rates {
		fmt.Fprintf(b, "| %s |", fmtFloat(rate))
		for _, k := range cfg.kinds {
			r, ok := find(rs, k, rate)
			switch {
			case !ok:
				b.WriteString(" | | |")
			case r.done.Phase == "":
				b.WriteString(" failed | | |")
			default:
				fmt.Fprintf(b, " %s / %s | %.3f | %.0f%% |", ms(r.done.P50), ms(r.done.P99), r.cpuPerEdit(), r.done.ClientCPU)
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("\nThe same measurements in detail: sent, the rate the writer achieved; late, how far behind its schedule it sent an edit at worst; " +
		"server CPU and machine CPU (every process, the server and the driver included), % of one core over the measurement; missing, deliveries that never arrived; disconnects, connections the server closed.\n\n")
	b.WriteString("| edits/s | server | sent | max ms | late ms | server CPU | machine CPU | missing | converged | disconnects |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		if r.done.Phase == "" {
			fmt.Fprintf(b, "| %s | %s | failed: %s | | | | | | | |\n", fmtFloat(r.rate), r.kind, cell(r.err.Error()))
			continue
		}
		fmt.Fprintf(b, "| %s | %s | %.1f | %s | %.1f | %.0f%% | %.0f%% | %d | %t | %d |\n", fmtFloat(r.rate), r.kind, r.done.RateAchieved,
			ms(r.done.Max), r.done.WriterLagMs, r.cpuPct(), r.machinePct(), r.done.Missing, r.done.Converged, r.done.Disconnects)
	}
	b.WriteString("\n")
}

func find(rs []fanoutResult, kind string, rate float64) (fanoutResult, bool) {
	for _, r := range rs {
		if r.kind == kind && r.rate == rate {
			return r, true
		}
	}
	return fanoutResult{}, false
}

func ladderTable(b *strings.Builder, cfg config, ls []ladder) {
	fmt.Fprintf(b, "Highest rate held: the fan-out above at %s edits/s in turn, a fresh server each, until a rate's p99 is %v or more, "+
		"a reader misses an edit, or the writer sends below 95%% of the rate.\n\n", joinRates(cfg.ladder), cfg.p99Limit)
	b.WriteString("| server | highest rate held, edits/s | stopped at | p99 at each rate, ms (server CPU, driver CPU: % of one core) |\n|---|---|---|---|\n")
	for _, l := range ls {
		best := "none"
		if l.best > 0 {
			best = fmtFloat(l.best)
		}
		stop := "held every rate"
		if l.stop != "" && len(l.steps) > 0 {
			stop = fmtFloat(l.steps[len(l.steps)-1].rate) + ": " + l.stop
		} else if l.stop != "" {
			stop = l.stop
		}
		var steps []string
		for _, s := range l.steps {
			if s.done.Phase == "" {
				steps = append(steps, fmtFloat(s.rate)+": failed")
				continue
			}
			steps = append(steps, fmt.Sprintf("%s: %s (%.0f%%, %.0f%%)", fmtFloat(s.rate), ms(s.done.P99), s.cpuPct(), s.done.ClientCPU))
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", l.kind, best, cell(stop), strings.Join(steps, ", "))
	}
	b.WriteString("\n")
}

func memoryTable(b *strings.Builder, cfg config, rs []memoryResult) {
	fmt.Fprintf(b, "Memory: %d documents of %d characters of text, one client each; the server's RSS before any client connected "+
		"(started and settled %v) and after all had synced and %v more; per document = (after − before) / %d.\n\n",
		cfg.docs, cfg.textBytes, cfg.settleBefore, cfg.settle, cfg.docs)
	b.WriteString("| server | run | RSS before, MiB | RSS after, MiB | peak RSS, MiB | per document, KiB | clients synced in |\n|---|---|---|---|---|---|---|\n")
	for _, m := range rs {
		if m.err != nil {
			fmt.Fprintf(b, "| %s | %d | failed: %s | | | | |\n", m.kind, m.run, cell(m.err.Error()))
			continue
		}
		fmt.Fprintf(b, "| %s | %d | %.1f | %.1f | %.1f | %.1f | %.1f s |\n", m.kind, m.run, mib(m.before), mib(m.after), mib(m.peak),
			m.perDocKiB(), m.took.Seconds())
	}
	b.WriteString("\n")
}

// problems lists every measurement that failed or whose server logged something.
func problems(b *strings.Builder, rep report) {
	var lines []string
	note := func(what string, err error, log string) {
		if err != nil {
			lines = append(lines, fmt.Sprintf("- %s: %s", what, cell(err.Error())))
		}
		if log != "" {
			lines = append(lines, fmt.Sprintf("- %s: the server logged: %s", what, cell(clip(log, 2000))))
		}
	}
	fanouts := rep.fanout
	for _, l := range rep.ladders {
		fanouts = append(fanouts, l.steps...)
	}
	for _, r := range fanouts {
		note(fmt.Sprintf("fan-out %s at %s edits/s", r.kind, fmtFloat(r.rate)), r.err, r.log)
	}
	for _, m := range rep.memory {
		note(fmt.Sprintf("memory %s run %d", m.kind, m.run), m.err, m.log)
	}
	if len(lines) == 0 {
		b.WriteString("No measurement failed, and no server logged anything.\n")
		return
	}
	b.WriteString("Problems seen:\n\n" + strings.Join(lines, "\n") + "\n")
}

func joinRates(rs []float64) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = fmtFloat(r)
	}
	return strings.Join(s, ", ")
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// cell keeps a table cell on one line.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

// clip shortens s to at most n bytes, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + " …"
}
