package documents

import (
	"context"
	"errors"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"

	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"

	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/service"
)

// Module describes the documents service to the process that runs it. It publishes the
// deletions and migrations every data service follows, and is the first to apply them.
func Module() service.Module {
	return service.Module{
		Name:        "documents",
		GRPCService: documentsv1.DocumentsService_ServiceDesc.ServiceName,
		Gateway: func(ctx context.Context, mux *runtime.ServeMux, conn grpc.ClientConnInterface) error {
			return documentsv1.RegisterDocumentsServiceHandlerClient(ctx, mux, documentsv1.NewDocumentsServiceClient(conn))
		},
		Publishes: []string{eventOrganizationDeleted, eventDocumentsDeleted, eventFolderDeleted, eventDocumentMigrated, eventLocationDataDeleted},
		Consumes:  []string{lifecycle.OrganizationDeleted, lifecycle.DocumentDeleted, lifecycle.FolderDeleted, lifecycle.DocumentMigrated},
		Setup:     func(*service.Flags) service.BuildFunc { return build },
	}
}

func build(ctx context.Context, env service.Env) (*service.Instance, error) {
	if env.Outbox == nil {
		return nil, errors.New("documents: the process gave no outbox")
	}
	var store Store = NewMemoryStore()
	if env.Mongo != nil {
		s, err := NewMongoStore(ctx, env.Mongo.Database("documents"))
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
	d, err := New(store, env.Secret, env.Outbox, WithClock(env.Clock), WithLogger(env.Log))
	if err != nil {
		return nil, err
	}
	return &service.Instance{
		Register: func(s grpc.ServiceRegistrar) { documentsv1.RegisterDocumentsServiceServer(s, d) },
		Ping:     d.Ping,
		Events:   d,
	}, nil
}
