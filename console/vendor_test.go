package console

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestVendorLicenses: LICENSES.txt, beside the generated Yjs bundle, names every package the
// bundle holds, at the version console/bundle's lockfile locks and under the license the
// lockfile records, and carries each one's license text; it names nothing else. The bundled
// packages are console/bundle/package.json's dependencies: the generator (console/bundle/gen)
// refuses to bundle a package that is not one, and this test requires each of them listed. That
// the committed files are the ones scripts/generate writes is scripts/check-generated's check.
func TestVendorLicenses(t *testing.T) {
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	var lock struct {
		Packages map[string]struct{ Version, License string } `json:"packages"`
	}
	readJSON(t, "bundle/package.json", &pkg)
	readJSON(t, "bundle/package-lock.json", &lock)
	if len(pkg.Dependencies) == 0 {
		t.Fatal("console/bundle/package.json has no dependencies")
	}
	if _, err := static.ReadFile("static/vendor/yjs.js"); err != nil {
		t.Fatalf("the bundle is not embedded: %v", err)
	}
	b, err := static.ReadFile("static/vendor/LICENSES.txt")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	listed := 0
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "- ") {
			listed++
		}
	}
	if listed != len(pkg.Dependencies) {
		t.Errorf("LICENSES.txt lists %d packages, console/bundle/package.json has %d dependencies:\n%s", listed, len(pkg.Dependencies), text)
	}
	for name, want := range pkg.Dependencies {
		locked, ok := lock.Packages["node_modules/"+name]
		if !ok || locked.Version != want || locked.License == "" {
			t.Errorf("%s: package.json wants %s, the lockfile holds %+v", name, want, locked)
			continue
		}
		title := fmt.Sprintf("%s %s (%s)", name, locked.Version, locked.License)
		if !strings.Contains(text, "\n- "+title+"\n") {
			t.Errorf("LICENSES.txt does not list %s", title)
		}
		head := "\n==== " + title + ": node_modules/" + name + "/"
		i := strings.Index(text, head)
		if i < 0 {
			t.Errorf("LICENSES.txt has no license text of %s", title)
			continue
		}
		body, _, _ := strings.Cut(text[i+len(head):], "\n==== ")
		if _, lic, _ := strings.Cut(body, "\n\n"); !strings.Contains(lic, "Copyright") {
			t.Errorf("the license text of %s holds no copyright notice: %q", title, body)
		}
	}
}

func readJSON(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}
