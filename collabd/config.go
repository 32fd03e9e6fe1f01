package collabd

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/service"
	"github.com/collab/collab/internal/tracing"
)

// Gateway is the name of the HTTP gateway in --services; it is not a service module.
const Gateway = "gateway"

// Config is everything a process is told at start. Every flag has an environment twin
// (service.EnvName); the flag wins.
type Config struct {
	// Modules are every service the binary knows, in event-delivery order (services.All).
	Modules []service.Module
	// builds holds each module's build function, with its flags parsed.
	builds map[string]service.BuildFunc

	HTTPAddr string
	GRPCAddr string
	// MetricsAddr is where /metrics is served (Prometheus); empty: no metrics.
	MetricsAddr string
	MongoURI    string
	DataDir     string
	// Services to run here: module names and "gateway"; "all" means every one.
	Services []string
	// Peers are gRPC addresses of services not run here, by service name.
	Peers map[string]string
	// HTTPPeers are the HTTP base URLs ("http://crdt:8080") of services with HTTP routes
	// (service.Module.Routes) not run here, by service name: a gateway proxies their routes
	// there (--<name>-http-addr).
	HTTPPeers map[string]string

	// TLSCertFile and TLSKeyFile are the HTTP listener's certificate and key (PEM, re-read when
	// they change); both empty: plain HTTP.
	TLSCertFile, TLSKeyFile string
	// GRPCTLSCAFile, GRPCTLSCertFile and GRPCTLSKeyFile turn on mutual TLS between services:
	// the gRPC listener requires client certificates of the CA, and connections to peers present
	// the certificate and verify theirs. All empty: plaintext gRPC.
	GRPCTLSCAFile, GRPCTLSCertFile, GRPCTLSKeyFile string
	// GRPCMaxConnectionAge is how long a connection to the gRPC listener lasts before the
	// server asks the client to open another (GOAWAY; calls in flight get GRPCConnectionGrace):
	// a replaced certificate or a CA dropped from the bundle then holds for every connection
	// within that time, not only new ones. 0: connections last until closed.
	GRPCMaxConnectionAge time.Duration

	// HTTPMaxConns and HTTPMaxConnsPerAddress cap the HTTP listener's open connections, in all
	// and per client address (limitListeners); 0: no cap.
	HTTPMaxConns, HTTPMaxConnsPerAddress int
	// AllowPublishedDevCredentials lets the development workspace keep its published
	// credentials while a listener is reachable beyond loopback (checkExposure).
	AllowPublishedDevCredentials bool

	AuthCacheTTL  time.Duration
	InternalToken string
	// ForwarderToken is the gateway's proof of the X-Forwarded-For it passes on
	// (authn.HeaderForwarder), shared by the gateway and the services; empty: the internal
	// token serves, where the gateway has one.
	ForwarderToken string
	SecretKey      string
	PublicURL      string

	SMTPAddr, SMTPUsername, SMTPPassword, SMTPFrom string
	// MailDir receives the emails as files when no SMTP server is set; empty: a new private
	// directory under the OS temporary directory.
	MailDir string

	LogFormat string
	LogLevel  slog.Level

	// OTLPEndpoint is the OpenTelemetry collector spans go to (internal/tracing.Config);
	// empty: no tracing. TraceSampleRatio is the share of new traces recorded.
	OTLPEndpoint     string
	TraceSampleRatio float64

	// WakeupURL is the NATS server (or cluster seeds) replicas send each other wake-ups through
	// (internal/wakeup); empty: wake-ups stay in the process and rooms poll the store as
	// without replicas. WakeupToken authenticates to it, WakeupCAFile verifies its certificate
	// (tls:// URLs). WakeupSafetyPoll is how often, with an engine, a loaded room still reads
	// the store in case a wake-up was lost.
	WakeupURL, WakeupToken, WakeupCAFile string
	WakeupSafetyPoll                     time.Duration
}

// HTTPS reports whether the HTTP listener serves TLS.
func (c Config) HTTPS() bool { return c.TLSCertFile != "" }

// MutualTLS reports whether gRPC between services runs over mutual TLS.
func (c Config) MutualTLS() bool { return c.GRPCTLSCAFile != "" }

// Runs reports whether the process runs the named service or the gateway.
func (c Config) Runs(name string) bool { return slices.Contains(c.Services, name) }

