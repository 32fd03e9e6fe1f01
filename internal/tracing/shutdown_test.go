package tracing_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/collab/collab/internal/tracing"
)

// blackHole accepts connections and never answers: a collector that hangs, the worst case for
// the exporter (a refused connection fails fast).
func blackHole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// Shutdown with spans left for a collector that never answers gives up when its context ends,
// with the context's error, instead of waiting for the exporter's own retries (a minute).
func TestShutdownWithAHungCollectorEndsWithItsContext(t *testing.T) {
	tp, err := tracing.NewProvider(context.Background(), tracing.Config{Endpoint: "http://" + blackHole(t), SampleRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		_, span := tp.Tracer("test").Start(context.Background(), "work")
		span.End()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	err = tp.Shutdown(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("shutdown: %v, want the context's deadline", err)
	}
}

// recordHandler hands every log record to a channel.
type recordHandler struct{ records chan slog.Record }

func (h recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	select {
	case h.records <- r:
	default:
	}
	return nil
}
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordHandler) WithGroup(string) slog.Handler      { return h }

// A collector that cannot be reached is reported in the process's own structured log (not by
// OpenTelemetry's default handler, which prints plain lines to stderr whatever the log format),
// with the number of spans lost.
func TestExportFailuresGoToTheProcessLog(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close() // nothing listens there now: connections are refused
	h := recordHandler{records: make(chan slog.Record, 8)}
	tp, err := tracing.NewProvider(context.Background(), tracing.Config{Endpoint: "http://" + closed, SampleRatio: 1, Log: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = tp.Shutdown(ctx)
	}()
	for range 3 {
		_, span := tp.Tracer("test").Start(context.Background(), "work")
		span.End()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := tp.ForceFlush(ctx); err == nil {
		t.Fatal("a flush to a closed port succeeded")
	}
	var r slog.Record
	select {
	case r = <-h.records:
	case <-time.After(30 * time.Second): // a guard against a hang, not a measure
		t.Fatal("no failure logged")
	}
	if r.Level != slog.LevelWarn {
		t.Errorf("level %v", r.Level)
	}
	attrs := map[string]string{}
	r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
	if attrs["spans"] != "3" || attrs["error"] == "" {
		t.Errorf("log %q %v, want the 3 spans lost and the error", r.Message, attrs)
	}
}
