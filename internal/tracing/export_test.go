package tracing

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// flakyExporter fails while down is set.
type flakyExporter struct {
	sdktrace.SpanExporter
	down bool
}

func (e *flakyExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if e.down {
		return errors.New("collector unreachable")
	}
	return e.SpanExporter.ExportSpans(ctx, spans)
}

// A collector down for several batches is one warning, not one per batch, and its return one
// info line with the spans lost meanwhile.
func TestLoggedExporterWarnsOnceAndSaysWhenBack(t *testing.T) {
	var buf bytes.Buffer
	inner := &flakyExporter{SpanExporter: tracetest.NewNoopExporter(), down: true}
	e := &loggedExporter{SpanExporter: inner, log: slog.New(slog.NewTextHandler(&buf, nil))}
	spans := make([]sdktrace.ReadOnlySpan, 2)
	for range 3 {
		if err := e.ExportSpans(context.Background(), spans); err != nil {
			t.Fatalf("a failure went back to the batcher: %v", err)
		}
	}
	inner.down = false
	for range 2 {
		if err := e.ExportSpans(context.Background(), spans); err != nil {
			t.Fatal(err)
		}
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 ||
		!strings.Contains(lines[0], `level=WARN msg="tracing: spans not exported" spans=2 error="collector unreachable"`) ||
		!strings.Contains(lines[1], `level=INFO msg="tracing: the collector takes spans again" spans_lost=6`) {
		t.Fatalf("log:\n%s", buf.String())
	}
}
