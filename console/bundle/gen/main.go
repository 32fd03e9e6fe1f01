// Command gen writes the playground's Yjs bundle, console/static/vendor/yjs.js, and the
// licenses of the packages in it, LICENSES.txt, beside it: scripts/generate runs it, and
// scripts/check-generated compares what it writes with what is committed (docs/console.md,
// "Libraries").
//
// The packages come from console/bundle's committed lockfile (installed with npm ci
// --ignore-scripts when node_modules does not hold it), the bundle from esbuild (pinned in
// tools/go.mod, given as -esbuild), minified and the same bytes on every run and machine. The
// licenses are those of the packages esbuild's metafile says went into the bundle, each
// package's own LICENSE file; a bundled package that is not a dependency of
// console/bundle/package.json, or that has no license file, fails the run, so every line of
// the bundle is one whose licence is written beside it.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/collab/collab/internal/testkit/nodeproject"
)

// Bundle and Licenses are the files written into the -out folder.
const (
	Bundle   = "yjs.js"
	Licenses = "LICENSES.txt"
)

func main() {
	esbuild := flag.String("esbuild", "", "the esbuild executable (built from tools/go.mod)")
	out := flag.String("out", "", "the folder to write "+Bundle+" and "+Licenses+" into")
	flag.Parse()
	if *esbuild == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: gen -esbuild <esbuild> -out <folder>")
		os.Exit(2)
	}
	if err := run(*esbuild, *out); err != nil {
		fmt.Fprintln(os.Stderr, "console/bundle/gen:", err)
		os.Exit(1)
	}
}

func run(esbuild, out string) error {
	project, err := nodeproject.New(nodeproject.Spec{
		Rel: "console/bundle", Marker: "entry.js", Who: "console/bundle/gen", What: "the playground's Yjs bundle",
	}).Prepare()
	if err != nil {
		return err
	}
	// esbuild runs in the project's folder: the paths given are made absolute first.
	if esbuild, err = exec.LookPath(esbuild); err == nil {
		esbuild, err = filepath.Abs(esbuild)
	}
	if err != nil {
		return err
	}
	if out, err = filepath.Abs(out); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o750); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "collab-bundle-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }() // a temporary folder: nothing to do if it stays
	meta := filepath.Join(tmp, "meta.json")
	// The entry and the metafile's inputs are relative to the project's folder.
	//nolint:gosec // the esbuild scripts/generate built from tools/go.mod, with our own arguments
	cmd := exec.Command(esbuild, "entry.js", "--bundle", "--format=esm", "--platform=browser",
		"--target=es2020", "--minify", "--legal-comments=none", "--charset=utf8", "--log-level=warning",
		"--metafile="+meta, "--outfile="+filepath.Join(out, Bundle))
	cmd.Dir = project.Dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, b)
	}
	pkgs, err := bundled(meta)
	if err != nil {
		return err
	}
	text, err := licenses(project.Dir, pkgs)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, Licenses), text, 0o600)
}

// bundled returns the package folders (node_modules/<name>, relative to the project) of the
// files esbuild's metafile lists as the bundle's inputs, sorted.
func bundled(metafile string) ([]string, error) {
	b, err := os.ReadFile(metafile) //nolint:gosec // our own temporary file
	if err != nil {
		return nil, err
	}
	var meta struct {
		Inputs map[string]json.RawMessage `json:"inputs"`
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		return nil, fmt.Errorf("esbuild's metafile: %w", err)
	}
	var dirs []string
	for input := range meta.Inputs {
		if dir, ok := packageDir(input); ok && !slices.Contains(dirs, dir) {
			dirs = append(dirs, dir)
		}
	}
	slices.Sort(dirs)
	return dirs, nil
}

// packageDir returns the folder of the package a bundled file belongs to: the part of its
// path up to the package's name after the last node_modules (a scoped name has two parts).
// A file of the project itself (entry.js) belongs to none.
func packageDir(input string) (string, bool) {
	i := strings.LastIndex(input, "node_modules/")
	if i < 0 {
		return "", false
	}
	rest := strings.Split(input[i+len("node_modules/"):], "/")
	n := 1
	if strings.HasPrefix(rest[0], "@") {
		n = 2
	}
	if len(rest) <= n {
		return "", false
	}
	return input[:i] + "node_modules/" + strings.Join(rest[:n], "/"), true
}

// manifest is what LICENSES.txt names of a package.
type manifest struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	License string `json:"license"`
}

// licenses writes LICENSES.txt: a list of the bundled packages, then each one's license file.
// Each must be a dependency of the project's package.json and hold a license file.
func licenses(project string, dirs []string) ([]byte, error) {
	var root struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := readJSON(filepath.Join(project, "package.json"), &root); err != nil {
		return nil, err
	}
	var list, texts bytes.Buffer
	list.WriteString("Licenses of the packages bundled in " + Bundle + " (written by scripts/generate from\n" +
		"console/bundle's lockfile; docs/console.md, \"Libraries\"):\n\n")
	for _, dir := range dirs {
		var m manifest
		if err := readJSON(filepath.Join(project, filepath.FromSlash(dir), "package.json"), &m); err != nil {
			return nil, err
		}
		if _, ok := root.Dependencies[m.Name]; !ok {
			return nil, fmt.Errorf("%s is bundled but not a dependency of console/bundle/package.json: "+
				"add it there at the version the lockfile holds, so its version is chosen, not inherited", m.Name)
		}
		text, file, err := licenseFile(filepath.Join(project, filepath.FromSlash(dir)))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.Name, err)
		}
		title := fmt.Sprintf("%s %s (%s)", m.Name, m.Version, m.License)
		fmt.Fprintf(&list, "- %s\n", title)
		fmt.Fprintf(&texts, "\n==== %s: %s ====\n\n%s\n", title, path.Join("node_modules", m.Name, file),
			strings.TrimSpace(strings.ReplaceAll(string(text), "\r\n", "\n")))
	}
	list.Write(texts.Bytes())
	return list.Bytes(), nil
}

// licenseFile reads a package's license: the first of its top-level files named LICENSE,
// LICENCE or COPYING (any case, any extension).
func licenseFile(dir string) ([]byte, string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, "", err
	}
	for _, e := range entries { // sorted by name
		up := strings.ToUpper(e.Name())
		if e.Type().IsRegular() && (strings.HasPrefix(up, "LICENSE") || strings.HasPrefix(up, "LICENCE") || strings.HasPrefix(up, "COPYING")) {
			b, err := os.ReadFile(filepath.Join(dir, e.Name())) //nolint:gosec // a file of the locked package
			return b, e.Name(), err
		}
	}
	return nil, "", errors.New("no LICENSE file in the package: its license cannot be written beside the bundle")
}

func readJSON(file string, v any) error {
	b, err := os.ReadFile(file) //nolint:gosec // a file of the project or a locked package
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}
