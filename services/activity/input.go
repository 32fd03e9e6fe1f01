package activity

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	activityv1 "github.com/collab/collab/proto/collab/activity/v1"
	eventsv1 "github.com/collab/collab/proto/collab/events/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/validate"
)

// Limits (docs/api.md "Activity logs"). Every request is checked whole before anything is
// written.
const (
	defaultPageSize   = 1000
	maxPageSize       = 10000
	maxPageBytes      = 4 << 20 // a page stops early, with a token, once its records reach this
	maxItems          = 100     // activities per Add / Update Activity Logs
	maxFilterIDs      = 1000    // activityIds of Get Activity Logs
	maxFilterTypes    = 100     // actionTypes of Get Activity Logs
	maxJSONBytes      = 64 << 10
	maxTemplateLength = 2000
	maxIconLength     = 2048
	maxNameLength     = 256
	maxTriggerEvents  = 100 // events per feature in triggers
)

// Feature types (docs/api.md, "Activity logs"): the features whose events become activity records.
var featureTypes = []string{"comment", "reaction", "recorder", "crdt", "custom"}

const msgFeatureTypes = "must be one of comment, reaction, recorder, crdt, custom."

func checkFeatureType(field, v string) error {
	if v == "" {
		return apierr.InvalidArgument("%s is required.", field)
	}
	if !slices.Contains(featureTypes, v) {
		return apierr.InvalidArgument("%s %s", field, msgFeatureTypes)
	}
	return nil
}

// listing is a checked Get Activity Logs request.
type listing struct {
	org    string
	filter Filter
	desc   bool
	size   int
}

func checkGet(req *activityv1.GetActivityLogsRequest) (*listing, error) {
	l := &listing{org: req.GetOrganizationId(), desc: true, size: defaultPageSize}
	if err := validate.ID("organizationId", l.org); err != nil {
		return nil, err
	}
	f := &l.filter
	f.DocumentID, f.TargetEntityID, f.UserID = req.GetDocumentId(), req.GetTargetEntityId(), req.GetUserId()
	for field, v := range map[string]string{"documentId": f.DocumentID, "targetEntityId": f.TargetEntityID, "userId": f.UserID} {
		if err := validate.OptionalID(field, v); err != nil {
			return nil, err
		}
	}
	if n := len(req.GetFeatureTypes()); n > len(featureTypes) {
		return nil, apierr.InvalidArgument("featureTypes must contain at most %d values.", len(featureTypes))
	}
	for i, t := range req.GetFeatureTypes() {
		if err := checkFeatureType(fmt.Sprintf("featureTypes[%d]", i), t); err != nil {
			return nil, err
		}
		if !slices.Contains(f.FeatureTypes, t) {
			f.FeatureTypes = append(f.FeatureTypes, t)
		}
	}
	var err error
	if f.ActionTypes, err = validate.IDs("actionTypes", req.GetActionTypes(), false, maxFilterTypes); err != nil {
		return nil, err
	}
	if f.IDs, err = validate.IDs("activityIds", req.GetActivityIds(), false, maxFilterIDs); err != nil {
		return nil, err
	}
	// An empty list filters nothing, as if it were absent.
	for _, l := range []*[]string{&f.FeatureTypes, &f.ActionTypes, &f.IDs} {
		if len(*l) == 0 {
			*l = nil
		}
	}
	switch req.GetOrder() {
	case "", "desc":
	case "asc":
		l.desc = false
	default:
		return nil, apierr.InvalidArgument("order must be asc or desc.")
	}
	if req.PageSize != nil {
		n := int(req.GetPageSize())
		if n < 1 || n > maxPageSize {
			return nil, apierr.InvalidArgument("pageSize must be between 1 and %d.", maxPageSize)
		}
		l.size = n
	}
	return l, nil
}

// scope is what a page token is bound to: the tenant, the organization, every filter and the
// order, so a token is refused with any other query. JSON keeps the parts apart.
func (l *listing) scope(apiKey string) string {
	sorted := func(v []string) []string {
		c := slices.Clone(v)
		slices.Sort(c)
		return c
	}
	b, _ := json.Marshal([]any{"activities", apiKey, l.org, l.filter.DocumentID, l.filter.TargetEntityID, l.filter.UserID,
		sorted(l.filter.FeatureTypes), sorted(l.filter.ActionTypes), sorted(l.filter.IDs), l.desc})
	return string(b)
}

// jsonText returns the JSON of a Struct or Value, "" for nil, refusing one larger than the
// limit.
func jsonText(field string, m proto.Message, isNil bool) (string, error) {
	if isNil {
		return "", nil
	}
	if proto.Size(m) > maxJSONBytes {
		return "", apierr.InvalidArgument("%s must be at most %d KiB.", field, maxJSONBytes>>10)
	}
	b, err := protojson.Marshal(m)
	if err != nil {
		return "", apierr.InvalidArgument("%s is not valid JSON.", field)
	}
	return string(b), nil
}

