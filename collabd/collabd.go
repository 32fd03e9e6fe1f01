package collabd

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"
	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"

	"github.com/collab/collab/console"
	"github.com/collab/collab/gateway"
	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/email"
	"github.com/collab/collab/internal/embedmongo"
	"github.com/collab/collab/internal/grpcserver"
	"github.com/collab/collab/internal/inproc"
	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/logging"
	"github.com/collab/collab/internal/metrics"
	"github.com/collab/collab/internal/mongodb"
	"github.com/collab/collab/internal/outbox"
	"github.com/collab/collab/internal/service"
	"github.com/collab/collab/internal/tlsfiles"
	"github.com/collab/collab/internal/tracing"
	"github.com/collab/collab/internal/wakeup"
)

// Deps replaces parts of the process for tests; zero values mean the real ones.
type Deps struct {
	Clock     clock.Clock
	Email     email.Sender
	LogOutput io.Writer
	// SpanExporter turns tracing on with spans exported synchronously to it, whatever
	// --otlp-endpoint says (tests: tracetest.InMemoryExporter).
	SpanExporter sdktrace.SpanExporter
}

// Process is a running collab process.
type Process struct {
	// HTTPAddr and GRPCAddr are the bound addresses ("" when not listening).
	HTTPAddr string
	GRPCAddr string
	// MetricsAddr is the bound address of /metrics ("" without --metrics-addr).
	MetricsAddr string
	// Dev holds the development workspace's credentials when it was created.
	Dev *service.DevCredentials
	// routesOnly is set when the HTTP listener serves services' own routes (live sync) but no
	// gateway: not the API.
	routesOnly bool
	// tls is the TLS material of the HTTP listener and of gRPC between services.
	tls processTLS
	// tracing is the process's tracer provider, nil when tracing is off.
	tracing trace.TracerProvider
	// wakeup is the process's wake-up bus (startWakeup), nil before the services phase; engine
	// is set when it is on NATS (--wakeup-url).
	wakeup wakeup.Bus
	engine bool

	log *slog.Logger
	// embedded is the embedded MongoDB-wire server of a --data-dir run.
	embedded *embedmongo.Server
	// closers run last to first, like defers: the HTTP server stops before the gRPC server,
	// which stops before storage closes.
	closers []func(context.Context) error
	errs    chan error
	once    sync.Once
}

// Start brings up everything cfg asks for and returns once it is serving. It runs in phases,
// one function each, in this order: observability (metrics registry, tracing), storage, the
// local services (one gRPC server, the connections to every service, the services built on
// them, the gRPC listener and the relays), then the HTTP listener (gateway and services' own
// routes) and the metrics listener. Each phase appends what it must release to p.closers, so
// Shutdown undoes them in reverse: the metrics listener, HTTP, the relays, gRPC, peers,
// storage, tracing. A phase that fails stops the start, and what the earlier ones opened is
// released.
func Start(ctx context.Context, cfg Config, deps Deps) (_ *Process, err error) {
	if deps.Clock == nil {
		deps.Clock = clock.Real()
	}
	if deps.LogOutput == nil {
		deps.LogOutput = os.Stderr
	}
	// An operator's token, given with mutual TLS, stays required: the certificate then secures
	// the transport but is no internal credential, since the gateway process, which needs no
	// token, holds one too.
	peersAreInternal := cfg.InternalToken == ""
	if cfg.InternalToken == "" {
		// ParseFlags allows this only where no other process calls our internal operations, or
		// under mutual TLS: a secret of our own keeps them closed to everyone else.
		cfg.InternalToken = authn.NewInternalToken()
	}
	p := &Process{log: logging.New(deps.LogOutput, cfg.LogFormat, cfg.LogLevel), errs: make(chan error, 4)}
	defer func() {
		if err != nil {
			_ = p.Shutdown(context.Background())
		}
	}()
	if p.tls, err = loadTLS(cfg, p.log); err != nil {
		return nil, err
	}
	p.tls.tokenOnly = !peersAreInternal
	if cfg.Runs(Gateway) && len(cfg.Peers) > 0 && cfg.ForwarderToken == "" && peersAreInternal && !p.tls.mutual() {
		p.log.Warn("the gateway cannot vouch for its callers' addresses to services in other processes: give it and them --forwarder-token; " +
			"until then they rate-limit every HTTP caller by the gateway's own address")
	}

	obs, err := p.startObservability(ctx, cfg, deps)
	if err != nil {
		return nil, err
	}
	store, err := p.startStorage(ctx, cfg, obs)
	if err != nil {
		return nil, err
	}
	svc, err := p.startServices(ctx, cfg, deps, obs, store)
	if err != nil {
		return nil, err
	}
	if err := p.serveHTTP(ctx, cfg, obs, svc); err != nil {
		return nil, err
	}
	if err := p.serveMetrics(cfg, obs, svc.health); err != nil {
		return nil, err
	}
	p.log.Info("collab started", "services", cfg.Services, "http", p.HTTPURL(), "grpc_mtls", p.tls.mutual(), "grpc", p.GRPCAddr, "metrics", p.MetricsAddr, "store", storeName(cfg), "tracing", obs.tracer != nil)
	return p, nil
}

