package activity

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	eventsv1 "github.com/collab/collab/proto/collab/events/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/lifecycle"
)

// consumes are the event types the activity service takes: the lifecycle events its records
// follow, and the domain events of every feature an activity record can have (the comments
// service's thread events, comment_annotation.*, are of the feature comment: featureOf).
var consumes = []string{
	lifecycle.OrganizationDeleted, lifecycle.DocumentDeleted, lifecycle.DocumentMigrated,
	"comment.*", "comment_annotation.*", "reaction.*", "recorder.*", "crdt.*", "custom.*",
}

// HandleEvent files a domain event as an activity record when the tenant's config records it,
// and applies the lifecycle events to the records. Idempotent: a record's id is its event's id,
// and deletions and moves may run twice.
func (s *Server) HandleEvent(ctx context.Context, e *lifecyclev1.Event) error {
	// The lifecycle events as every store with generation markers follows them
	// (lifecycle.MarkedHandlers); a type this service takes no action on is left alone.
	h := lifecycle.MarkedHandlers(s.store)
	h.Domain = s.record
	_, err := lifecycle.Dispatch(ctx, e, h)
	return err
}

// record files one domain event, unless its feature has no activity, the config is off, or its
// trigger is switched off.
func (s *Server) record(ctx context.Context, e *eventsv1.Event) error {
	feature, action, ok := featureOf(e.GetType())
	if !ok {
		return nil
	}
	if e.GetId() == "" || e.GetApiKey() == "" || e.GetOrganizationId() == "" {
		return lifecycle.Invalid(lifecycle.Domain(e), "id, api key or organization")
	}
	cfg, err := s.store.Config(ctx, e.GetApiKey())
	if errors.Is(err, ErrNotFound) {
		return nil // never configured: disabled
	}
	if err != nil {
		return fmt.Errorf("read activity config: %w", err)
	}
	if !cfg.Enabled {
		return nil
	}
	if on, set := cfg.Triggers[feature][action]; set && !on {
		return nil
	}
	r := fromEvent(e)
	r.Immutable = cfg.Immutable != nil && *cfg.Immutable
	if _, err := s.store.Insert(ctx, []*Record{r}); err != nil {
		return fmt.Errorf("record %s: %w", e.GetType(), err)
	}
	// The organization or document may have been deleted or migrated since the event was
	// published: the record goes or moves with it. Run on a redelivery too (a record that
	// exists already), so a settle that failed is finished.
	_, err = s.settle(ctx, r.APIKey, r.OrganizationID, r.OrganizationGeneration, r.DocumentID, r.DocumentGeneration)
	return err
}

// fromEvent is the record of a domain event. The event's data may carry the record's display
// fields (displayMessageTemplate, displayMessageTemplateData, changes, entityData,
// entityTargetData, actionIcon); without a template, an event of the comments service reads as
// commentDisplay writes it, and any other gets the default one, filled from the event's data
// with actionUser and actionType added (docs/events.md).
func fromEvent(e *eventsv1.Event) *Record {
	feature, _, _ := featureOf(e.GetType())
	r := &Record{
		APIKey: e.GetApiKey(), OrganizationID: e.GetOrganizationId(), ID: e.GetId(),
		OrganizationGeneration: e.GetOrganizationGeneration(), DocumentID: e.GetDocumentId(), DocumentGeneration: e.GetDocumentGeneration(),
		FeatureType: feature, ActionType: e.GetType(), ActionUser: userOf(e.GetActionUser()),
		TargetEntityID: e.GetTargetEntityId(), Timestamp: int64(e.GetTimestamp()),
	}
	data := e.GetData().GetFields()
	t, explicit := data["displayMessageTemplate"].GetKind().(*structpb.Value_StringValue)
	if !explicit && commentDisplay(e, r) {
		return r
	}
	if explicit && len(t.StringValue) <= maxTemplateLength {
		r.DisplayMessageTemplate = t.StringValue
	} else {
		r.DisplayMessageTemplate = defaultTemplate
	}
	if v := data["displayMessageTemplateData"]; v.GetStructValue() != nil {
		r.DisplayMessageTemplateData = jsonField(v)
	} else {
		r.DisplayMessageTemplateData = jsonField(structpb.NewStructValue(templateData(e)))
	}
	if v := data["changes"]; v.GetStructValue() != nil && checkChanges("changes", v.GetStructValue()) == nil {
		r.Changes = jsonField(v)
	}
	r.EntityData, r.EntityTargetData = jsonField(data["entityData"]), jsonField(data["entityTargetData"])
	if icon, ok := data["actionIcon"].GetKind().(*structpb.Value_StringValue); ok && len(icon.StringValue) <= maxIconLength {
		r.ActionIcon = icon.StringValue
	}
	return r
}

// jsonField is a value as a record's JSON field: "" for none, and for one past maxJSONBytes
// (left out of the record).
func jsonField(v *structpb.Value) string {
	if v == nil {
		return ""
	}
	b, err := protojson.Marshal(v)
	if err != nil || len(b) > maxJSONBytes {
		return ""
	}
	return string(b)
}

// defaultTemplate reads, for comment.add by Ada, "Ada: comment.add".
const defaultTemplate = "{{actionUser.name}}: {{actionType}}"

// templateData is the event's data with actionUser and actionType added (the data's own keys
// win).
func templateData(e *eventsv1.Event) *structpb.Struct {
	out := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for k, v := range e.GetData().GetFields() {
		out.Fields[k] = v
	}
	if _, ok := out.Fields["actionUser"]; !ok {
		u := e.GetActionUser()
		out.Fields["actionUser"] = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			"userId": structpb.NewStringValue(u.GetUserId()), "name": structpb.NewStringValue(u.GetName()), "email": structpb.NewStringValue(u.GetEmail()),
		}})
	}
	if _, ok := out.Fields["actionType"]; !ok {
		out.Fields["actionType"] = structpb.NewStringValue(e.GetType())
	}
	return out
}
