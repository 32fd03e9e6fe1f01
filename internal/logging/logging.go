// Package logging holds the process's slog setup and the request id that travels on the
// context, so every log line of a request carries it without being passed by hand.
package logging

import (
	"context"
	"io"
	"log/slog"
	"strings"

	"github.com/collab/collab/internal/ids"
)

// RequestIDHeader is the HTTP header and gRPC metadata key of the request id.
const RequestIDHeader = "x-request-id"

type requestIDKey struct{}

// WithRequestID returns ctx carrying id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return &requestIDContext{Context: ctx, id: id}
}

// requestIDContext carries a request id in one allocation, where context.WithValue takes two
// (its own and the string's, boxed): every HTTP request and every RPC gets one.
type requestIDContext struct {
	context.Context
	id string
}

func (c *requestIDContext) Value(key any) any {
	if _, ok := key.(requestIDKey); ok {
		return &c.id
	}
	return c.Context.Value(key)
}

// RequestID returns the request id on ctx, or "".
func RequestID(ctx context.Context) string {
	if id, ok := ctx.Value(requestIDKey{}).(*string); ok {
		return *id
	}
	return ""
}

// NewRequestID returns a fresh request id.
func NewRequestID() string { return ids.Random(20) }

// ValidRequestID reports whether an id supplied by a caller is safe to reuse: short and plain, so
// it cannot forge log lines or headers.
func ValidRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:", r)
		if !ok {
			return false
		}
	}
	return true
}

// contextHandler adds the context's request id to every record.
type contextHandler struct{ slog.Handler }

func (h contextHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestID(ctx); id != "" {
		r.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

func (h contextHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return contextHandler{h.Handler.WithAttrs(attrs)}
}

func (h contextHandler) WithGroup(name string) slog.Handler {
	return contextHandler{h.Handler.WithGroup(name)}
}

// New returns a logger writing text or JSON (format "json") at level to w, adding request ids.
func New(w io.Writer, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	if format == "json" {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(contextHandler{h})
}

// Discard returns a logger that writes nothing, for tests.
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