// Module returns the module of that name.
func (c Config) Module(name string) (service.Module, bool) {
	i := slices.IndexFunc(c.Modules, func(m service.Module) bool { return m.Name == name })
	if i < 0 {
		return service.Module{}, false
	}
	return c.Modules[i], true
}

// Names are the modules' names, in list order.
func (c Config) Names() []string {
	out := make([]string, len(c.Modules))
	for i, m := range c.Modules {
		out[i] = m.Name
	}
	return out
}

// ParseFlags reads the configuration of a process that can run the given modules from args
// (without the program name) and the environment.
func ParseFlags(modules []service.Module, args []string, getenv func(string) string) (Config, error) {
	c := Config{Modules: modules, builds: map[string]service.BuildFunc{}}
	fs, f, apply := c.declareFlags(getenv)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if err := f.Finish(); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if err := apply(); err != nil {
		return c, err
	}
	if c.MongoURI != "" && c.DataDir != "" {
		return c, fmt.Errorf("--mongo-uri and --data-dir exclude each other")
	}
	if err := c.checkRoutes(); err != nil {
		return c, err
	}
	if err := c.checkPeers(); err != nil {
		return c, err
	}
	if err := c.checkTLS(); err != nil {
		return c, err
	}
	return c, c.checkInternalToken()
}

// declareFlags declares the platform's flags and every module's on a new flag set, and returns
// the function that copies the parsed values into c. The platform's flags come in groups, each
// declared with the function that copies its values.
func (c *Config) declareFlags(getenv func(string) string) (*flag.FlagSet, *service.Flags, func() error) {
	fs := flag.NewFlagSet("collabd", flag.ContinueOnError)
	f := service.NewFlags(fs, getenv)
	copies := []func() error{c.declareListenFlags(f), c.declareSecretFlags(f), c.declareTopologyFlags(f), c.declareMailAndLogFlags(f), c.declareWakeupFlags(f)}
	for _, m := range c.Modules {
		if m.Setup != nil {
			c.builds[m.Name] = m.Setup(f)
		}
	}
	return fs, f, func() error {
		for _, copyValues := range copies {
			if err := copyValues(); err != nil {
				return err
			}
		}
		return nil
	}
}

