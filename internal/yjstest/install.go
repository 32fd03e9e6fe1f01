package yjstest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// minNodeMajor is the oldest Node.js the scripts run on (package.json's engines).
const minNodeMajor = 18

// projectRel is the Node project's directory relative to the repository root.
var projectRel = filepath.Join("e2e", "yjs")

type environment struct {
	node        string // the node executable
	nodeVersion string // "v20.20.2"
	dir         string // e2e/yjs, dependencies installed
}

var (
	prepareOnce sync.Once
	prepared    environment
	prepareErr  error
)

// prepare finds node and e2e/yjs and installs its dependencies if they are missing or stale,
// once per test binary.
func prepare() (environment, error) {
	prepareOnce.Do(func() {
		prepared, prepareErr = doPrepare()
	})
	return prepared, prepareErr
}

func doPrepare() (environment, error) {
	node, version, err := lookNode()
	if err != nil {
		return environment{}, err
	}
	dir, err := projectDir()
	if err != nil {
		return environment{}, err
	}
	if err := ensureInstalled(dir); err != nil {
		return environment{}, err
	}
	return environment{node: node, nodeVersion: version, dir: dir}, nil
}

var toolsHelp = "the reference yjs of the tests (e2e/yjs) needs Node.js " +
	strconv.Itoa(minNodeMajor) + " or newer and npm in PATH; install them (CI has them)"

// lookNode finds node in PATH and checks its version.
func lookNode() (path, version string, err error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return "", "", fmt.Errorf("yjstest: node not found (%v): %s", err, toolsHelp)
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		return "", "", fmt.Errorf("yjstest: %s --version: %v: %s", node, err, toolsHelp)
	}
	version = strings.TrimSpace(string(out)) // "v20.20.2"
	major, _, _ := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	if n, err := strconv.Atoi(major); err != nil || n < minNodeMajor {
		return "", "", fmt.Errorf("yjstest: %s is Node.js %s: %s", node, version, toolsHelp)
	}
	return node, version, nil
}

// projectDir finds e2e/yjs: next to this source file's repository, or (when the binary was
// built with -trimpath, so the source path is not a real one) in the working directory or one of
// its parents; go test runs tests in their package's directory.
func projectDir() (string, error) {
	var tried []string
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		// file is <root>/internal/yjstest/install.go.
		dir := filepath.Join(filepath.Dir(file), "..", "..", projectRel)
		if isProjectDir(dir) {
			return filepath.Clean(dir), nil
		}
		tried = append(tried, filepath.Clean(dir))
	}
	wd, err := os.Getwd()
	if err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			dir := filepath.Join(d, projectRel)
			if isProjectDir(dir) {
				return dir, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
		tried = append(tried, filepath.Join(wd, projectRel)+" and the same under every parent")
	}
	return "", fmt.Errorf("yjstest: cannot find %s (check.mjs, package.json, package-lock.json); tried %s",
		projectRel, strings.Join(tried, ", "))
}

func isProjectDir(dir string) bool {
	for _, f := range []string{"check.mjs", "package.json", "package-lock.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return false
		}
	}
	return true
}

// ensureInstalled runs `npm ci` in dir unless node_modules already holds every package of
// package-lock.json at its locked version (a fresh clone has no node_modules; a changed lock
// makes it stale). An exclusive lock on package.json keeps concurrent test binaries from
// installing at the same time, or starting a script from a half-installed tree. npm's output is
// shown only when it fails.
func ensureInstalled(dir string) error {
	unlock, err := lockFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return fmt.Errorf("yjstest: locking %s: %v", dir, err)
	}
	defer unlock()
	if installed(dir) == nil {
		return nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return fmt.Errorf("yjstest: npm not found (%v), and %s needs its dependencies installed: %s",
			err, dir, toolsHelp)
	}
	// --include=dev: the self-test's reference server is a devDependency, and NODE_ENV=production
	// would leave it out.
	cmd := exec.Command(npm, "ci", "--prefix", dir, "--include=dev",
		"--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("yjstest: %s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	if err := installed(dir); err != nil {
		return fmt.Errorf("yjstest: npm ci --prefix %s succeeded, but %v", dir, err)
	}
	return nil
}

// installed reports why node_modules does not hold package-lock.json's packages at their
// versions, or nil when it does. An optional package may be missing (npm skips one that fails
// to install), but not at another version.
func installed(dir string) error {
	var lock struct {
		LockfileVersion int `json:"lockfileVersion"`
		Packages        map[string]struct {
			Version  string `json:"version"`
			Optional bool   `json:"optional"`
			Link     bool   `json:"link"`
		} `json:"packages"`
	}
	if err := readJSON(filepath.Join(dir, "package-lock.json"), &lock); err != nil {
		return err
	}
	if len(lock.Packages) <= 1 {
		return fmt.Errorf("package-lock.json (lockfileVersion %d) lists no packages", lock.LockfileVersion)
	}
	for path, want := range lock.Packages {
		if path == "" || want.Link || !strings.HasPrefix(path, "node_modules/") {
			continue
		}
		var got struct {
			Version string `json:"version"`
		}
		err := readJSON(filepath.Join(dir, filepath.FromSlash(path), "package.json"), &got)
		if errors.Is(err, fs.ErrNotExist) && want.Optional {
			continue
		}
		if err != nil {
			return err
		}
		if got.Version != want.Version {
			return fmt.Errorf("%s is %s, package-lock.json locks %s", path, got.Version, want.Version)
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

// cached runs generate into a directory kept under os.TempDir, once per key, and returns the
// directory. The key is a hash of name, args, the node version and the named files of e2e/yjs
// (the scripts and package-lock.json), so any change to them makes a new directory. generate
// writes into a fresh directory that is renamed into place when complete, under a file lock, so
// concurrent test binaries generate once and never see half a directory.
func cached(env environment, name string, files, args []string, generate func(dir string) error) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%q\x00", name, env.nodeVersion, args)
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(env.dir, f))
		if err != nil {
			return "", fmt.Errorf("yjstest: %v", err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", f, len(b))
		h.Write(b)
	}
	parent := filepath.Join(os.TempDir(), "collab-yjstest")
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("yjstest: %v", err)
	}
	final := filepath.Join(parent, name+"-"+hex.EncodeToString(h.Sum(nil))[:20])
	complete := func() bool {
		_, err := os.Stat(filepath.Join(final, completeMarker))
		return err == nil
	}
	if complete() {
		return final, nil
	}
	unlock, err := lockFile(final + ".lock")
	if err != nil {
		return "", fmt.Errorf("yjstest: locking %s: %v", final, err)
	}
	defer unlock()
	if complete() {
		return final, nil
	}
	// A directory without the marker is what is left of a crash or a tmp cleaner: start over.
	if err := os.RemoveAll(final); err != nil {
		return "", fmt.Errorf("yjstest: %v", err)
	}
	tmp, err := os.MkdirTemp(parent, name+"-tmp-")
	if err != nil {
		return "", fmt.Errorf("yjstest: %v", err)
	}
	if err := generate(tmp); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, completeMarker), nil, 0o644); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("yjstest: %v", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		os.RemoveAll(tmp)
		if complete() { // another process without flock got there first
			return final, nil
		}
		return "", fmt.Errorf("yjstest: %v", err)
	}
	return final, nil
}

// completeMarker is the file a cached directory holds once it is complete.
const completeMarker = ".complete"
