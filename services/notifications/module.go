package notifications

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	notificationsv1 "github.com/collab/collab/proto/collab/notifications/v1"
	usersv1 "github.com/collab/collab/proto/collab/users/v1"
	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"

	"github.com/collab/collab/internal/service"
)

// Module describes the notifications service to the process that runs it. It asks documents
// for organizations and documents, users for an organization's members, access who may read a
// document, and workspace for the Slack webhook; it publishes notification.add and fans it out
// itself (the outbox's gate) before anyone else gets it.
func Module() service.Module {
	return service.Module{
		Name:        "notifications",
		GRPCService: notificationsv1.NotificationsService_ServiceDesc.ServiceName,
		Gateway: func(ctx context.Context, mux *runtime.ServeMux, conn grpc.ClientConnInterface) error {
			return notificationsv1.RegisterNotificationsServiceHandlerClient(ctx, mux, notificationsv1.NewNotificationsServiceClient(conn))
		},
		Calls:     []string{"documents", "users", "access", "workspace"},
		Publishes: []string{eventNotificationAdd},
		Consumes:  consumes,
		Setup: func(f *service.Flags) service.BuildFunc {
			var private string
			f.Func("slack-private-targets", "", "post Slack notifications to loopback, private and link-local addresses: allow or deny; default allow unless --mongo-uri is set",
				func(v string) error {
					if v != "" && v != "allow" && v != "deny" {
						return fmt.Errorf("must be allow or deny")
					}
					private = v
					return nil
				})
			quotas := DefaultQuotas
			f.Func("notifications-recipients-per-minute", strconv.Itoa(DefaultQuotas.RecipientsPerMinute),
				"the recipients a workspace's notifications may reach in a minute (Add Notifications answers RESOURCE_EXHAUSTED past it), or off",
				quotaFlag(&quotas.RecipientsPerMinute))
			f.Func("notifications-inbox-limit", strconv.Itoa(DefaultQuotas.InboxSize),
				"the notifications a user's inbox in an organization may hold (Add Notifications answers RESOURCE_EXHAUSTED past it), or off",
				quotaFlag(&quotas.InboxSize))
			return func(ctx context.Context, env service.Env) (*service.Instance, error) {
				return build(ctx, env, private == "allow" || private == "" && env.Storage != service.StorageMongoDB, quotas)
			}
		},
	}
}

// quotaFlag parses a quota: a positive number, or off (0).
func quotaFlag(v *int) func(string) error {
	positive := service.IntFunc(v, 1, -1)
	return func(s string) error {
		if s == "off" {
			*v = 0
			return nil
		}
		if err := positive(s); err != nil {
			return fmt.Errorf("%w, or off", err)
		}
		return nil
	}
}

func build(ctx context.Context, env service.Env, slackPrivate bool, quotas Quotas) (*service.Instance, error) {
	if env.Outbox == nil {
		return nil, errors.New("notifications: the process gave no outbox")
	}
	var store Store = NewMemoryStore()
	if env.Mongo != nil {
		s, err := NewMongoStore(ctx, env.Mongo.Database("notifications"))
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
	peers := Peers{
		Documents: documentsv1.NewDocumentsServiceClient(env.Conn("documents")),
		Users:     usersv1.NewUsersServiceClient(env.Conn("users")),
		Access:    accessv1.NewAccessServiceClient(env.Conn("access")),
		Workspace: workspacev1.NewWorkspaceServiceClient(env.Conn("workspace")),
	}
	n, err := New(store, peers, env.Outbox, env.Secret, WithClock(env.Clock), WithLogger(env.Log), WithMail(env.Email), WithSlackPrivateTargets(slackPrivate),
		WithQuotas(quotas))
	if err != nil {
		return nil, err
	}
	if env.Metrics != nil {
		for _, c := range n.Collectors() {
			if err := env.Metrics.Register(c); err != nil {
				return nil, fmt.Errorf("notifications: metrics: %w", err)
			}
		}
	}
	return &service.Instance{
		Register: func(s grpc.ServiceRegistrar) { notificationsv1.RegisterNotificationsServiceServer(s, n) },
		Ping:     n.Ping,
		Events:   n,
		Run:      n.RunDeliveries,
	}, nil
}
