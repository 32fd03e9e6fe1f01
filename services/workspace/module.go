package workspace

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"

	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"

	"github.com/collab/collab/internal/service"
)

// Module describes the workspace service to the process that runs it: it checks every
// credential for the other services and owns the development workspace of a local run.
func Module() service.Module {
	return service.Module{
		Name:          "workspace",
		GRPCService:   workspacev1.WorkspaceService_ServiceDesc.ServiceName,
		Authenticates: true,
		Gateway: func(ctx context.Context, mux *runtime.ServeMux, conn grpc.ClientConnInterface) error {
			return workspacev1.RegisterWorkspaceServiceHandlerClient(ctx, mux, workspacev1.NewWorkspaceServiceClient(conn))
		},
		Setup: setup,
	}
}

// publishedDev are the development credentials the README and docs publish; tokens an operator
// chose instead are secrets like any other.
func publishedDev() service.DevCredentials {
	//nolint:gosec // G101: published on purpose (README); --mongo-uri turns them off
	return service.DevCredentials{WorkspaceID: "dev-workspace", WorkspaceToken: "dev-workspace-token", APIKey: "dev-api-key", AuthToken: "dev-auth-token"}
}

// setup declares the workspace service's flags: rate limits, the email grace period and the
// development workspace.
func setup(f *service.Flags) service.BuildFunc {
	limits := DefaultRateLimits
	f.Func("rate-limit", "", "off, or per-minute limits like createWorkspace=10,getWorkspace=60,emailStatus=20,emailStatusPerAddress=60", func(v string) (err error) {
		limits, err = ParseRateLimits(v)
		return err
	})
	grace := f.Duration("email-grace-period", DefaultEmailGracePeriod, "how long API keys work before the owner email is verified")
	// The development workspace: "auto" makes it unless data lives in an operator's MongoDB.
	devMode := "auto"
	f.Func("dev-workspace", "", "create the development workspace: true or false; default true unless --mongo-uri is set", func(v string) error {
		if strings.TrimSpace(v) == "" {
			devMode = "auto"
			return nil
		}
		on, err := service.ParseSwitch(v)
		devMode = map[bool]string{true: "on", false: "off"}[on]
		return err
	})
	published := publishedDev()
	devID := f.String("dev-workspace-id", published.WorkspaceID, "development workspace id")
	devToken := f.Secret("dev-workspace-token", published.WorkspaceToken, "development workspace auth token")
	devKey := f.String("dev-api-key", published.APIKey, "development API key")
	devAuth := f.Secret("dev-auth-token", published.AuthToken, "development API key's auth token")
	devEmail := f.String("dev-owner-email", "dev@localhost", "development workspace owner email")

	return func(ctx context.Context, env service.Env) (*service.Instance, error) {
		var store Store = NewMemoryStore()
		if env.Mongo != nil {
			s, err := NewMongoStore(ctx, env.Mongo.Database("workspace"))
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
		ws, err := New(store, env.Secret,
			WithClock(env.Clock), WithLogger(env.Log), WithEmailSender(env.Email),
			WithRateLimits(limits), WithEmailGracePeriod(*grace), WithPublicURL(env.PublicURL))
		if err != nil {
			return nil, err
		}
		inst := &service.Instance{
			Register:      func(s grpc.ServiceRegistrar) { workspacev1.RegisterWorkspaceServiceServer(s, ws) },
			Ping:          ws.Ping,
			Authenticator: ws,
		}
		if devMode == "on" || devMode == "auto" && env.Storage != service.StorageMongoDB {
			dev := service.DevCredentials{WorkspaceID: *devID, WorkspaceToken: *devToken, APIKey: *devKey, AuthToken: *devAuth, OwnerEmail: *devEmail}
			dev.Published = dev.WorkspaceToken == published.WorkspaceToken && dev.AuthToken == published.AuthToken
			dev.AnyPublished = dev.WorkspaceToken == published.WorkspaceToken || dev.AuthToken == published.AuthToken
			if err := ws.EnsureDevWorkspace(ctx, dev); err != nil {
				return nil, err
			}
			inst.Dev = &dev
		}
		return inst, nil
	}
}

// ParseRateLimits reads "off", "" (defaults) or a list such as "createWorkspace=10,emailStatus=5"
// (calls per minute; names not listed keep their defaults; 0 means unlimited).
func ParseRateLimits(v string) (RateLimits, error) {
	limits := DefaultRateLimits
	v = strings.TrimSpace(v)
	switch strings.ToLower(v) {
	case "", "on", "default":
		return limits, nil
	case "off":
		return RateLimits{}, nil
	}
	for _, part := range strings.Split(v, ",") {
		name, num, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.Atoi(strings.TrimSpace(num))
		if !ok || err != nil || n < 0 {
			return limits, fmt.Errorf("%q is not name=calls-per-minute", part)
		}
		switch strings.TrimSpace(name) {
		case "createWorkspace":
			limits.CreateWorkspace = n
		case "getWorkspace":
			limits.GetWorkspace = n
		case "emailStatus":
			limits.EmailStatus = n
		case "emailStatusPerAddress":
			limits.EmailStatusPerAddress = n
		default:
			return limits, fmt.Errorf("unknown limit %q (createWorkspace, getWorkspace, emailStatus, emailStatusPerAddress)", name)
		}
	}
	return limits, nil
}