// declareListenFlags declares what the process listens on and how: addresses, TLS, connection
// caps, metrics and tracing.
func (c *Config) declareListenFlags(f *service.Flags) func() error {
	httpAddr := f.String("http-addr", "127.0.0.1:8080", "HTTP listen address: the API where the gateway runs, and the routes of services that serve their own (crdt's live sync)")
	grpcAddr := f.String("grpc-addr", "127.0.0.1:9090", "gRPC listen address for internal callers, reflection on; empty: in-process only")
	metricsAddr := f.String("metrics-addr", "", "listen address of the Prometheus /metrics endpoint (e.g. 127.0.0.1:9100), apart from the HTTP API; empty: no metrics")
	otlpEndpoint := f.String("otlp-endpoint", "", "OpenTelemetry collector (OTLP over gRPC) that receives the traces: host:port or https://host:port (TLS), http://host:port (plain text); empty: no tracing")
	sampleRatio := 1.0
	f.Func("trace-sample-ratio", "1", "share of new traces recorded with --otlp-endpoint, 0 to 1; a call whose caller's trace was sampled (or not) follows it", func(v string) error {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || !(r >= 0 && r <= 1) { // NaN fails every comparison: refused too
			return fmt.Errorf("want a number from 0 to 1, got %q", v)
		}
		sampleRatio = r
		return nil
	})
	tlsCert := f.String("tls-cert-file", "", "PEM certificate (chain) the HTTP listener serves over TLS, with --tls-key-file; re-read when the file changes; empty: plain HTTP")
	tlsKey := f.String("tls-key-file", "", "PEM private key of --tls-cert-file")
	grpcCA := f.String("grpc-tls-ca-file", "", "PEM CA bundle of mutual TLS between services, with --grpc-tls-cert-file and --grpc-tls-key-file: the gRPC listener requires client certificates it verifies, and connections to peers verify theirs; re-read when the files change; empty: plaintext gRPC")
	grpcCert := f.String("grpc-tls-cert-file", "", "PEM certificate this process presents in mutual TLS, as server and as client; its SANs must hold the host names (or IPs) peers dial it at")
	grpcKey := f.String("grpc-tls-key-file", "", "PEM private key of --grpc-tls-cert-file")
	maxConnAge := f.Duration("grpc-max-connection-age", 30*time.Minute, "how long a connection to the gRPC listener lasts before the server asks the client to reconnect (in-flight calls get a minute to finish): under mutual TLS, a replaced certificate or a CA dropped from the bundle then holds for open connections within that time; 0: until closed; at least 1s")
	maxConns, maxConnsPerAddr := 25000, 2000
	f.Func("http-max-conns", strconv.Itoa(maxConns), "most connections the HTTP listener holds open at once (live sync's WebSockets included); past it new ones wait; 0: no cap",
		service.IntFunc(&maxConns, 0, -1))
	f.Func("http-max-conns-per-address", strconv.Itoa(maxConnsPerAddr), "most connections the HTTP listener holds open from one client address; past it new ones are closed at once; behind a proxy every client has the proxy's address: raise it or use 0 (no cap) and cap at the proxy",
		service.IntFunc(&maxConnsPerAddr, 0, -1))
	allowPublished := false
	f.Func("allow-published-dev-credentials", "false", "start even though the development workspace has its published credentials and a listener (--http-addr, --grpc-addr) is reachable beyond loopback: anyone who reaches it is then its owner",
		func(v string) (err error) {
			allowPublished, err = service.ParseSwitch(v)
			return err
		})
	return func() error {
		c.HTTPAddr, c.GRPCAddr, c.MetricsAddr = *httpAddr, *grpcAddr, *metricsAddr
		c.TLSCertFile, c.TLSKeyFile = *tlsCert, *tlsKey
		c.GRPCTLSCAFile, c.GRPCTLSCertFile, c.GRPCTLSKeyFile = *grpcCA, *grpcCert, *grpcKey
		c.GRPCMaxConnectionAge = *maxConnAge
		c.HTTPMaxConns, c.HTTPMaxConnsPerAddress, c.AllowPublishedDevCredentials = maxConns, maxConnsPerAddr, allowPublished
		c.OTLPEndpoint, c.TraceSampleRatio = *otlpEndpoint, sampleRatio
		if c.OTLPEndpoint != "" {
			if _, err := tracing.ParseEndpoint(c.OTLPEndpoint); err != nil {
				return fmt.Errorf("--otlp-endpoint (%s): %w", service.EnvName("otlp-endpoint"), err)
			}
		}
		return nil
	}
}

// declareSecretFlags declares the shared secrets and what callers are trusted with.
func (c *Config) declareSecretFlags(f *service.Flags) func() error {
	ttl := f.Duration("auth-cache-ttl", 5*time.Second, "how long services other than the authenticating one trust a checked credential")
	internalToken := f.Secret("internal-token", "", "shared secret of service-to-service calls, required on internal gRPC operations; at least 32 random characters (openssl rand -hex 32); required when services run in several processes without --grpc-tls-* (with mutual TLS and no token, a peer's verified certificate is the credential; a token given stays required), random per process otherwise")
	forwarderToken := f.Secret("forwarder-token", "", "shared secret the gateway sends on its calls to vouch for the client address it passes on (X-Forwarded-For, which services rate-limit public operations by); it opens nothing else, so a gateway without the internal token can hold it; the same in the gateway and every service; at least 32 random characters; empty: the internal token vouches (a gateway without either passes no client address, and its callers share its own)")
	secretKey := f.Secret("secret-key", "", "master secret for page tokens; empty: kept in MongoDB, or random per run on the memory store")
	publicURL := f.String("public-url", "", "base URL of the HTTP API as callers reach it, for links in emails")
	return func() error {
		c.AuthCacheTTL, c.InternalToken, c.SecretKey, c.PublicURL = *ttl, *internalToken, *secretKey, *publicURL
		c.ForwarderToken = *forwarderToken
		if c.ForwarderToken != "" {
			if err := authn.CheckInternalToken(c.ForwarderToken); err != nil {
				return fmt.Errorf("--forwarder-token (%s): %w", service.EnvName("forwarder-token"), err)
			}
		}
		return nil
	}
}

