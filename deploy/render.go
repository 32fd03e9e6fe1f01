// Package deploy holds the deployment files (the container image, docker-compose.yml at the
// repository root, the Kubernetes manifests) and renders their per-service parts from the list
// of services (Render; scripts/generate writes them, scripts/check-generated and deploy_test.go
// fail when they are stale). Adding a service to services.All() and running scripts/generate
// gives it its compose block, its Kubernetes overlay and its peer addresses; a service with
// HTTP routes of its own (service.Module.Routes) also gets its HTTP port and the gateway's
// HTTP address for it.
package deploy

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/collab/collab/internal/service"
)

// Files rendered, relative to the repository root.
const (
	ComposeFile   = "docker-compose.yml"
	KustomizeFile = "deploy/kubernetes/kustomization.yaml"
	ConfigFile    = "deploy/kubernetes/config.yaml"
	GatewayFile   = "deploy/kubernetes/gateway.yaml"
	OverlayDir    = "deploy/kubernetes/services"
	// PrometheusFile is the compose deployment's Prometheus configuration: it scrapes every
	// service's container.
	PrometheusFile = "deploy/monitoring/prometheus.yml"
)

// HTTPPort is the HTTP port of every collabd container (the image sets
// COLLAB_HTTP_ADDR=0.0.0.0:8080): the gateway's API, and the routes of a service that serves
// its own (service.Module.Routes), which the gateway proxies there.
const HTTPPort = 8080

// MetricsPort is where every collabd container serves /metrics in the deployment files
// (COLLAB_METRICS_ADDR=0.0.0.0:9100): on the compose or cluster network, never published.
const MetricsPort = 9100

// Render returns the deployment files as the modules make them, by path relative to root: the
// generated regions of the shared files (between "# BEGIN generated: <name>" and
// "# END generated: <name>") and one overlay per service. A nil content means the file goes:
// the overlay of a service no longer in the list.
func Render(root string, mods []service.Module) (map[string][]byte, error) {
	out := map[string][]byte{}
	regions := map[string]map[string]string{
		ComposeFile: {
			"peers":    lines(mods, func(m service.Module) string { return fmt.Sprintf("  %s: %s:9090\n", addr(m), m.Name) }),
			"services": lines(mods, composeService),
			"http-peers": lines(withRoutes(mods), func(m service.Module) string {
				return fmt.Sprintf("      %s: %s:%d\n", httpAddr(m), m.Name, HTTPPort)
			}),
		},
		KustomizeFile: {
			"overlays": lines(mods, func(m service.Module) string { return fmt.Sprintf("  - services/%s\n", m.Name) }),
		},
		ConfigFile: {
			"peers": lines(mods, func(m service.Module) string {
				return fmt.Sprintf("  %s: dns:///%s-headless.collab.svc.cluster.local:9090\n", addr(m), m.Name)
			}),
		},
		GatewayFile: {
			"http-peers": gatewayEnv(withRoutes(mods)),
		},
		PrometheusFile: {
			"targets": lines(mods, func(m service.Module) string { return fmt.Sprintf("          - %s:%d\n", m.Name, MetricsPort) }),
		},
	}
	for file, regs := range regions {
		b, err := os.ReadFile(filepath.Join(root, file)) //nolint:gosec // G304: the repository's own deployment files
		if err != nil {
			return nil, err
		}
		for name, content := range regs {
			if b, err = replaceRegion(b, name, content); err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
		}
		out[file] = b
	}
	known := map[string]bool{}
	for _, m := range mods {
		known[m.Name] = true
		out[filepath.ToSlash(filepath.Join(OverlayDir, m.Name, "kustomization.yaml"))] = []byte(overlay(m))
	}
	entries, err := os.ReadDir(filepath.Join(root, OverlayDir))
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if !known[e.Name()] {
			out[filepath.ToSlash(filepath.Join(OverlayDir, e.Name(), "kustomization.yaml"))] = nil
		}
	}
	return out, nil
}

// Write renders the files and writes them under root, removing the overlays of services that
// are gone.
func Write(root string, mods []service.Module) error {
	files, err := Render(root, mods)
	if err != nil {
		return err
	}
	for path, content := range files {
		full := filepath.Join(root, path)
		if content == nil {
			if err := os.RemoveAll(filepath.Dir(full)); err != nil {
				return err
			}
			continue
		}
		// Committed files, checked out readable by everyone: git's modes, not secrets.
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil { //nolint:gosec // G301: see above
			return err
		}
		if err := os.WriteFile(full, content, 0o644); err != nil { //nolint:gosec // G306: see above
			return err
		}
	}
	return nil
}

func addr(m service.Module) string { return service.EnvName(m.Name + "-addr") }

// httpAddr is the variable of the service's HTTP address (--<name>-http-addr), which only a
// service with routes has.
func httpAddr(m service.Module) string { return service.EnvName(m.Name + "-http-addr") }

// withRoutes are the modules that serve HTTP routes of their own.
func withRoutes(mods []service.Module) []service.Module {
	var out []service.Module
	for _, m := range mods {
		if len(m.Routes) > 0 {
			out = append(out, m)
		}
	}
	return out
}

