package comments

import (
	"context"
	"errors"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
	commentsv1 "github.com/collab/collab/proto/collab/comments/v1"
	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"

	"github.com/collab/collab/internal/service"
)

// Module describes the comments service to the process that runs it. It asks documents for
// generations (and to create organizations and documents) and access to verify end users,
// publishes an event per change, and consumes the lifecycle events its threads follow.
func Module() service.Module {
	return service.Module{
		Name:        "comments",
		GRPCService: commentsv1.CommentsService_ServiceDesc.ServiceName,
		Gateway: func(ctx context.Context, mux *runtime.ServeMux, conn grpc.ClientConnInterface) error {
			return commentsv1.RegisterCommentsServiceHandlerClient(ctx, mux, commentsv1.NewCommentsServiceClient(conn))
		},
		Calls:     []string{"documents", "access"},
		Publishes: publishes,
		Consumes:  consumes,
		// The live stream, Server-Sent Events per document (build's Instance.Routes serves it).
		Routes:     []string{StreamPrefix},
		RoutesName: "The comments stream",
		Setup: func(f *service.Flags) service.BuildFunc {
			recheck := DefaultStreamRecheck
			f.Func("comments-stream-recheck", DefaultStreamRecheck.String(), "how often each open comments live stream asks again whether its token and role still hold (a reset auth token, a revoked role, a deleted document), from 10s to 24h",
				func(v string) error {
					d, err := time.ParseDuration(v)
					if err != nil || d < 10*time.Second || d > 24*time.Hour {
						return errors.New("must be a duration from 10s to 24h, e.g. 1m")
					}
					recheck = d
					return nil
				})
			return func(ctx context.Context, env service.Env) (*service.Instance, error) { return build(ctx, env, recheck) }
		},
	}
}

func build(ctx context.Context, env service.Env, recheck time.Duration) (*service.Instance, error) {
	if env.Outbox == nil {
		return nil, errors.New("comments: the process gave no outbox")
	}
	var store Store = NewMemoryStore()
	if env.Mongo != nil {
		s, err := NewMongoStore(ctx, env.Mongo.Database("comments"))
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
	s, err := New(store, documentsv1.NewDocumentsServiceClient(env.Conn("documents")), accessv1.NewAccessServiceClient(env.Conn("access")),
		env.Outbox, env.Secret, WithClock(env.Clock), WithLogger(env.Log), WithWakeups(env.Wakeup, env.WakeupSafetyPoll), WithStreamRecheck(recheck))
	if err != nil {
		return nil, err
	}
	streams := newStreamHub(s)
	return &service.Instance{
		Register: func(r grpc.ServiceRegistrar) { commentsv1.RegisterCommentsServiceServer(r, s) },
		Ping:     s.Ping,
		Events:   s,
		Routes:   []service.Route{{Prefix: StreamPrefix, Handler: streams}},
		Run: func(ctx context.Context) {
			<-ctx.Done()
			streams.Close()
		},
	}, nil
}
