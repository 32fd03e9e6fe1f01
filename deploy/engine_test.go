package deploy

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/collab/collab/internal/testkit/natstest"
)

// The wake-up engine's token in the tests: hex, as the deployment files ask for.
const engineToken = "0123456789abcdef0123456789abcdef"

// natsMinor is the minor version of the nats-server library in go.mod ("2.15"): the version
// the tests run the deployments' configuration files with, so the images run it too.
func natsMinor(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*github\.com/nats-io/nats-server/v2 v(\d+\.\d+)\.\d+`).FindSubmatch(b)
	if m == nil {
		t.Fatal("go.mod requires no github.com/nats-io/nats-server/v2")
	}
	return string(m[1])
}

// checkEngineImage holds an engine image to the official alpine image (it has wget, which the
// probes use) pinned to a release of go.mod's minor version.
func checkEngineImage(t *testing.T, where, image string) {
	t.Helper()
	if want := regexp.MustCompile(`^nats:` + regexp.QuoteMeta(natsMinor(t)) + `\.\d+-alpine$`); !want.MatchString(image) {
		t.Errorf("%s: image %q, want nats:%s.<patch>-alpine (go.mod's nats-server, pinned)", where, image, natsMinor(t))
	}
}

// configArg is the configuration file a nats-server command line names.
func configArg(cmd []string) string {
	for i, a := range cmd {
		if (a == "--config" || a == "-c") && i+1 < len(cmd) {
			return cmd[i+1]
		}
	}
	return ""
}

// healthURL is the http:// URL a probe's command asks.
func healthURL(t *testing.T, where string, cmd []string) *url.URL {
	t.Helper()
	for _, a := range cmd {
		if strings.HasPrefix(a, "http://") {
			u, err := url.Parse(a)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			return u
		}
	}
	t.Fatalf("%s: the probe %v asks no URL", where, cmd)
	return nil
}

// checkMonitoring holds a probe to the monitoring listener of the configuration: NATS's
// /healthz on loopback (its pages take no credentials, so they never leave the container).
func checkMonitoring(t *testing.T, where string, probe []string, o *server.Options) {
	t.Helper()
	u := healthURL(t, where, probe)
	if o.HTTPHost != "127.0.0.1" || u.Host != net.JoinHostPort(o.HTTPHost, strconv.Itoa(o.HTTPPort)) || u.Path != "/healthz" {
		t.Errorf("%s: the probe asks %s; the monitoring port is %s:%d (want loopback, and /healthz)", where, u, o.HTTPHost, o.HTTPPort)
	}
}

type composeEngine struct {
	Image       string            `yaml:"image"`
	Command     []string          `yaml:"command"`
	User        string            `yaml:"user"`
	Restart     string            `yaml:"restart"`
	ReadOnly    bool              `yaml:"read_only"`
	SecurityOpt []string          `yaml:"security_opt"`
	Volumes     []string          `yaml:"volumes"`
	Environment map[string]string `yaml:"environment"`
	Ports       []string          `yaml:"ports"`
	Healthcheck struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
}

// The compose file runs the wake-up engine, a NATS server that requires the token every
// service container holds, and every service container names it in COLLAB_WAKEUP_URL and
// starts after it. The gateway, which runs no service, holds no token of it.
func TestComposeRunsTheEngine(t *testing.T) {
	var compose struct {
		ServiceEnv map[string]string `yaml:"x-service-env"`
		Services   map[string]struct {
			composeEngine `yaml:",inline"`
			DependsOn     map[string]struct {
				Condition string `yaml:"condition"`
			} `yaml:"depends_on"`
		} `yaml:"services"`
	}
	readYAML(t, "../"+ComposeFile, &compose)
	engine, ok := compose.Services["nats"]
	if !ok {
		t.Fatal("compose runs no wake-up engine (service nats)")
	}
	checkEngineImage(t, "compose nats", engine.Image)
	if engine.Restart != "unless-stopped" || !engine.ReadOnly || !slices.Equal(engine.SecurityOpt, []string{"no-new-privileges:true"}) || engine.User == "" {
		t.Errorf("compose nats: restart %q, read_only %v, security_opt %v, user %q: want the collabd containers' (and no root)",
			engine.Restart, engine.ReadOnly, engine.SecurityOpt, engine.User)
	}
	if len(engine.Ports) > 0 {
		t.Errorf("compose nats publishes %v", engine.Ports)
	}
	// Its configuration is a committed file, mounted read-only where its command reads it.
	conf := configArg(engine.Command)
	var source string
	for _, v := range engine.Volumes {
		if src, rest, _ := strings.Cut(v, ":"); rest == conf+":ro" {
			source = src
		}
	}
	if conf == "" || source == "" {
		t.Fatalf("compose nats: command %v, volumes %v: want --config naming a file mounted read-only", engine.Command, engine.Volumes)
	}
	// The token from the environment compose gives it: the same required secret as the services'.
	const tokenRef = "${COLLAB_WAKEUP_TOKEN:?set COLLAB_WAKEUP_TOKEN in .env, e.g. openssl rand -hex 32}"
	if engine.Environment["COLLAB_WAKEUP_TOKEN"] != tokenRef || compose.ServiceEnv["COLLAB_WAKEUP_TOKEN"] != tokenRef {
		t.Errorf("COLLAB_WAKEUP_TOKEN: nats %q, services %q, want both %q", engine.Environment["COLLAB_WAKEUP_TOKEN"], compose.ServiceEnv["COLLAB_WAKEUP_TOKEN"], tokenRef)
	}
	if strings.Contains(strings.Join(engine.Command, " "), "COLLAB_WAKEUP_TOKEN") {
		t.Error("compose nats: the token on the command line, where ps shows it")
	}
	env := map[string]string{}
	for k := range engine.Environment {
		env[k] = engineToken
	}
	o := natstest.ConfigFile(t, filepath.Join("..", source), env)
	if o.Authorization != engineToken {
		t.Errorf("%s: the server does not require COLLAB_WAKEUP_TOKEN of its clients (token %q)", source, o.Authorization)
	}
	checkMonitoring(t, "compose nats healthcheck", engine.Healthcheck.Test, o)

	wantURL := fmt.Sprintf("nats://nats:%d", o.Port)
	for _, n := range names() {
		s := compose.Services[n]
		if got := s.Environment["COLLAB_WAKEUP_URL"]; got != wantURL {
			t.Errorf("%s: COLLAB_WAKEUP_URL %q, want the engine, %s", n, got, wantURL)
		}
		if s.Environment["COLLAB_WAKEUP_TOKEN"] != tokenRef {
			t.Errorf("%s: no COLLAB_WAKEUP_TOKEN", n)
		}
		// Started, not healthy: collabd works without the engine (docs/operations.md).
		if s.DependsOn["nats"].Condition != "service_started" || s.DependsOn["mongo"].Condition != "service_healthy" {
			t.Errorf("%s: depends_on %+v, want mongo healthy and nats started", n, s.DependsOn)
		}
	}
	if _, ok := compose.Services["gateway"].Environment["COLLAB_WAKEUP_TOKEN"]; ok {
		t.Error("the gateway, which runs no service, holds the engine's token")
	}
}
