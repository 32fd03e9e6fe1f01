package webhooks

import (
	"context"
	"fmt"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"

	webhooksv1 "github.com/collab/collab/proto/collab/webhooks/v1"

	"github.com/collab/collab/internal/service"
)

// Module describes the webhooks service to the process that runs it. It consumes every domain
// event (and the lifecycle types, which it passes over) and delivers them with its own worker.
func Module() service.Module {
	return service.Module{
		Name:        "webhooks",
		GRPCService: webhooksv1.WebhooksService_ServiceDesc.ServiceName,
		Gateway: func(ctx context.Context, mux *runtime.ServeMux, conn grpc.ClientConnInterface) error {
			return webhooksv1.RegisterWebhooksServiceHandlerClient(ctx, mux, webhooksv1.NewWebhooksServiceClient(conn))
		},
		Consumes: []string{"*"},
		Setup: func(f *service.Flags) service.BuildFunc {
			var private string
			f.Func("webhook-private-targets", "", "deliver webhooks to loopback, private and link-local addresses: allow or deny; default allow unless --mongo-uri is set",
				func(v string) error {
					if v != "" && v != "allow" && v != "deny" {
						return fmt.Errorf("must be allow or deny")
					}
					private = v
					return nil
				})
			workers := 64
			f.Func("webhook-workers", "64", "webhook deliveries this process sends at once; 0: it only stores messages, and processes with workers send them",
				service.IntFunc(&workers, 0, 1024))
			tenantWorkers := 0
			f.Func("webhook-tenant-workers", "0", "webhook deliveries of one workspace this process sends at once, so that one tenant's slow or dead endpoints leave workers to the others; 0: a quarter of --webhook-workers",
				service.IntFunc(&tenantWorkers, 0, 1024))
			lease := time.Minute
			f.Func("webhook-lease", "1m", "how long a worker holds a delivery it sends; another worker takes it over after that if the first died (at least 20s: an attempt takes up to 15s)",
				func(v string) error {
					d, err := time.ParseDuration(v)
					if err != nil || d < 20*time.Second || d > time.Hour {
						return fmt.Errorf("must be a duration from 20s to 1h")
					}
					lease = d
					return nil
				})
			return func(ctx context.Context, env service.Env) (*service.Instance, error) {
				allow := private == "allow" || private == "" && env.Storage != service.StorageMongoDB
				return build(ctx, env, WithPrivateTargets(allow), WithWorkers(workers), WithTenantWorkers(tenantWorkers), WithLease(lease))
			}
		},
	}
}

func build(ctx context.Context, env service.Env, opts ...Option) (*service.Instance, error) {
	var store Store = NewMemoryStore()
	if env.Mongo != nil {
		s, err := NewMongoStore(ctx, env.Mongo.Database("webhooks"))
		if err != nil {
			return nil, err
		}
		store = s
	}
	o, err := env.ObserveStore(Module().Name)
	if err != nil {
		return nil, err
	}
	store = observeStore(store, o) // after choosing it, so both kinds are observed
	w, err := New(store, append([]Option{WithClock(env.Clock), WithLogger(env.Log)}, opts...)...)
	if err != nil {
		return nil, err
	}
	if env.Metrics != nil {
		for _, c := range w.Collectors() {
			if err := env.Metrics.Register(c); err != nil {
				return nil, fmt.Errorf("webhooks: metrics: %w", err)
			}
		}
	}
	return &service.Instance{
		Register: func(s grpc.ServiceRegistrar) { webhooksv1.RegisterWebhooksServiceServer(s, w) },
		Ping:     w.Ping,
		Events:   w,
		Run:      w.RunDeliveries,
	}, nil
}
