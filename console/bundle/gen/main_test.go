package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackageDir: a bundled file belongs to the package after its last node_modules, scoped
// names included; the project's own files to none.
func TestPackageDir(t *testing.T) {
	for input, want := range map[string]string{
		"node_modules/yjs/dist/yjs.mjs":                      "node_modules/yjs",
		"node_modules/lib0/encoding.js":                      "node_modules/lib0",
		"node_modules/@y/protocols/sync.js":                  "node_modules/@y/protocols",
		"node_modules/y-websocket/node_modules/lib0/math.js": "node_modules/y-websocket/node_modules/lib0",
		"node_modules/a/node_modules/@s/b/index.js":          "node_modules/a/node_modules/@s/b",
		"entry.js":              "",
		"node_modules/orphan":   "",
		"node_modules/@scope/x": "",
	} {
		got, ok := packageDir(input)
		if got != want || ok != (want != "") {
			t.Errorf("packageDir(%q) = %q, %v; want %q", input, got, ok, want)
		}
	}
}

// TestLicenses: the list names each package with its version and license, each license text
// follows; a bundled package that is not a dependency of the project, or has no license file,
// is refused.
func TestLicenses(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("package.json", `{"dependencies": {"a": "1.0.0", "@s/b": "2.0.0"}}`)
	write("node_modules/a/package.json", `{"name": "a", "version": "1.0.0", "license": "MIT"}`)
	write("node_modules/a/LICENSE", "Copyright A\r\n")
	write("node_modules/@s/b/package.json", `{"name": "@s/b", "version": "2.0.0", "license": "ISC"}`)
	write("node_modules/@s/b/license.md", "Copyright B\n")
	write("node_modules/c/package.json", `{"name": "c", "version": "3.0.0", "license": "MIT"}`)
	write("node_modules/c/LICENSE", "Copyright C\n")
	write("node_modules/d/package.json", `{"name": "d", "version": "4.0.0", "license": "MIT"}`)

	out, err := licenses(dir, []string{"node_modules/@s/b", "node_modules/a"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\n- @s/b 2.0.0 (ISC)\n- a 1.0.0 (MIT)\n", "==== @s/b 2.0.0 (ISC): node_modules/@s/b/license.md ====\n\nCopyright B\n",
		"==== a 1.0.0 (MIT): node_modules/a/LICENSE ====\n\nCopyright A\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("LICENSES.txt lacks %q:\n%s", want, out)
		}
	}
	if _, err := licenses(dir, []string{"node_modules/a", "node_modules/c"}); err == nil || !strings.Contains(err.Error(), "c is bundled but not a dependency") {
		t.Errorf("a bundled package that is not a dependency: %v", err)
	}
	write("package.json", `{"dependencies": {"d": "4.0.0"}}`)
	if _, err := licenses(dir, []string{"node_modules/d"}); err == nil || !strings.Contains(err.Error(), "no LICENSE file") {
		t.Errorf("a package without a license file: %v", err)
	}
}
