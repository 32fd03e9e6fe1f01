package users

import (
	"context"
	"errors"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	usersv1 "github.com/collab/collab/proto/collab/users/v1"

	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/service"
)

// Module describes the users service to the process that runs it. It asks documents whether
// resources exist and access to give roles, and publishes users.removed.
func Module() service.Module {
	return service.Module{
		Name:        "users",
		GRPCService: usersv1.UsersService_ServiceDesc.ServiceName,
		Gateway: func(ctx context.Context, mux *runtime.ServeMux, conn grpc.ClientConnInterface) error {
			return usersv1.RegisterUsersServiceHandlerClient(ctx, mux, usersv1.NewUsersServiceClient(conn))
		},
		Calls:     []string{"documents", "access"},
		Publishes: []string{eventUsersRemoved},
		Consumes:  []string{lifecycle.OrganizationDeleted, lifecycle.DocumentDeleted, lifecycle.DocumentMigrated, lifecycle.UsersRemoved},
		Setup:     func(*service.Flags) service.BuildFunc { return build },
	}
}

func build(ctx context.Context, env service.Env) (*service.Instance, error) {
	if env.Outbox == nil {
		return nil, errors.New("users: the process gave no outbox")
	}
	var store Store = NewMemoryStore()
	if env.Mongo != nil {
		s, err := NewMongoStore(ctx, env.Mongo.Database("users"))
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
	u, err := New(store, documentsv1.NewDocumentsServiceClient(env.Conn("documents")), accessv1.NewAccessServiceClient(env.Conn("access")),
		env.Outbox, WithClock(env.Clock), WithLogger(env.Log))
	if err != nil {
		return nil, err
	}
	return &service.Instance{
		Register: func(s grpc.ServiceRegistrar) { usersv1.RegisterUsersServiceServer(s, u) },
		Ping:     u.Ping,
		Events:   u,
	}, nil
}
