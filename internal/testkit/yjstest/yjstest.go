// Package yjstest gives tests the real yjs (npm yjs 13.6, e2e/yjs) to hold the Go Yjs codec
// (internal/yjs) to: deterministic fixtures of multi-client editing sessions with the view real
// yjs has of their result (Fixtures, LoadFixtures), a checker process that loads, applies,
// edits, diffs and merges updates with yjs on request (StartChecker), a scriptable y-websocket
// client for end-to-end tests of the sync server (StartClient), and the inputs of the yjs
// benchmark (BenchInputs, e2e/yjs/bench.mjs) so Go benchmarks measure the same work.
//
// A View (e2e/yjs/view.mjs documents it exactly) is how a document looks through the yjs API:
// per root, toString/toJSON and the text's delta, and the state vector. The Go codec's tests
// build the same view from their own decoding and compare with ViewEqual.
//
// Everything needs Node.js (18 or newer) and npm in PATH; without them the test fails (CI has
// both). The first use in a test binary installs e2e/yjs's locked dependencies with `npm ci`
// when node_modules lacks them or holds other versions, under a file lock so parallel test
// binaries install once. Nothing touches the network after that.
package yjstest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Root is a root shared type of a document: its name and kind, one of "text" (Y.Text), "map"
// (Y.Map), "array" (Y.Array) and "xml" (Y.XmlFragment).
type Root struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
}

// StandardRoots are the roots of the generated fixtures.
var StandardRoots = []Root{{"text", "text"}, {"map", "map"}, {"array", "array"}, {"xml", "xml"}}

// View is e2e/yjs/view.mjs's view of a document. JSON holds, per root, the text's toString(),
// the map's or array's toJSON() (JSON-safe: {"$bytes": base64}, {"$undefined": true}, ...) or
// the XML fragment's toString(); Delta holds the toDelta() of each text root; StateVector maps
// each client ID (decimal) to its clock. Numbers decode as json.Number, so they compare exactly.
type View struct {
	JSON        map[string]any    `json:"json"`
	Delta       map[string]any    `json:"delta"`
	StateVector map[string]uint64 `json:"stateVector"`
}

// Fixture is one generated document (e2e/yjs/fixtures.mjs): the updates its clients emitted
// for their own transactions, in emission order (applied in turn to an empty document, none
// waits for another), the final document's full update and state vector, and yjs's view of it.
type Fixture struct {
	Name        string   `json:"name"`
	Seed        int64    `json:"seed"`
	GC          string   `json:"gc"`      // the clients' Y.Doc gc option: "on", "off" or "mixed"
	Clients     []uint32 `json:"clients"` // the client IDs, the first one's doc is the final doc
	Roots       []Root   `json:"roots"`
	Updates     [][]byte `json:"updates"`
	Full        []byte   `json:"full"`
	StateVector []byte   `json:"stateVector"`
	Expected    View     `json:"expected"`
}

// fixtureFiles are the files of e2e/yjs that make the fixtures (the cache key).
var fixtureFiles = []string{"fixtures.mjs", "gen.mjs", "view.mjs", "package-lock.json"}

var (
	fixturesOnce sync.Once
	fixturesDir  string
	fixturesErr  error
)

// Fixtures generates the fixtures (node fixtures.mjs <dir>: 300 traces, the edge cases and
// large.json) once per test binary and returns their directory. The directory is cached under
// os.TempDir, keyed by the generating scripts, the lock file and the node version, so the test
// binaries of one run (and later runs) share it; it must not be modified.
func Fixtures(t testing.TB) string {
	t.Helper()
	fixturesOnce.Do(func() {
		env, err := prepare()
		if err != nil {
			fixturesErr = err
			return
		}
		fixturesDir, fixturesErr = cached(env, "fixtures", fixtureFiles, nil, func(dir string) error {
			return runNode(env, 5*time.Minute, "fixtures.mjs", dir)
		})
	})
	if fixturesErr != nil {
		t.Fatal(fixturesErr)
	}
	return fixturesDir
}

// LoadFixtures reads every fixture of dir, sorted by name with large.json last.
func LoadFixtures(t testing.TB, dir string) []Fixture {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatalf("yjstest: %v", err)
	}
	if len(paths) == 0 {
		t.Fatalf("yjstest: no fixtures (*.json) in %s", dir)
	}
	out := make([]Fixture, 0, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("yjstest: %v", err)
		}
		var f Fixture
		if err := decodeJSON(b, &f); err != nil {
			t.Fatalf("yjstest: %s: %v", p, err)
		}
		if f.Name == "" || f.Full == nil || f.Expected.JSON == nil {
			t.Fatalf("yjstest: %s is not a fixture (no name, full or expected view)", p)
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool {
		li, lj := out[i].Name == "large", out[j].Name == "large"
		if li != lj {
			return lj
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// decodeJSON decodes b into v with numbers in interfaces as json.Number.
func decodeJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

var (
	benchOnce sync.Once
	benchDir  string
	benchErr  error
)

// BenchInputs writes the inputs of e2e/yjs/bench.mjs (node bench.mjs --write <dir>
// --inputs-only) once per test binary, cached like Fixtures, and returns their directory:
// original.txt, edited.txt, original.update, apply10k.json, doc60k.update, doc1k.update and
// manifest.json (bench.mjs says what each is).
func BenchInputs(t testing.TB) string {
	t.Helper()
	dir, err := BenchInputsDir()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// BenchInputsDir is BenchInputs for programs (bench/crdt): the directory, or why the inputs
// could not be written.
func BenchInputsDir() (string, error) {
	benchOnce.Do(func() {
		env, err := prepare()
		if err != nil {
			benchErr = err
			return
		}
		benchDir, benchErr = cached(env, "bench", []string{"bench.mjs", "gen.mjs", "package-lock.json"}, nil,
			func(dir string) error {
				return runNode(env, 5*time.Minute, "--expose-gc", "bench.mjs", "--write", dir, "--inputs-only")
			})
	})
	return benchDir, benchErr
}

// RunBench runs e2e/yjs/bench.mjs (node --expose-gc bench.mjs --runs runs) and returns its
// report: the JSON object it prints, and the Node.js version. Its stderr goes to stderr.
func RunBench(runs int) (report []byte, nodeVersion string, err error) {
	env, err := prepare()
	if err != nil {
		return nil, "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, env.Node, "--expose-gc", "bench.mjs", "--runs", strconv.Itoa(runs))
	cmd.Dir = env.Dir
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, "", fmt.Errorf("yjstest: node bench.mjs: %w", err)
	}
	return out, env.NodeVersion, nil
}

// runNode runs node with args in e2e/yjs, killing it after timeout; its output goes into the
// error when it fails.
func runNode(env environment, timeout time.Duration, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, env.Node, args...)
	cmd.Dir = env.Dir
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return fmt.Errorf("yjstest: node %s did not finish within %v\n%s", strings.Join(args, " "), timeout, out)
	}
	if err != nil {
		return fmt.Errorf("yjstest: node %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}
