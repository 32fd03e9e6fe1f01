package collabd

import (
	"flag"
	"io"
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

// serviceNames are the names of services.All() but those given, in the list's order.
func serviceNames(except ...string) []string {
	var out []string
	for _, m := range services.All() {
		if !slices.Contains(except, m.Name) {
			out = append(out, m.Name)
		}
	}
	return out
}

// peerFlags are the flags that put each of the services at addr (--<name>-addr).
func peerFlags(addr string, names ...string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, "--"+n+"-addr="+addr)
	}
	return out
}

func TestDefaults(t *testing.T) {
	c, err := parse(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != "127.0.0.1:8080" || c.GRPCAddr != "127.0.0.1:9090" || c.MongoURI != "" || c.AuthCacheTTL != 5*time.Second {
		t.Fatalf("defaults %+v", c)
	}
	want := append(serviceNames(), Gateway)
	slices.Sort(want)
	if !slices.Equal(c.Services, want) || !c.AllInOne() {
		t.Fatalf("services %v, want %v", c.Services, want)
	}
}

func TestEnvironmentTwinsAndFlagsWin(t *testing.T) {
	env := map[string]string{"COLLAB_HTTP_ADDR": "0.0.0.0:1", "COLLAB_MONGO_URI": "mongodb://x/db", "COLLAB_AUTH_CACHE_TTL": "1s", "COLLAB_DOCUMENTS_ADDR": "d:1"}
	everything := "--services=" + Gateway + "," + strings.Join(serviceNames("documents"), ",")
	c, err := parse(t, env, "--http-addr=127.0.0.1:2", everything, "--internal-token=9c1e4f7a2b8d05e3f6a9c2d1b4e7f0a3")
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != "127.0.0.1:2" || c.MongoURI != "mongodb://x/db" || c.AuthCacheTTL != time.Second || c.Peers["documents"] != "d:1" {
		t.Fatalf("%+v", c)
	}
}

// What a service needs follows from its module: direct calls, the authenticating service, and
// the consumers of the events it publishes. The expectations are written by hand per service;
// a service without one fails here, saying what the modules make it need, until its line is
// written. They are compared on the services that have one, so a new service's line is the
// only one to write (a new consumer of documents' events does not rewrite documents' line).
func TestNeedsDeriveFromModules(t *testing.T) {
	c, err := parse(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"workspace": nil,
		"documents": {"workspace", "users", "access", "activity", "notifications", "memory", "crdt", "comments"},
		"users":     {"workspace", "documents", "access", "notifications"},
		"access":    {"workspace", "documents"},
		// events publishes every domain type; activity and webhooks consume them, notifications
		// the comment events that notify.
		"events":   {"workspace", "documents", "activity", "notifications", "webhooks"},
		"activity": {"workspace", "documents"},
		// notifications fans out its own notification.add, then webhooks sends it.
		"notifications": {"workspace", "documents", "users", "access", "webhooks"},
		"webhooks":      {"workspace"},
		// memory asks documents for generations; it publishes nothing.
		"memory": {"workspace", "documents"},
		// crdt publishes crdt.update_data, which activity records and webhooks sends.
		"crdt": {"workspace", "documents", "access", "activity", "webhooks"},
		// comments publishes an event per change, which activity records, notifications turns
		// into notifications (mentions, assignments, replies) and webhooks sends.
		"comments": {"workspace", "documents", "access", "activity", "notifications", "webhooks"},
	}
	written := func(names []string) []string {
		return slices.DeleteFunc(slices.Clone(names), func(n string) bool { _, ok := want[n]; return !ok })
	}
	// The gateway calls every service, in the list's order.
	if got := c.Needs(Gateway); !slices.Equal(got, serviceNames()) {
		t.Errorf("the gateway needs %v, want every service %v", got, serviceNames())
	}
	for _, name := range serviceNames() {
		w, ok := want[name]
		if !ok {
			t.Errorf("service %s has no expectation in TestNeedsDeriveFromModules: its module makes it need %v; write what it should need (its Calls, workspace to authenticate, the consumers of what it publishes)", name, c.Needs(name))
			continue
		}
		if got := written(c.Needs(name)); !slices.Equal(got, w) {
			t.Errorf("%s needs %v, want %v", name, got, w)
		}
	}
	for event, w := range map[string][]string{
		"folder.deleted":            {"documents", "access"},
		"users.removed":             {"users", "access", "notifications"},
		"comment.add":               {"activity", "notifications", "webhooks"},
		"comment.delete":            {"activity", "webhooks"},
		"comment_annotation.assign": {"activity", "notifications", "webhooks"},
		"comment.reaction_add":      {"activity", "webhooks"},
		"crdt.update_data":          {"activity", "webhooks"},
		"document.migrated":         {"documents", "users", "access", "activity", "notifications", "memory", "crdt", "comments"},
		"huddle.join":               {"webhooks"},
	} {
		if got := written(c.Consumers(event)); !slices.Equal(got, w) {
			t.Errorf("%s goes to %v, want %v", event, got, w)
		}
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
		{nil, []string{"--crdt-http-addr=crdt:8080"}, "service crdt runs here and also has an HTTP peer address (--crdt-http-addr)"},
		{map[string]string{"COLLAB_CRDT_HTTP_ADDR": "crdt:8080"}, nil, "also has an HTTP peer address"},
		{nil, []string{"--crdt-http-addr=dns:///crdt:8080"}, "--crdt-http-addr (COLLAB_CRDT_HTTP_ADDR): want host:port or an http(s) URL"},
		{nil, []string{"--crdt-http-addr=crdt"}, "want host:port"},
		{nil, []string{"--crdt-http-addr=crdt:0"}, "bad port"},
		{nil, []string{"--crdt-http-addr=http://crdt:70000"}, "bad port"},
		{nil, []string{"--crdt-http-addr=http://crdt:8080/v2"}, "path"},
		{nil, []string{"--crdt-http-addr=http://crdt:8080?x=1"}, "query"},
		{nil, []string{"--crdt-http-addr=http://u:p@crdt:8080"}, "credentials"},
		{nil, []string{"--crdt-http-addr=http://:8080"}, "no host"},
		{map[string]string{"COLLAB_CRDT_HTTP_ADDR": "ws://crdt:8080"}, []string{"--services=gateway"}, "COLLAB_CRDT_HTTP_ADDR"},
		// Only services with HTTP routes have an HTTP peer address.
		{nil, []string{"--workspace-http-addr=w:8080"}, "flag provided but not defined"},
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

// A service with HTTP routes (crdt's live sync) has an HTTP peer address beside its gRPC one:
// host:port or an http(s) URL, from the flag or its environment twin, read as a base URL.
func TestHTTPPeerAddress(t *testing.T) {
	gateway := []string{"--services=gateway"}
	for _, s := range services.All() {
		gateway = append(gateway, "--"+s.Name+"-addr="+s.Name+":9090")
	}
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"--crdt-http-addr=crdt:8080"}, "http://crdt:8080"},
		{nil, []string{"--crdt-http-addr=10.0.0.7:8080"}, "http://10.0.0.7:8080"},
		{nil, []string{"--crdt-http-addr=[::1]:8080"}, "http://[::1]:8080"},
		{nil, []string{"--crdt-http-addr=http://crdt.collab.svc.cluster.local:8080/"}, "http://crdt.collab.svc.cluster.local:8080"},
		{nil, []string{"--crdt-http-addr=https://sync.example.com"}, "https://sync.example.com"},
		{map[string]string{"COLLAB_CRDT_HTTP_ADDR": "crdt:8080"}, nil, "http://crdt:8080"},
		{map[string]string{"COLLAB_CRDT_HTTP_ADDR": "crdt:8080"}, []string{"--crdt-http-addr=other:81"}, "http://other:81"},
		{nil, nil, ""},
	} {
		cfg, err := parse(t, c.env, append(slices.Clone(gateway), c.args...)...)
		if err != nil {
			t.Errorf("%v %v: %v", c.env, c.args, err)
			continue
		}
		if got, ok := cfg.HTTPPeers["crdt"]; got != c.want || ok != (c.want != "") {
			t.Errorf("%v %v: HTTP peer %q (set %v), want %q", c.env, c.args, got, ok, c.want)
		}
		// The gateway alone proxies the routes of every module that has some (crdt's among them).
		var names []string
		for _, m := range cfg.RemoteRoutes() {
			names = append(names, m.Name)
			if m.Name == "crdt" && !slices.Equal(m.Routes, []string{"/v2/crdt/sync/"}) {
				t.Errorf("crdt's remote routes %v", m.Routes)
			}
		}
		if want := modulesWithRoutes(); !slices.Equal(names, want) {
			t.Errorf("remote routes of the gateway %v, want %v", names, want)
		}
	}
	// A process that runs crdt serves its routes; one without the gateway serves no one else's.
	gatewayAndCrdt := append([]string{"--services=gateway,crdt", "--internal-token=9c1e4f7a2b8d05e3f6a9c2d1b4e7f0a3"}, peerFlags("p:1", serviceNames("crdt")...)...)
	for _, args := range [][]string{nil, gatewayAndCrdt} {
		cfg, err := parse(t, nil, args...)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range cfg.RemoteRoutes() {
			if m.Name == "crdt" {
				t.Errorf("%v: crdt's routes proxied", args)
			}
		}
	}
	cfg, err := parse(t, nil, "--services=workspace", "--crdt-http-addr=crdt:8080", "--internal-token=9c1e4f7a2b8d05e3f6a9c2d1b4e7f0a3")
	if err != nil {
		t.Fatalf("an HTTP address the process does not need is harmless, like a gRPC one: %v", err)
	}
	if rr := cfg.RemoteRoutes(); len(rr) != 0 {
		t.Errorf("a process without the gateway proxies %v", rr)
	}
}

