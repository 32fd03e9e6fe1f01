package collabd

import (
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/collab/collab/services/workspace"
)

// ServiceNames are the services one process can run, besides the gateway.
var ServiceNames = []string{"workspace", "documents", "users", "access"}

// DataServices hold tenant data and receive lifecycle events, in delivery order: documents
// first, so a migration that conflicts there stops before any other service moves data.
var DataServices = []string{"documents", "users", "access"}

// dependencies are the services each one calls (besides workspace, which every service but
// the gateway needs for authentication): direct calls, and event delivery to every data service.
var dependencies = map[string][]string{
	"gateway":   {"workspace", "documents", "users", "access"},
	"documents": DataServices,
	"users":     DataServices,
	"access":    {"documents"},
}

// Config is everything a process is told at start. Every field has a flag and an environment
// twin (COLLAB_...); the flag wins.
type Config struct {
	HTTPAddr string
	GRPCAddr string
	MongoURI string
	DataDir  string
	// Services to run here: service names and "gateway"; "all" means every one.
	Services []string
	// Peers are gRPC addresses of services not run here, by service name.
	Peers map[string]string

	RateLimits    workspace.RateLimits
	AuthCacheTTL  time.Duration
	InternalToken string
	SecretKey     string
	PublicURL     string
	EmailGrace    time.Duration

	DevWorkspace bool
	Dev          workspace.DevCredentials

	SMTPAddr, SMTPUsername, SMTPPassword, SMTPFrom string
	// MailDir receives the emails as files when no SMTP server is set; empty: a new private
	// directory under the OS temporary directory.
	MailDir string

	LogFormat string
	LogLevel  slog.Level
}

// Runs reports whether the process runs the named service or "gateway".
func (c Config) Runs(name string) bool { return slices.Contains(c.Services, name) }

