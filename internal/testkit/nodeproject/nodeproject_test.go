package nodeproject

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var receiver = Spec{Rel: filepath.Join("e2e", "webhookreceiver"), Marker: "receiver.mjs", Who: "nodeproject test", What: "the webhook receiver of the tests"}

func TestMissingNode(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, _, err := New(receiver).lookNode()
	if err == nil || !strings.Contains(err.Error(), "node not found") || !strings.Contains(err.Error(), "npm") {
		t.Errorf("lookNode without node in PATH: %v", err)
	}
}

// Prepare finds the project in the repository and leaves its locked dependencies installed.
func TestPrepareInstalls(t *testing.T) {
	p, err := New(receiver).Prepare()
	if err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Clean(filepath.Join(wd, "..", "..", "..", "e2e", "webhookreceiver")); p.Dir != want {
		t.Errorf("Dir = %s, want %s", p.Dir, want)
	}
	if err := installed(p.Dir); err != nil {
		t.Errorf("after Prepare: %v", err)
	}
	if !strings.HasPrefix(p.NodeVersion, "v") {
		t.Errorf("NodeVersion %q", p.NodeVersion)
	}
}

func TestMissingProject(t *testing.T) {
	_, err := New(Spec{Rel: "no/such/dir", Marker: "x.mjs", Who: "w", What: "it"}).projectDir()
	if err == nil || !strings.HasPrefix(err.Error(), "w: cannot find no/such/dir") {
		t.Errorf("projectDir of a missing project: %v", err)
	}
}