// declareTopologyFlags declares where the data lives, which services this process runs and
// where the others are.
func (c *Config) declareTopologyFlags(f *service.Flags) func() error {
	names := c.Names()
	mongoURI := f.Secret("mongo-uri", "", "MongoDB URI; empty: memory store")
	dataDir := f.String("data-dir", "", "keep data in this directory on an embedded MongoDB-wire server")
	services := f.String("services", "all", "comma-separated services to run: all, gateway, "+strings.Join(names, ", "))
	peers := map[string]*string{}
	for _, s := range names {
		peers[s] = f.String(s+"-addr", "", "gRPC address of the "+s+" service when it runs elsewhere")
	}
	httpPeers := map[string]*string{}
	for _, m := range c.Modules {
		if len(m.Routes) > 0 {
			httpPeers[m.Name] = f.String(m.Name+"-http-addr", "", "HTTP address (host:port or http(s) URL) of the "+m.Name+
				" service's processes when it runs elsewhere: the gateway proxies its routes "+strings.Join(m.Routes, ", ")+" there; empty: they answer 503")
		}
	}
	return func() error {
		c.MongoURI, c.DataDir = *mongoURI, *dataDir
		var err error
		if c.Services, err = c.parseServices(*services); err != nil {
			return err
		}
		c.Peers = map[string]string{}
		for s, addr := range peers {
			if *addr != "" {
				c.Peers[s] = *addr
			}
		}
		c.HTTPPeers = map[string]string{}
		for s, addr := range httpPeers {
			if *addr == "" {
				continue
			}
			u, err := parseHTTPAddr(*addr)
			if err != nil {
				return fmt.Errorf("--%s-http-addr (%s): %w", s, service.EnvName(s+"-http-addr"), err)
			}
			c.HTTPPeers[s] = u
		}
		return nil
	}
}

// declareWakeupFlags declares the wake-up engine replicas share (docs/operations.md,
// "Wake-ups between replicas").
func (c *Config) declareWakeupFlags(f *service.Flags) func() error {
	addr := f.String("wakeup-url", "", "NATS server replicas send each other wake-ups through (nats://host:4222 or tls://host:4222; several comma-separated for a cluster's seeds): an edit on one replica reaches the clients of the others at once instead of at their next poll of the store; empty: wake-ups stay in this process and live-sync rooms poll the store every 250ms")
	token := f.Secret("wakeup-token", "", "authorization token of the --wakeup-url server; empty: none")
	ca := f.String("wakeup-tls-ca-file", "", "PEM CA bundle that verifies the --wakeup-url server's certificate (tls:// URLs); empty: the system's roots")
	poll := f.Duration("wakeup-safety-poll", 5*time.Second, "with --wakeup-url, how often a loaded live-sync room still reads the store in case a wake-up was lost (its finds are counted: collab_wakeup_safety_poll_finds_total); 1s to 10m")
	return func() error {
		c.WakeupURL, c.WakeupToken, c.WakeupCAFile, c.WakeupSafetyPoll = strings.TrimSpace(*addr), *token, *ca, *poll
		return c.checkWakeup()
	}
}

// checkWakeup refuses an engine's address that is not one, credentials or a CA for no engine,
// and a safety poll that would hammer the store or leave lost wake-ups unnoticed.
func (c Config) checkWakeup() error {
	if c.WakeupURL == "" {
		if c.WakeupToken != "" || c.WakeupCAFile != "" {
			return fmt.Errorf("--wakeup-token (%s) and --wakeup-tls-ca-file (%s) need --wakeup-url (%s)",
				service.EnvName("wakeup-token"), service.EnvName("wakeup-tls-ca-file"), service.EnvName("wakeup-url"))
		}
		return nil
	}
	for _, raw := range strings.Split(c.WakeupURL, ",") {
		u, err := url.Parse(strings.TrimSpace(raw))
		switch {
		case err != nil || u.Host == "" || (u.Scheme != "nats" && u.Scheme != "tls"):
			return fmt.Errorf("--wakeup-url (%s): %q is not a NATS address: want nats://host:port or tls://host:port", service.EnvName("wakeup-url"), raw)
		case u.User != nil:
			return fmt.Errorf("--wakeup-url (%s): credentials do not go in the address; give the token with --wakeup-token (%s)", service.EnvName("wakeup-url"), service.EnvName("wakeup-token"))
		}
	}
	if p := c.WakeupSafetyPoll; p < time.Second || p > 10*time.Minute {
		return fmt.Errorf("--wakeup-safety-poll (%s): %s; want 1s to 10m", service.EnvName("wakeup-safety-poll"), p)
	}
	return nil
}

