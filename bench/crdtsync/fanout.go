package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"
)

// doneLine is the driver's fan-out result (syncbench.mjs's "done" line).
type doneLine struct {
	Phase        string   `json:"phase"`
	Edits        int      `json:"edits"`
	RateAchieved float64  `json:"rate_achieved"`
	Deliveries   int      `json:"deliveries"`
	P50          *float64 `json:"p50_ms"`
	P95          *float64 `json:"p95_ms"`
	P99          *float64 `json:"p99_ms"`
	Max          *float64 `json:"max_ms"`
	Missing      int      `json:"missing"`
	Converged    bool     `json:"converged"`
	MeasureMs    float64  `json:"measure_ms"`
	WriterLagMs  float64  `json:"writer_lag_max_ms"`
	ClientCPU    float64  `json:"client_cpu_pct"`
	Disconnects  int      `json:"disconnects"`
}

// fanoutResult is one fan-out measurement: one server, one rate.
type fanoutResult struct {
	kind string
	rate float64
	done doneLine
	// serverCPU is the server's CPU time from the driver's "measuring" line to its "done"
	// line, machineCPU every process's, wall the time between the two.
	serverCPU, machineCPU, wall time.Duration
	// log is what the server wrote to stderr (ours: warnings and errors).
	log string
	// err says why there is no done line, or what went wrong after it.
	err error
}

// cpuPerEdit is the server's CPU time per measured edit, in ms.
func (r fanoutResult) cpuPerEdit() float64 {
	return float64(r.serverCPU) / float64(time.Millisecond) / float64(r.done.Edits)
}

// cpuPct is the server's CPU over the measurement, percent of one core.
func (r fanoutResult) cpuPct() float64 { return 100 * r.serverCPU.Seconds() / r.wall.Seconds() }

// machinePct is the whole machine's CPU over the measurement, percent of one core: the
// server's, the driver's and that of anything else running.
func (r fanoutResult) machinePct() float64 { return 100 * r.machineCPU.Seconds() / r.wall.Seconds() }

// held reports whether the server held the rate with a p99 under limit, and if not why.
func (r fanoutResult) held(limit time.Duration) (bool, string) {
	switch {
	case r.done.Phase == "" || (r.err != nil && r.done.Converged):
		return false, "failed: " + r.err.Error()
	case !r.done.Converged || r.done.Missing > 0:
		return false, fmt.Sprintf("did not converge (%d deliveries missing)", r.done.Missing)
	case r.done.RateAchieved < 0.95*r.rate:
		return false, fmt.Sprintf("sent at %.0f edits/s only", r.done.RateAchieved)
	case r.done.P99 == nil || *r.done.P99 >= float64(limit)/float64(time.Millisecond):
		return false, fmt.Sprintf("p99 %s ms", ms(r.done.P99))
	}
	return true, ""
}

// measureFanout starts a fresh server of kind and has the driver's writer type at rate to
// cfg.readers readers.
func measureFanout(ctx context.Context, env environment, cfg config, kind string, rate float64) fanoutResult {
	r := fanoutResult{kind: kind, rate: rate}
	s, err := startServer(ctx, env, kind)
	if err != nil {
		r.err = err
		return r
	}
	defer func() {
		r.log = s.log()
		if err := s.stop(); err != nil && r.err == nil {
			r.err = err
		}
		logFanout(r)
	}()
	dir, err := os.MkdirTemp("", "crdtsync-")
	if err != nil {
		r.err = fmt.Errorf("crdtsync: %w", err)
		return r
	}
	defer func() { _ = os.RemoveAll(dir) }() // best effort: a temporary file of tokens
	room, tokenArgs, err := s.fanoutRoom(ctx, cfg.readers, dir)
	if err != nil {
		r.err = err
		return r
	}
	args := append([]string{"syncbench.mjs", "fanout", "--kind", kind, "--url", s.url, "--room", room,
		"--readers", strconv.Itoa(cfg.readers), "--rate", fmtFloat(rate), "--seconds", fmtFloat(cfg.seconds),
		"--warmup", fmtFloat(cfg.warmup), "--timeout", fmtFloat(cfg.connectTimeout.Seconds())}, tokenArgs...)
	r.done, r.serverCPU, r.machineCPU, r.wall, r.err = drive(ctx, env, cfg, s, args)
	return r
}