// checkChanges requires every change to be an object holding from and/or to, nothing else.
func checkChanges(field string, s *structpb.Struct) error {
	for name, v := range s.GetFields() {
		o := v.GetStructValue()
		if o == nil {
			return apierr.InvalidArgument("%s.%s must be an object {from, to}.", field, name)
		}
		for k := range o.GetFields() {
			if k != "from" && k != "to" {
				return apierr.InvalidArgument("%s.%s may hold only from and to.", field, name)
			}
		}
	}
	return nil
}

func checkUser(field string, u *eventsv1.ActionUser) error {
	if err := validate.OptionalID(field+".userId", u.GetUserId()); err != nil {
		return err
	}
	if err := validate.Name(field+".name", u.GetName(), maxNameLength); err != nil {
		return err
	}
	if e := u.GetEmail(); e != "" && !validate.IsEmail(e) {
		return apierr.InvalidArgument("%s.email must be a valid email address.", field)
	}
	return nil
}

// checkItemCount requires 1 to maxItems activities.
func checkItemCount(n int) error {
	if n == 0 {
		return apierr.InvalidArgument("activities must contain at least one activity.")
	}
	if n > maxItems {
		return apierr.InvalidArgument("activities must contain at most %d activities.", maxItems)
	}
	return nil
}

// checkUpdates checks Update Activity Logs and returns each item's patch, in order.
func checkUpdates(req *activityv1.UpdateActivityLogsRequest) ([]Patch, error) {
	if err := validate.ID("organizationId", req.GetOrganizationId()); err != nil {
		return nil, err
	}
	items := req.GetActivities()
	if err := checkItemCount(len(items)); err != nil {
		return nil, err
	}
	seen := map[string]int{}
	patches := make([]Patch, len(items))
	for i, a := range items {
		field := fmt.Sprintf("activities[%d]", i)
		if err := validate.ID(field+".id", a.GetId()); err != nil {
			return nil, err
		}
		if j, dup := seen[a.GetId()]; dup {
			return nil, apierr.InvalidArgument("%s.id repeats activities[%d].id: each activity may appear once.", field, j)
		}
		seen[a.GetId()] = i
		p := &patches[i]
		if a.Changes != nil {
			if err := checkChanges(field+".changes", a.GetChanges()); err != nil {
				return nil, err
			}
		}
		for _, j := range []struct {
			name string
			m    proto.Message
			nil  bool
			dst  **string
		}{
			{"changes", a.GetChanges(), a.Changes == nil, &p.Changes},
			{"entityData", a.GetEntityData(), a.EntityData == nil, &p.EntityData},
			{"entityTargetData", a.GetEntityTargetData(), a.EntityTargetData == nil, &p.EntityTargetData},
			{"displayMessageTemplateData", a.GetDisplayMessageTemplateData(), a.DisplayMessageTemplateData == nil, &p.DisplayMessageTemplateData},
		} {
			if j.nil {
				continue
			}
			text, err := jsonText(field+"."+j.name, j.m, false)
			if err != nil {
				return nil, err
			}
			*j.dst = &text
		}
		if a.DisplayMessageTemplate != nil {
			if err := validate.MaxLength(field+".displayMessageTemplate", a.GetDisplayMessageTemplate(), maxTemplateLength); err != nil {
				return nil, err
			}
			p.DisplayMessageTemplate = a.DisplayMessageTemplate
		}
		if a.ActionIcon != nil {
			if err := validate.Name(field+".actionIcon", a.GetActionIcon(), maxIconLength); err != nil {
				return nil, err
			}
			p.ActionIcon = a.ActionIcon
		}
		if *p == (Patch{}) {
			return nil, apierr.InvalidArgument("%s must set at least one of changes, entityData, entityTargetData, displayMessageTemplate, displayMessageTemplateData, actionIcon.", field)
		}
	}
	return patches, nil
}

