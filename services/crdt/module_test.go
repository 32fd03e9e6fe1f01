package crdt

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/collab/collab/internal/service"
)

// --crdt-sync-recheck takes 0s (never) or 10s to 24h, as a flag or from the environment; a
// shorter period would have every connection ask the access service again and again.
func TestSyncRecheckFlag(t *testing.T) {
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
	for _, ok := range []string{"0s", "10s", "1m", "24h"} {
		if err := parse(nil, "--crdt-sync-recheck="+ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"1s", "-1m", "25h", "soon"} {
		if err := parse(nil, "--crdt-sync-recheck="+bad); err == nil || !strings.Contains(err.Error(), "from 10s to 24h") {
			t.Errorf("%s: %v", bad, err)
		}
	}
	if err := parse(map[string]string{"COLLAB_CRDT_SYNC_RECHECK": "2s"}); err == nil || !strings.Contains(err.Error(), "COLLAB_CRDT_SYNC_RECHECK") {
		t.Errorf("COLLAB_CRDT_SYNC_RECHECK=2s: %v", err)
	}
}
