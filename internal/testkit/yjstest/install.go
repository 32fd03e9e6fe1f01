package yjstest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/collab/collab/internal/testkit/nodeproject"
)

// project is e2e/yjs, the reference yjs the tests drive.
var project = nodeproject.New(nodeproject.Spec{
	Rel: filepath.Join("e2e", "yjs"), Marker: "check.mjs", Who: "yjstest", What: "the reference yjs of the tests",
})

// environment is e2e/yjs prepared: node found, dependencies installed.
type environment = nodeproject.Project

// prepare finds node and e2e/yjs and installs its dependencies if they are missing or stale,
// once per test binary.
func prepare() (environment, error) { return project.Prepare() }

// cached runs generate into a directory kept under os.TempDir, once per key, and returns the
// directory. The key is a hash of name, args, the node version and the named files of e2e/yjs
// (the scripts and package-lock.json), so any change to them makes a new directory. generate
// writes into a fresh directory that is renamed into place when complete, under a file lock, so
// concurrent test binaries generate once and never see half a directory.
func cached(env environment, name string, files, args []string, generate func(dir string) error) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%q\x00", name, env.NodeVersion, args)
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(env.Dir, f))
		if err != nil {
			return "", fmt.Errorf("yjstest: %w", err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", f, len(b))
		h.Write(b)
	}
	parent := filepath.Join(os.TempDir(), "collab-yjstest")
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("yjstest: %w", err)
	}
	final := filepath.Join(parent, name+"-"+hex.EncodeToString(h.Sum(nil))[:20])
	complete := func() bool {
		_, err := os.Stat(filepath.Join(final, completeMarker))
		return err == nil
	}
	if complete() {
		return final, nil
	}
	unlock, err := nodeproject.LockFile(final + ".lock")
	if err != nil {
		return "", fmt.Errorf("yjstest: locking %s: %w", final, err)
	}
	defer unlock()
	if complete() {
		return final, nil
	}
	// A directory without the marker is what is left of a crash or a tmp cleaner: start over.
	if err := os.RemoveAll(final); err != nil {
		return "", fmt.Errorf("yjstest: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, name+"-tmp-")
	if err != nil {
		return "", fmt.Errorf("yjstest: %w", err)
	}
	if err := generate(tmp); err != nil {
		_ = os.RemoveAll(tmp) // best effort: the error returned is the one that matters
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, completeMarker), nil, 0o644); err != nil {
		_ = os.RemoveAll(tmp) // best effort: the error returned is the one that matters
		return "", fmt.Errorf("yjstest: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		// Best effort: the error returned is the one that matters.
		_ = os.RemoveAll(tmp)
		if complete() { // another process without flock got there first
			return final, nil
		}
		return "", fmt.Errorf("yjstest: %w", err)
	}
	return final, nil
}

// completeMarker is the file a cached directory holds once it is complete.
const completeMarker = ".complete"