// declareMailAndLogFlags declares how emails are sent and how the process logs.
func (c *Config) declareMailAndLogFlags(f *service.Flags) func() error {
	smtpAddr := f.String("smtp-addr", "", "SMTP server host:port; empty: emails are written to --mail-dir")
	smtpUser := f.String("smtp-username", "", "SMTP username")
	smtpPassword := f.Secret("smtp-password", "", "SMTP password")
	smtpFrom := f.String("smtp-from", "collab@localhost", "sender address of emails")
	mailDir := f.String("mail-dir", "", "without --smtp-addr, write each email as a file (mode 0600) here; empty: a new 0700 directory under the OS temporary directory")
	logFormat := f.String("log-format", "text", "text or json")
	level := f.String("log-level", "info", "debug, info, warn or error")
	return func() error {
		c.SMTPAddr, c.SMTPUsername, c.SMTPPassword, c.SMTPFrom, c.MailDir = *smtpAddr, *smtpUser, *smtpPassword, *smtpFrom, *mailDir
		c.LogFormat = *logFormat
		if err := c.LogLevel.UnmarshalText([]byte(*level)); err != nil {
			return fmt.Errorf("--log-level: %w", err)
		}
		if c.LogFormat != "text" && c.LogFormat != "json" {
			return fmt.Errorf("--log-format: want text or json, got %q", c.LogFormat)
		}
		return nil
	}
}

// Needs returns the services the named service (or the gateway) calls: directly, to
// authenticate its callers, and to deliver the events it publishes.
func (c Config) Needs(name string) []string {
	var out []string
	add := func(s string) {
		if s != name && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if name == Gateway {
		for _, m := range c.Modules {
			if m.Gateway != nil {
				add(m.Name)
			}
		}
		return out
	}
	m, ok := c.Module(name)
	if !ok {
		return nil
	}
	for _, a := range c.Modules {
		if a.Authenticates {
			add(a.Name)
		}
	}
	for _, s := range m.Calls {
		add(s)
	}
	for _, s := range c.ConsumersOf(m.Publishes) {
		add(s)
	}
	return out
}

// Consumers are the services that consume an event type, in the order of the module list.
func (c Config) Consumers(eventType string) []string {
	var out []string
	for _, m := range c.Modules {
		if service.ConsumesType(m.Consumes, eventType) {
			out = append(out, m.Name)
		}
	}
	return out
}

// ConsumersOf are the services that consume any of the published types or patterns: the lanes
// of a producer's outbox.
func (c Config) ConsumersOf(published []string) []string {
	var out []string
	for _, m := range c.Modules {
		for _, p := range published {
			if service.Overlap(m.Consumes, p) {
				out = append(out, m.Name)
				break
			}
		}
	}
	return out
}

func (c Config) checkPeers() error {
	for _, s := range c.Names() {
		_, peer := c.Peers[s]
		if c.Runs(s) && peer {
			return fmt.Errorf("service %s runs here and also has a peer address", s)
		}
		if _, peer := c.HTTPPeers[s]; c.Runs(s) && peer {
			return fmt.Errorf("service %s runs here and also has an HTTP peer address (--%s-http-addr): it serves its routes itself", s, s)
		}
	}
	for _, s := range append([]string{Gateway}, c.Names()...) {
		if !c.Runs(s) {
			continue
		}
		for _, n := range c.Needs(s) {
			if !c.Runs(n) && c.Peers[n] == "" {
				return fmt.Errorf("the %s service needs the %s service: run it here or set --%s-addr", s, n, n)
			}
		}
	}
	return nil
}

// checkRoutes refuses modules whose declared HTTP routes are not path subtrees or collide:
// the process mounts them on one mux.
func (c Config) checkRoutes() error {
	owner := map[string]string{}
	for _, m := range c.Modules {
		for _, p := range m.Routes {
			if err := service.CheckRoutePrefix(p); err != nil {
				return fmt.Errorf("service %s: %w", m.Name, err)
			}
			if o, ok := owner[p]; ok {
				return fmt.Errorf("services %s and %s both declare the route %s", o, m.Name, p)
			}
			owner[p] = m.Name
		}
	}
	return nil
}

// RemoteRoutes are the modules whose HTTP routes this process's gateway serves for processes
// that run them: the modules with routes that it does not run, when it runs the gateway.
func (c Config) RemoteRoutes() []service.Module {
	if !c.Runs(Gateway) {
		return nil
	}
	var out []service.Module
	for _, m := range c.Modules {
		if len(m.Routes) > 0 && !c.Runs(m.Name) {
			out = append(out, m)
		}
	}
	return out
}

// parseHTTPAddr reads an HTTP peer address, host:port or an http(s) URL without path, query
// or credentials, as a base URL.
func parseHTTPAddr(v string) (string, error) {
	const want = "want host:port or an http(s) URL such as http://crdt:8080"
	if !strings.Contains(v, "://") {
		host, port, err := net.SplitHostPort(v)
		if err != nil || host == "" {
			return "", fmt.Errorf("%s, got %q", want, v)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("%s, got %q (bad port)", want, v)
		}
		return "http://" + net.JoinHostPort(host, port), nil
	}
	u, err := url.Parse(v)
	switch {
	case err != nil:
		return "", fmt.Errorf("%s: %w", want, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("%s, got the scheme %q", want, u.Scheme)
	case u.Hostname() == "":
		return "", fmt.Errorf("%s, got no host in %q", want, v)
	case u.User != nil:
		return "", fmt.Errorf("%s, got credentials in the URL", want)
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.Fragment != "", u.Opaque != "":
		return "", fmt.Errorf("%s, got a path, query or fragment in %q: the routes keep their own paths", want, v)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("%s, got %q (bad port)", want, v)
		}
	}
	return u.Scheme + "://" + u.Host, nil
}

// AllInOne reports whether the process runs every service, so that no other process ever
// needs to call its internal operations.
func (c Config) AllInOne() bool {
	for _, s := range c.Names() {
		if !c.Runs(s) {
			return false
		}
	}
	return true
}

// checkTLS refuses half a TLS setup, which would otherwise quietly serve plaintext, and a
// connection age that would churn connections.
func (c Config) checkTLS() error {
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return fmt.Errorf("--tls-cert-file (%s) and --tls-key-file (%s) go together: set both to serve HTTPS, or neither",
			service.EnvName("tls-cert-file"), service.EnvName("tls-key-file"))
	}
	set := 0
	for _, v := range []string{c.GRPCTLSCAFile, c.GRPCTLSCertFile, c.GRPCTLSKeyFile} {
		if v != "" {
			set++
		}
	}
	if set != 0 && set != 3 {
		return fmt.Errorf("--grpc-tls-ca-file (%s), --grpc-tls-cert-file (%s) and --grpc-tls-key-file (%s) go together: set all three for mutual TLS between services, or none",
			service.EnvName("grpc-tls-ca-file"), service.EnvName("grpc-tls-cert-file"), service.EnvName("grpc-tls-key-file"))
	}
	if a := c.GRPCMaxConnectionAge; a < 0 || (a > 0 && a < time.Second) {
		return fmt.Errorf("--grpc-max-connection-age (%s): %s; want 0 (no limit) or at least 1s", service.EnvName("grpc-max-connection-age"), a)
	}
	return nil
}

