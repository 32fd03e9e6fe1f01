// Package lifecycle is the receiving end of durable events: one LifecycleService server per
// process routes each delivered event to the handler of the named local service.
package lifecycle

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/ids"
)

// Types of the lifecycle events (<feature>.<action>). Producers write them; consumers name the
// ones they handle in their service.Module, which routes each type to its consumers.
const (
	OrganizationDeleted = "organization.deleted"
	DocumentDeleted     = "document.deleted"
	FolderDeleted       = "folder.deleted"
	DocumentMigrated    = "document.migrated"
	LocationDataDeleted = "location.data_deleted"
	UsersRemoved        = "users.removed"
)

// Ref is the key under which other services keep records about one generation of a resource
// (an organization, folder or document: collab.lifecycle.v1 explains generations): its id, and
// its generation after a record separator. Ids are validated and never hold control
// characters, so no two (id, generation) pairs share a key; the empty generation (records from
// before generations) keys by the bare id.
func Ref(id, generation string) string {
	if generation == "" {
		return id
	}
	return id + "\x1e" + generation
}

// SplitRef is Ref's inverse: the id and generation a key was made of.
func SplitRef(ref string) (id, generation string) {
	id, generation, _ = strings.Cut(ref, "\x1e")
	return id, generation
}

// Incarnation names one generation of a resource.
type Incarnation struct {
	ID         string
	Generation string
}

// Ref is the key of records about the incarnation (the package-level Ref).
func (i Incarnation) Ref() string { return Ref(i.ID, i.Generation) }

// DeletedDocuments returns the documents a document.deleted event names, each with its
// generation; an event from before generations names those of the empty one.
func DeletedDocuments(e *lifecyclev1.Event, p *lifecyclev1.DocumentsDeleted) ([]Incarnation, error) {
	ids, gens := p.GetDocumentIds(), p.GetGenerations()
	if len(gens) != 0 && len(gens) != len(ids) {
		return nil, Invalid(e, "generation for every document")
	}
	out := make([]Incarnation, len(ids))
	for i, id := range ids {
		out[i].ID = id
		if len(gens) > 0 {
			out[i].Generation = gens[i]
		}
	}
	return out, nil
}

// Refs returns the keys of the incarnations.
func Refs(in []Incarnation) []string {
	out := make([]string, len(in))
	for i, v := range in {
		out[i] = v.Ref()
	}
	return out
}

// NewGeneration returns the generation of a resource being created.
func NewGeneration() string { return ids.Random(16) }

// Handler applies one event to a service's data. It must be idempotent: the same event can
// arrive again, with part of its effect already applied. An error with code InvalidArgument,
// FailedPrecondition, AlreadyExists or NotFound fails the event for good; any other error is
// retried.
type Handler interface {
	HandleEvent(ctx context.Context, e *lifecyclev1.Event) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, e *lifecyclev1.Event) error

func (f HandlerFunc) HandleEvent(ctx context.Context, e *lifecyclev1.Event) error { return f(ctx, e) }

// Dispatcher implements LifecycleService for the services of one process.
type Dispatcher struct {
	lifecyclev1.UnimplementedLifecycleServiceServer

	mu       sync.RWMutex
	handlers map[string]Handler
}

// NewDispatcher returns a Dispatcher with no handlers.
func NewDispatcher() *Dispatcher { return &Dispatcher{handlers: map[string]Handler{}} }

// Register routes events for service to h.
func (d *Dispatcher) Register(service string, h Handler) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.handlers[service] = h
}

func (d *Dispatcher) HandleEvent(ctx context.Context, req *lifecyclev1.HandleEventRequest) (*lifecyclev1.HandleEventResponse, error) {
	d.mu.RLock()
	h, ok := d.handlers[req.GetService()]
	d.mu.RUnlock()
	if !ok {
		// Unavailable, not NotFound: a misrouted delivery is retried, never dropped.
		return nil, status.Errorf(codes.Unavailable, "service %q does not run in this process", req.GetService())
	}
	if req.GetEvent() == nil || req.GetEvent().GetId() == "" {
		return nil, status.Error(codes.InvalidArgument, "event with an id is required")
	}
	if err := h.HandleEvent(ctx, req.GetEvent()); err != nil {
		return nil, fmt.Errorf("%s handling %s %s: %w", req.GetService(), req.GetEvent().GetType(), req.GetEvent().GetId(), err)
	}
	return &lifecyclev1.HandleEventResponse{}, nil
}

// Permanent reports whether a delivery error means the event can never be applied.
func Permanent(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.FailedPrecondition, codes.AlreadyExists, codes.NotFound:
		return true
	}
	return false
}

// Invalid refuses an event that lacks what it needs. InvalidArgument fails it for good:
// redelivering it cannot help.
func Invalid(e *lifecyclev1.Event, what string) error {
	return apierr.InvalidArgument("event %s (%s) has no %s", e.GetId(), e.GetType(), what)
}

// Scoped returns the tenant and organization of an event that must have both.
func Scoped(e *lifecyclev1.Event) (apiKey, org string, err error) {
	if e.GetApiKey() == "" || e.GetOrganizationId() == "" {
		return "", "", Invalid(e, "api key or organization")
	}
	return e.GetApiKey(), e.GetOrganizationId(), nil
}
