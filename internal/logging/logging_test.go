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
