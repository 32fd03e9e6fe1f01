package logging

import (
	"context"
	"log/slog"
	"strings"
	"testing"
)

func TestRequestIDInLogs(t *testing.T) {
	var out strings.Builder
	log := New(&out, "json", slog.LevelInfo).With("svc", "x")
	log.InfoContext(WithRequestID(context.Background(), "abc123"), "hello")
	log.DebugContext(context.Background(), "hidden")
	if !strings.Contains(out.String(), `"request_id":"abc123"`) || !strings.Contains(out.String(), `"svc":"x"`) {
		t.Fatalf("log line %s", out.String())
	}
	if strings.Contains(out.String(), "hidden") {
		t.Fatal("debug line written at info level")
	}
}

func TestValidRequestID(t *testing.T) {
	for id, want := range map[string]bool{
		"abc-123_X.y:z": true, "": false, "has space": false, "new\nline": false, strings.Repeat("a", 129): false, strings.Repeat("a", 128): true, NewRequestID(): true,
	} {
		if ValidRequestID(id) != want {
			t.Errorf("ValidRequestID(%q) = %v", id, !want)
		}
	}
}

// The id is the context's like any value: found through derived contexts, replaced by a later
// one, absent before, and the context it wraps still cancels and carries its values.
func TestRequestIDOnContext(t *testing.T) {
	type key struct{}
	base, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	if RequestID(base) != "" {
		t.Fatal("an id before any was set")
	}
	ctx := WithRequestID(base, "first")
	derived, stop := context.WithCancel(context.WithValue(ctx, key{}, "w"))
	defer stop()
	if RequestID(derived) != "first" || RequestID(WithRequestID(derived, "second")) != "second" {
		t.Fatalf("ids %q, %q", RequestID(derived), RequestID(WithRequestID(derived, "second")))
	}
	if ctx.Value(key{}) != "v" || derived.Value(key{}) != "w" {
		t.Fatal("the wrapped context's values are lost")
	}
	cancel()
	<-derived.Done()
	if ctx.Err() == nil || derived.Err() == nil {
		t.Fatal("cancellation did not pass through")
	}
}