// observability is what the process measures and traces with: the first phase of Start.
type observability struct {
	// reg is the process's Prometheus registry. Services register their series whether or not
	// anything serves them: a registry nobody scrapes costs nothing per call, and the
	// per-request interceptors only run with --metrics-addr.
	reg *metrics.Registry
	// tracer is nil when tracing is off.
	tracer trace.TracerProvider
	// server are the gRPC server's outermost interceptors: tracing, then per-RPC metrics.
	server []grpc.UnaryServerInterceptor
	// inprocClients trace the calls made over in-process connections.
	inprocClients []grpc.UnaryClientInterceptor
	// peers trace and count the calls made to other processes.
	peers []grpc.DialOption
	// mongo counts the MongoDB commands.
	mongo []mongodb.ConnectOption
}

// startObservability builds the metrics registry and, when asked for, tracing, with the
// interceptors and options that put both on RPCs and MongoDB commands.
func (p *Process) startObservability(ctx context.Context, cfg Config, deps Deps) (observability, error) {
	o := observability{reg: metrics.New()}
	tracer, rpcTracing, peerTracing, err := p.startTracing(ctx, cfg, deps)
	if err != nil {
		return o, err
	}
	p.tracing, o.tracer = tracer, tracer
	o.server, o.inprocClients = rpcTracing, peerTracing
	if len(peerTracing) > 0 {
		o.peers = append(o.peers, grpc.WithChainUnaryInterceptor(peerTracing...))
	}
	if cfg.MetricsAddr != "" {
		o.server = append(o.server, o.reg.UnaryServerInterceptor())
		o.peers = append(o.peers, grpc.WithChainUnaryInterceptor(o.reg.UnaryClientInterceptor()))
		o.mongo = append(o.mongo, mongodb.WithCommandMonitor(o.reg.MongoMonitor()))
	}
	return o, nil
}

// storage is where the services keep their data: the second phase of Start.
type storage struct {
	mongo *mongodb.Conn // nil: memory stores
	kind  service.Storage
	// secret is the deployment's master secret (page tokens, sealed keys).
	secret []byte
}

// startStorage opens the MongoDB connection (or the embedded server of --data-dir), if any,
// and reads the master secret.
func (p *Process) startStorage(ctx context.Context, cfg Config, obs observability) (storage, error) {
	mongo, kind, err := p.openStorage(ctx, cfg, p.log, obs.mongo...)
	if err != nil {
		return storage{}, err
	}
	secret, err := masterSecret(ctx, cfg, mongo)
	if err != nil {
		return storage{}, err
	}
	return storage{mongo: mongo, kind: kind, secret: secret}, nil
}

// localServices is what the local services phase hands to the listeners after it.
type localServices struct {
	// plain are the connections the gateway forwards callers through, one per service.
	plain map[string]grpc.ClientConnInterface
	// routes are the local services' own HTTP routes.
	routes []service.Route
	// health checks the local services (nil without any): the gRPC health service, and
	// /readyz on the metrics listener.
	health *grpcserver.Health
}

