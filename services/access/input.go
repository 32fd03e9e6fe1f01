package access

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/validate"
)

// Limits. Every request is checked whole before anything is written, so a refused request
// leaves no trace.
const (
	maxUserIDs        = 100   // userIds of Get Permissions and Set Roles
	maxResourceIDs    = 30    // folderIds, documentIds of Get Permissions (docs/api.md, "Access")
	maxReaderUserIDs  = 10000 // userIds of FilterReaders
	readerBatch       = 1000  // users per grant read of FilterReaders
	maxResources      = 100   // permissions.resources
	maxContextValues  = 1000
	maxContextValue   = 1000 // characters of one context value
	maxNameLength     = 200
	maxFieldNameChars = validate.MaxIDLength
	// latestExpiry is the end of year 9999: later times do not fit the stores' dates.
	latestExpiry = 253402300799
)

// checkCount requires 1 to limit items in the list called field.
func checkCount(field, item string, n, limit int) error {
	if n == 0 {
		return apierr.InvalidArgument("%s must contain at least one %s.", field, item)
	}
	if n > limit {
		return apierr.InvalidArgument("%s must contain at most %d %ss.", field, limit, item)
	}
	return nil
}

// checkResourceType checks a required resource type.
func checkResourceType(field, v string) error {
	switch v {
	case ResourceOrganization, ResourceFolder, ResourceDocument:
		return nil
	case "":
		return apierr.InvalidArgument("%s is required.", field)
	}
	return apierr.InvalidArgument("%s must be one of organization, folder, document.", field)
}

// checkTarget checks what names a grant: type, id and organization, and that an organization
// grant names its own organization.
func checkTarget(prefix, typ, id, org string) error {
	if err := checkResourceType(prefix+"type", typ); err != nil {
		return err
	}
	if err := validate.ID(prefix+"id", id); err != nil {
		return err
	}
	if err := validate.ID(prefix+"organizationId", org); err != nil {
		return err
	}
	if typ == ResourceOrganization && id != org {
		return apierr.InvalidArgument("%sid must equal %sorganizationId for type organization.", prefix, prefix)
	}
	return nil
}

// expiry checks an optional expiresAt (Unix seconds) and returns it as a time, zero when not
// given.
func expiry(field string, v *float64, now time.Time) (time.Time, error) {
	if v == nil {
		return time.Time{}, nil
	}
	if math.IsNaN(*v) || math.IsInf(*v, 0) || *v > latestExpiry {
		return time.Time{}, apierr.InvalidArgument("%s must be a time in Unix seconds.", field)
	}
	if *v <= 0 {
		return time.Time{}, apierr.InvalidArgument("%s must be in the future.", field)
	}
	t := storeTime(time.UnixMilli(int64(math.Round(*v * 1000))))
	if !t.After(now) {
		return time.Time{}, apierr.InvalidArgument("%s must be in the future.", field)
	}
	return t, nil
}

// unixSeconds is how the API shows a time: Unix seconds, milliseconds as the fraction.
func unixSeconds(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }

// optionalEmail checks an optional email and returns it trimmed.
func optionalEmail(field, v string) (string, error) {
	v = strings.TrimSpace(v)
	if v != "" && !validate.IsEmail(v) {
		return "", apierr.InvalidArgument("%s must be a valid email address.", field)
	}
	return v, nil
}

// grantPlan is a checked Add Permissions: the grants to write and, when the request has a
// context, the user's new context fields in one organization.
type grantPlan struct {
	userID     string
	grants     []Grant
	hasContext bool
	contextOrg string
	fields     []string
	// resolved is what bind learnt of the organizations, for confirm.
	resolved []*resolvedOrg
}

// planGrants checks permissions for userID as Add Permissions does (field names under
// "permissions."), including that every organization, folder and document exists, and writes
// nothing. The grants it plans are keyed by the resources' current generations (bind).
func (s *Server) planGrants(ctx context.Context, apiKey, userID string, p *accessv1.Permissions, now time.Time) (*grantPlan, error) {
	resources := p.GetResources()
	if err := checkCount("permissions.resources", "resource", len(resources), maxResources); err != nil {
		return nil, err
	}
	plan := &grantPlan{userID: userID}
	// The same resource twice: the later one wins, as two requests in a row would.
	index := map[GrantRef]int{}
	for i, r := range resources {
		prefix := fmt.Sprintf("permissions.resources[%d].", i)
		if err := checkTarget(prefix, r.GetType(), r.GetId(), r.GetOrganizationId()); err != nil {
			return nil, err
		}
		role := r.GetAccessRole()
		if err := validate.AccessRole(prefix+"accessRole", role, true); err != nil {
			return nil, err
		}
		if role == "" {
			role = validate.RoleEditor
		}
		expires, err := expiry(prefix+"expiresAt", r.ExpiresAt, now)
		if err != nil {
			return nil, err
		}
		g := Grant{OrganizationID: r.GetOrganizationId(), ResourceType: r.GetType(), ResourceID: r.GetId(), UserID: userID, AccessRole: role, ExpiresAt: expires}
		if j, dup := index[g.Ref()]; dup {
			plan.grants[j] = g
			continue
		}
		index[g.Ref()] = len(plan.grants)
		plan.grants = append(plan.grants, g)
	}
	if p.Context != nil {
		org := plan.grants[0].OrganizationID
		for _, g := range plan.grants {
			if g.OrganizationID != org {
				return nil, apierr.InvalidArgument("permissions.context needs resources of one organization.")
			}
		}
		fields, err := contextFields("permissions.context.access", p.GetContext().GetAccess())
		if err != nil {
			return nil, err
		}
		plan.hasContext, plan.contextOrg, plan.fields = true, org, fields
	}
	if err := s.bind(ctx, apiKey, plan); err != nil {
		return nil, err
	}
	return plan, nil
}

