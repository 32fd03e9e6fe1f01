package tracing

import (
	"context"
	"log/slog"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// failureLogEvery spaces the warnings of a collector that stays unreachable: the batcher tries
// every few seconds, and under load many times a second.
const failureLogEvery = time.Minute

// loggedExporter reports failed exports in the process's log. The batcher would hand them to
// OpenTelemetry's global error handler, which prints plain lines to stderr whatever the
// process's log format, once per failed batch; failures here are logged at most once a minute,
// with the spans lost since, and the next success says the collector is back.
type loggedExporter struct {
	sdktrace.SpanExporter
	log *slog.Logger

	mu       sync.Mutex
	lastLog  time.Time
	lost     int // spans lost since the last warning
	failing  bool
	lostEver int // spans lost since the collector was last reached
}

func (e *loggedExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err == nil {
		if e.failing {
			e.log.Info("tracing: the collector takes spans again", "spans_lost", e.lostEver)
			e.failing, e.lost, e.lostEver = false, 0, 0
		}
		return nil
	}
	e.failing = true
	e.lost += len(spans)
	e.lostEver += len(spans)
	if now := time.Now(); e.lastLog.IsZero() || now.Sub(e.lastLog) >= failureLogEvery {
		e.log.Warn("tracing: spans not exported", "spans", e.lost, "error", err)
		e.lastLog, e.lost = now, 0
	}
	// Reported here: nil keeps the batcher from reporting it again to the global handler.
	return nil
}
