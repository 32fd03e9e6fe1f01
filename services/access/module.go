package access

import (
	"context"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"

	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/service"
)

// Module describes the access service to the process that runs it. It asks documents for the
// resources it resolves, and drops or moves grants as resources go.
func Module() service.Module {
	return service.Module{
		Name:        "access",
		GRPCService: accessv1.AccessService_ServiceDesc.ServiceName,
		Gateway: func(ctx context.Context, mux *runtime.ServeMux, conn grpc.ClientConnInterface) error {
			return accessv1.RegisterAccessServiceHandlerClient(ctx, mux, accessv1.NewAccessServiceClient(conn))
		},
		// documents resolves resources; workspace reports API keys' token generations to
		// VerifyToken (besides authenticating callers, as for every service).
		Calls: []string{"documents", "workspace"},
		Consumes: []string{lifecycle.OrganizationDeleted, lifecycle.DocumentDeleted, lifecycle.FolderDeleted,
			lifecycle.DocumentMigrated, lifecycle.UsersRemoved},
		Setup: func(*service.Flags) service.BuildFunc { return build },
	}
}

func build(ctx context.Context, env service.Env) (*service.Instance, error) {
	var store Store = NewMemoryStore()
	if env.Mongo != nil {
		s, err := NewMongoStore(ctx, env.Mongo.Database("access"))
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
	a, err := New(store, env.Secret, documentsv1.NewDocumentsServiceClient(env.Conn("documents")), WithClock(env.Clock), WithLogger(env.Log),
		WithWorkspace(workspacev1.NewWorkspaceServiceClient(env.Conn("workspace"))))
	if err != nil {
		return nil, err
	}
	return &service.Instance{
		Register: func(s grpc.ServiceRegistrar) { accessv1.RegisterAccessServiceServer(s, a) },
		Ping:     a.Ping,
		Events:   a,
	}, nil
}
