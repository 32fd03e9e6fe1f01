package collabd

import (
	"io"
	"os"
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

// Secrets set in the environment still configure the process, but never show in the usage
// text that -h and every mistyped flag print (into the terminal, or a container's log).
func TestSecretsStayOutOfTheUsage(t *testing.T) {
	env := map[string]string{
		"COLLAB_MONGO_URI": "mongodb://collab:mongo-pw-1@db.internal/collab", "COLLAB_INTERNAL_TOKEN": "internal-tok-2",
		"COLLAB_SECRET_KEY": "master-key-3", "COLLAB_SMTP_PASSWORD": "smtp-pw-4",
		"COLLAB_DEV_WORKSPACE_TOKEN": "dev-ws-tok-5", "COLLAB_DEV_AUTH_TOKEN": "dev-auth-tok-6",
	}
	usage := captureStderr(t, func() {
		if _, err := parse(t, env, "--no-such-flag"); err == nil {
			t.Fatal("a mistyped flag was accepted")
		}
	})
	if !strings.Contains(usage, "-smtp-password") {
		t.Fatalf("no usage printed, so nothing is proven: %q", usage)
	}
	for name, v := range env {
		if strings.Contains(usage, v) {
			t.Errorf("the usage shows %s", name)
		}
	}
	c, err := parse(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if c.MongoURI != env["COLLAB_MONGO_URI"] || c.InternalToken != env["COLLAB_INTERNAL_TOKEN"] || c.SecretKey != env["COLLAB_SECRET_KEY"] ||
		c.SMTPPassword != env["COLLAB_SMTP_PASSWORD"] || c.Dev.WorkspaceToken != env["COLLAB_DEV_WORKSPACE_TOKEN"] || c.Dev.AuthToken != env["COLLAB_DEV_AUTH_TOKEN"] {
		t.Fatalf("environment secrets not applied: %+v", c)
	}
	if c.DevWorkspace {
		t.Fatal("the MongoDB URI from the environment no longer turns the dev workspace off")
	}
	c, err = parse(t, env, "--internal-token=from-flag", "--dev-auth-token=flag-dev")
	if err != nil || c.InternalToken != "from-flag" || c.Dev.AuthToken != "flag-dev" || c.SMTPPassword != "smtp-pw-4" {
		t.Fatalf("the flag must win over the environment: %+v %v", c, err)
	}
}

func TestMailDir(t *testing.T) {
	c, err := parse(t, nil)
	if err != nil || c.MailDir != "" {
		t.Fatalf("default %q %v", c.MailDir, err)
	}
	c, err = parse(t, map[string]string{"COLLAB_MAIL_DIR": "/tmp/env-mail"})
	if err != nil || c.MailDir != "/tmp/env-mail" {
		t.Fatalf("environment %q %v", c.MailDir, err)
	}
	c, err = parse(t, map[string]string{"COLLAB_MAIL_DIR": "/tmp/env-mail"}, "--mail-dir=/tmp/flag-mail")
	if err != nil || c.MailDir != "/tmp/flag-mail" {
		t.Fatalf("flag %q %v", c.MailDir, err)
	}
}

// The banner prints the development credentials the docs publish, and no token an operator
// chose.
func TestBannerPrintsOnlyPublishedTokens(t *testing.T) {
	defaults, err := parse(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	published := defaults.Dev
	published.OwnerEmail = ""
	if published != publishedDev {
		t.Fatalf("flag defaults %+v and the banner's published credentials %+v differ", published, publishedDev)
	}
	var out strings.Builder
	PrintBanner(&out, &Process{HTTPAddr: "127.0.0.1:8080", Dev: &defaults.Dev})
	for _, v := range []string{"dev-workspace-token", "dev-auth-token", "dev-api-key"} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("the banner lacks the published %s:\n%s", v, out.String())
		}
	}
	custom := defaults.Dev
	custom.WorkspaceToken, custom.AuthToken = "chosen-ws-secret", "chosen-auth-secret"
	out.Reset()
	PrintBanner(&out, &Process{HTTPAddr: "127.0.0.1:8080", Dev: &custom})
	if strings.Contains(out.String(), "chosen-") {
		t.Fatalf("the banner prints chosen tokens:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "<the value of --dev-auth-token>") {
		t.Fatalf("the banner does not say where the token is:\n%s", out.String())
	}
}

// captureStderr returns what f wrote to os.Stderr.
func captureStderr(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	func() {
		defer func() { os.Stderr = saved }()
		f()
	}()
	_ = w.Close()
	return <-done
}
