package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/collab/collab/collabd"
	"github.com/collab/collab/internal/embedmongo"
	"github.com/collab/collab/internal/testkit/natstest"
	"github.com/collab/collab/internal/testkit/yjstest"
	"github.com/collab/collab/services"
)

// loadCompose loads the repository's docker-compose.yml with compose-go, the library Docker
// Compose itself loads files with (interpolation, merge keys, extends, validation against the
// Compose schema), with env as the only environment: what `docker compose up` would run.
func loadCompose(t *testing.T, env map[string]string) *types.Project {
	t.Helper()
	var pairs []string
	for k, v := range env {
		pairs = append(pairs, k+"="+v)
	}
	opts, err := cli.NewProjectOptions([]string{"../docker-compose.yml"}, cli.WithWorkingDirectory(".."), cli.WithName("collab"), cli.WithEnv(pairs))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("docker-compose.yml does not load as Docker Compose loads it: %v", err)
	}
	return p
}

func randomToken(t *testing.T) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// composeSecrets are the secrets the compose file requires, each in .env or the shell.
var composeSecrets = []string{"COLLAB_INTERNAL_TOKEN", "COLLAB_FORWARDER_TOKEN", "COLLAB_WAKEUP_TOKEN"}

// composeEnv gives every secret of the compose file a random value.
func composeEnv(t *testing.T) map[string]string {
	env := map[string]string{}
	for _, k := range composeSecrets {
		env[k] = randomToken(t)
	}
	return env
}

// The compose file refuses to load without any one of its secrets, as its comments say, and
// names the one missing.
func TestComposeNeedsItsSecrets(t *testing.T) {
	t.Parallel()
	for _, missing := range composeSecrets {
		var pairs []string
		for k, v := range composeEnv(t) {
			if k != missing {
				pairs = append(pairs, k+"="+v)
			}
		}
		opts, err := cli.NewProjectOptions([]string{"../docker-compose.yml"}, cli.WithWorkingDirectory(".."), cli.WithName("collab"), cli.WithEnv(pairs))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := opts.LoadProject(context.Background()); err == nil || !strings.Contains(err.Error(), missing) {
			t.Errorf("loaded without %s: %v", missing, err)
		}
	}
}

