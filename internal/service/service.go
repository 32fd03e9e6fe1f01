// Package service is what a collab service declares about itself to the process that runs it
// (docs/architecture.md, "Adding a service"): its name, its gRPC and HTTP registration, the
// services it calls, the events it publishes and consumes, its flags, and how it is built from
// storage. Each service's package exports one Module; the composition root lists them, and
// names, flags, readiness, event routing and peer checks all derive from that list. This
// package imports no service, so the arrows point down: services → service → platform packages.
package service

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"

	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/email"
	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/mongodb"
	"github.com/collab/collab/internal/outbox"
	"github.com/collab/collab/internal/storeobserve"
	"github.com/collab/collab/internal/wakeup"
)

// Module describes one service.
type Module struct {
	// Name is the short name: the value of --services, the peer flag --<name>-addr, the
	// MongoDB database <prefix>_<name>, the event subscriber name.
	Name string
	// GRPCService is the full name of its main gRPC service, whose health readiness reports.
	GRPCService string
	// Gateway registers its HTTP routes (grpc-gateway's generated Register...HandlerClient);
	// nil for a service with no HTTP operation.
	Gateway func(ctx context.Context, mux *runtime.ServeMux, conn grpc.ClientConnInterface) error
	// Authenticates marks the one service that checks credentials for every other one
	// (WorkspaceService.Authenticate); its Instance provides the Authenticator.
	Authenticates bool
	// Calls are the services it calls directly, besides the authenticating one, which every
	// service needs.
	Calls []string
	// Publishes are the event types (or patterns, below) it writes to its outbox; the process
	// gives it an outbox (Env.Outbox) that delivers each type to the services consuming it.
	Publishes []string
	// Consumes are the event types (or patterns, below) its Instance.Events handles. A producer
	// that consumes its own event gets it before anyone else (the outbox's gate); other
	// consumers get it independently of each other.
	Consumes []string
	// Routes are the path prefixes of the plain HTTP routes its Instance serves (Instance.Routes),
	// declared here so that a process can tell before building anything which prefixes belong
	// to the service: a gateway that does not run it proxies them to the service's processes
	// (--<name>-http-addr), and the deployment files open the service's HTTP port. Each is a
	// subtree of http.ServeMux ("/v2/crdt/sync/"). The process refuses an Instance whose routes
	// differ from them (CheckRoutes).
	Routes []string
	// RoutesName names what the routes serve in messages to callers ("Live sync"); empty: "The
	// HTTP routes".
	RoutesName string
	// Setup declares the service's own flags (none, for most) and returns how to build the
	// service once they are parsed. Required.
	Setup func(f *Flags) BuildFunc
}

// BuildFunc builds a service on the process's storage and connections.
type BuildFunc func(ctx context.Context, env Env) (*Instance, error)

// Storage says where data lives, for defaults that depend on it (the development workspace is
// made unless data lives in an operator's MongoDB).
type Storage int

const (
	StorageMemory Storage = iota
	StorageEmbedded
	StorageMongoDB
)

// Env is what the process gives a service to build it.
type Env struct {
	Log   *slog.Logger
	Clock clock.Clock
	// Secret is the deployment's master secret (page tokens, sealed keys).
	Secret []byte
	// Mongo is the MongoDB connection; nil means memory stores. A service keeps its data in
	// Mongo.Database(Name).
	Mongo   *mongodb.Conn
	Storage Storage
	// Email sends mail (SMTP, or the log in a local run).
	Email email.Sender
	// PublicURL is the HTTP API as callers reach it, for links in emails.
	PublicURL string
	// Conn returns a connection to a service, in this process or a peer, that carries the
	// internal credentials: the one to use for service-to-service calls.
	Conn func(service string) grpc.ClientConnInterface
	// Outbox is the service's durable event outbox, when it publishes events.
	Outbox *outbox.Outbox
	// Metrics is where the service registers its own Prometheus series (collab_<service>_...,
	// with bounded labels: no ids); never nil. Without --metrics-addr nothing serves it.
	Metrics prometheus.Registerer
	// Tracing is where the service starts its own spans (OpenTelemetry); nil when tracing is
	// off. Services take tracers through Tracer, which is a no-op then.
	Tracing trace.TracerProvider
	// Wakeup carries wake-up hints between the processes of the deployment (internal/wakeup):
	// on the NATS engine of --wakeup-url, or in this process only; never nil in a process
	// collabd builds. WakeupSafetyPoll is how often, with an engine, what waits for wake-ups
	// still reads the store in case one was lost; zero without an engine (poll as before).
	Wakeup           wakeup.Bus
	WakeupSafetyPoll time.Duration
}

// Tracer returns the named tracer of the process's provider, or a no-op one when tracing is
// off, so spans cost nothing unless an exporter is configured.
func (e Env) Tracer(name string) trace.Tracer {
	if e.Tracing == nil {
		return noop.NewTracerProvider().Tracer(name)
	}
	return e.Tracing.Tracer(name)
}

