package activity

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	activityv1 "github.com/collab/collab/proto/collab/activity/v1"
	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	eventsv1 "github.com/collab/collab/proto/collab/events/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/cursor"
	"github.com/collab/collab/internal/ids"
	"github.com/collab/collab/internal/lifecycle"
)

const statusSuccess = "success"

// Messages the caller sees (docs/api.md, "Activity logs").
const (
	msgLogsRetrieved   = "Activity logs retrieved successfully."
	msgLogsUpdated     = "Activity logs updated successfully."
	msgAdded           = "Activity(s) added successfully."
	msgConfigRetrieved = "Activity config retrieved successfully."
	msgConfigUpdated   = "Activity config updated successfully."
	msgItemAdded       = "Activity added."
	msgItemExists      = "An activity with this id already exists."
	msgItemUpdated     = "Activity updated."
	msgItemMissing     = "Activity does not exist."
	msgItemImmutable   = "Activity is immutable and cannot be updated."
	msgOrgMissing      = "Organization does not exist."
	msgDocumentMissing = "Document does not exist."
	msgNoConfigField   = "Provide at least one of isEnabled, immutable, triggers."
)

var (
	_ activityv1.ActivityServiceServer = (*Server)(nil)
	_ lifecycle.Handler                = (*Server)(nil)
)

// Server implements the activity service and files domain events as activity records.
type Server struct {
	activityv1.UnimplementedActivityServiceServer

	store Store
	docs  documentsv1.DocumentsServiceClient
	pages *cursor.Sealer
	clock clock.Clock
	log   *slog.Logger
}

// Option configures a Server.
type Option func(*Server)

func WithClock(c clock.Clock) Option   { return func(s *Server) { s.clock = c } }
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// New returns a Server on store. docs tells the generations Add Activities files records
// under; secret keys the page tokens.
func New(store Store, docs documentsv1.DocumentsServiceClient, secret []byte, opts ...Option) (*Server, error) {
	if store == nil || docs == nil {
		return nil, errors.New("activity: a store and a documents client are required")
	}
	s := &Server{store: store, docs: docs, clock: clock.Real(), log: slog.Default()}
	for _, o := range opts {
		o(s)
	}
	key, err := cursor.DeriveKey(secret, "activity.logs")
	if err != nil {
		return nil, err
	}
	if s.pages, err = cursor.NewSealer(key, s.clock); err != nil {
		return nil, err
	}
	return s, nil
}

// Ping reports whether the store answers.
func (s *Server) Ping(ctx context.Context) error { return s.store.Ping(ctx) }

func (s *Server) now() int64 { return s.clock.Now().UnixMilli() }

// tokenPosition is the sealed form of a Position.
type tokenPosition struct {
	Timestamp int64  `json:"t"`
	ID        string `json:"i"`
}

func (s *Server) GetActivityLogs(ctx context.Context, req *activityv1.GetActivityLogsRequest) (*activityv1.GetActivityLogsResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	l, err := checkGet(req)
	if err != nil {
		return nil, err
	}
	// An unknown organization is NOT_FOUND, as for every other operation on one (an empty list
	// would read as an organization without activity).
	if _, _, err := s.generations(ctx, c.APIKey, l.org, ""); err != nil {
		return nil, err
	}
	scope := l.scope(c.APIKey)
	var after *Position
	if tok := req.GetPageToken(); tok != "" {
		var p tokenPosition
		if err := s.pages.Open(tok, scope, &p); err != nil {
			return nil, cursor.Refusal("pageToken", err)
		}
		after = &Position{Timestamp: p.Timestamp, ID: p.ID}
	}
	recs, err := s.store.List(ctx, c.APIKey, l.org, l.filter, after, l.desc, l.size+1)
	if err != nil {
		return nil, fmt.Errorf("list activities: %w", err)
	}
	resp := &activityv1.GetActivityLogsResponse{Status: statusSuccess, Message: msgLogsRetrieved, Data: []*activityv1.ActivityRecord{}}
	bytes, more := 0, len(recs) > l.size
	for i, r := range recs {
		if i == l.size {
			break
		}
		m := toProto(r)
		// A page of large records stops early; the token carries on where it stopped.
		if bytes += proto.Size(m); bytes > maxPageBytes && i > 0 {
			more = true
			break
		}
		resp.Data = append(resp.Data, m)
	}
	if more {
		last := recs[len(resp.Data)-1]
		tok, err := s.pages.Seal(scope, tokenPosition{Timestamp: last.Timestamp, ID: last.ID})
		if err != nil {
			return nil, fmt.Errorf("seal page token: %w", err)
		}
		resp.PageToken = &tok
	}
	return resp, nil
}

