package collabd

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/collab/collab/services/workspace"
)

func parse(t *testing.T, env map[string]string, args ...string) (Config, error) {
	t.Helper()
	return ParseFlags(args, func(k string) string { return env[k] })
}

func TestDefaults(t *testing.T) {
	c, err := parse(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != "127.0.0.1:8080" || c.GRPCAddr != "127.0.0.1:9090" || c.MongoURI != "" || !c.DevWorkspace {
		t.Fatalf("defaults %+v", c)
	}
	if !slices.Equal(c.Services, []string{"access", "documents", "gateway", "users", "workspace"}) {
		t.Fatalf("services %v", c.Services)
	}
	if c.RateLimits != workspace.DefaultRateLimits || c.AuthCacheTTL != 5*time.Second {
		t.Fatalf("limits %+v ttl %v", c.RateLimits, c.AuthCacheTTL)
	}
}

func TestEnvironmentTwinsAndFlagsWin(t *testing.T) {
	env := map[string]string{"COLLAB_HTTP_ADDR": "0.0.0.0:1", "COLLAB_MONGO_URI": "mongodb://x/db", "COLLAB_RATE_LIMIT": "off", "COLLAB_AUTH_CACHE_TTL": "1s"}
	c, err := parse(t, env, "--http-addr=127.0.0.1:2")
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != "127.0.0.1:2" || c.MongoURI != "mongodb://x/db" || c.RateLimits != (workspace.RateLimits{}) || c.AuthCacheTTL != time.Second {
		t.Fatalf("%+v", c)
	}
	if c.DevWorkspace {
		t.Fatal("the dev workspace is on by default with a MongoDB URI")
	}
	c, err = parse(t, env, "--dev-workspace=true")
	if err != nil || !c.DevWorkspace {
		t.Fatalf("explicit dev workspace: %v %v", c.DevWorkspace, err)
	}
}

func TestRateLimitSpec(t *testing.T) {
	l, err := ParseRateLimits("createWorkspace=3, emailStatus=0")
	if err != nil {
		t.Fatal(err)
	}
	want := workspace.DefaultRateLimits
	want.CreateWorkspace, want.EmailStatus = 3, 0
	if l != want {
		t.Fatalf("%+v", l)
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
		{nil, []string{"--rate-limit=createWorkspace=x"}, "--rate-limit"},
		{nil, []string{"--rate-limit=speed=3"}, "unknown limit"},
		{nil, []string{"--rate-limit=createWorkspace=-1"}, "--rate-limit"},
		{nil, []string{"--mongo-uri=mongodb://x", "--data-dir=/tmp/x"}, "exclude each other"},
		{nil, []string{"--services=gateway"}, "the gateway service needs the workspace service"},
		{nil, []string{"--services=users", "--workspace-addr=w:1", "--documents-addr=d:1"}, "the users service needs the access service"},
		{nil, []string{"--services=access", "--documents-addr=d:1"}, "the access service needs the workspace service"},
		{nil, []string{"--workspace-addr=x:1"}, "also has a peer address"},
		{nil, []string{"--log-level=loud"}, "--log-level"},
		{nil, []string{"--log-format=xml"}, "--log-format"},
		{nil, []string{"--dev-workspace=maybe"}, "--dev-workspace"},
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
