package webhooks

import (
	"context"
	"fmt"

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
			return func(ctx context.Context, env service.Env) (*service.Instance, error) {
				allow := private == "allow" || private == "" && env.Storage != service.StorageMongoDB
				return build(ctx, env, allow)
			}
		},
	}
}

func build(ctx context.Context, env service.Env, allowPrivate bool) (*service.Instance, error) {
	var store Store = NewMemoryStore()
	if env.Mongo != nil {
		s, err := NewMongoStore(ctx, env.Mongo.Database("webhooks"))
		if err != nil {
			return nil, err
		}
		store = s
	}
	w, err := New(store, WithClock(env.Clock), WithLogger(env.Log), WithPrivateTargets(allowPrivate))
	if err != nil {
		return nil, err
	}
	return &service.Instance{
		Register: func(s grpc.ServiceRegistrar) { webhooksv1.RegisterWebhooksServiceServer(s, w) },
		Ping:     w.Ping,
		Events:   w,
		Run:      w.RunDeliveries,
	}, nil
}
