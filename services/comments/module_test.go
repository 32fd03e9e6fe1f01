package comments

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/collab/collab/internal/service"
)

// --comments-stream-recheck takes 10s to 24h, as a flag or from the environment; a shorter
// period would have every open stream ask the access service again and again.
func TestStreamRecheckFlag(t *testing.T) {
	parse := func(env map[string]string, args ...string) error {
		fs := flag.NewFlagSet("collabd", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f := service.NewFlags(fs, func(k string) string { return env[k] })
		Module().Setup(f)
		if err := fs.Parse(args); err != nil {
			return err
		}
		return f.Finish()
	}
	for _, ok := range []string{"10s", "1m", "24h"} {
		if err := parse(nil, "--comments-stream-recheck="+ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"0s", "1s", "-1m", "25h", "soon"} {
		if err := parse(nil, "--comments-stream-recheck="+bad); err == nil || !strings.Contains(err.Error(), "from 10s to 24h") {
			t.Errorf("%s: %v", bad, err)
		}
	}
	if err := parse(map[string]string{"COLLAB_COMMENTS_STREAM_RECHECK": "2s"}); err == nil || !strings.Contains(err.Error(), "COLLAB_COMMENTS_STREAM_RECHECK") {
		t.Errorf("COLLAB_COMMENTS_STREAM_RECHECK=2s: %v", err)
	}
}
