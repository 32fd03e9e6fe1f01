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
	for _, f := range []string{ComposeFile, KustomizeFile, ConfigFile, GatewayFile, PrometheusFile} {
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
	// notes serves HTTP routes of its own (as crdt does); the first service of the list none.
	mods := append(slices.Clone(services.All()[:1]), service.Module{Name: "notes", Routes: []string{"/v2/notes/live/"}})
	if err := Write(root, mods); err != nil {
		t.Fatal(err)
	}
	compose, _ := os.ReadFile(filepath.Join(root, ComposeFile))
	for _, want := range []string{"COLLAB_NOTES_ADDR: notes:9090", `command: ["--services=notes"]`, `COLLAB_NOTES_ADDR: ""`, "COLLAB_NOTES_HTTP_ADDR: notes:8080", `expose: ["8080"]`} {
		if !strings.Contains(string(compose), want) {
			t.Errorf("compose lacks %q", want)
		}
	}
	for _, gone := range []string{"--services=documents", "COLLAB_CRDT_HTTP_ADDR"} {
		if strings.Contains(string(compose), gone) {
			t.Errorf("compose keeps %s of a service taken off the list", gone)
		}
	}
	overlay, err := os.ReadFile(filepath.Join(root, OverlayDir, "notes", "kustomization.yaml"))
	if err != nil || !strings.Contains(string(overlay), "value: notes-headless") || !strings.Contains(string(overlay), "containerPort: 8080") {
		t.Fatalf("overlay of notes: %v\n%s", err, overlay)
	}
	if first, _ := os.ReadFile(filepath.Join(root, OverlayDir, mods[0].Name, "kustomization.yaml")); strings.Contains(string(first), "8080") {
		t.Errorf("%s has no routes but an HTTP port:\n%s", mods[0].Name, first)
	}
	prom, _ := os.ReadFile(filepath.Join(root, PrometheusFile))
	if !strings.Contains(string(prom), "- notes:9100\n") || strings.Contains(string(prom), "- documents:9100") {
		t.Errorf("prometheus.yml's targets do not follow the list:\n%s", prom)
	}
	gateway, _ := os.ReadFile(filepath.Join(root, GatewayFile))
	if !strings.Contains(string(gateway), "- name: COLLAB_NOTES_HTTP_ADDR\n              value: notes.collab.svc.cluster.local:8080\n") || strings.Contains(string(gateway), "COLLAB_CRDT_HTTP_ADDR") {
		t.Errorf("gateway.yaml's HTTP addresses do not follow the list:\n%s", gateway)
	}
	// Without any service with routes the gateway has no HTTP address (its env list keeps the
	// forwarder token), and the file still reads.
	if err := Write(root, services.All()[:1]); err != nil {
		t.Fatal(err)
	}
	gateway, _ = os.ReadFile(filepath.Join(root, GatewayFile))
	compose, _ = os.ReadFile(filepath.Join(root, ComposeFile))
	if strings.Contains(string(gateway), "_HTTP_ADDR") || strings.Contains(string(compose), "_HTTP_ADDR") || strings.Contains(string(compose), "expose:") {
		t.Errorf("HTTP addresses or ports without a service with routes:\n%s\n%s", gateway, compose)
	}
	var g struct{}
	for _, doc := range strings.Split(string(gateway), "\n---\n") {
		if err := yaml.Unmarshal([]byte(doc), &g); err != nil {
			t.Errorf("gateway.yaml without HTTP addresses: %v", err)
		}
	}
	if err := Write(root, mods); err != nil {
		t.Fatal(err)
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

func httpAddrVar(name string) string { return service.EnvName(name + "-http-addr") }

// withRoutes are the services that serve HTTP routes of their own (crdt's live sync).
func routeServices() []string {
	var out []string
	for _, m := range services.All() {
		if len(m.Routes) > 0 {
			out = append(out, m.Name)
		}
	}
	return out
}

type composeEntry struct {
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Expose      []string          `yaml:"expose"`
	Ports       []string          `yaml:"ports"`
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
		if got := s.Environment["COLLAB_METRICS_ADDR"]; got != fmt.Sprintf("0.0.0.0:%d", MetricsPort) {
			t.Errorf("%s: COLLAB_METRICS_ADDR %q, want the metrics port %d on every interface", n, got, MetricsPort)
		}
		if got := s.Environment["COLLAB_OTLP_ENDPOINT"]; got != "${COLLAB_OTLP_ENDPOINT:-}" {
			t.Errorf("%s: COLLAB_OTLP_ENDPOINT %q, want the shell's or .env's (tracing off without it)", n, got)
		}
		// A service with routes opens its HTTP port to the other containers (the gateway),
		// never to the host; it listens where the image says (no COLLAB_HTTP_ADDR of its own),
		// and has no HTTP address of its own or anyone's.
		if want := slices.Contains(routeServices(), n); !slices.Equal(s.Expose, map[bool][]string{true: {"8080"}, false: nil}[want]) {
			t.Errorf("%s: expose %v (serves routes: %v)", n, s.Expose, want)
		}
		if len(s.Ports) > 0 {
			t.Errorf("%s publishes ports %v", n, s.Ports)
		}
		for k := range s.Environment {
			if strings.HasSuffix(k, "HTTP_ADDR") {
				t.Errorf("%s: sets %s", n, k)
			}
		}
	}
	gw := compose.Services["gateway"]
	if got := gw.Environment["COLLAB_METRICS_ADDR"]; got != fmt.Sprintf("0.0.0.0:%d", MetricsPort) {
		t.Errorf("gateway: COLLAB_METRICS_ADDR %q", got)
	}
	if !slices.Equal(gw.Command, []string{"--services=gateway"}) {
		t.Errorf("gateway command %v", gw.Command)
	}
	for _, n := range names() {
		if gw.Environment[addrVar(n)] != n+":9090" {
			t.Errorf("gateway: no peer address for %s", n)
		}
	}
	if len(routeServices()) == 0 {
		t.Fatal("no service serves HTTP routes: crdt's live sync should")
	}
	httpVars := 0
	for k := range gw.Environment {
		if strings.HasSuffix(k, "_HTTP_ADDR") {
			httpVars++
		}
	}
	for _, n := range routeServices() {
		if gw.Environment[httpAddrVar(n)] != n+":8080" {
			t.Errorf("gateway: %s = %q, want %s:8080", httpAddrVar(n), gw.Environment[httpAddrVar(n)], n)
		}
	}
	if httpVars != len(routeServices()) {
		t.Errorf("gateway: %d HTTP addresses, want one per service with routes %v", httpVars, routeServices())
	}
	for name := range compose.Services {
		if name != "mongo" && name != "nats" && name != "gateway" && name != "prometheus" && name != "jaeger" && !slices.Contains(names(), name) {
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
	Op    string `yaml:"op"`
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
		// A service with routes adds its HTTP port to the container and to its ClusterIP
		// Service (not the headless one: the gateway reaches it through the virtual IP).
		if slices.Contains(routeServices(), n) {
			want["Deployment collab-service /spec/template/spec/containers/0/ports/-"] = "map[containerPort:8080 name:http protocol:TCP]"
			want["Service collab-service /spec/ports/-"] = "map[name:http port:8080 protocol:TCP targetPort:http]"
		}
		got := map[string]string{}
		for _, p := range k.Patches {
			var ops []jsonPatchOp
			if err := yaml.Unmarshal([]byte(p.Patch), &ops); err != nil {
				t.Fatalf("%s: patch: %v", n, err)
			}
			for _, op := range ops {
				// A list value (the args) compares as its printed form, [--services=name], a
				// map as map[key:value ...] (keys sorted).
				got[p.Target.Kind+" "+p.Target.Name+" "+op.Path] = fmt.Sprint(op.Value)
				if wantOp := map[bool]string{true: "add", false: "replace"}[strings.HasSuffix(op.Path, "/-")]; op.Op != wantOp {
					t.Errorf("%s: %s is %q, want %q", n, op.Path, op.Op, wantOp)
				}
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
		if strings.HasSuffix(k, "_ADDR") && k != "COLLAB_METRICS_ADDR" && !slices.ContainsFunc(names(), func(n string) bool { return addrVar(n) == k }) {
			t.Errorf("config.yaml has %s, which names no service", k)
		}
	}

	// The gateway alone has the HTTP addresses of the services with routes: their ClusterIP
	// Services on 8080 (a process that runs the service may not have its address).
	gw := gatewayContainer(t)
	env := map[string]string{}
	for _, e := range gw.Env {
		env[e.Name] = e.Value
	}
	// Besides: the forwarder token (from the Secret: the one key the gateway holds, its value
	// not in the file) and no per-address connection cap behind the Ingress.
	want := map[string]string{"COLLAB_FORWARDER_TOKEN": "", "COLLAB_HTTP_MAX_CONNS_PER_ADDRESS": "0"}
	for _, n := range routeServices() {
		want[httpAddrVar(n)] = n + ".collab.svc.cluster.local:8080"
	}
	if !mapsEqual(env, want) {
		t.Errorf("gateway.yaml env %v, want %v", env, want)
	}
}

type container struct {
	Env []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
}

// gatewayContainer is the collabd container of the gateway's Deployment.
func gatewayContainer(t *testing.T) container {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", GatewayFile))
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	for {
		var doc struct {
			Kind string `yaml:"kind"`
			Spec struct {
				Template struct {
					Spec struct {
						Containers []container `yaml:"containers"`
					} `yaml:"spec"`
				} `yaml:"template"`
			} `yaml:"spec"`
		}
		if err := dec.Decode(&doc); err != nil {
			t.Fatalf("%s: no Deployment: %v", GatewayFile, err)
		}
		if doc.Kind == "Deployment" && len(doc.Spec.Template.Spec.Containers) == 1 {
			return doc.Spec.Template.Spec.Containers[0]
		}
	}
}

// Every collabd container listens on 0.0.0.0:8080 for HTTP, the gateway's API and a service's
// routes alike: the image says so (collabd's default is loopback), and no deployment file
// takes it back.
func TestContainersListenForHTTP(t *testing.T) {
	dockerfile, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(dockerfile), "COLLAB_HTTP_ADDR=0.0.0.0:8080") {
		t.Error("the image does not set COLLAB_HTTP_ADDR=0.0.0.0:8080")
	}
	err = filepath.WalkDir("kubernetes", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err == nil && setsHTTPAddr(b) {
			t.Errorf("%s sets COLLAB_HTTP_ADDR", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	compose, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	if setsHTTPAddr(compose) {
		t.Error("docker-compose.yml sets COLLAB_HTTP_ADDR")
	}
	gw := gatewayContainer(t)
	// The API on http; /metrics on a port of its own (COLLAB_METRICS_ADDR in config.yaml), which
	// the gateway's Service does not expose.
	if len(gw.Ports) != 2 || gw.Ports[0].Name != "http" || gw.Ports[0].ContainerPort != HTTPPort ||
		gw.Ports[1].Name != "metrics" || gw.Ports[1].ContainerPort != 9100 {
		t.Errorf("gateway ports %+v", gw.Ports)
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

// setsHTTPAddr reports whether a YAML file names COLLAB_HTTP_ADDR outside its comments.
func setsHTTPAddr(b []byte) bool {
	for _, line := range strings.Split(string(b), "\n") {
		if code, _, _ := strings.Cut(line, "#"); strings.Contains(code, "COLLAB_HTTP_ADDR") {
			return true
		}
	}
	return false
}