// checkAdds checks Add Activities and returns the records to write (ids, tenant, timestamps
// and generations left to the caller).
func checkAdds(req *activityv1.AddActivitiesRequest) ([]*Record, error) {
	if err := validate.ID("organizationId", req.GetOrganizationId()); err != nil {
		return nil, err
	}
	if err := validate.OptionalID("documentId", req.GetDocumentId()); err != nil {
		return nil, err
	}
	items := req.GetActivities()
	if err := checkItemCount(len(items)); err != nil {
		return nil, err
	}
	seen := map[string]int{}
	out := make([]*Record, len(items))
	for i, a := range items {
		field := fmt.Sprintf("activities[%d]", i)
		if err := validate.TokenID(field+".id", a.GetId()); err != nil {
			return nil, err
		}
		if a.GetId() != "" {
			if j, dup := seen[a.GetId()]; dup {
				return nil, apierr.InvalidArgument("%s.id repeats activities[%d].id: each activity may appear once.", field, j)
			}
			seen[a.GetId()] = i
		}
		if err := checkFeatureType(field+".featureType", a.GetFeatureType()); err != nil {
			return nil, err
		}
		if err := validate.ID(field+".actionType", a.GetActionType()); err != nil {
			return nil, err
		}
		if err := checkUser(field+".actionUser", a.GetActionUser()); err != nil {
			return nil, err
		}
		if err := validate.OptionalID(field+".targetEntityId", a.GetTargetEntityId()); err != nil {
			return nil, err
		}
		if err := validate.MaxLength(field+".displayMessageTemplate", a.GetDisplayMessageTemplate(), maxTemplateLength); err != nil {
			return nil, err
		}
		if err := validate.Name(field+".actionIcon", a.GetActionIcon(), maxIconLength); err != nil {
			return nil, err
		}
		if a.Changes != nil {
			if err := checkChanges(field+".changes", a.GetChanges()); err != nil {
				return nil, err
			}
		}
		r := &Record{
			ID: a.GetId(), OrganizationID: req.GetOrganizationId(), DocumentID: req.GetDocumentId(),
			FeatureType: a.GetFeatureType(), ActionType: a.GetActionType(), ActionUser: userOf(a.GetActionUser()),
			TargetEntityID: a.GetTargetEntityId(), DisplayMessageTemplate: a.GetDisplayMessageTemplate(), ActionIcon: a.GetActionIcon(),
		}
		var err error
		for _, j := range []struct {
			name string
			m    proto.Message
			nil  bool
			dst  *string
		}{
			{"changes", a.GetChanges(), a.Changes == nil, &r.Changes},
			{"entityData", a.GetEntityData(), a.EntityData == nil, &r.EntityData},
			{"entityTargetData", a.GetEntityTargetData(), a.EntityTargetData == nil, &r.EntityTargetData},
			{"displayMessageTemplateData", a.GetDisplayMessageTemplateData(), a.DisplayMessageTemplateData == nil, &r.DisplayMessageTemplateData},
		} {
			if *j.dst, err = jsonText(field+"."+j.name, j.m, j.nil); err != nil {
				return nil, err
			}
		}
		out[i] = r
	}
	return out, nil
}

func userOf(u *eventsv1.ActionUser) User {
	return User{UserID: u.GetUserId(), Name: u.GetName(), Email: u.GetEmail()}
}

// checkTriggers reads the triggers object: feature (one of the five), then event (the action,
// "add", or the whole type, "comment.add"), then a boolean. Events are stored by action, as
// featureOf names it (comment_annotation.add: annotation_add under comment).
func checkTriggers(s *structpb.Struct) (map[string]map[string]bool, error) {
	out := map[string]map[string]bool{}
	for feature, v := range s.GetFields() {
		if !slices.Contains(featureTypes, feature) {
			return nil, apierr.InvalidArgument("triggers has an unknown feature %q: features are comment, reaction, recorder, crdt, custom.", feature)
		}
		events := v.GetStructValue()
		if events == nil {
			return nil, apierr.InvalidArgument("triggers.%s must be an object of event names to booleans.", feature)
		}
		if len(events.GetFields()) > maxTriggerEvents {
			return nil, apierr.InvalidArgument("triggers.%s must hold at most %d events.", feature, maxTriggerEvents)
		}
		out[feature] = map[string]bool{}
		for event, on := range events.GetFields() {
			action, err := triggerAction(feature, event)
			if err != nil {
				return nil, err
			}
			if _, dup := out[feature][action]; dup {
				return nil, apierr.InvalidArgument("triggers.%s names the event %s twice.", feature, action)
			}
			b, ok := on.GetKind().(*structpb.Value_BoolValue)
			if !ok {
				return nil, apierr.InvalidArgument("triggers.%s.%s must be a boolean.", feature, event)
			}
			out[feature][action] = b.BoolValue
		}
	}
	return out, nil
}

// triggerAction is the action an event name of triggers.<feature> stands for: the name itself
// when it is one word, else the action of the whole type it names (featureOf). A type of
// another feature (comment.reaction_add under comment) is refused, saying where it belongs.
func triggerAction(feature, event string) (string, error) {
	whole := event
	if !strings.Contains(event, ".") {
		whole = feature + "." + event
	}
	f, action, ok := featureOf(whole)
	// One word: the stores keep actions as keys, where a dot would mean nesting.
	if !ok || action == "" || strings.Contains(action, ".") || validate.EventType("", whole) != nil {
		return "", apierr.InvalidArgument("triggers.%s has an invalid event name %q: use the action (e.g. add) or the whole type (e.g. %s.add).", feature, event, feature)
	}
	if f != feature {
		return "", apierr.InvalidArgument("triggers.%s names %s, an event of the feature %s: name it in triggers.%s.", feature, whole, f, f)
	}
	return action, nil
}