// GRPCConnectionGrace is how long calls in flight on a connection past
// GRPCMaxConnectionAge may still run: longer than any internal call (an outbox delivery's 30s).
const GRPCConnectionGrace = time.Minute

// checkInternalToken fails closed: a process that runs services beside other processes cannot
// start without a strong shared token, and a token given is never a placeholder. The all-in-one
// process (and a gateway, which serves no internal operation) may go without: it then uses a
// random secret of its own (Start). With mutual TLS and no token, a peer's verified certificate
// (with the internal connection's marker, authn.WithVerifiedPeers) is the credential: the token
// is then optional; a token given is checked, and stays the only credential (Start).
func (c Config) checkInternalToken() error {
	runsService := false
	for _, s := range c.Names() {
		runsService = runsService || c.Runs(s)
	}
	if c.InternalToken == "" && (!runsService || c.AllInOne() || c.MutualTLS()) {
		return nil
	}
	if err := authn.CheckInternalToken(c.InternalToken); err != nil {
		if c.InternalToken == "" {
			return fmt.Errorf("services split across processes call each other's internal operations: %w (or turn on mutual TLS between them with --grpc-tls-ca-file, --grpc-tls-cert-file and --grpc-tls-key-file)", err)
		}
		return fmt.Errorf("--internal-token: %w", err)
	}
	return nil
}

func (c Config) parseServices(v string) ([]string, error) {
	known := append([]string{Gateway}, c.Names()...)
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