// startServices is the third phase of Start: one gRPC server carries the local services, over
// TCP for other processes and in process (internal/inproc) for the gateway and the local
// services themselves, with the same interceptor chain on both; the connections to every
// service; the local services built on them and registered; then the gRPC listener and the
// outboxes' relays. A process without local services (the gateway alone) only connects.
func (p *Process) startServices(ctx context.Context, cfg Config, deps Deps, obs observability, store storage) (localServices, error) {
	var modules []service.Module
	for _, m := range cfg.Modules {
		if cfg.Runs(m.Name) {
			modules = append(modules, m)
		}
	}
	// The chain needs the authenticator, which for a local authenticating service is the
	// service itself: buildAll sets it as soon as that service is built; when it runs
	// elsewhere, it is a client of it, set before serving starts.
	var (
		auth  authn.Authenticator
		srv   *grpc.Server
		local *inproc.Server
	)
	if len(modules) > 0 {
		srv, local = p.newGRPCServer(cfg, obs, func() authn.Authenticator { return auth })
	}
	plain, internal, err := p.connect(cfg, local, obs.peers...)
	if err != nil {
		return localServices{}, err
	}
	out := localServices{plain: plain}
	if local == nil {
		return out, nil
	}
	out.health = grpcserver.NewHealth()
	healthpb.RegisterHealthServer(local, out.health)
	if err := p.startWakeup(cfg, obs); err != nil {
		return out, err
	}
	reflection.Register(srv)
	b, err := p.newBuilder(cfg, deps, obs, store, internal)
	if err != nil {
		return out, err
	}
	if out.routes, err = b.buildAll(ctx, modules, local, out.health, &auth); err != nil {
		return out, err
	}
	if err := p.checkBuilt(cfg, out.routes); err != nil {
		return out, err
	}
	if auth == nil {
		auth = p.remoteAuthenticator(cfg, deps, plain)
	}
	if err := p.serveGRPC(cfg, srv); err != nil {
		return out, err
	}
	// The relays stop before the gRPC server they deliver through.
	b.startRelays()
	return out, nil
}

// startWakeup opens the process's wake-up bus: on the NATS engine of --wakeup-url, or in
// process. An engine that does not answer is no error (the bus reconnects in the background,
// and /readyz says so meanwhile); a malformed address or CA file is.
func (p *Process) startWakeup(cfg Config, obs observability) error {
	m, err := wakeup.NewMetrics(obs.reg.Registerer())
	if err != nil {
		return fmt.Errorf("wake-up metrics: %w", err)
	}
	if cfg.WakeupURL == "" {
		p.wakeup = wakeup.NewInProcess(m)
		return nil
	}
	bus, err := wakeup.DialNATS(wakeup.NATSConfig{URL: cfg.WakeupURL, Token: cfg.WakeupToken, CAFile: cfg.WakeupCAFile,
		Name: "collabd " + strings.Join(cfg.Services, ","), Logger: p.log}, m)
	if err != nil {
		return fmt.Errorf("--wakeup-url: %w", err)
	}
	p.wakeup, p.engine = bus, true
	p.closers = append(p.closers, func(context.Context) error { bus.Close(); return nil })
	return nil
}

// newBuilder returns the builder of the local services, on the process's storage, internal
// connections and mail sender (SMTP, or files in --mail-dir, unless the test gave one).
func (p *Process) newBuilder(cfg Config, deps Deps, obs observability, store storage, internal map[string]grpc.ClientConnInterface) (*builder, error) {
	sender := deps.Email
	if sender == nil {
		var err error
		if sender, err = emailSender(cfg, p.log); err != nil {
			return nil, err
		}
	}
	return &builder{metrics: obs.reg, cfg: cfg, deps: deps, log: p.log, mongo: store.mongo, storage: store.kind, secret: store.secret,
		email: sender, internal: internal, p: p, tracing: obs.tracer}, nil
}

// checkBuilt runs what must hold once the services are built, before anything listens: the
// embedded server's files the services created are made private, and the development
// credentials a service made are not exposed beyond loopback (checkExposure).
func (p *Process) checkBuilt(cfg Config, routes []service.Route) error {
	if p.embedded != nil {
		if err := p.embedded.Protect(); err != nil {
			return err
		}
	}
	var listens []string // an empty --grpc-addr listens nowhere; an empty --http-addr everywhere
	if cfg.GRPCAddr != "" {
		listens = append(listens, cfg.GRPCAddr)
	}
	if cfg.Runs(Gateway) || len(routes) > 0 {
		listens = append(listens, cfg.HTTPAddr)
	}
	return checkExposure(cfg, p.Dev, listens)
}