// apply writes a checked plan, then confirms that what it names still exists.
func (s *Server) apply(ctx context.Context, apiKey string, plan *grantPlan) error {
	if err := s.store.PutGrants(ctx, apiKey, plan.grants); err != nil {
		return fmt.Errorf("write grants: %w", err)
	}
	if plan.hasContext {
		if err := s.store.SetContextFields(ctx, apiKey, plan.contextOrg, plan.userID, plan.fields); err != nil {
			return fmt.Errorf("write access context: %w", err)
		}
	}
	return s.confirm(ctx, apiKey, plan)
}

// resolvedOrg is what the documents service answered about one organization of a request: its
// generation and those of the folders and documents asked for, which key the grants
// (lifecycle.Ref).
type resolvedOrg struct {
	id, generation string
	req            *documentsv1.ResolveResourcesRequest
	res            *documentsv1.ResolveResourcesResponse
}

// ref returns the key of a resource of this organization: for the organization itself its own
// key, for a folder or document its id and generation. ok is false when it does not exist.
func (o *resolvedOrg) ref(resourceType, id string) (string, bool) {
	var r *documentsv1.ResolvedResource
	switch resourceType {
	case ResourceOrganization:
		return lifecycle.Ref(o.id, o.generation), o.res.GetOrganizationExists()
	case ResourceFolder:
		r = o.res.GetFolders()[id]
	case ResourceDocument:
		r = o.res.GetDocuments()[id]
	}
	return lifecycle.Ref(id, r.GetGeneration()), r.GetExists()
}

// resolveTargets asks the documents service, once per organization, about the organizations,
// folders and documents the grants name.
func (s *Server) resolveTargets(ctx context.Context, apiKey string, refs []GrantRef) ([]*resolvedOrg, error) {
	var out []*resolvedOrg
	byOrg := map[string]*resolvedOrg{}
	for _, g := range refs {
		o, ok := byOrg[g.OrganizationID]
		if !ok {
			o = &resolvedOrg{id: g.OrganizationID, req: &documentsv1.ResolveResourcesRequest{ApiKey: apiKey, OrganizationId: g.OrganizationID}}
			byOrg[g.OrganizationID] = o
			out = append(out, o)
		}
		switch g.ResourceType {
		case ResourceFolder:
			if !slices.Contains(o.req.FolderIds, g.ResourceID) {
				o.req.FolderIds = append(o.req.FolderIds, g.ResourceID)
			}
		case ResourceDocument:
			if !slices.Contains(o.req.DocumentIds, g.ResourceID) {
				o.req.DocumentIds = append(o.req.DocumentIds, g.ResourceID)
			}
		}
	}
	for _, o := range out {
		res, err := s.docs.ResolveResources(ctx, o.req)
		if err != nil {
			return nil, apierr.FromPeer("resolve resources", err)
		}
		o.res, o.generation = res, res.GetOrganizationGeneration()
	}
	return out, nil
}

// bind checks that every organization, folder and document the plan's grants name exists,
// answering NOT_FOUND naming the first that does not, and rewrites the grants (and the context
// organization) to the keys of their current generations.
func (s *Server) bind(ctx context.Context, apiKey string, plan *grantPlan) error {
	refs := make([]GrantRef, len(plan.grants))
	for i, g := range plan.grants {
		refs[i] = g.Ref()
	}
	orgs, err := s.resolveTargets(ctx, apiKey, refs)
	if err != nil {
		return err
	}
	byOrg := map[string]*resolvedOrg{}
	for _, o := range orgs {
		if !o.res.GetOrganizationExists() {
			return apierr.NotFound("Organization %s does not exist.", o.id)
		}
		byOrg[o.id] = o
	}
	for i := range plan.grants {
		g := &plan.grants[i]
		o := byOrg[g.OrganizationID]
		ref, ok := o.ref(g.ResourceType, g.ResourceID)
		if !ok {
			return missingResource(g.ResourceType, g.ResourceID, o.id)
		}
		orgRef, _ := o.ref(ResourceOrganization, "")
		g.OrganizationID, g.ResourceID = orgRef, ref
	}
	if plan.hasContext {
		plan.contextOrg, _ = byOrg[plan.contextOrg].ref(ResourceOrganization, "")
	}
	plan.resolved = orgs
	return nil
}