// imageEnv is the environment deploy/Dockerfile gives every collabd container (its ENV lines),
// under the compose file's.
func imageEnv(t *testing.T) map[string]string {
	t.Helper()
	dockerfile, err := os.ReadFile("../deploy/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	pair := regexp.MustCompile(`(COLLAB_[A-Z0-9_]+)=(\S+)`)
	inEnv := false
	for line := range strings.Lines(string(dockerfile)) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "ENV ") {
			inEnv = true
		}
		if inEnv {
			for _, m := range pair.FindAllStringSubmatch(line, -1) {
				env[m[1]] = m[2]
			}
			inEnv = strings.HasSuffix(line, `\`)
		}
	}
	if env["COLLAB_GRPC_ADDR"] == "" || env["COLLAB_HTTP_ADDR"] == "" {
		t.Fatalf("deploy/Dockerfile gives no listen addresses: %v", env)
	}
	return env
}

// composeHost is where a container of the compose file listens in the test: its host name's
// ports mapped to loopback addresses.
type composeHost struct{ grpc, http, metrics string }

// startComposeEngine runs the compose file's wake-up engine, its nats service, as the container
// would: the configuration file its command names (the file the service mounts there), read
// with the environment the compose file gives the container, by the nats-server library, the
// listener moved to a loopback port. The healthcheck's URL must be the file's monitoring
// listener, which the test asks as the healthcheck does. It returns the server and the port the
// file listens on (the one the services' COLLAB_WAKEUP_URL names).
func startComposeEngine(t *testing.T, project *types.Project) (*server.Server, int) {
	t.Helper()
	svc, ok := project.Services["nats"]
	if !ok {
		t.Fatal("docker-compose.yml runs no wake-up engine (service nats)")
	}
	var conf string
	for i, a := range svc.Command {
		if a == "--config" && i+1 < len(svc.Command) {
			conf = svc.Command[i+1]
		}
	}
	var source string
	for _, v := range svc.Volumes {
		if v.Type == types.VolumeTypeBind && v.Target == conf && v.ReadOnly {
			source = v.Source
		}
	}
	if source == "" {
		t.Fatalf("nats: its command %v names no configuration file mounted read-only (volumes %+v)", svc.Command, svc.Volumes)
	}
	env := map[string]string{}
	for k, v := range svc.Environment {
		if v != nil {
			env[k] = *v
		}
	}
	opts := natstest.ConfigFile(t, source, env)
	if opts.Authorization == "" || opts.Authorization != env["COLLAB_WAKEUP_TOKEN"] {
		t.Fatalf("nats: %s does not require COLLAB_WAKEUP_TOKEN of its clients", source)
	}
	if svc.HealthCheck == nil || !slices.Contains(svc.HealthCheck.Test, fmt.Sprintf("http://%s:%d/healthz", opts.HTTPHost, opts.HTTPPort)) {
		t.Fatalf("nats: the healthcheck %v does not ask /healthz of the monitoring listener, %s:%d", svc.HealthCheck, opts.HTTPHost, opts.HTTPPort)
	}
	filePort := opts.Port
	opts.Host, opts.Port, opts.HTTPPort = "127.0.0.1", -1, -1
	s := natstest.Start(t, opts)
	res, err := http.Get("http://" + s.MonitorAddr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("nats: the healthcheck's /healthz answers %d", res.StatusCode)
	}
	if nc, err := nats.Connect(s.ClientURL()); err == nil {
		nc.Close()
		t.Fatal("nats: a client without the token got in")
	}
	return s, filePort
}

// TestComposeTopology runs the topology of docker-compose.yml as processes of this test: every
// container that runs collabd, with its command and environment from the file (loaded by
// compose-go) over the image's (deploy/Dockerfile), the containers' host names mapped to
// loopback ports, the file's MongoDB served by the embedded MongoDB-wire server and its
// wake-up engine by an embedded NATS server running the file's configuration. Then it drives the
// system through the gateway, the file's one published port, across the processes: so the file
// operators start is the one proven to work. Prometheus and Jaeger (the monitoring profile) are
// not run.
func TestComposeTopology(t *testing.T) {
	t.Parallel()
	project := loadCompose(t, composeEnv(t))
	mongo, err := embedmongo.Start(t.TempDir(), embedmongo.QuietLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mongo.Stop)
	mongoHost := strings.TrimSuffix(strings.TrimPrefix(mongo.URI(), "mongodb://"), "/")
	engine, enginePort := startComposeEngine(t, project)

	var names []string // the collabd containers
	hosts := map[string]composeHost{}
	for name, svc := range project.Services {
		if svc.Image != "collabd:local" {
			continue
		}
		names = append(names, name)
		hosts[name] = composeHost{grpc: freeAddr(t), http: freeAddr(t), metrics: freeAddr(t)}
	}
	slices.Sort(names)
	for _, m := range services.All() {
		if _, ok := hosts[m.Name]; !ok {
			t.Fatalf("docker-compose.yml runs no container for %s", m.Name)
		}
	}
	if _, ok := hosts["gateway"]; !ok {
		t.Fatal("docker-compose.yml runs no gateway")
	}
	// A value naming a container's port is given its loopback address.
	var pairs []string
	for name, h := range hosts {
		pairs = append(pairs, name+":9090", h.grpc, name+":8080", h.http)
	}
	pairs = append(pairs, "mongo:27017", mongoHost, fmt.Sprintf("nats:%d", enginePort), engine.Addr().String())
	mapHosts := strings.NewReplacer(pairs...)

	image := imageEnv(t)
	systems := map[string]*system{}
	for _, name := range names {
		svc := project.Services[name]
		env := map[string]string{}
		for k, v := range image {
			env[k] = v
		}
		for k, v := range svc.Environment {
			if v != nil {
				env[k] = mapHosts.Replace(*v)
			}
		}
		h := hosts[name]
		env["COLLAB_GRPC_ADDR"], env["COLLAB_HTTP_ADDR"] = h.grpc, h.http
		if env["COLLAB_METRICS_ADDR"] != "" {
			env["COLLAB_METRICS_ADDR"] = h.metrics
		}
		for k, v := range env {
			if strings.Contains(v, "mongo:27017") || strings.Contains(v, fmt.Sprintf("nats:%d", enginePort)) || strings.Contains(v, ":9090") && !strings.Contains(v, "127.0.0.1") {
				t.Fatalf("%s: %s=%s names a container left unmapped", name, k, v)
			}
		}
		cfg, err := collabd.ParseFlags(services.All(), svc.Command, func(k string) string { return env[k] })
		if err != nil {
			t.Fatalf("%s: its command %v and environment do not configure collabd: %v", name, svc.Command, err)
		}
		if name != "gateway" && !strings.HasPrefix(cfg.MongoURI, "mongodb://"+mongoHost) {
			t.Fatalf("%s: store %q, want the file's MongoDB", name, cfg.MongoURI)
		}
		if name != "gateway" && !slices.Equal(cfg.Services, []string{name}) {
			t.Fatalf("%s runs %v", name, cfg.Services)
		}
		systems[name] = startLogging(t, cfg, io.Discard)
	}

	// The gateway is ready when every service answers and each its store (docs/operations.md).
	gw := systems["gateway"]
	eventually(t, "the gateway ready: every service of the file answering", func() bool { return gw.do("GET", "/readyz", nil, nil).status == 200 })
	id, token := gw.newWorkspace("compose@example.com")
	key, auth := gw.newKey(id, token)
	k := keyHeaders(key, auth)
	gw.call("/v2/users/add", k, map[string]any{"organizationId": "o", "createOrganization": true, "documentId": "d", "createDocument": true, "users": users("u1")}).data(t, "")
	perms := gw.call("/v2/auth/permissions/get", k, map[string]any{"organizationId": "o", "userIds": []string{"u1"}, "documentIds": []string{"d"}}).data(t, "")
	if role := perms["u1"].(map[string]any)["documents"].(map[string]any)["d"].(map[string]any)["accessRole"]; role != "editor" {
		t.Fatalf("a role across the compose file's processes: %v", role)
	}
	// Live sync through the gateway's published port, proxied to the crdt container's HTTP port
	// (COLLAB_CRDT_HTTP_ADDR), with a real y-websocket client.
	editor := yjstest.StartClient(t, gw.syncURL(), "o/d/e", gw.syncToken(t, k, "u1", "editor"))
	next(t, editor, "synced")
	gw.call("/v2/crdt/add", k, map[string]any{"organizationId": "o", "documentId": "d", "editorId": "e", "data": "hello compose", "type": "text"}).data(t, "CRDT data added successfully.")
	waitText(t, editor, "hello compose")
	if err := editor.Send(map[string]any{"cmd": "insertText", "root": "content", "index": 0, "text": ">> "}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the client's edit stored by the crdt container", func() bool { return gw.restText(t, k) == ">> hello compose" })
	// Every service container is a client of the engine (with the file's token), and the crdt
	// container's wake-ups for the edits went through it.
	var want []string
	for _, name := range names {
		if name != "gateway" {
			want = append(want, "collabd "+name)
		}
	}
	eventually(t, "every service container connected to the engine", func() bool { return slices.Equal(engineClients(t, engine), want) })
	if published := metricValue(t, systems["crdt"], "collab_wakeup_published_total"); published < 1 {
		t.Fatalf("the crdt container published %v wake-ups for its edits", published)
	}
	if v, err := engine.Varz(nil); err != nil || v.InMsgs < 1 {
		t.Fatalf("the engine carried no wake-up: %+v, %v", v, err)
	}
	if err := editor.Close(); err != nil {
		t.Fatal(err)
	}
	gw.call("/v2/workspace/activityconfig/update", k, map[string]any{"isEnabled": true}).data(t, "")
	gw.call("/v2/events/publish", k, map[string]any{"id": "ev1", "type": "comment.add", "organizationId": "o", "documentId": "d",
		"actionUser": map[string]any{"userId": "u1"}, "data": map[string]any{"commentText": "hi"}}).ok(t)
	eventually(t, "the published event recorded by activity in its own process", func() bool {
		res := gw.call("/v2/activities/get", k, map[string]any{"organizationId": "o", "activityIds": []string{"ev1"}})
		data, _ := res.body["result"].(map[string]any)["data"].([]any)
		return res.status == 200 && len(data) == 1
	})
}

// engineClients are the names of the engine's client connections (collabd names its own
// "collabd <services>"), sorted.
func engineClients(t *testing.T, s *server.Server) []string {
	t.Helper()
	cz, err := s.Connz(nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range cz.Conns {
		out = append(out, c.Name)
	}
	slices.Sort(out)
	return out
}

// metricValue is the value of a series without labels on the process's /metrics.
func metricValue(t *testing.T, s *system, name string) float64 {
	t.Helper()
	res, err := http.Get("http://" + s.proc.MetricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(body)) {
		if value, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return v
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}
