package webhooktest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// minNodeMajor is the oldest Node.js the receiver runs on (package.json's engines).
const minNodeMajor = 18

// receiverRel is the receiver's directory relative to the repository root.
var receiverRel = filepath.Join("e2e", "webhookreceiver")

type environment struct {
	node string // the node executable
	dir  string // the receiver's directory, dependencies installed
}

var (
	prepareOnce sync.Once
	prepared    environment
	prepareErr  error
)

// prepare finds node and the receiver's directory and installs the receiver's dependencies if
// they are missing, once per test binary.
func prepare() (environment, error) {
	prepareOnce.Do(func() {
		prepared, prepareErr = doPrepare()
	})
	return prepared, prepareErr
}

func doPrepare() (environment, error) {
	node, err := lookNode()
	if err != nil {
		return environment{}, err
	}
	dir, err := receiverDir()
	if err != nil {
		return environment{}, err
	}
	if err := ensureInstalled(dir); err != nil {
		return environment{}, err
	}
	return environment{node: node, dir: dir}, nil
}

var toolsHelp = "the webhook receiver of the tests (e2e/webhookreceiver) needs Node.js " +
	strconv.Itoa(minNodeMajor) + " or newer and npm in PATH; install them (CI has them)"

// lookNode finds node in PATH and checks its version.
func lookNode() (string, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return "", fmt.Errorf("webhooktest: node not found (%v): %s", err, toolsHelp)
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("webhooktest: %s --version: %v: %s", node, err, toolsHelp)
	}
	version := strings.TrimSpace(string(out)) // "v20.20.2"
	major, _, _ := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	if n, err := strconv.Atoi(major); err != nil || n < minNodeMajor {
		return "", fmt.Errorf("webhooktest: %s is Node.js %s: %s", node, version, toolsHelp)
	}
	return node, nil
}

// receiverDir finds e2e/webhookreceiver: next to this source file's repository, or (when the
// binary was built with -trimpath, so the source path is not a real one) in the working
// directory or one of its parents; go test runs tests in their package's directory.
func receiverDir() (string, error) {
	var tried []string
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		// file is <root>/internal/webhooktest/install.go.
		dir := filepath.Join(filepath.Dir(file), "..", "..", receiverRel)
		if isReceiverDir(dir) {
			return filepath.Clean(dir), nil
		}
		tried = append(tried, filepath.Clean(dir))
	}
	wd, err := os.Getwd()
	if err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			dir := filepath.Join(d, receiverRel)
			if isReceiverDir(dir) {
				return dir, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
		tried = append(tried, filepath.Join(wd, receiverRel)+" and the same under every parent")
	}
	return "", fmt.Errorf("webhooktest: cannot find %s (receiver.mjs, package.json); tried %s",
		receiverRel, strings.Join(tried, ", "))
}

func isReceiverDir(dir string) bool {
	for _, f := range []string{"receiver.mjs", "package.json", "package-lock.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return false
		}
	}
	return true
}

// ensureInstalled runs `npm ci` in dir unless node_modules already holds every dependency of
// package.json at its pinned version (a fresh clone has no node_modules; a changed pin makes
// it stale). An exclusive lock on package.json keeps concurrent test binaries (go test ./...)
// from installing at the same time, or starting a receiver from a half-installed tree. npm's
// output is shown only when it fails.
func ensureInstalled(dir string) error {
	unlock, err := lockFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return fmt.Errorf("webhooktest: locking %s: %v", dir, err)
	}
	defer unlock()
	if installed(dir) == nil {
		return nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return fmt.Errorf("webhooktest: npm not found (%v), and %s needs its dependencies installed: %s",
			err, dir, toolsHelp)
	}
	cmd := exec.Command(npm, "ci", "--prefix", dir,
		"--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("webhooktest: %s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	if err := installed(dir); err != nil {
		return fmt.Errorf("webhooktest: npm ci --prefix %s succeeded, but %v", dir, err)
	}
	return nil
}

// installed reports why node_modules does not hold package.json's dependencies at their
// (exact) versions, or nil when it does.
func installed(dir string) error {
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := readJSON(filepath.Join(dir, "package.json"), &pkg); err != nil {
		return err
	}
	if len(pkg.Dependencies) == 0 {
		return errors.New("package.json has no dependencies")
	}
	for name, want := range pkg.Dependencies {
		var dep struct {
			Version string `json:"version"`
		}
		if err := readJSON(filepath.Join(dir, "node_modules", filepath.FromSlash(name), "package.json"), &dep); err != nil {
			return err
		}
		if dep.Version != want {
			return fmt.Errorf("node_modules has %s %s, package.json pins %s", name, dep.Version, want)
		}
	}
	return nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	return nil
}
