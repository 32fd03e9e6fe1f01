package collabd

import (
	"flag"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/collab/collab/internal/service"
	"github.com/collab/collab/services"
)

func parse(t *testing.T, env map[string]string, args ...string) (Config, error) {
	t.Helper()
	return ParseFlags(services.All(), args, func(k string) string { return env[k] })
}

func TestDefaults(t *testing.T) {
	c, err := parse(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != "127.0.0.1:8080" || c.GRPCAddr != "127.0.0.1:9090" || c.MongoURI != "" || c.AuthCacheTTL != 5*time.Second {
		t.Fatalf("defaults %+v", c)
	}
	if !slices.Equal(c.Services, []string{"access", "documents", "gateway", "users", "workspace"}) || !c.AllInOne() {
		t.Fatalf("services %v", c.Services)
	}
}

func TestEnvironmentTwinsAndFlagsWin(t *testing.T) {
	env := map[string]string{"COLLAB_HTTP_ADDR": "0.0.0.0:1", "COLLAB_MONGO_URI": "mongodb://x/db", "COLLAB_AUTH_CACHE_TTL": "1s", "COLLAB_DOCUMENTS_ADDR": "d:1"}
	c, err := parse(t, env, "--http-addr=127.0.0.1:2", "--services=gateway,workspace,users,access", "--internal-token=9c1e4f7a2b8d05e3f6a9c2d1b4e7f0a3")
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != "127.0.0.1:2" || c.MongoURI != "mongodb://x/db" || c.AuthCacheTTL != time.Second || c.Peers["documents"] != "d:1" {
		t.Fatalf("%+v", c)
	}
}

// What a service needs follows from its module: direct calls, the authenticating service, and
// the consumers of the events it publishes.
func TestNeedsDeriveFromModules(t *testing.T) {
	c, err := parse(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]string{
		"gateway":   {"workspace", "documents", "users", "access"},
		"workspace": nil,
		"documents": {"workspace", "users", "access"},
		"users":     {"workspace", "documents", "access"},
		"access":    {"workspace", "documents"},
	} {
		if got := c.Needs(name); !slices.Equal(got, want) {
			t.Errorf("%s needs %v, want %v", name, got, want)
		}
	}
	if got := c.Consumers("folder.deleted"); !slices.Equal(got, []string{"documents", "access"}) {
		t.Errorf("folder.deleted goes to %v", got)
	}
	if got := c.Consumers("users.removed"); !slices.Equal(got, []string{"users", "access"}) {
		t.Errorf("users.removed goes to %v", got)
	}
}

func TestConfigErrors(t *testing.T) {
	cases := []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"--services=gateway,bogus"}, "unknown service"},
		{nil, []string{"--services=,"}, "nothing to run"},
		{nil, []string{"--rate-limit=createWorkspace=x"}, "-rate-limit"},
		{nil, []string{"--rate-limit=speed=3"}, "unknown limit"},
		{nil, []string{"--rate-limit=createWorkspace=-1"}, "-rate-limit"},
		{map[string]string{"COLLAB_RATE_LIMIT": "speed=3"}, nil, "COLLAB_RATE_LIMIT"},
		{nil, []string{"--mongo-uri=mongodb://x", "--data-dir=/tmp/x"}, "exclude each other"},
		{nil, []string{"--services=gateway"}, "the gateway service needs the workspace service"},
		{nil, []string{"--services=users", "--workspace-addr=w:1", "--documents-addr=d:1"}, "the users service needs the access service"},
		{nil, []string{"--services=access", "--documents-addr=d:1", "--internal-token=9c1e4f7a2b8d05e3f6a9c2d1b4e7f0a3"}, "the access service needs the workspace service"},
		{nil, []string{"--workspace-addr=x:1"}, "also has a peer address"},
		{nil, []string{"--log-level=loud"}, "--log-level"},
		{nil, []string{"--log-format=xml"}, "--log-format"},
		{nil, []string{"--dev-workspace=maybe"}, "-dev-workspace"},
		{map[string]string{"COLLAB_AUTH_CACHE_TTL": "soon"}, nil, "COLLAB_AUTH_CACHE_TTL"},
		{nil, []string{"extra"}, "unexpected arguments"},
	}
	for _, c := range cases {
		_, err := parse(t, c.env, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %v: error %v, want one mentioning %q", c.env, c.args, err, c.want)
		}
	}
}

// The README's configuration table names every flag, the services' own included.
func TestReadmeListsEveryFlag(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	c := Config{Modules: services.All(), builds: map[string]service.BuildFunc{}}
	fs, _, _ := c.declareFlags(func(string) string { return "" })
	n := 0
	fs.VisitAll(func(fl *flag.Flag) {
		n++
		if !strings.Contains(string(readme), "`--"+fl.Name+"`") {
			t.Errorf("README's configuration table does not list --%s (%s)", fl.Name, service.EnvName(fl.Name))
		}
	})
	if n < 20 {
		t.Fatalf("only %d flags declared", n)
	}
}