// gatewayEnv is the gateway container's env list: the HTTP address of every service with
// routes, its ClusterIP Service (one WebSocket is one connection, which kube-proxy balances
// well). Nothing (not even the key) when no service has routes.
func gatewayEnv(mods []service.Module) string {
	// The forwarder token, the one key of the Secret the gateway holds (it vouches for the
	// client addresses it passes on), and no per-address connection cap: behind an Ingress
	// every client has the Ingress's address (docs/operations.md, "HTTP listener").
	const fixed = "            - name: COLLAB_FORWARDER_TOKEN\n              valueFrom:\n                secretKeyRef:\n" +
		"                  name: collab-secrets\n                  key: COLLAB_FORWARDER_TOKEN\n" +
		"            - name: COLLAB_HTTP_MAX_CONNS_PER_ADDRESS\n              value: \"0\"\n"
	return "          env:\n" + fixed + lines(mods, func(m service.Module) string {
		return fmt.Sprintf("            - name: %s\n              value: %s.collab.svc.cluster.local:%d\n", httpAddr(m), m.Name, HTTPPort)
	})
}

func lines(mods []service.Module, line func(service.Module) string) string {
	var b strings.Builder
	for _, m := range mods {
		b.WriteString(line(m))
	}
	return b.String()
}

// replaceRegion puts content between a region's marker lines, keeping the markers.
func replaceRegion(b []byte, name, content string) ([]byte, error) {
	begin, end := "# BEGIN generated: "+name, "# END generated: "+name
	i := bytes.Index(b, []byte(begin))
	j := bytes.Index(b, []byte(end))
	if i < 0 || j < i {
		return nil, fmt.Errorf("no region %q (markers %q ... %q)", name, begin, end)
	}
	startOfContent := i + bytes.IndexByte(b[i:], '\n') + 1
	endOfContent := bytes.LastIndexByte(b[:j], '\n') + 1
	var out bytes.Buffer
	out.Write(b[:startOfContent])
	out.WriteString(content)
	out.Write(b[endOfContent:])
	return out.Bytes(), nil
}

func composeService(m service.Module) string {
	expose := ""
	if len(m.Routes) > 0 {
		expose = fmt.Sprintf(`    # Its HTTP routes (%[1]s) on port %[2]d, where the image listens
    # (COLLAB_HTTP_ADDR=0.0.0.0:%[2]d); the gateway proxies them here (%[3]s).
    # Not published.
    expose: ["%[2]d"]
`, strings.Join(m.Routes, ", "), HTTPPort, httpAddr(m))
	}
	return fmt.Sprintf(`  %[1]s:
    <<: *collabd
    command: ["--services=%[1]s"]
%[3]s    environment:
      <<: *service-env
      %[2]s: ""   # runs here
    depends_on: *service-depends-on

`, m.Name, addr(m), expose)
}

// overlay is a service's Kubernetes overlay: the service base made into this service, with
// an HTTP port for the routes of a service that serves its own.
func overlay(m service.Module) string {
	about, deployment, svc := "", "", ""
	if len(m.Routes) > 0 {
		about = fmt.Sprintf(`
#
# It serves HTTP routes of its own (%[1]s): its container's port %[2]d (named http,
# where the image listens: COLLAB_HTTP_ADDR=0.0.0.0:%[2]d) and an http port %[2]d on the %[3]s
# Service, which the gateway proxies them to (%[4]s in gateway.yaml).`, strings.Join(m.Routes, ", "), HTTPPort, m.Name, httpAddr(m))
		deployment = fmt.Sprintf("\n      - {op: add, path: /spec/template/spec/containers/0/ports/-, value: {name: http, containerPort: %d, protocol: TCP}}", HTTPPort)
		svc = fmt.Sprintf("\n      - {op: add, path: /spec/ports/-, value: {name: http, port: %d, targetPort: http, protocol: TCP}}", HTTPPort)
	}
	return fmt.Sprintf(`# Rendered from services.All() by scripts/generate (deploy.Render): do not edit.
#
# The %[1]s service: the service base (../../service-base) made into this service: its names
# (%[1]s, %[1]s-headless), its app.kubernetes.io/name label, --services=%[1]s and the peer
# address it blanks (%[2]s).%[3]s
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../service-base
labels:
  - pairs:
      app.kubernetes.io/name: %[1]s
    includeSelectors: true
    includeTemplates: true
patches:
  - target: {kind: Deployment, name: collab-service}
    options: {allowNameChange: true}
    patch: |-
      - {op: replace, path: /metadata/name, value: %[1]s}
      - {op: replace, path: /spec/template/spec/containers/0/args, value: ["--services=%[1]s"]}
      - {op: replace, path: /spec/template/spec/containers/0/env/0/name, value: %[2]s}
      - {op: replace, path: /spec/template/spec/topologySpreadConstraints/0/labelSelector/matchLabels/app.kubernetes.io~1name, value: %[1]s}%[4]s
  - target: {kind: Service, name: collab-service}
    options: {allowNameChange: true}
    patch: |-
      - {op: replace, path: /metadata/name, value: %[1]s}%[5]s
  - target: {kind: Service, name: collab-service-headless}
    options: {allowNameChange: true}
    patch: |-
      - {op: replace, path: /metadata/name, value: %[1]s-headless}
`, m.Name, addr(m), about, deployment, svc)
}
