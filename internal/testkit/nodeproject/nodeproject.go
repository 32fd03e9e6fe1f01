// Package nodeproject prepares a pinned Node.js project of the repository for tests (the real
// components the tests drive: e2e/webhookreceiver, e2e/yjs): it finds node, finds the
// project's directory, and installs the project's locked npm dependencies when they are
// missing or stale, once per test binary and under a file lock across test binaries.
package nodeproject

import (
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

// MinNodeMajor is the oldest Node.js the projects run on (their package.json's engines).
const MinNodeMajor = 18

// Project is a prepared project: node found, dependencies installed.
type Project struct {
	Node        string // the node executable
	NodeVersion string // "v20.20.2"
	Dir         string // the project's directory
}

// Spec says which project to prepare.
type Spec struct {
	// Rel is the project's directory relative to the repository root, e.g. e2e/yjs.
	Rel string
	// Marker is a file the directory holds beside package.json and package-lock.json, to
	// recognise it (receiver.mjs, check.mjs).
	Marker string
	// Who prefixes errors (the calling package), What says what needs Node.js in them.
	Who, What string
}

// Preparer prepares one project once per process.
type Preparer struct {
	spec Spec
	once sync.Once
	p    Project
	err  error
}

// New returns the Preparer of a project.
func New(spec Spec) *Preparer { return &Preparer{spec: spec} }

// Prepare finds node and the project and installs its dependencies if they are missing or
// stale; the first call does the work, later ones return its outcome.
func (pr *Preparer) Prepare() (Project, error) {
	pr.once.Do(func() { pr.p, pr.err = pr.prepare() })
	return pr.p, pr.err
}

func (pr *Preparer) prepare() (Project, error) {
	node, version, err := pr.lookNode()
	if err != nil {
		return Project{}, err
	}
	dir, err := pr.projectDir()
	if err != nil {
		return Project{}, err
	}
	if err := pr.ensureInstalled(dir); err != nil {
		return Project{}, err
	}
	return Project{Node: node, NodeVersion: version, Dir: dir}, nil
}

func (pr *Preparer) help() string {
	return pr.spec.What + " (" + filepath.ToSlash(pr.spec.Rel) + ") needs Node.js " +
		strconv.Itoa(MinNodeMajor) + " or newer and npm in PATH; install them (CI has them)"
}

func (pr *Preparer) errorf(format string, args ...any) error {
	return fmt.Errorf(pr.spec.Who+": "+format, args...)
}

// lookNode finds node in PATH and checks its version.
func (pr *Preparer) lookNode() (path, version string, err error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return "", "", pr.errorf("node not found (%v): %s", err, pr.help())
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		return "", "", pr.errorf("%s --version: %v: %s", node, err, pr.help())
	}
	version = strings.TrimSpace(string(out)) // "v20.20.2"
	major, _, _ := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	if n, err := strconv.Atoi(major); err != nil || n < MinNodeMajor {
		return "", "", pr.errorf("%s is Node.js %s: %s", node, version, pr.help())
	}
	return node, version, nil
}

// projectDir finds the project: next to this source file's repository, or (when the binary
// was built with -trimpath, so the source path is not a real one) in the working directory or
// one of its parents; go test runs tests in their package's directory.
func (pr *Preparer) projectDir() (string, error) {
	var tried []string
	if _, file, _, ok := runtime.Caller(0); ok {
		// file is <root>/internal/testkit/nodeproject/nodeproject.go.
		dir := filepath.Join(filepath.Dir(file), "..", "..", "..", pr.spec.Rel)
		if pr.isProjectDir(dir) {
			return filepath.Clean(dir), nil
		}
		tried = append(tried, dir)
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			dir := filepath.Join(d, pr.spec.Rel)
			if pr.isProjectDir(dir) {
				return dir, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
		tried = append(tried, filepath.Join(wd, pr.spec.Rel)+" and the same under every parent")
	}
	return "", pr.errorf("cannot find %s (%s, package.json, package-lock.json); tried %s",
		pr.spec.Rel, pr.spec.Marker, strings.Join(tried, ", "))
}

func (pr *Preparer) isProjectDir(dir string) bool {
	for _, f := range []string{pr.spec.Marker, "package.json", "package-lock.json"} {
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
func (pr *Preparer) ensureInstalled(dir string) error {
	unlock, err := LockFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return pr.errorf("locking %s: %v", dir, err)
	}
	defer unlock()
	if installed(dir) == nil {
		return nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return pr.errorf("npm not found (%v), and %s needs its dependencies installed: %s", err, dir, pr.help())
	}
	// --include=dev: a project's self-test may need a devDependency, and NODE_ENV=production
	// would leave it out.
	cmd := exec.Command(npm, "ci", "--prefix", dir, "--include=dev",
		"--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error")
	if out, err := cmd.CombinedOutput(); err != nil {
		return pr.errorf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	if err := installed(dir); err != nil {
		return pr.errorf("npm ci --prefix %s succeeded, but %v", dir, err)
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
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