// A module's routes are path subtrees, each declared by one module.
func TestModuleRoutesAreChecked(t *testing.T) {
	for _, c := range []struct {
		mods []service.Module
		want string
	}{
		{[]service.Module{{Name: "a", Routes: []string{"/a"}}}, "not a path subtree"},
		{[]service.Module{{Name: "a", Routes: []string{"/x/"}}, {Name: "b", Routes: []string{"/x/"}}}, "services a and b both declare the route /x/"},
	} {
		if _, err := ParseFlags(c.mods, nil, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.mods, err, c.want)
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
	// The peer addresses, one per service, are one row: `--<service>-addr`.
	peers := map[string]bool{}
	for _, s := range serviceNames() {
		peers[s+"-addr"] = true
	}
	n := 0
	fs.VisitAll(func(fl *flag.Flag) {
		n++
		name := fl.Name
		if peers[name] {
			name = "<service>-addr"
		}
		if !strings.Contains(string(readme), "`--"+name+"`") {
			t.Errorf("README's configuration table does not list --%s (%s)", fl.Name, service.EnvName(fl.Name))
		}
	})
	if n < 20 {
		t.Fatalf("only %d flags declared", n)
	}
}

// Secrets set in the environment still configure the process, but never show in the usage
// text that -h and every mistyped flag print (into the terminal, or a container's log).
func TestSecretsStayOutOfTheUsage(t *testing.T) {
	env := map[string]string{
		"COLLAB_MONGO_URI": "mongodb://collab:mongo-pw-1@db.internal/collab", "COLLAB_INTERNAL_TOKEN": "9c1e4f7a2b8d05e3f6a9c2d1b4e7f0a3-tok-2",
		"COLLAB_SECRET_KEY": "master-key-3", "COLLAB_SMTP_PASSWORD": "smtp-pw-4",
		"COLLAB_DEV_WORKSPACE_TOKEN": "dev-ws-tok-5", "COLLAB_DEV_AUTH_TOKEN": "dev-auth-tok-6",
	}
	usage := captureStderr(t, func() {
		if _, err := parse(t, env, "--no-such-flag"); err == nil {
			t.Fatal("a mistyped flag was accepted")
		}
	})
	if !strings.Contains(usage, "-smtp-password") || !strings.Contains(usage, "-dev-auth-token") {
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
		c.SMTPPassword != env["COLLAB_SMTP_PASSWORD"] {
		t.Fatalf("environment secrets not applied: %+v", c)
	}
	c, err = parse(t, env, "--internal-token=0f9e8d7c6b5a49382716afbecd0123456789", "--smtp-password=from-flag")
	if err != nil || c.InternalToken != "0f9e8d7c6b5a49382716afbecd0123456789" || c.SMTPPassword != "from-flag" || c.SecretKey != "master-key-3" {
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
	published := &service.DevCredentials{WorkspaceID: "dev-workspace", WorkspaceToken: "dev-workspace-token", APIKey: "dev-api-key", AuthToken: "dev-auth-token", Published: true}
	var out strings.Builder
	PrintBanner(&out, &Process{HTTPAddr: "127.0.0.1:8080", Dev: published})
	for _, v := range []string{"dev-workspace-token", "dev-auth-token", "dev-api-key", "Console:  http://127.0.0.1:8080/console/"} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("the banner lacks the published %s:\n%s", v, out.String())
		}
	}
	custom := *published
	custom.WorkspaceToken, custom.AuthToken, custom.Published = "chosen-ws-secret", "chosen-auth-secret", false
	out.Reset()
	PrintBanner(&out, &Process{HTTPAddr: "127.0.0.1:8080", Dev: &custom})
	if strings.Contains(out.String(), "chosen-") {
		t.Fatalf("the banner prints chosen tokens:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "<the value of --dev-auth-token>") {
		t.Fatalf("the banner does not say where the token is:\n%s", out.String())
	}
	// A process without the gateway listens on HTTP for live sync only: no API, no curl.
	out.Reset()
	PrintBanner(&out, &Process{HTTPAddr: "127.0.0.1:8081", Dev: published, routesOnly: true})
	if strings.Contains(out.String(), "curl") || strings.Contains(out.String(), "HTTP API") || strings.Contains(out.String(), "Console") || !strings.Contains(out.String(), "live sync only") {
		t.Fatalf("the banner of a process without the gateway:\n%s", out.String())
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

// TLS flags come in whole sets, with their environment twins; mutual TLS makes the internal
// token optional in split mode, but a token given is still checked.
func TestTLSFlags(t *testing.T) {
	split := "--services=access"
	peers := []string{"--workspace-addr=w:1", "--documents-addr=d:1"}
	mtls := []string{"--grpc-tls-ca-file=ca.crt", "--grpc-tls-cert-file=s.crt", "--grpc-tls-key-file=s.key"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert-file=c.crt"}, "--tls-cert-file (COLLAB_TLS_CERT_FILE) and --tls-key-file (COLLAB_TLS_KEY_FILE) go together"},
		{[]string{"--tls-key-file=c.key"}, "go together"},
		{[]string{"--grpc-tls-ca-file=ca.crt"}, "--grpc-tls-ca-file (COLLAB_GRPC_TLS_CA_FILE), --grpc-tls-cert-file (COLLAB_GRPC_TLS_CERT_FILE) and --grpc-tls-key-file (COLLAB_GRPC_TLS_KEY_FILE) go together"},
		{[]string{"--grpc-tls-cert-file=s.crt", "--grpc-tls-key-file=s.key"}, "go together"},
		{append([]string{split}, peers...), "or turn on mutual TLS"},
		{append(append([]string{split, "--internal-token=short"}, peers...), mtls...), "--internal-token"},
	} {
		if _, err := parse(t, nil, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
	cfg, err := parse(t, nil, append(append([]string{split}, peers...), mtls...)...)
	if err != nil || !cfg.MutualTLS() || cfg.InternalToken != "" || cfg.GRPCTLSCertFile != "s.crt" {
		t.Fatalf("split mode with mutual TLS and no token: %+v, %v", cfg, err)
	}
	env := map[string]string{"COLLAB_TLS_CERT_FILE": "h.crt", "COLLAB_TLS_KEY_FILE": "h.key", "COLLAB_GRPC_TLS_CA_FILE": "ca.crt",
		"COLLAB_GRPC_TLS_CERT_FILE": "g.crt", "COLLAB_GRPC_TLS_KEY_FILE": "g.key"}
	cfg, err = parse(t, env, "--tls-key-file=flag.key")
	if err != nil || !cfg.HTTPS() || cfg.TLSCertFile != "h.crt" || cfg.TLSKeyFile != "flag.key" || cfg.GRPCTLSCAFile != "ca.crt" || cfg.GRPCTLSKeyFile != "g.key" {
		t.Fatalf("environment twins: %+v, %v", cfg, err)
	}
}

// modulesWithRoutes names the services with HTTP routes of their own, in the list's order.
func modulesWithRoutes() []string {
	var out []string
	for _, m := range services.All() {
		if len(m.Routes) > 0 {
			out = append(out, m.Name)
		}
	}
	return out
}
