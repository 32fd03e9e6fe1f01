// Command crdtsync measures our live sync against two other Yjs servers on the same machine,
// under the same load, so that its figures mean something beside theirs (issue 19): collabd
// (bench/collabproc: the real binary, memory store, loopback), Hocuspocus (@hocuspocus/server)
// and @y/websocket-server (both run by e2e/yjs/peerserver.mjs). One load driver drives all
// three (e2e/yjs/syncbench.mjs: y-websocket clients for ours and @y/websocket-server,
// HocuspocusProvider for Hocuspocus, which speaks its own protocol), and every measurement
// gets a fresh server process. The servers' costs are read from /proc, never from figures
// they report about themselves.
//
// Fan-out: one writer types into a room that -readers readers hold, at each rate of -rates
// edits a second (-warmup s, then -seconds s measured): the driver's delivery latencies
// (writer's send to a reader seeing the edit; p50, p99), the driver's own CPU (its clients
// share one event loop, and on 2 cores it competes with the server), and the server's CPU per
// edit: its utime + stime (/proc/<pid>/stat) when the driver prints its "done" line minus
// when it prints "measuring", divided by the measured edits.
//
// Ladder: for each server, the rates of -ladder in order, each measured as above, until one
// has a p99 of -p99 or more, does not converge, misses a delivery, or is sent at less than 95%
// of its rate (the driver fell behind); the highest rate that passed is reported.
//
// Memory: -docs documents, one client each holding a text of -text-bytes characters
// (syncbench.mjs memory): the server's RSS once started and settled -settle-before, before
// any client connects, and after all have synced and -settle more; their difference per
// document. -memory-runs times per server. For ours the documents are made first (Add
// Documents, 100 a call) and one token of an organization member opens them all.
//
// It prints markdown tables, with the machine's and the packages' versions, to stdout, and its
// progress to stderr.
//
//	go run ./bench/crdtsync [-servers ours,hocuspocus,ywebsocket] [-readers 100]
//	    [-rates 100,400,800] [-seconds 10] [-warmup 2]
//	    [-ladder 100,200,400,800,1200,1600,2400,3200] [-p99 50ms]
//	    [-docs 1000] [-text-bytes 5000] [-memory-runs 3] [-settle 10s] [-settle-before 2s]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/collab/collab/bench/collabproc"
)

// The servers measured, in the tables' order.
const (
	kindOurs       = "ours"
	kindHocuspocus = "hocuspocus"
	kindYWebsocket = "ywebsocket"
)

var allKinds = []string{kindOurs, kindHocuspocus, kindYWebsocket}

// config is what one run measures.
type config struct {
	kinds []string
	// Fan-out, and the ladder's steps (none: no ladder).
	readers         int
	rates, ladder   []float64
	seconds, warmup float64
	p99Limit        time.Duration
	// Memory.
	docs, textBytes, memoryRuns int
	settle, settleBefore        time.Duration
	// connectTimeout bounds how long the driver's clients may take to sync.
	connectTimeout time.Duration
}