// ParseFlags reads the configuration from args (without the program name) and the
// environment.
func ParseFlags(args []string, getenv func(string) string) (Config, error) {
	fs := flag.NewFlagSet("collabd", flag.ContinueOnError)
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	var c Config
	var envErr error
	// Secrets take their environment value after parsing, not as their flag's default: flag
	// prints defaults in -h and in the usage it writes after any parse error, which would put
	// them in the terminal or the process log.
	secretEnv := map[string]string{} // flag name -> environment variable
	secret := func(p *string, name, envName, def, usage string) {
		fs.StringVar(p, name, def, usage)
		secretEnv[name] = envName
	}
	durationEnv := func(name string, def time.Duration) time.Duration {
		v := getenv(name)
		if v == "" {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil && envErr == nil {
			envErr = fmt.Errorf("%s=%q is not a duration (e.g. 5s, 168h)", name, v)
		}
		return d
	}
	fs.StringVar(&c.HTTPAddr, "http-addr", env("COLLAB_HTTP_ADDR", "127.0.0.1:8080"), "HTTP API listen address (COLLAB_HTTP_ADDR)")
	fs.StringVar(&c.GRPCAddr, "grpc-addr", env("COLLAB_GRPC_ADDR", "127.0.0.1:9090"), "gRPC listen address for internal callers, reflection on; empty: in-process only (COLLAB_GRPC_ADDR)")
	secret(&c.MongoURI, "mongo-uri", "COLLAB_MONGO_URI", "", "MongoDB URI; empty: memory store (COLLAB_MONGO_URI)")
	fs.StringVar(&c.DataDir, "data-dir", env("COLLAB_DATA_DIR", ""), "keep data in this directory on an embedded MongoDB-wire server (COLLAB_DATA_DIR)")
	services := fs.String("services", env("COLLAB_SERVICES", "all"), "comma-separated services to run: all, gateway, "+strings.Join(ServiceNames, ", ")+" (COLLAB_SERVICES)")
	peers := map[string]*string{}
	for _, s := range ServiceNames {
		envName := "COLLAB_" + strings.ToUpper(s) + "_ADDR"
		peers[s] = fs.String(s+"-addr", env(envName, ""), "gRPC address of the "+s+" service when it runs elsewhere ("+envName+")")
	}
	rate := fs.String("rate-limit", env("COLLAB_RATE_LIMIT", ""), "off, or per-minute limits like createWorkspace=10,getWorkspace=60,emailStatus=20 (COLLAB_RATE_LIMIT)")
	fs.DurationVar(&c.AuthCacheTTL, "auth-cache-ttl", durationEnv("COLLAB_AUTH_CACHE_TTL", 5*time.Second), "how long services other than workspace trust a checked credential (COLLAB_AUTH_CACHE_TTL)")
	secret(&c.InternalToken, "internal-token", "COLLAB_INTERNAL_TOKEN", "", "shared secret required on internal gRPC operations (COLLAB_INTERNAL_TOKEN)")
	secret(&c.SecretKey, "secret-key", "COLLAB_SECRET_KEY", "", "master secret for page tokens; empty: kept in MongoDB, or random per run on the memory store (COLLAB_SECRET_KEY)")
	fs.StringVar(&c.PublicURL, "public-url", env("COLLAB_PUBLIC_URL", ""), "base URL of the HTTP API as callers reach it, for links in emails (COLLAB_PUBLIC_URL)")
	fs.DurationVar(&c.EmailGrace, "email-grace-period", durationEnv("COLLAB_EMAIL_GRACE_PERIOD", workspace.DefaultEmailGracePeriod), "how long API keys work before the owner email is verified (COLLAB_EMAIL_GRACE_PERIOD)")
	dev := fs.String("dev-workspace", env("COLLAB_DEV_WORKSPACE", ""), "create the development workspace: true or false; default true unless --mongo-uri is set (COLLAB_DEV_WORKSPACE)")
	fs.StringVar(&c.Dev.WorkspaceID, "dev-workspace-id", env("COLLAB_DEV_WORKSPACE_ID", "dev-workspace"), "development workspace id (COLLAB_DEV_WORKSPACE_ID)")
	secret(&c.Dev.WorkspaceToken, "dev-workspace-token", "COLLAB_DEV_WORKSPACE_TOKEN", "dev-workspace-token", "development workspace auth token (COLLAB_DEV_WORKSPACE_TOKEN)")
	fs.StringVar(&c.Dev.APIKey, "dev-api-key", env("COLLAB_DEV_API_KEY", "dev-api-key"), "development API key (COLLAB_DEV_API_KEY)")
	secret(&c.Dev.AuthToken, "dev-auth-token", "COLLAB_DEV_AUTH_TOKEN", "dev-auth-token", "development API key's auth token (COLLAB_DEV_AUTH_TOKEN)")
	fs.StringVar(&c.Dev.OwnerEmail, "dev-owner-email", env("COLLAB_DEV_OWNER_EMAIL", "dev@localhost"), "development workspace owner email (COLLAB_DEV_OWNER_EMAIL)")
	fs.StringVar(&c.SMTPAddr, "smtp-addr", env("COLLAB_SMTP_ADDR", ""), "SMTP server host:port; empty: emails are written to --mail-dir (COLLAB_SMTP_ADDR)")
	fs.StringVar(&c.SMTPUsername, "smtp-username", env("COLLAB_SMTP_USERNAME", ""), "SMTP username (COLLAB_SMTP_USERNAME)")
	secret(&c.SMTPPassword, "smtp-password", "COLLAB_SMTP_PASSWORD", "", "SMTP password (COLLAB_SMTP_PASSWORD)")
	fs.StringVar(&c.SMTPFrom, "smtp-from", env("COLLAB_SMTP_FROM", "collab@localhost"), "sender address of emails (COLLAB_SMTP_FROM)")
	fs.StringVar(&c.MailDir, "mail-dir", env("COLLAB_MAIL_DIR", ""), "without --smtp-addr, write each email as a file (mode 0600) here; empty: a new 0700 directory under the OS temporary directory (COLLAB_MAIL_DIR)")
	fs.StringVar(&c.LogFormat, "log-format", env("COLLAB_LOG_FORMAT", "text"), "text or json (COLLAB_LOG_FORMAT)")
	level := fs.String("log-level", env("COLLAB_LOG_LEVEL", "info"), "debug, info, warn or error (COLLAB_LOG_LEVEL)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if envErr != nil {
		return c, envErr
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for name, envName := range secretEnv {
		if v := getenv(envName); v != "" && !given[name] {
			if err := fs.Set(name, v); err != nil {
				return c, fmt.Errorf("%s: %w", envName, err)
			}
		}
	}
	var err error
	if c.Services, err = parseServices(*services); err != nil {
		return c, err
	}
	c.Peers = map[string]string{}
	for s, addr := range peers {
		if *addr != "" {
			c.Peers[s] = *addr
		}
	}
	if c.RateLimits, err = ParseRateLimits(*rate); err != nil {
		return c, err
	}
	switch strings.ToLower(*dev) {
	case "":
		c.DevWorkspace = c.MongoURI == ""
	case "true", "1", "on", "yes":
		c.DevWorkspace = true
	case "false", "0", "off", "no":
		c.DevWorkspace = false
	default:
		return c, fmt.Errorf("--dev-workspace: want true or false, got %q", *dev)
	}
	if err := c.LogLevel.UnmarshalText([]byte(*level)); err != nil {
		return c, fmt.Errorf("--log-level: %w", err)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return c, fmt.Errorf("--log-format: want text or json, got %q", c.LogFormat)
	}
	if c.MongoURI != "" && c.DataDir != "" {
		return c, fmt.Errorf("--mongo-uri and --data-dir exclude each other")
	}
	return c, c.checkPeers()
}

func (c Config) checkPeers() error {
	for _, s := range ServiceNames {
		_, peer := c.Peers[s]
		if c.Runs(s) && peer {
			return fmt.Errorf("service %s runs here and also has a peer address", s)
		}
	}
	for _, s := range append([]string{"gateway"}, ServiceNames...) {
		if !c.Runs(s) {
			continue
		}
		needs := dependencies[s]
		if s != "gateway" && s != "workspace" {
			needs = append([]string{"workspace"}, needs...)
		}
		for _, n := range needs {
			if !c.Runs(n) && c.Peers[n] == "" {
				return fmt.Errorf("the %s service needs the %s service: run it here or set --%s-addr", s, n, n)
			}
		}
	}
	return nil
}

func parseServices(v string) ([]string, error) {
	known := append([]string{"gateway"}, ServiceNames...)
	var out []string
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(strings.ToLower(s))
		switch {
		case s == "":
		case s == "all":
			out = append(out, known...)
		case slices.Contains(known, s):
			out = append(out, s)
		default:
			return nil, fmt.Errorf("--services: unknown service %q (known: all, %s)", s, strings.Join(known, ", "))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--services: nothing to run")
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// ParseRateLimits reads "off", "" (defaults) or a list such as "createWorkspace=10,emailStatus=5"
// (calls per minute; names not listed keep their defaults; 0 means unlimited).
func ParseRateLimits(v string) (workspace.RateLimits, error) {
	limits := workspace.DefaultRateLimits
	v = strings.TrimSpace(v)
	switch strings.ToLower(v) {
	case "", "on", "default":
		return limits, nil
	case "off":
		return workspace.RateLimits{}, nil
	}
	for _, part := range strings.Split(v, ",") {
		name, num, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.Atoi(strings.TrimSpace(num))
		if !ok || err != nil || n < 0 {
			return limits, fmt.Errorf("--rate-limit: %q is not name=calls-per-minute", part)
		}
		switch strings.TrimSpace(name) {
		case "createWorkspace":
			limits.CreateWorkspace = n
		case "getWorkspace":
			limits.GetWorkspace = n
		case "emailStatus":
			limits.EmailStatus = n
		default:
			return limits, fmt.Errorf("--rate-limit: unknown limit %q (createWorkspace, getWorkspace, emailStatus)", name)
		}
	}
	return limits, nil
}
