package events

import (
	"context"
	"errors"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"

	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	eventsv1 "github.com/collab/collab/proto/collab/events/v1"

	"github.com/collab/collab/internal/service"
)

// Module describes the events service to the process that runs it. It asks documents for
// generations and publishes every domain event type.
func Module() service.Module {
	return service.Module{
		Name:        "events",
		GRPCService: eventsv1.EventsService_ServiceDesc.ServiceName,
		Gateway: func(ctx context.Context, mux *runtime.ServeMux, conn grpc.ClientConnInterface) error {
			return eventsv1.RegisterEventsServiceHandlerClient(ctx, mux, eventsv1.NewEventsServiceClient(conn))
		},
		Calls:     []string{"documents"},
		Publishes: []string{"*"},
		Setup:     func(*service.Flags) service.BuildFunc { return build },
	}
}

func build(_ context.Context, env service.Env) (*service.Instance, error) {
	if env.Outbox == nil {
		return nil, errors.New("events: the process gave no outbox")
	}
	s, err := New(documentsv1.NewDocumentsServiceClient(env.Conn("documents")), env.Outbox, WithClock(env.Clock), WithLogger(env.Log))
	if err != nil {
		return nil, err
	}
	return &service.Instance{
		Register: func(r grpc.ServiceRegistrar) { eventsv1.RegisterEventsServiceServer(r, s) },
		// The service keeps nothing but its outbox.
		Ping: env.Outbox.Ping,
	}, nil
}