func main() {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	_, err = run(ctx, cfg, os.Stdout)
	stop()
	collabproc.Cleanup()
	if err != nil {
		slog.Error("crdtsync failed", "err", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (config, error) {
	fs := flag.NewFlagSet("crdtsync", flag.ContinueOnError)
	kinds := fs.String("servers", strings.Join(allKinds, ","), "servers to measure, comma-separated: "+strings.Join(allKinds, ", "))
	readers := fs.Int("readers", 100, "fan-out: readers of the writer's room")
	rates := fs.String("rates", "100,400,800", "fan-out: the writer's rates, edits per second, comma-separated")
	seconds := fs.Float64("seconds", 10, "fan-out: seconds measured at each rate")
	warmup := fs.Float64("warmup", 2, "fan-out: seconds of edits before the measured ones")
	ladder := fs.String("ladder", "100,200,400,800,1200,1600,2400,3200", "ladder: rates tried in order; empty: no ladder")
	p99 := fs.Duration("p99", 50*time.Millisecond, "ladder: a rate passes with a p99 latency under this")
	docs := fs.Int("docs", 1000, "memory: documents, one client each")
	textBytes := fs.Int("text-bytes", 5000, "memory: characters of each document's text")
	runs := fs.Int("memory-runs", 3, "memory: measurements per server")
	settle := fs.Duration("settle", 10*time.Second, "memory: wait after every client synced before reading the RSS")
	settleBefore := fs.Duration("settle-before", 2*time.Second, "memory: wait after the server started before reading the RSS")
	connect := fs.Duration("connect-timeout", 2*time.Minute, "time the driver's clients may take to sync")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	cfg := config{readers: *readers, seconds: *seconds, warmup: *warmup, p99Limit: *p99, docs: *docs,
		textBytes: *textBytes, memoryRuns: *runs, settle: *settle, settleBefore: *settleBefore, connectTimeout: *connect}
	var err error
	if cfg.kinds, err = parseKinds(*kinds); err != nil {
		return config{}, err
	}
	if cfg.rates, err = parseRates(*rates); err != nil {
		return config{}, fmt.Errorf("-rates: %w", err)
	}
	if cfg.ladder, err = parseRates(*ladder); err != nil {
		return config{}, fmt.Errorf("-ladder: %w", err)
	}
	if cfg.readers < 1 || cfg.docs < 1 || cfg.textBytes < 0 || cfg.memoryRuns < 0 || cfg.seconds <= 0 || cfg.warmup < 0 {
		return config{}, fmt.Errorf("want -readers, -docs, -seconds > 0 and -text-bytes, -memory-runs, -warmup >= 0")
	}
	return cfg, nil
}

func parseKinds(s string) ([]string, error) {
	var out []string
	for _, k := range strings.Split(s, ",") {
		k = strings.TrimSpace(k)
		if !slices.Contains(allKinds, k) {
			return nil, fmt.Errorf("-servers: %q is not one of %s", k, strings.Join(allKinds, ", "))
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out, nil
}

// parseRates reads comma-separated positive numbers; an empty string is none.
func parseRates(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		r, err := strconv.ParseFloat(f, 64)
		if err != nil || r <= 0 {
			return nil, fmt.Errorf("%q is not a rate > 0", f)
		}
		out = append(out, r)
	}
	return out, nil
}

// report is everything one run measured.
type report struct {
	env     environment
	fanout  []fanoutResult // by rate, then server in cfg.kinds' order
	ladders []ladder
	memory  []memoryResult // by server, then run
}

// run measures what cfg asks for, writes the tables to out and returns the figures.
func run(ctx context.Context, cfg config, out io.Writer) (report, error) {
	var rep report
	env, err := describe(ctx)
	if err != nil {
		return rep, err
	}
	rep.env = env
	started := time.Now()
	for _, rate := range cfg.rates {
		for _, kind := range cfg.kinds {
			rep.fanout = append(rep.fanout, measureFanout(ctx, env, cfg, kind, rate))
		}
	}
	if len(cfg.ladder) > 0 {
		for _, kind := range cfg.kinds {
			rep.ladders = append(rep.ladders, climb(ctx, env, cfg, kind))
		}
	}
	for _, kind := range cfg.kinds {
		for i := range cfg.memoryRuns {
			rep.memory = append(rep.memory, measureMemory(ctx, env, cfg, kind, i+1))
		}
	}
	if err := ctx.Err(); err != nil {
		return rep, fmt.Errorf("crdtsync: stopped: %w", err)
	}
	rep.env.took = time.Since(started)
	rep.env.loadAfter = loadAverage()
	if _, err := io.WriteString(out, markdown(cfg, rep)); err != nil {
		return rep, fmt.Errorf("crdtsync: writing the tables: %w", err)
	}
	return rep, nil
}
