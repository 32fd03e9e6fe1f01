package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/collab/collab/bench/collabproc"
	"github.com/collab/collab/internal/testkit/nodeproject"
)

// project is e2e/yjs: the load driver and the peer servers, with their pinned packages.
var project = nodeproject.New(nodeproject.Spec{
	Rel: filepath.Join("e2e", "yjs"), Marker: "syncbench.mjs", Who: "crdtsync",
	What: "the live-sync benchmark's load driver and peer servers",
})

// environment is what a run ran on: node and e2e/yjs prepared, and the versions the tables
// name.
type environment struct {
	node nodeproject.Project
	// packages are the versions of e2e/yjs's servers and clients, "name version".
	packages []string
	cpu      string
	cores    int
	kernel   string
	commit   string
	// loadBefore and loadAfter are /proc/loadavg's first three fields at the start and end.
	loadBefore, loadAfter string
	took                  time.Duration
}

// measuredPackages are the packages whose versions the tables name.
var measuredPackages = []string{"@hocuspocus/server", "@hocuspocus/provider", "@y/websocket-server", "y-websocket", "yjs", "ws"}

// describe prepares e2e/yjs (installing its packages when missing), builds collabd, and reads
// the versions of everything that runs.
func describe(ctx context.Context) (environment, error) {
	node, err := project.Prepare()
	if err != nil {
		return environment{}, fmt.Errorf("crdtsync: %w", err)
	}
	if _, err := collabproc.Binary(); err != nil {
		return environment{}, fmt.Errorf("crdtsync: %w", err)
	}
	env := environment{node: node, cores: runtime.NumCPU(), cpu: cpuModel(), loadBefore: loadAverage()}
	for _, p := range measuredPackages {
		var pkg struct {
			Version string `json:"version"`
		}
		b, err := os.ReadFile(filepath.Join(node.Dir, "node_modules", filepath.FromSlash(p), "package.json"))
		if err == nil {
			err = json.Unmarshal(b, &pkg)
		}
		if err != nil {
			return environment{}, fmt.Errorf("crdtsync: the version of %s: %w", p, err)
		}
		env.packages = append(env.packages, p+" "+pkg.Version)
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		env.kernel = strings.TrimSpace(string(b))
	}
	// The commit measured, best effort: a run outside a git checkout names none.
	git := exec.CommandContext(ctx, "git", "-C", node.Dir, "rev-parse", "--short", "HEAD") //nolint:gosec // G204: git in this repository's own directory
	if b, err := git.Output(); err == nil {
		env.commit = strings.TrimSpace(string(b))
	}
	return env, nil
}

// cpuModel is /proc/cpuinfo's first model name, or "" when it has none.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// loadAverage is the 1, 5 and 15 minute load averages, "0.98 2.08 2.22", or "?".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// machineCPU is the CPU time every core of the machine has spent busy since boot (user,
// nice, system, irq, softirq and steal of /proc/stat), so that a measurement can tell how
// much of the machine others used meanwhile; 0 when it cannot be read.
func machineCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system (idle iowait) irq softirq steal
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ
}

// userHZ is the unit of /proc/stat's times.
const userHZ = 100