func (s *Server) UpdateActivityLogs(ctx context.Context, req *activityv1.UpdateActivityLogsRequest) (*activityv1.ItemResultsResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	patches, err := checkUpdates(req)
	if err != nil {
		return nil, err
	}
	data := map[string]*activityv1.ItemResult{}
	for i, a := range req.GetActivities() {
		err := s.store.Update(ctx, c.APIKey, req.GetOrganizationId(), a.GetId(), patches[i])
		switch {
		case err == nil:
			data[a.GetId()] = &activityv1.ItemResult{Success: true, Message: msgItemUpdated}
		case errors.Is(err, ErrNotFound):
			data[a.GetId()] = &activityv1.ItemResult{Message: msgItemMissing}
		case errors.Is(err, ErrImmutable):
			data[a.GetId()] = &activityv1.ItemResult{Message: msgItemImmutable}
		default:
			return nil, fmt.Errorf("update activity: %w", err)
		}
	}
	return &activityv1.ItemResultsResponse{Status: statusSuccess, Message: msgLogsUpdated, Data: data}, nil
}

func (s *Server) AddActivities(ctx context.Context, req *activityv1.AddActivitiesRequest) (*activityv1.ItemResultsResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	recs, err := checkAdds(req)
	if err != nil {
		return nil, err
	}
	org, doc := req.GetOrganizationId(), req.GetDocumentId()
	orgGen, docGen, err := s.generations(ctx, c.APIKey, org, doc)
	if err != nil {
		return nil, err
	}
	immutable, err := s.immutable(ctx, c.APIKey)
	if err != nil {
		return nil, err
	}
	now := s.now()
	for _, r := range recs {
		if r.ID == "" {
			r.ID = "act_" + ids.Random(24)
		}
		r.APIKey, r.OrganizationGeneration, r.DocumentGeneration = c.APIKey, orgGen, docGen
		r.Timestamp, r.Immutable = now, immutable
	}
	existing, err := s.store.Insert(ctx, recs)
	if err != nil {
		return nil, fmt.Errorf("add activities: %w", err)
	}
	// Also when every id existed: a retry after a failed settle finishes it.
	if gone, err := s.settle(ctx, c.APIKey, org, orgGen, doc, docGen); err != nil {
		return nil, err
	} else if gone != "" {
		return nil, apierr.NotFound("%s", gone)
	}
	data := map[string]*activityv1.ItemResult{}
	for _, r := range recs {
		if slices.Contains(existing, r.ID) {
			data[r.ID] = &activityv1.ItemResult{Message: msgItemExists}
		} else {
			data[r.ID] = &activityv1.ItemResult{Success: true, Message: msgItemAdded}
		}
	}
	return &activityv1.ItemResultsResponse{Status: statusSuccess, Message: msgAdded, Data: data}, nil
}

// generations returns the generations of the organization and document as the documents
// service knows them now: NOT_FOUND for an unknown organization, "" for a document it does not
// know (activity may be about documents a product never registered).
func (s *Server) generations(ctx context.Context, apiKey, org, doc string) (string, string, error) {
	req := &documentsv1.ResolveResourcesRequest{ApiKey: apiKey, OrganizationId: org}
	if doc != "" {
		req.DocumentIds = []string{doc}
	}
	res, err := s.docs.ResolveResources(ctx, req)
	if err != nil {
		return "", "", fmt.Errorf("resolve %s: %w", org, err)
	}
	if !res.GetOrganizationExists() {
		return "", "", apierr.NotFound(msgOrgMissing)
	}
	docGen := ""
	if d := res.GetDocuments()[doc]; d.GetExists() {
		docGen = d.GetGeneration()
	}
	return res.GetOrganizationGeneration(), docGen, nil
}

