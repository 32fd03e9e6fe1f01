package collabd

import (
	"context"
	"log/slog"
	"sync"

	"google.golang.org/grpc"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"
	usersv1 "github.com/collab/collab/proto/collab/users/v1"
	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"

	"github.com/collab/collab/internal/grpcserver"
	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/mongodb"
	"github.com/collab/collab/internal/outbox"
	"github.com/collab/collab/services/access"
	"github.com/collab/collab/services/documents"
	"github.com/collab/collab/services/users"
	"github.com/collab/collab/services/workspace"
)

// builder constructs the services a process runs, on its storage, registered on its gRPC server.
type builder struct {
	ctx      context.Context
	cfg      Config
	deps     Deps
	log      *slog.Logger
	mongo    *mongodb.Conn
	secret   []byte
	srv      *grpc.Server
	health   *grpcserver.Health
	internal map[string]grpc.ClientConnInterface
	p        *Process

	outboxes []*outbox.Outbox
}

// services builds and registers every local service and returns the workspace service when it
// runs here.
func (b *builder) services() (*workspace.Server, error) {
	var ws *workspace.Server
	cfg := b.cfg
	if cfg.Runs("workspace") {
		var store workspace.Store = workspace.NewMemoryStore()
		if b.mongo != nil {
			s, err := workspace.NewMongoStore(b.ctx, b.mongo.Database("workspace"))
			if err != nil {
				return nil, err
			}
			store = s
		}
		sender := b.deps.Email
		if sender == nil {
			s, err := emailSender(cfg, b.log)
			if err != nil {
				return nil, err
			}
			sender = s
		}
		publicURL := cfg.PublicURL
		if publicURL == "" {
			publicURL = "http://" + cfg.HTTPAddr
		}
		var err error
		ws, err = workspace.New(store, b.secret,
			workspace.WithClock(b.deps.Clock), workspace.WithLogger(b.log), workspace.WithEmailSender(sender),
			workspace.WithRateLimits(cfg.RateLimits), workspace.WithEmailGracePeriod(cfg.EmailGrace),
			workspace.WithPublicURL(publicURL))
		if err != nil {
			return nil, err
		}
		workspacev1.RegisterWorkspaceServiceServer(b.srv, ws)
		b.health.Add(workspacev1.WorkspaceService_ServiceDesc.ServiceName, ws.Ping)
	}

	runsData := false
	for _, s := range DataServices {
		runsData = runsData || cfg.Runs(s)
	}
	if !runsData {
		return ws, nil
	}
	dispatcher := lifecycle.NewDispatcher()
	lifecyclev1.RegisterLifecycleServiceServer(b.srv, dispatcher)
	docsClient := documentsv1.NewDocumentsServiceClient(b.internal["documents"])
	accessClient := accessv1.NewAccessServiceClient(b.internal["access"])

	if cfg.Runs("documents") {
		var store documents.Store = documents.NewMemoryStore()
		if b.mongo != nil {
			s, err := documents.NewMongoStore(b.ctx, b.mongo.Database("documents"))
			if err != nil {
				return nil, err
			}
			store = s
		}
		events, err := b.outbox("documents")
		if err != nil {
			return nil, err
		}
		d, err := documents.New(store, b.secret, events, documents.WithClock(b.deps.Clock), documents.WithLogger(b.log))
		if err != nil {
			return nil, err
		}
		documentsv1.RegisterDocumentsServiceServer(b.srv, d)
		b.health.Add(documentsv1.DocumentsService_ServiceDesc.ServiceName, d.Ping)
		dispatcher.Register("documents", d)
	}
	if cfg.Runs("users") {
		var store users.Store = users.NewMemoryStore()
		if b.mongo != nil {
			s, err := users.NewMongoStore(b.ctx, b.mongo.Database("users"))
			if err != nil {
				return nil, err
			}
			store = s
		}
		events, err := b.outbox("users")
		if err != nil {
			return nil, err
		}
		u, err := users.New(store, docsClient, accessClient, events, users.WithClock(b.deps.Clock), users.WithLogger(b.log))
		if err != nil {
			return nil, err
		}
		usersv1.RegisterUsersServiceServer(b.srv, u)
		b.health.Add(usersv1.UsersService_ServiceDesc.ServiceName, u.Ping)
		dispatcher.Register("users", u)
	}
	if cfg.Runs("access") {
		var store access.Store = access.NewMemoryStore()
		if b.mongo != nil {
			s, err := access.NewMongoStore(b.ctx, b.mongo.Database("access"))
			if err != nil {
				return nil, err
			}
			store = s
		}
		a, err := access.New(store, b.secret, docsClient, access.WithClock(b.deps.Clock), access.WithLogger(b.log),
			access.WithWorkspace(workspacev1.NewWorkspaceServiceClient(b.internal["workspace"])))
		if err != nil {
			return nil, err
		}
		accessv1.RegisterAccessServiceServer(b.srv, a)
		b.health.Add(accessv1.AccessService_ServiceDesc.ServiceName, a.Ping)
		dispatcher.Register("access", a)
	}
	return ws, nil
}

// outbox builds the event outbox of a producing service, in that service's own database.
func (b *builder) outbox(service string) (*outbox.Outbox, error) {
	var store outbox.Store = outbox.NewMemoryStore()
	if b.mongo != nil {
		s, err := outbox.NewMongoStore(b.ctx, b.mongo.Database(service))
		if err != nil {
			return nil, err
		}
		store = s
	}
	clients := map[string]lifecyclev1.LifecycleServiceClient{}
	for _, s := range DataServices {
		clients[s] = lifecyclev1.NewLifecycleServiceClient(b.internal[s])
	}
	ob := outbox.New(store, outbox.GRPCDeliverer{Clients: clients}, DataServices,
		outbox.WithClock(b.deps.Clock), outbox.WithLogger(b.log.With("outbox", service)))
	b.outboxes = append(b.outboxes, ob)
	return ob, nil
}

// startRelays runs every outbox's delivery loop until shutdown.
func (b *builder) startRelays() {
	if len(b.outboxes) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, ob := range b.outboxes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ob.Run(ctx)
		}()
	}
	b.p.closers = append(b.p.closers, func(context.Context) error {
		cancel()
		wg.Wait()
		return nil
	})
}