// drainWithin is how long after its last edit the driver may take to print its done line:
// its own 10 s wait for the readers, and a margin.
const drainWithin = 30 * time.Second

// drive runs the fan-out driver and reads the server's CPU time at its measuring and done
// lines, and the machine's, and the time between them. A driver that printed its done line
// and then failed (the readers did not converge) returns the line and the error.
func drive(ctx context.Context, env environment, cfg config, s *server, args []string) (done doneLine, serverCPU, machine, wall time.Duration, err error) {
	d, err := startNode(env.node, args...)
	if err != nil {
		return done, 0, 0, 0, err
	}
	defer func() {
		if err != nil && done.Phase == "" {
			_ = d.wait(0) // kills it
		}
	}()
	within := cfg.connectTimeout + time.Duration(cfg.warmup*float64(time.Second)) + 30*time.Second
	if _, err := d.line(ctx, within, "the measuring line"); err != nil {
		return done, 0, 0, 0, err
	}
	before, err := s.stats()
	machine0, start := machineCPU(), time.Now()
	if err != nil {
		return done, 0, 0, 0, err
	}
	line, err := d.line(ctx, time.Duration(cfg.seconds*float64(time.Second))+drainWithin, "the done line")
	if err != nil {
		return done, 0, 0, 0, err
	}
	after, err := s.stats()
	machine, wall = machineCPU()-machine0, time.Since(start)
	if err != nil {
		return done, 0, 0, 0, err
	}
	if err := json.Unmarshal([]byte(line), &done); err != nil {
		return doneLine{}, 0, 0, 0, fmt.Errorf("crdtsync: the driver's done line %q: %w", line, err)
	}
	if done.Phase != "done" || done.Edits < 1 {
		return doneLine{}, 0, 0, 0, fmt.Errorf("crdtsync: the driver's done line %q: want the phase done and edits", line)
	}
	// The driver exits by itself once its clients are closed: 1 when the readers did not
	// converge (the line says so too).
	err = d.wait(30 * time.Second)
	return done, after.CPU - before.CPU, machine, wall, err
}

func logFanout(r fanoutResult) {
	if r.done.Phase == "" {
		slog.Error("fanout failed", "server", r.kind, "rate", r.rate, "err", r.err)
		return
	}
	attrs := []any{"server", r.kind, "rate", r.rate, "p50_ms", ms(r.done.P50), "p99_ms", ms(r.done.P99),
		"server_cpu_ms_per_edit", fmt.Sprintf("%.3f", r.cpuPerEdit()), "client_cpu_pct", r.done.ClientCPU, "machine_cpu_pct", fmt.Sprintf("%.0f", r.machinePct()),
		"achieved", r.done.RateAchieved, "missing", r.done.Missing, "disconnects", r.done.Disconnects}
	if r.err != nil {
		attrs = append(attrs, "err", r.err)
	}
	if r.log != "" {
		attrs = append(attrs, "server_log", r.log)
	}
	slog.Info("fanout", attrs...)
}

// ladder is one server's climb through the ladder's rates.
type ladder struct {
	kind  string
	steps []fanoutResult
	// best is the highest rate held; 0 when none was.
	best float64
	// stop says why the climb stopped at its last step; empty when every rate was held.
	stop string
}

// climb measures the ladder's rates on fresh servers of kind until one is not held.
func climb(ctx context.Context, env environment, cfg config, kind string) ladder {
	l := ladder{kind: kind}
	for _, rate := range cfg.ladder {
		if ctx.Err() != nil {
			l.stop = "stopped: " + ctx.Err().Error()
			break
		}
		r := measureFanout(ctx, env, cfg, kind, rate)
		l.steps = append(l.steps, r)
		ok, why := r.held(cfg.p99Limit)
		if !ok {
			l.stop = why
			break
		}
		l.best = rate
	}
	return l
}

// ms formats a latency of the driver's, "-" when there is none.
func ms(v *float64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v, 'f', 1, 64)
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
