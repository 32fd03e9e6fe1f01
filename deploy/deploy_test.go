package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/collab/collab/internal/service"
	"github.com/collab/collab/services"
)

// The committed files are what the list of services renders (scripts/generate).
func TestDeploymentFilesAreRendered(t *testing.T) {
	files, err := Render("..", services.All())
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range files {
		got, err := os.ReadFile(filepath.Join("..", path))
		switch {
		case want == nil && err == nil:
			t.Errorf("%s belongs to no service: run scripts/generate", path)
		case want != nil && (err != nil || string(got) != string(want)):
			t.Errorf("%s is stale: run scripts/generate", path)
		}
	}
}

// A service added to the list gets its compose block, its peer address everywhere and its
// Kubernetes overlay from the renderer alone; one taken off the list loses them.
func TestRenderFollowsTheList(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{ComposeFile, KustomizeFile, ConfigFile} {
		b, err := os.ReadFile(filepath.Join("..", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, OverlayDir, "access"), 0o755); err != nil {
		t.Fatal(err)
	}
	mods := append(services.All()[:1], service.Module{Name: "notes"})
	if err := Write(root, mods); err != nil {
		t.Fatal(err)
	}
	compose, _ := os.ReadFile(filepath.Join(root, ComposeFile))
	for _, want := range []string{"COLLAB_NOTES_ADDR: notes:9090", `command: ["--services=notes"]`, `COLLAB_NOTES_ADDR: ""`} {
		if !strings.Contains(string(compose), want) {
			t.Errorf("compose lacks %q", want)
		}
	}
	if strings.Contains(string(compose), "--services=documents") {
		t.Error("compose keeps a service taken off the list")
	}
	overlay, err := os.ReadFile(filepath.Join(root, OverlayDir, "notes", "kustomization.yaml"))
	if err != nil || !strings.Contains(string(overlay), "value: notes-headless") {
		t.Fatalf("overlay of notes: %v\n%s", err, overlay)
	}
	if _, err := os.Stat(filepath.Join(root, OverlayDir, "access")); !os.IsNotExist(err) {
		t.Errorf("the overlay of a service taken off the list stays: %v", err)
	}
	kustomization, _ := os.ReadFile(filepath.Join(root, KustomizeFile))
	config, _ := os.ReadFile(filepath.Join(root, ConfigFile))
	if !strings.Contains(string(kustomization), "- services/notes") || !strings.Contains(string(config), "dns:///notes-headless.collab.svc.cluster.local:9090") {
		t.Errorf("kustomization or config lack notes:\n%s\n%s", kustomization, config)
	}
}

func readYAML(t *testing.T, path string, out any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func names() []string {
	var out []string
	for _, m := range services.All() {
		out = append(out, m.Name)
	}
	return out
}

func addrVar(name string) string { return service.EnvName(name + "-addr") }

type composeEntry struct {
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
}

func TestComposeRunsEveryService(t *testing.T) {
	var compose struct {
		Peers    map[string]string       `yaml:"x-peers"`
		Services map[string]composeEntry `yaml:"services"`
	}
	readYAML(t, "../docker-compose.yml", &compose)
	want := map[string]string{}
	for _, n := range names() {
		want[addrVar(n)] = n + ":9090"
	}
	if !mapsEqual(compose.Peers, want) {
		t.Errorf("x-peers %v, want %v", compose.Peers, want)
	}
	for _, n := range names() {
		s, ok := compose.Services[n]
		if !ok {
			t.Errorf("no compose service %q", n)
			continue
		}
		if !slices.Equal(s.Command, []string{"--services=" + n}) {
			t.Errorf("%s: command %v", n, s.Command)
		}
		if v, ok := s.Environment[addrVar(n)]; !ok || v != "" {
			t.Errorf("%s: does not blank its own %s", n, addrVar(n))
		}
		for _, other := range names() {
			if other != n && s.Environment[addrVar(other)] != other+":9090" {
				t.Errorf("%s: no peer address for %s", n, other)
			}
		}
		if s.Environment["COLLAB_INTERNAL_TOKEN"] == "" {
			t.Errorf("%s: no internal token", n)
		}
	}
	gw := compose.Services["gateway"]
	if !slices.Equal(gw.Command, []string{"--services=gateway"}) {
		t.Errorf("gateway command %v", gw.Command)
	}
	for _, n := range names() {
		if gw.Environment[addrVar(n)] != n+":9090" {
			t.Errorf("gateway: no peer address for %s", n)
		}
	}
	for name := range compose.Services {
		if name != "mongo" && name != "gateway" && !slices.Contains(names(), name) {
			t.Errorf("compose service %q is not a collab service", name)
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

type kustomization struct {
	Resources []string `yaml:"resources"`
	Labels    []struct {
		Pairs map[string]string `yaml:"pairs"`
	} `yaml:"labels"`
	Patches []struct {
		Target struct {
			Kind string `yaml:"kind"`
			Name string `yaml:"name"`
		} `yaml:"target"`
		Patch string `yaml:"patch"`
	} `yaml:"patches"`
}

type jsonPatchOp struct {
	Path  string `yaml:"path"`
	Value any    `yaml:"value"`
}

func TestKubernetesOverlayPerService(t *testing.T) {
	const dir = "kubernetes"
	var root kustomization
	readYAML(t, filepath.Join(dir, "kustomization.yaml"), &root)
	var overlays []string
	for _, r := range root.Resources {
		if strings.HasPrefix(r, "services/") {
			overlays = append(overlays, strings.TrimPrefix(r, "services/"))
		}
	}
	if !slices.Equal(overlays, names()) {
		t.Errorf("kustomization lists overlays %v, want one per service in order %v", overlays, names())
	}
	entries, err := os.ReadDir(filepath.Join(dir, "services"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !slices.Contains(names(), e.Name()) {
			t.Errorf("overlay services/%s belongs to no service", e.Name())
		}
	}

	for _, n := range names() {
		var k kustomization
		readYAML(t, filepath.Join(dir, "services", n, "kustomization.yaml"), &k)
		if !slices.Equal(k.Resources, []string{"../../service-base"}) {
			t.Errorf("%s: resources %v", n, k.Resources)
		}
		if len(k.Labels) != 1 || k.Labels[0].Pairs["app.kubernetes.io/name"] != n {
			t.Errorf("%s: labels %+v", n, k.Labels)
		}
		// Every value the overlay writes is this service's.
		want := map[string]string{
			"Deployment collab-service /metadata/name":                                                                                    n,
			"Deployment collab-service /spec/template/spec/containers/0/env/0/name":                                                       addrVar(n),
			"Service collab-service /metadata/name":                                                                                       n,
			"Service collab-service-headless /metadata/name":                                                                              n + "-headless",
			"Deployment collab-service /spec/template/spec/containers/0/args":                                                             "[--services=" + n + "]",
			"Deployment collab-service /spec/template/spec/topologySpreadConstraints/0/labelSelector/matchLabels/app.kubernetes.io~1name": n,
		}
		got := map[string]string{}
		for _, p := range k.Patches {
			var ops []jsonPatchOp
			if err := yaml.Unmarshal([]byte(p.Patch), &ops); err != nil {
				t.Fatalf("%s: patch: %v", n, err)
			}
			for _, op := range ops {
				// A list value (the args) compares as its printed form, [--services=name].
				got[p.Target.Kind+" "+p.Target.Name+" "+op.Path] = fmt.Sprint(op.Value)
			}
		}
		for key, v := range want {
			if got[key] != v {
				t.Errorf("%s: %s = %v, want %v", n, key, got[key], v)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: patches %v, want exactly %v", n, got, want)
		}
	}

	var config struct {
		Data map[string]string `yaml:"data"`
	}
	readYAML(t, filepath.Join(dir, "config.yaml"), &config)
	for _, n := range names() {
		want := "dns:///" + n + "-headless.collab.svc.cluster.local:9090"
		if config.Data[addrVar(n)] != want {
			t.Errorf("config.yaml %s = %q, want %q", addrVar(n), config.Data[addrVar(n)], want)
		}
	}
	for k := range config.Data {
		if strings.HasSuffix(k, "_ADDR") && !slices.ContainsFunc(names(), func(n string) bool { return addrVar(n) == k }) {
			t.Errorf("config.yaml has %s, which names no service", k)
		}
	}
}

// The image's build context keeps every directory the binary is built from: .dockerignore
// once excluded collabd/ with a pattern meant for a built binary.
func TestDockerContextHoldsTheSources(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.Dir}}{{end}}", "../cmd/collabd").Output()
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, line := range strings.Split(string(raw), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			patterns = append(patterns, strings.TrimPrefix(line, "/"))
		}
	}
	checked := 0
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, dir)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue // a module from the cache
		}
		checked++
		// Docker excludes a directory when a pattern matches it or any directory above it.
		parts := strings.Split(filepath.ToSlash(rel), "/")
		for i := range parts {
			prefix := strings.Join(parts[:i+1], "/")
			for _, p := range patterns {
				if ok, _ := filepath.Match(strings.TrimPrefix(p, "**/"), prefix); ok {
					t.Errorf(".dockerignore pattern %q excludes %s, which the binary is built from", p, rel)
				}
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d of the binary's packages found in the repository", checked)
	}
}