// ObserveStore returns the observer for the generated wrapper of the store named name (the
// service's name, or "<service>.outbox" for its outbox's), on the process's metrics and
// tracing.
func (e Env) ObserveStore(name string) (*storeobserve.Observer, error) {
	return storeobserve.New(name, storeobserve.Config{Metrics: e.Metrics, Tracing: e.Tracing, MongoDB: e.Mongo != nil})
}

// Instance is a built service.
type Instance struct {
	// Register puts the service's gRPC servers on s.
	Register func(s grpc.ServiceRegistrar)
	// Ping reports whether the service can serve: its store answers.
	Ping func(ctx context.Context) error
	// Events handles the event types of Module.Consumes.
	Events lifecycle.Handler
	// Run, when set, is the service's background work (a delivery queue): the process runs it
	// once the service is registered and cancels its context at shutdown, before the gRPC
	// server stops.
	Run func(ctx context.Context)
	// Authenticator checks credentials; set by the Authenticates module only.
	Authenticator authn.Authenticator
	// Dev holds the development workspace's credentials when the service made one.
	Dev *DevCredentials
	// Routes are plain HTTP routes the service serves itself, beside its gRPC API (the CRDT
	// service's WebSocket), one per prefix of Module.Routes: every process that runs the service
	// serves them on its HTTP listener, in front of the gateway when it runs there too; a
	// gateway elsewhere proxies them to it.
	Routes []Route
}

// Route is a path prefix and the handler of the requests under it.
type Route struct {
	Prefix  string
	Handler http.Handler
}

// CheckRoutes reports an Instance whose routes are not exactly the prefixes its Module
// declares: each declared prefix served once, with a handler, and nothing else.
func (m Module) CheckRoutes(inst *Instance) error {
	served := map[string]bool{}
	for _, r := range inst.Routes {
		switch {
		case !slices.Contains(m.Routes, r.Prefix):
			return fmt.Errorf("serves the route %q, which its module does not declare (Module.Routes %q)", r.Prefix, m.Routes)
		case served[r.Prefix]:
			return fmt.Errorf("serves the route %q twice", r.Prefix)
		case r.Handler == nil:
			return fmt.Errorf("serves the route %q without a handler", r.Prefix)
		}
		served[r.Prefix] = true
	}
	for _, p := range m.Routes {
		if !served[p] {
			return fmt.Errorf("does not serve the route %q its module declares", p)
		}
	}
	return nil
}

// CheckRoutePrefix reports a declared route prefix that is not a path subtree ("/a/b/").
func CheckRoutePrefix(p string) error {
	if !strings.HasPrefix(p, "/") || !strings.HasSuffix(p, "/") || len(p) < 2 || strings.ContainsAny(p, " {}?#") || strings.Contains(p, "//") {
		return fmt.Errorf("route prefix %q is not a path subtree such as /v2/crdt/sync/", p)
	}
	return nil
}

// DevCredentials are the fixed credentials of the development workspace a local run creates,
// so a newcomer's scripts keep working across restarts.
type DevCredentials struct {
	WorkspaceID    string
	WorkspaceToken string
	APIKey         string
	AuthToken      string
	OwnerEmail     string
	// Published is true when the tokens are the well-known ones the docs print; otherwise an
	// operator chose them, and they are secrets (the banner does not print them).
	Published bool
	// AnyPublished is true when either token is a published one: each opens the workspace on
	// its own (the workspace token for its settings, the auth token with the API key for every
	// operation), so either makes it anyone's who reads the docs.
	AnyPublished bool
}

// Event type patterns in Module.Publishes and Module.Consumes: an exact type
// ("document.deleted"), every action of a feature ("comment.*"), or every domain type ("*": all
// but the lifecycle types, which a consumer names exactly).

// ConsumesType reports whether any of the patterns takes the event type.
func ConsumesType(patterns []string, eventType string) bool {
	for _, p := range patterns {
		if matches(p, eventType) {
			return true
		}
	}
	return false
}

// Overlap reports whether some event type matches both one of the consumer's patterns and the
// published pattern. A published pattern never covers the reserved types (lifecycle.Reserved):
// only their producers publish them, by exact name, so the events service's "*" does not make
// it a producer of document.deleted.
func Overlap(consumes []string, published string) bool {
	for _, c := range consumes {
		if c == published || matches(c, published) || matches(published, c) && !lifecycle.Reserved(c) {
			return true
		}
	}
	return false
}

func matches(pattern, eventType string) bool {
	switch {
	case pattern == "*":
		return !lifecycle.IsLifecycle(eventType)
	case strings.HasSuffix(pattern, ".*"):
		return strings.HasPrefix(eventType, strings.TrimSuffix(pattern, "*"))
	default:
		return pattern == eventType
	}
}
