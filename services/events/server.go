package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"google.golang.org/protobuf/proto"

	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	eventsv1 "github.com/collab/collab/proto/collab/events/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/ids"
	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/outbox"
	"github.com/collab/collab/internal/validate"
)

// Limits of one event.
const (
	maxDataBytes   = 256 << 10 // data, encoded
	maxFieldLength = 256       // targetEntityId, channel, actionUser fields
	// maxTimestamp is the year 9999 in Unix milliseconds: a timestamp internal callers set
	// beyond it is a mistake.
	maxTimestamp = 253402300799999
)

const (
	statusSuccess  = "success"
	msgPublished   = "Event published successfully."
	msgOrgMissing  = "Organization does not exist."
	generatedIDLen = 24
)

// Publisher stores an event durably and relays it (*outbox.Outbox). Publish answers
// outbox.ErrDuplicate for an id stored before.
type Publisher interface {
	Publish(ctx context.Context, e *lifecyclev1.Event) (*outbox.Record, error)
}

var (
	_ eventsv1.EventsServiceServer = (*Server)(nil)
	_ Publisher                    = (*outbox.Outbox)(nil)
)

// Server implements EventsService.
type Server struct {
	eventsv1.UnimplementedEventsServiceServer

	docs   documentsv1.DocumentsServiceClient
	outbox Publisher
	clock  clock.Clock
	log    *slog.Logger
}

// Option configures a Server.
type Option func(*Server)

func WithClock(c clock.Clock) Option   { return func(s *Server) { s.clock = c } }
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// New returns a Server publishing through outbox; docs tells the generations of organizations
// and documents.
func New(docs documentsv1.DocumentsServiceClient, outbox Publisher, opts ...Option) (*Server, error) {
	if docs == nil || outbox == nil {
		return nil, errors.New("events: a documents client and an outbox are required")
	}
	s := &Server{docs: docs, outbox: outbox, clock: clock.Real(), log: slog.Default()}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// PublishEvent publishes a product's event under the calling API key.
func (s *Server) PublishEvent(ctx context.Context, req *eventsv1.PublishEventRequest) (*eventsv1.PublishEventResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	e := &eventsv1.Event{
		Id: req.GetId(), Type: req.GetType(), WorkspaceId: c.WorkspaceID, ApiKey: c.APIKey,
		OrganizationId: req.GetOrganizationId(), DocumentId: req.GetDocumentId(), ActionUser: req.GetActionUser(),
		TargetEntityId: req.GetTargetEntityId(), Channel: req.GetChannel(), Data: req.GetData(),
	}
	id, _, err := s.publish(ctx, e)
	if err != nil {
		return nil, err
	}
	return &eventsv1.PublishEventResponse{Status: statusSuccess, Message: msgPublished, Data: &eventsv1.PublishedEvent{EventId: id}}, nil
}

// Publish publishes an internal caller's event on the tenant it names.
func (s *Server) Publish(ctx context.Context, req *eventsv1.PublishRequest) (*eventsv1.PublishResponse, error) {
	in := req.GetEvent()
	if in == nil {
		return nil, apierr.InvalidArgument("event is required.")
	}
	if in.GetApiKey() == "" || in.GetWorkspaceId() == "" {
		return nil, apierr.InvalidArgument("event.apiKey and event.workspaceId are required.")
	}
	e := proto.Clone(in).(*eventsv1.Event)
	// The service sets these; a caller's values would let one tenant's event pass as filed
	// under generations it never had.
	e.OrganizationGeneration, e.DocumentGeneration = "", ""
	id, dup, err := s.publish(ctx, e)
	if err != nil {
		return nil, err
	}
	return &eventsv1.PublishResponse{EventId: id, Duplicate: dup}, nil
}

// publish checks the event, completes it and stores it. A repeated id answers the stored
// event's id and publishes nothing.
func (s *Server) publish(ctx context.Context, e *eventsv1.Event) (string, bool, error) {
	if err := check(e); err != nil {
		return "", false, err
	}
	if e.Id == "" {
		e.Id = "evt_" + ids.Random(generatedIDLen)
	}
	if e.Timestamp == 0 {
		e.Timestamp = float64(s.clock.Now().UTC().Truncate(time.Millisecond).UnixMilli())
	}
	res, err := s.docs.ResolveResources(ctx, &documentsv1.ResolveResourcesRequest{
		ApiKey: e.GetApiKey(), OrganizationId: e.GetOrganizationId(), DocumentIds: nonEmpty(e.GetDocumentId()),
	})
	if err != nil {
		return "", false, fmt.Errorf("events: resolving %s: %w", e.GetOrganizationId(), err)
	}
	if !res.GetOrganizationExists() {
		return "", false, apierr.NotFound(msgOrgMissing)
	}
	e.OrganizationGeneration = res.GetOrganizationGeneration()
	if d := res.GetDocuments()[e.GetDocumentId()]; d.GetExists() {
		e.DocumentGeneration = d.GetGeneration()
	}
	if _, err := s.outbox.Publish(ctx, lifecycle.Domain(e)); err != nil {
		if errors.Is(err, outbox.ErrDuplicate) {
			return e.GetId(), true, nil
		}
		return "", false, err
	}
	s.log.DebugContext(ctx, "event published", "event_id", e.GetId(), "type", e.GetType())
	return e.GetId(), false, nil
}

func nonEmpty(id string) []string {
	if id == "" {
		return nil
	}
	return []string{id}
}

// check refuses an event a consumer could not file, before anything is stored.
func check(e *eventsv1.Event) error {
	if err := validate.TokenID("id", e.GetId()); err != nil {
		return err
	}
	if err := validate.EventType("type", e.GetType()); err != nil {
		return err
	}
	if lifecycle.Reserved(e.GetType()) {
		return apierr.InvalidArgument("type %s is reserved for collab's own events.", e.GetType())
	}
	if err := validate.ID("organizationId", e.GetOrganizationId()); err != nil {
		return err
	}
	if err := validate.OptionalID("documentId", e.GetDocumentId()); err != nil {
		return err
	}
	for field, v := range map[string]string{
		"targetEntityId": e.GetTargetEntityId(), "channel": e.GetChannel(),
		"actionUser.userId": e.GetActionUser().GetUserId(),
	} {
		if err := validate.OptionalID(field, v); err != nil {
			return err
		}
	}
	if err := validate.Name("actionUser.name", e.GetActionUser().GetName(), maxFieldLength); err != nil {
		return err
	}
	if email := e.GetActionUser().GetEmail(); email != "" && !validate.IsEmail(email) {
		return apierr.InvalidArgument("actionUser.email must be a valid email address.")
	}
	if t := e.GetTimestamp(); math.IsNaN(t) || math.IsInf(t, 0) || t < 0 || t > maxTimestamp {
		return apierr.InvalidArgument("timestamp must be Unix milliseconds.")
	}
	if e.GetData() != nil && proto.Size(e.GetData()) > maxDataBytes {
		return apierr.InvalidArgument("data must be at most %d KiB.", maxDataBytes>>10)
	}
	return nil
}