// settle runs after records were written under the generations, and again on every retry of
// the write (lifecycle.Settle), and names what is gone: the records went with a deletion that
// came meanwhile.
func (s *Server) settle(ctx context.Context, apiKey, org, orgGen, doc, docGen string) (string, error) {
	switch gone, err := lifecycle.Settle(ctx, s.store, apiKey, org, orgGen, doc, docGen); {
	case err != nil:
		return "", err
	case gone == lifecycle.OrganizationGone:
		return msgOrgMissing, nil
	case gone == lifecycle.DocumentGone:
		return msgDocumentMissing, nil
	}
	return "", nil
}

// immutable reports whether records written now are immutable.
func (s *Server) immutable(ctx context.Context, apiKey string) (bool, error) {
	cfg, err := s.store.Config(ctx, apiKey)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read activity config: %w", err)
	}
	return cfg.Immutable != nil && *cfg.Immutable, nil
}

func (s *Server) GetActivityConfig(ctx context.Context, _ *activityv1.GetActivityConfigRequest) (*activityv1.ActivityConfigResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	cfg, err := s.store.Config(ctx, c.APIKey)
	if errors.Is(err, ErrNotFound) {
		cfg, err = &Config{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read activity config: %w", err)
	}
	return configResponse(msgConfigRetrieved, cfg)
}

func (s *Server) UpdateActivityConfig(ctx context.Context, req *activityv1.UpdateActivityConfigRequest) (*activityv1.ActivityConfigResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	if req.IsEnabled == nil && req.Immutable == nil && req.Triggers == nil {
		return nil, apierr.InvalidArgument(msgNoConfigField)
	}
	p := ConfigPatch{Enabled: req.IsEnabled, Immutable: req.Immutable}
	if req.Triggers != nil {
		if p.Triggers, err = checkTriggers(req.GetTriggers()); err != nil {
			return nil, err
		}
	}
	cfg, err := s.store.UpdateConfig(ctx, c.APIKey, p, s.clock.Now().UTC().Truncate(time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("update activity config: %w", err)
	}
	s.log.InfoContext(ctx, "activity config updated", "workspace_id", c.WorkspaceID, "enabled", cfg.Enabled)
	return configResponse(msgConfigUpdated, cfg)
}

func configResponse(msg string, cfg *Config) (*activityv1.ActivityConfigResponse, error) {
	out := &activityv1.ActivityServiceConfig{IsEnabled: cfg.Enabled, Immutable: cfg.Immutable}
	if cfg.Triggers != nil {
		m := map[string]any{}
		for feature, events := range cfg.Triggers {
			e := map[string]any{}
			for action, on := range events {
				e[action] = on
			}
			m[feature] = e
		}
		st, err := structpb.NewStruct(m)
		if err != nil {
			return nil, fmt.Errorf("triggers: %w", err)
		}
		out.Triggers = st
	}
	return &activityv1.ActivityConfigResponse{Status: statusSuccess, Message: msg,
		Data: &activityv1.ActivityConfigData{ActivityServiceConfig: out}}, nil
}

// toProto is the record as callers see it.
func toProto(r *Record) *activityv1.ActivityRecord {
	return &activityv1.ActivityRecord{
		Id: r.ID, FeatureType: r.FeatureType, ActionType: r.ActionType,
		ActionUser:             &eventsv1.ActionUser{UserId: r.ActionUser.UserID, Name: r.ActionUser.Name, Email: r.ActionUser.Email},
		TargetEntityId:         r.TargetEntityID,
		DisplayMessageTemplate: r.DisplayMessageTemplate, DisplayMessageTemplateData: structOf(r.DisplayMessageTemplateData),
		Metadata:  &activityv1.ActivityMetadata{ApiKey: r.APIKey, DocumentId: r.DocumentID, OrganizationId: r.OrganizationID},
		Timestamp: float64(r.Timestamp),
		Changes:   structOf(r.Changes), EntityData: valueOf(r.EntityData), EntityTargetData: valueOf(r.EntityTargetData),
		ActionIcon: r.ActionIcon, Immutable: r.Immutable,
	}
}

func structOf(text string) *structpb.Struct {
	if text == "" {
		return nil
	}
	s := &structpb.Struct{}
	if err := protojson.Unmarshal([]byte(text), s); err != nil {
		return nil // written by us from a Struct: cannot happen short of a corrupt store
	}
	return s
}

func valueOf(text string) *structpb.Value {
	if text == "" {
		return nil
	}
	v := &structpb.Value{}
	if err := protojson.Unmarshal([]byte(text), v); err != nil {
		return nil
	}
	return v
}
