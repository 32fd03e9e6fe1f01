package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"time"
)

// memoryResult is one memory measurement: one server, docs documents open.
type memoryResult struct {
	kind string
	run  int
	docs int
	// before is the server's RSS before any client connected, after its RSS and peak RSS once
	// every client had synced and the server had settled.
	before, after, peak int64
	// took is how long the clients took to connect and sync.
	took time.Duration
	log  string
	err  error
}

// perDocKiB is the RSS growth per open document, KiB.
func (m memoryResult) perDocKiB() float64 {
	return float64(m.after-m.before) / 1024 / float64(m.docs)
}

// measureMemory starts a fresh server of kind, reads its RSS, opens cfg.docs documents with
// a client each, and reads its RSS again once they have synced and it has settled.
func measureMemory(ctx context.Context, env environment, cfg config, kind string, run int) memoryResult {
	m := memoryResult{kind: kind, run: run, docs: cfg.docs}
	s, err := startServer(ctx, env, kind)
	if err != nil {
		m.err = err
		return m
	}
	defer func() {
		m.log = s.log()
		if err := s.stop(); err != nil && m.err == nil {
			m.err = err
		}
		logMemory(m)
	}()
	pattern, tokenArgs, err := s.memoryRooms(ctx, cfg.docs)
	if err != nil {
		m.err = err
		return m
	}
	if err := sleep(ctx, cfg.settleBefore); err != nil {
		m.err = err
		return m
	}
	st, err := s.stats()
	if err != nil {
		m.err = err
		return m
	}
	m.before = st.RSS
	args := append([]string{"syncbench.mjs", "memory", "--kind", kind, "--url", s.url, "--room-pattern", pattern,
		"--docs", strconv.Itoa(cfg.docs), "--text-bytes", strconv.Itoa(cfg.textBytes),
		"--timeout", fmtFloat(cfg.connectTimeout.Seconds())}, tokenArgs...)
	m.after, m.peak, m.took, m.err = holdDocuments(ctx, env, cfg, s, args)
	return m
}

// holdDocuments runs the memory driver until its clients have synced and the server has
// settled, reads the server's RSS and peak, and ends the driver.
func holdDocuments(ctx context.Context, env environment, cfg config, s *server, args []string) (rss, peak int64, took time.Duration, err error) {
	start := time.Now()
	d, err := startNode(env.node, args...)
	if err != nil {
		return 0, 0, 0, err
	}
	defer func() {
		if stopErr := d.stop(time.Minute); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	line, err := d.line(ctx, cfg.connectTimeout+30*time.Second, "the synced line")
	if err != nil {
		return 0, 0, 0, err
	}
	took = time.Since(start)
	var synced struct {
		Phase string `json:"phase"`
		Docs  int    `json:"docs"`
	}
	if err := json.Unmarshal([]byte(line), &synced); err != nil {
		return 0, 0, took, fmt.Errorf("crdtsync: the driver's synced line %q: %w", line, err)
	}
	if synced.Phase != "synced" || synced.Docs != cfg.docs {
		return 0, 0, took, fmt.Errorf("crdtsync: the driver's synced line %q: want the phase synced and %d documents", line, cfg.docs)
	}
	if err := sleep(ctx, cfg.settle); err != nil {
		return 0, 0, took, err
	}
	st, err := s.stats()
	if err != nil {
		return 0, 0, took, err
	}
	return st.RSS, st.PeakRSS, took, nil
}

func logMemory(m memoryResult) {
	if m.err != nil {
		slog.Error("memory failed", "server", m.kind, "run", m.run, "err", m.err, "server_log", m.log)
		return
	}
	attrs := []any{"server", m.kind, "run", m.run, "before_mib", m.before >> 20, "after_mib", m.after >> 20,
		"per_doc_kib", fmt.Sprintf("%.1f", m.perDocKiB()), "connect", m.took.Round(time.Millisecond)}
	if m.log != "" {
		attrs = append(attrs, "server_log", m.log)
	}
	slog.Info("memory", attrs...)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("crdtsync: %w", ctx.Err())
	}
}