// newGRPCServer returns the gRPC server of the local services and its in-process twin, both
// behind the interceptor chain: observability, then the request id, recovery, errors and
// authentication by the authenticator auth returns when a call comes.
func (p *Process) newGRPCServer(cfg Config, obs observability, auth func() authn.Authenticator) (*grpc.Server, *inproc.Server) {
	authOpts := append(p.tls.authnOptions(), authn.WithForwarderToken(cfg.ForwarderToken))
	chain := grpcserver.Chain(p.log, authn.NewInterceptor(lazyAuthenticator{get: auth}, cfg.InternalToken, authOpts...), obs.server...)
	opts := p.tls.serverOptions()
	if cfg.GRPCMaxConnectionAge > 0 {
		opts = append(opts, grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionAge: cfg.GRPCMaxConnectionAge, MaxConnectionAgeGrace: GRPCConnectionGrace}))
	}
	srv := grpcserver.New(chain, opts...)
	local := inproc.New(srv, chain, grpcserver.MaxMessageBytes)
	local.InterceptClients(obs.inprocClients...)
	return srv, local
}

// remoteAuthenticator checks credentials with the authenticating service in another process,
// caching successes for --auth-cache-ttl.
func (p *Process) remoteAuthenticator(cfg Config, deps Deps, plain map[string]grpc.ClientConnInterface) authn.Authenticator {
	authService := ""
	for _, m := range cfg.Modules {
		if m.Authenticates {
			authService = m.Name
		}
	}
	return p.tls.authClient(authn.NewClient(workspacev1.NewWorkspaceServiceClient(plain[authService]), p.peerToken(cfg), cfg.AuthCacheTTL, deps.Clock))
}

// serveGRPC listens at --grpc-addr (nowhere when empty: in-process calls only) and stops the
// server gracefully at shutdown, or at once when the shutdown's context ends.
func (p *Process) serveGRPC(cfg Config, srv *grpc.Server) error {
	if cfg.GRPCAddr != "" {
		ln, err := net.Listen("tcp", cfg.GRPCAddr)
		if err != nil {
			return fmt.Errorf("grpc listen %s: %w", cfg.GRPCAddr, err)
		}
		ln = limitListeners(ln, maxGRPCConns, 0, p.log)
		p.GRPCAddr = ln.Addr().String()
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				p.errs <- fmt.Errorf("grpc server: %w", err)
			}
		}()
	}
	p.closers = append(p.closers, func(ctx context.Context) error {
		stopped := make(chan struct{})
		go func() { srv.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-ctx.Done():
			srv.Stop()
		}
		return nil
	})
	return nil
}

// serveHTTP is the fourth phase of Start: the HTTP listener, where the process runs the
// gateway or its services serve HTTP routes of their own (the gateway proxies /v2/crdt/sync/
// to the crdt processes); without the gateway, anything else there is not found.
func (p *Process) serveHTTP(ctx context.Context, cfg Config, obs observability, svc localServices) error {
	if !cfg.Runs(Gateway) && len(svc.routes) == 0 {
		return nil
	}
	handler, err := p.httpHandler(ctx, cfg, obs, svc)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("http listen %s: %w", cfg.HTTPAddr, err)
	}
	// Per address only where the gateway runs: a process serving its routes behind the
	// gateway sees every client as the gateway (it proxies each WebSocket on a connection of
	// its own).
	perAddr := cfg.HTTPMaxConnsPerAddress
	if !cfg.Runs(Gateway) {
		perAddr = 0
	}
	ln = limitListeners(ln, cfg.HTTPMaxConns, perAddr, p.log)
	if perAddr > 0 {
		handler = limitRequests(handler, perAddr)
	}
	p.HTTPAddr, p.routesOnly = ln.Addr().String(), !cfg.Runs(Gateway)
	// Requests live in base, which ends once Shutdown has waited for them: Shutdown does not
	// wait for hijacked connections (live sync's WebSockets, served or proxied), and ending
	// their requests' context closes them.
	base, cancelBase := context.WithCancel(context.Background())
	hs := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second,
		MaxHeaderBytes: MaxHeaderBytes,
		ErrorLog:       slog.NewLogLogger(p.log.Handler(), slog.LevelWarn),
		BaseContext:    func(net.Listener) context.Context { return base }}
	serve := hs.Serve
	if p.tls.http != nil {
		// ServeTLS sets up HTTP/2 as well; the certificate comes from GetCertificate.
		hs.TLSConfig = tlsfiles.Server(p.tls.http)
		serve = func(ln net.Listener) error { return hs.ServeTLS(ln, "", "") }
	}
	go func() {
		if err := serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.errs <- fmt.Errorf("http server: %w", err)
		}
	}()
	p.closers = append(p.closers, func(ctx context.Context) error {
		defer cancelBase()
		return hs.Shutdown(ctx)
	})
	return nil
}