func missingResource(resourceType, id, org string) error {
	if resourceType == ResourceFolder {
		return apierr.NotFound("Folder %s does not exist in organization %s.", id, org)
	}
	return apierr.NotFound("Document %s does not exist in organization %s.", id, org)
}

// confirm runs after a plan's grants are written. When an organization, folder or document they
// name was deleted meanwhile (its generation is gone), its deletion may have swept the grants
// before they landed: the grants of that generation go again, and the caller learns that it
// does not exist, as if the deletion had come first. Nobody reads under a dead generation, so
// this is tidying, and what it misses (a crash just before it) stays unseen.
func (s *Server) confirm(ctx context.Context, apiKey string, plan *grantPlan) error {
	tidy := context.WithoutCancel(ctx)
	for _, before := range plan.resolved {
		res, err := s.docs.ResolveResources(ctx, before.req)
		if err != nil {
			return apierr.FromPeer("resolve resources", err)
		}
		now := &resolvedOrg{id: before.id, generation: res.GetOrganizationGeneration(), req: before.req, res: res}
		orgRef, _ := before.ref(ResourceOrganization, "")
		if !res.GetOrganizationExists() || now.generation != before.generation {
			if err := s.store.DeleteOrganization(tidy, apiKey, orgRef); err != nil {
				return fmt.Errorf("remove grants of a deleted organization: %w", err)
			}
			return apierr.NotFound("Organization %s does not exist.", before.id)
		}
		for _, kind := range []struct {
			typ string
			ids []string
		}{{ResourceFolder, before.req.GetFolderIds()}, {ResourceDocument, before.req.GetDocumentIds()}} {
			for _, id := range kind.ids {
				was, _ := before.ref(kind.typ, id)
				if is, ok := now.ref(kind.typ, id); ok && is == was {
					continue
				}
				if err := s.store.DeleteResourceGrants(tidy, apiKey, orgRef, kind.typ, []string{was}); err != nil {
					return fmt.Errorf("remove grants of a deleted %s: %w", kind.typ, err)
				}
				return missingResource(kind.typ, id, before.id)
			}
		}
	}
	return nil
}

// contextFields turns an access context object into sorted, distinct "field:value" strings.
// Values are strings, numbers, or arrays of them; numbers print as JSON writes them, without
// trailing zeros (1, 2.5).
func contextFields(field string, access *structpb.Struct) ([]string, error) {
	names := make([]string, 0, len(access.GetFields()))
	for name := range access.GetFields() {
		names = append(names, name)
	}
	slices.Sort(names) // the first refusal is the same on every call
	var out []string
	add := func(name, value string) error {
		if utf8.RuneCountInString(value) > maxContextValue {
			return apierr.InvalidArgument("%s.%s values must be at most %d characters.", field, name, maxContextValue)
		}
		out = append(out, name+":"+value)
		if len(out) > maxContextValues {
			return apierr.InvalidArgument("%s must hold at most %d values.", field, maxContextValues)
		}
		return nil
	}
	for _, name := range names {
		if err := checkFieldName(field, name); err != nil {
			return nil, err
		}
		v := access.GetFields()[name]
		if list, ok := v.GetKind().(*structpb.Value_ListValue); ok {
			for i, item := range list.ListValue.GetValues() {
				s, ok := scalar(item)
				if !ok {
					return nil, apierr.InvalidArgument("%s.%s[%d] must be a string or a number.", field, name, i)
				}
				if err := add(name, s); err != nil {
					return nil, err
				}
			}
			continue
		}
		s, ok := scalar(v)
		if !ok {
			return nil, apierr.InvalidArgument("%s.%s must be a string, a number, or an array of them.", field, name)
		}
		if err := add(name, s); err != nil {
			return nil, err
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// checkFieldName checks the name of an access context field of the object called field.
func checkFieldName(field, name string) error {
	if name == "" || utf8.RuneCountInString(name) > maxFieldNameChars || !utf8.ValidString(name) || strings.IndexFunc(name, unicode.IsControl) >= 0 {
		return apierr.InvalidArgument("%s field names must be 1 to %d characters without control characters.", field, maxFieldNameChars)
	}
	return nil
}

// scalar prints a string or finite number value.
func scalar(v *structpb.Value) (string, bool) {
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		return k.StringValue, true
	case *structpb.Value_NumberValue:
		n := k.NumberValue
		if math.IsNaN(n) || math.IsInf(n, 0) {
			return "", false
		}
		if n == 0 {
			n = 0 // no "-0"
		}
		return strconv.FormatFloat(n, 'f', -1, 64), true
	}
	return "", false
}
