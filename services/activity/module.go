package activity

import (
	"context"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"

	activityv1 "github.com/collab/collab/proto/collab/activity/v1"
	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"

	"github.com/collab/collab/internal/service"
)

// Module describes the activity service to the process that runs it. It asks documents for
// generations, and consumes the domain events of the features that have activity and the
// lifecycle events its records follow.
func Module() service.Module {
	return service.Module{
		Name:        "activity",
		GRPCService: activityv1.ActivityService_ServiceDesc.ServiceName,
		Gateway: func(ctx context.Context, mux *runtime.ServeMux, conn grpc.ClientConnInterface) error {
			return activityv1.RegisterActivityServiceHandlerClient(ctx, mux, activityv1.NewActivityServiceClient(conn))
		},
		Calls:    []string{"documents"},
		Consumes: consumes,
		Setup:    func(*service.Flags) service.BuildFunc { return build },
	}
}

func build(ctx context.Context, env service.Env) (*service.Instance, error) {
	var store Store = NewMemoryStore()
	if env.Mongo != nil {
		s, err := NewMongoStore(ctx, env.Mongo.Database("activity"))
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
	a, err := New(store, documentsv1.NewDocumentsServiceClient(env.Conn("documents")), env.Secret, WithClock(env.Clock), WithLogger(env.Log))
	if err != nil {
		return nil, err
	}
	return &service.Instance{
		Register: func(s grpc.ServiceRegistrar) { activityv1.RegisterActivityServiceServer(s, a) },
		Ping:     a.Ping,
		Events:   a,
	}, nil
}