// httpHandler is what the HTTP listener serves: the services' own routes, local and, where the
// gateway runs, those of services that run elsewhere (the gateway is the one public entry
// point, so it forwards them to their processes, --<name>-http-addr), in front of the gateway.
func (p *Process) httpHandler(ctx context.Context, cfg Config, obs observability, svc localServices) (http.Handler, error) {
	routes := svc.routes
	var gw http.Handler = http.HandlerFunc(notFound)
	if cfg.Runs(Gateway) {
		remote, err := remoteRoutes(cfg, p.tls, p.log)
		if err != nil {
			return nil, err
		}
		routes = append(slices.Clip(routes), remote...)
		var upstreams []gateway.Upstream
		for _, m := range cfg.Modules {
			if m.Gateway != nil {
				upstreams = append(upstreams, gateway.Upstream{Name: m.Name, GRPCService: m.GRPCService, Register: m.Gateway, Conn: svc.plain[m.Name]})
			}
		}
		g, err := gateway.New(ctx, upstreams, p.log)
		if err != nil {
			return nil, err
		}
		if cfg.MetricsAddr != "" {
			g.SetMetrics(obs.reg.HTTP())
		}
		if obs.tracer != nil {
			g.SetTracing(obs.tracer)
		}
		gw = g
		cons, err := console.Handler(consoleOptions(p.Dev))
		if err != nil {
			return nil, fmt.Errorf("console: %w", err)
		}
		// The console's pages, beside the API on the gateway's listener (docs/console.md).
		routes = append(slices.Clip(routes), service.Route{Prefix: console.Prefix, Handler: cons},
			service.Route{Prefix: strings.TrimSuffix(console.Prefix, "/"), Handler: cons})
	}
	if len(routes) == 0 {
		return gw, nil
	}
	mux := http.NewServeMux()
	for _, r := range routes {
		mux.Handle(r.Prefix, r.Handler)
	}
	mux.Handle("/", gw)
	return mux, nil
}

// serveMetrics is the last phase of Start: the /metrics listener with the probes, where
// --metrics-addr asks for it.
func (p *Process) serveMetrics(cfg Config, obs observability, health *grpcserver.Health) error {
	if cfg.MetricsAddr == "" {
		return nil
	}
	addr, stop, err := obs.reg.Serve(cfg.MetricsAddr, p.log, p.errs, probes(health, p.wakeupDown)...)
	if err != nil {
		return err
	}
	p.MetricsAddr = addr
	p.closers = append(p.closers, stop)
	return nil
}

