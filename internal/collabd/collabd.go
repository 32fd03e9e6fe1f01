package collabd

import (
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
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/test/bufconn"

	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"

	"github.com/collab/collab/gateway"
	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/email"
	"github.com/collab/collab/internal/embedmongo"
	"github.com/collab/collab/internal/grpcserver"
	"github.com/collab/collab/internal/logging"
	"github.com/collab/collab/internal/mongodb"
	"github.com/collab/collab/services/workspace"
)

// Deps replaces parts of the process for tests; zero values mean the real ones.
type Deps struct {
	Clock     clock.Clock
	Email     email.Sender
	LogOutput io.Writer
}

// Process is a running collab process.
type Process struct {
	// HTTPAddr and GRPCAddr are the bound addresses ("" when not listening).
	HTTPAddr string
	GRPCAddr string
	// Dev holds the development workspace's credentials when it was created.
	Dev *workspace.DevCredentials

	log *slog.Logger
	// closers run last to first, like defers: the HTTP server stops before the gRPC server,
	// which stops before storage closes.
	closers []func(context.Context) error
	errs    chan error
	once    sync.Once
}

// Start brings up everything cfg asks for and returns once it is serving.
func Start(ctx context.Context, cfg Config, deps Deps) (_ *Process, err error) {
	if deps.Clock == nil {
		deps.Clock = clock.Real()
	}
	if deps.LogOutput == nil {
		deps.LogOutput = os.Stderr
	}
	log := logging.New(deps.LogOutput, cfg.LogFormat, cfg.LogLevel)
	p := &Process{log: log, errs: make(chan error, 4)}
	defer func() {
		if err != nil {
			_ = p.Shutdown(context.Background())
		}
	}()

	mongo, err := p.openStorage(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	secret, err := masterSecret(ctx, cfg, mongo)
	if err != nil {
		return nil, err
	}
	local := map[string]bool{}
	runsAny := false
	for _, s := range ServiceNames {
		local[s] = cfg.Runs(s)
		runsAny = runsAny || local[s]
	}

	// Two connections to every service: a plain one for the gateway, which forwards callers'
	// credentials, and one that adds the internal token for service-to-service calls.
	plain := map[string]grpc.ClientConnInterface{}
	internal := map[string]grpc.ClientConnInterface{}
	callOpts := grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(grpcserver.MaxMessageBytes))
	dial := func(target string, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
		opts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), callOpts}, extra...)
		conn, err := grpc.NewClient(target, opts...)
		if err != nil {
			return nil, err
		}
		p.closers = append(p.closers, func(context.Context) error { return conn.Close() })
		return conn, nil
	}
	withToken := grpc.WithChainUnaryInterceptor(authn.InternalClientInterceptor(cfg.InternalToken))
	// Calls to peers spread over every address the target resolves to (a headless
	// Kubernetes service behind dns:///), not only the first.
	roundRobin := grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`)
	for name, addr := range cfg.Peers {
		if plain[name], err = dial(addr, roundRobin); err != nil {
			return nil, fmt.Errorf("peer %s at %s: %w", name, addr, err)
		}
		if internal[name], err = dial(addr, roundRobin, withToken); err != nil {
			return nil, fmt.Errorf("peer %s at %s: %w", name, addr, err)
		}
	}
	var inproc *bufconn.Listener
	if runsAny {
		inproc = bufconn.Listen(1 << 20)
		viaBufconn := grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return inproc.DialContext(ctx) })
		localPlain, err := dial("passthrough:///in-process", viaBufconn)
		if err != nil {
			return nil, fmt.Errorf("in-process connection: %w", err)
		}
		localInternal, err := dial("passthrough:///in-process", viaBufconn, withToken)
		if err != nil {
			return nil, fmt.Errorf("in-process connection: %w", err)
		}
		for name, isLocal := range local {
			if isLocal {
				plain[name], internal[name] = localPlain, localInternal
			}
		}
	}

	var wsServer *workspace.Server
	if runsAny {
		// The interceptor needs the authenticator, which for a local workspace service is the
		// service itself; it is set once the services exist, before serving starts.
		var auth authn.Authenticator
		srv := grpcserver.New(log, authn.NewInterceptor(lazyAuthenticator{get: func() authn.Authenticator { return auth }}, cfg.InternalToken))
		health := grpcserver.NewHealth()
		healthpb.RegisterHealthServer(srv, health)
		reflection.Register(srv)
		b := &builder{ctx: ctx, cfg: cfg, deps: deps, log: log, mongo: mongo, secret: secret, srv: srv, health: health, internal: internal, p: p}
		if wsServer, err = b.services(); err != nil {
			return nil, err
		}
		if wsServer != nil {
			auth = wsServer
		} else {
			auth = authn.NewClient(workspacev1.NewWorkspaceServiceClient(plain["workspace"]), cfg.InternalToken, cfg.AuthCacheTTL, deps.Clock)
		}
		go func() { _ = srv.Serve(inproc) }()
		if cfg.GRPCAddr != "" {
			ln, err := net.Listen("tcp", cfg.GRPCAddr)
			if err != nil {
				return nil, fmt.Errorf("grpc listen %s: %w", cfg.GRPCAddr, err)
			}
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
		// The relays stop before the gRPC server they deliver through.
		b.startRelays()
	}

	if wsServer != nil && cfg.DevWorkspace {
		if err := wsServer.EnsureDevWorkspace(ctx, cfg.Dev); err != nil {
			return nil, err
		}
		dev := cfg.Dev
		p.Dev = &dev
	}

	if cfg.Runs("gateway") {
		gw, err := gateway.New(ctx, plain, log)
		if err != nil {
			return nil, err
		}
		ln, err := net.Listen("tcp", cfg.HTTPAddr)
		if err != nil {
			return nil, fmt.Errorf("http listen %s: %w", cfg.HTTPAddr, err)
		}
		p.HTTPAddr = ln.Addr().String()
		hs := &http.Server{Handler: gw, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
		go func() {
			if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				p.errs <- fmt.Errorf("http server: %w", err)
			}
		}()
		p.closers = append(p.closers, hs.Shutdown)
	}
	log.Info("collab started", "services", cfg.Services, "http", p.HTTPAddr, "grpc", p.GRPCAddr, "store", storeName(cfg))
	return p, nil
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

func (p *Process) openStorage(ctx context.Context, cfg Config, log *slog.Logger) (*mongodb.Conn, error) {
	uri := cfg.MongoURI
	if cfg.DataDir != "" {
		srv, err := embedmongo.Start(cfg.DataDir, embedmongo.QuietLogger(log))
		if err != nil {
			return nil, err
		}
		p.closers = append(p.closers, func(context.Context) error { srv.Stop(); return nil })
		uri = srv.URI()
	}
	if uri == "" {
		return nil, nil
	}
	conn, err := mongodb.Connect(ctx, uri)
	if err != nil {
		return nil, err
	}
	p.closers = append(p.closers, conn.Close)
	return conn, nil
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