// connect opens two connections to every service: a plain one for the gateway, which forwards
// callers' credentials and proves its X-Forwarded-For (authn.HeaderForwarder), and one that
// adds the internal token for service-to-service calls.
// Services of this process are reached in process (local), others at their peer address.
func (p *Process) connect(cfg Config, local *inproc.Server, peerOpts ...grpc.DialOption) (plain, internal map[string]grpc.ClientConnInterface, err error) {
	plain, internal = map[string]grpc.ClientConnInterface{}, map[string]grpc.ClientConnInterface{}
	withToken := authn.InternalClientInterceptor(cfg.InternalToken)
	dial := func(target string, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
		opts := append([]grpc.DialOption{
			grpc.WithTransportCredentials(p.tls.dialCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(grpcserver.MaxMessageBytes)),
			// Calls to peers spread over every address the target resolves to (a headless
			// Kubernetes service behind dns:///), not only the first.
			grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`),
		}, slices.Concat(peerOpts, extra)...)
		conn, err := grpc.NewClient(target, opts...)
		if err != nil {
			return nil, err
		}
		p.closers = append(p.closers, func(context.Context) error { return conn.Close() })
		return conn, nil
	}
	for name, addr := range cfg.Peers {
		if plain[name], err = dial(addr, grpc.WithChainUnaryInterceptor(authn.ForwarderClientInterceptor(cmp.Or(cfg.ForwarderToken, p.peerToken(cfg))))); err != nil {
			return nil, nil, fmt.Errorf("peer %s at %s: %w", name, addr, err)
		}
		if internal[name], err = dial(addr, append(p.tls.internalPeerOptions(), grpc.WithChainUnaryInterceptor(authn.InternalClientInterceptor(p.peerToken(cfg))))...); err != nil {
			return nil, nil, fmt.Errorf("peer %s at %s: %w", name, addr, err)
		}
	}
	if local != nil {
		localPlain, localInternal := local.Conn(authn.ForwarderClientInterceptor(cmp.Or(cfg.ForwarderToken, cfg.InternalToken))), local.Conn(withToken)
		for _, name := range cfg.Names() {
			if cfg.Runs(name) {
				plain[name], internal[name] = localPlain, localInternal
			}
		}
	}
	return plain, internal, nil
}

// startTracing builds the process's tracer provider when --otlp-endpoint (or a test's exporter)
// asks for one, with the interceptors that trace RPCs on both sides. Off, it returns nothing,
// so no interceptor runs and services get no-op tracers. The provider shuts down, flushing its
// spans, after everything else has stopped: its closer is the first.
func (p *Process) startTracing(ctx context.Context, cfg Config, deps Deps) (trace.TracerProvider, []grpc.UnaryServerInterceptor, []grpc.UnaryClientInterceptor, error) {
	tp, err := tracing.NewProvider(ctx, tracing.Config{Endpoint: cfg.OTLPEndpoint, SampleRatio: cfg.TraceSampleRatio, Services: cfg.Services, Exporter: deps.SpanExporter, Log: p.log})
	if err != nil || tp == nil {
		// A nil *TracerProvider must not become a non-nil interface.
		return nil, nil, nil, err
	}
	p.closers = append(p.closers, func(ctx context.Context) error {
		if err := tp.Shutdown(ctx); err != nil {
			return fmt.Errorf("tracing: flush spans: %w", err)
		}
		return nil
	})
	return tp, []grpc.UnaryServerInterceptor{tracing.ServerInterceptor(tp)}, []grpc.UnaryClientInterceptor{tracing.ClientInterceptor(tp)}, nil
}

// peerToken is the internal token calls to peers carry: the operator's, which every process
// shares. A token the process made for itself (none was given) is its own secret and never
// leaves it: peers would not accept it, and under mutual TLS the certificate and the marker are
// the credential.
func (p *Process) peerToken(cfg Config) string {
	if !p.tls.tokenOnly {
		return ""
	}
	return cfg.InternalToken
}

// lazyAuthenticator lets the interceptor be built before the service that authenticates.
type lazyAuthenticator struct{ get func() authn.Authenticator }

func (l lazyAuthenticator) AuthenticateKey(ctx context.Context, key, token string) (authn.Caller, error) {
	return l.get().AuthenticateKey(ctx, key, token)
}

func (l lazyAuthenticator) AuthenticateWorkspace(ctx context.Context, id, token string) (authn.Caller, error) {
	return l.get().AuthenticateWorkspace(ctx, id, token)
}

func storeName(cfg Config) string {
	switch {
	case cfg.MongoURI != "":
		return "mongodb"
	case cfg.DataDir != "":
		return "embedded mongodb in " + cfg.DataDir
	default:
		return "memory"
	}
}

func (p *Process) openStorage(ctx context.Context, cfg Config, log *slog.Logger, opts ...mongodb.ConnectOption) (*mongodb.Conn, service.Storage, error) {
	uri, storage := cfg.MongoURI, service.StorageMongoDB
	if cfg.DataDir != "" {
		srv, err := embedmongo.Start(cfg.DataDir, embedmongo.QuietLogger(log))
		if err != nil {
			return nil, 0, err
		}
		p.closers = append(p.closers, func(context.Context) error { srv.Stop(); return nil })
		p.embedded = srv
		uri, storage = srv.URI(), service.StorageEmbedded
	}
	if uri == "" {
		return nil, service.StorageMemory, nil
	}
	conn, err := mongodb.Connect(ctx, uri, opts...)
	if err != nil {
		return nil, 0, err
	}
	p.closers = append(p.closers, conn.Close)
	return conn, storage, nil
}

func masterSecret(ctx context.Context, cfg Config, mongo *mongodb.Conn) ([]byte, error) {
	switch {
	case cfg.SecretKey != "":
		sum := sha256.Sum256([]byte(cfg.SecretKey))
		return sum[:], nil
	case mongo != nil:
		return mongo.MasterSecret(ctx)
	default:
		// Memory data dies with the process; its page tokens may too.
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		return b, nil
	}
}

// emailSender sends through SMTP when a server is set; otherwise it writes each mail as a file
// in the mail directory, so a local run still hands over the verification link without
// putting it in the log.
func emailSender(cfg Config, log *slog.Logger) (email.Sender, error) {
	if cfg.SMTPAddr == "" {
		return email.NewDir(cfg.MailDir, log)
	}
	return email.SMTP{Addr: cfg.SMTPAddr, Username: cfg.SMTPUsername, Password: cfg.SMTPPassword, From: cfg.SMTPFrom}, nil
}

// HTTPURL is the base URL of the HTTP listener ("" when not listening): https with --tls-*.
func (p *Process) HTTPURL() string {
	if p.HTTPAddr == "" {
		return ""
	}
	return p.tls.scheme() + "://" + p.HTTPAddr
}

// Err delivers a server's failure after start.
func (p *Process) Err() <-chan error { return p.errs }

// Shutdown stops serving, waiting for calls in flight until ctx ends, and releases storage.
func (p *Process) Shutdown(ctx context.Context) error {
	var errs []error
	p.once.Do(func() {
		for i := len(p.closers) - 1; i >= 0; i-- {
			if err := p.closers[i](ctx); err != nil {
				errs = append(errs, err)
			}
		}
	})
	return errors.Join(errs...)
}

// builder builds the services of a process on its storage and connections.
type builder struct {
	cfg      Config
	deps     Deps
	log      *slog.Logger
	mongo    *mongodb.Conn
	storage  service.Storage
	secret   []byte
	email    email.Sender
	internal map[string]grpc.ClientConnInterface
	p        *Process
	metrics  *metrics.Registry
	// tracing is nil when tracing is off.
	tracing trace.TracerProvider

	outboxes   []*outbox.Outbox
	background []func(ctx context.Context)
}

func (b *builder) build(ctx context.Context, m service.Module) (*service.Instance, error) {
	build, ok := b.cfg.builds[m.Name]
	if !ok {
		return nil, errors.New("not set up: the module has no Setup, or the Config did not come from ParseFlags")
	}
	publicURL := b.cfg.PublicURL
	if publicURL == "" {
		publicURL = b.p.tls.scheme() + "://" + b.cfg.HTTPAddr
	}
	env := service.Env{
		Log: b.log, Clock: b.deps.Clock, Secret: b.secret, Mongo: b.mongo, Storage: b.storage,
		Email: b.email, PublicURL: publicURL,
		Conn:    func(name string) grpc.ClientConnInterface { return b.internal[name] },
		Metrics: b.metrics.Registerer(),
		Tracing: b.tracing,
		Wakeup:  b.p.wakeup,
	}
	if b.p.engine {
		env.WakeupSafetyPoll = b.cfg.WakeupSafetyPoll
	}
	if len(m.Publishes) > 0 {
		ob, err := b.outbox(ctx, m, env)
		if err != nil {
			return nil, err
		}
		env.Outbox = ob
	}
	inst, err := build(ctx, env)
	if err != nil {
		return nil, err
	}
	if inst.Register == nil || inst.Ping == nil {
		return nil, errors.New("built without Register or Ping")
	}
	if err := m.CheckRoutes(inst); err != nil {
		return nil, err
	}
	return inst, nil
}

// buildAll builds the local services in order and registers each on the in-process server
// (its gRPC service, its health check, its event handler on the lifecycle dispatcher, its
// background work), and the outboxes' metrics. The authenticating service's authenticator goes
// to *auth as soon as it is built, so the services built after it are served by it; auth stays
// nil when that service runs elsewhere. It returns the services' own HTTP routes.
func (b *builder) buildAll(ctx context.Context, modules []service.Module, local *inproc.Server, health *grpcserver.Health, auth *authn.Authenticator) ([]service.Route, error) {
	var routes []service.Route
	dispatcher := lifecycle.NewDispatcher()
	events := false
	for _, m := range modules {
		inst, err := b.build(ctx, m)
		if err != nil {
			return nil, fmt.Errorf("service %s: %w", m.Name, err)
		}
		inst.Register(local)
		health.Add(m.GRPCService, inst.Ping)
		if len(m.Consumes) > 0 {
			if inst.Events == nil {
				return nil, fmt.Errorf("service %s consumes events but handles none", m.Name)
			}
			dispatcher.Register(m.Name, inst.Events)
			events = true
		}
		if inst.Authenticator != nil {
			*auth = inst.Authenticator
		}
		if inst.Dev != nil {
			b.p.Dev = inst.Dev
		}
		routes = append(routes, inst.Routes...)
		if inst.Run != nil {
			b.background = append(b.background, inst.Run)
		}
	}
	if events {
		lifecyclev1.RegisterLifecycleServiceServer(local, dispatcher)
	}
	if len(b.outboxes) > 0 {
		if err := b.metrics.Registerer().Register(outbox.NewCollector(b.outboxes...)); err != nil {
			return nil, fmt.Errorf("outbox metrics: %w", err)
		}
	}
	return routes, nil
}

// outbox builds the event outbox of a producing service, in that service's own database; it
// delivers each event type to the services consuming it. Its store is observed as
// "<service>.outbox" (collab_store_operation_seconds), apart from the service's own.
func (b *builder) outbox(ctx context.Context, m service.Module, env service.Env) (*outbox.Outbox, error) {
	routes := outbox.Routes{For: b.cfg.Consumers, All: b.cfg.ConsumersOf(m.Publishes)}
	var store outbox.Store = outbox.NewMemoryStore()
	if b.mongo != nil {
		s, err := outbox.NewMongoStore(ctx, b.mongo.Database(m.Name))
		if err != nil {
			return nil, err
		}
		if err := s.IndexLanes(ctx, routes.All); err != nil {
			return nil, err
		}
		store = s
	}
	clients := map[string]lifecyclev1.LifecycleServiceClient{}
	for _, c := range b.cfg.Modules {
		if len(c.Consumes) > 0 {
			clients[c.Name] = lifecyclev1.NewLifecycleServiceClient(b.internal[c.Name])
		}
	}
	obs, err := env.ObserveStore(m.Name + ".outbox")
	if err != nil {
		return nil, err
	}
	opts := []outbox.Option{outbox.WithClock(b.deps.Clock), outbox.WithLogger(b.log.With("outbox", m.Name)), outbox.WithStoreObserver(obs)}
	if b.tracing != nil {
		opts = append(opts, outbox.WithTracer(b.tracing))
	}
	if b.p.engine { // the producer's lanes in the other processes run at once (issue 23)
		opts = append(opts, outbox.WithWakeups(env.Wakeup))
	}
	ob := outbox.New(m.Name, store, outbox.GRPCDeliverer{Clients: clients}, routes, opts...)
	b.outboxes = append(b.outboxes, ob)
	return ob, nil
}

// startRelays runs every outbox's delivery loop and every service's background work until
// shutdown.
func (b *builder) startRelays() {
	if len(b.outboxes)+len(b.background) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, ob := range b.outboxes {
		wg.Go(func() { ob.Run(ctx) })
	}
	for _, run := range b.background {
		wg.Go(func() { run(ctx) })
	}
	b.p.closers = append(b.p.closers, func(context.Context) error {
		cancel()
		wg.Wait()
		return nil
	})
}

// wakeupDown reports whether the process's wake-up engine is configured and unreachable.
func (p *Process) wakeupDown() bool { return p.engine && !p.wakeup.Connected() }

// probes are the metrics listener's /healthz (the process serves) and, where the process runs
// services, /readyz (every local service and its store answer): probes that need neither the
// API's port nor the gRPC port, which under mutual TLS takes no caller without a certificate
// (a kubelet's gRPC probe). The wake-up engine down leaves the process ready (everything works
// at the safety poll's latency), and /readyz says so (wakeupDown; nil: no engine).
func probes(health *grpcserver.Health, wakeupDown func() bool) []metrics.Route {
	out := []metrics.Route{{Pattern: "GET /healthz", Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		probeAnswer(w, http.StatusOK, "alive")
	})}}
	if health != nil {
		out = append(out, metrics.Route{Pattern: "GET /readyz", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			resp, err := health.Check(r.Context(), &healthpb.HealthCheckRequest{})
			if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				probeAnswer(w, http.StatusServiceUnavailable, "not ready")
				return
			}
			if wakeupDown != nil && wakeupDown() {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusOK)
				_, _ = w.Write([]byte(`{"status":"ready","wakeup":"The wake-up engine (--wakeup-url) is unreachable: replicas follow the store at the safety poll (--wakeup-safety-poll)."}`))
				return
			}
			probeAnswer(w, http.StatusOK, "ready")
		})})
	}
	return out
}

func probeAnswer(w http.ResponseWriter, code int, status string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(`{"status":"` + status + `"}`))
}

// notFound answers a process's HTTP listener when it has no gateway: the error envelope.
func notFound(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	_, _ = w.Write([]byte(`{"error":{"status":"NOT_FOUND","message":"Not found: this process serves no gateway."}}`))
}
