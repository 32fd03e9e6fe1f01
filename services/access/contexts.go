package access

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"google.golang.org/protobuf/types/known/structpb"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/validate"
)

// Limits of MatchContexts: a fan-out batch is many users and one context, an inbox page one user
// and a context per notification; users times contexts bounds the work either way.
const (
	maxMatchUsers    = 10000
	maxMatchContexts = 1000
	maxMatchPairs    = 10000
	maxMatchFields   = 20 // fields of one context, as Add Notifications allows
)

// MatchContexts tells the notifications service which of the contexts each user's access
// context grants (docs/api.md, "Internal gRPC"): a context is granted when the user's fields in
// the organization (Add Permissions' permissions.context, kept as "<field>:<value>") hold every
// field and value it names. Values compare as Add Permissions stores them: a number as the
// string it prints as, so 5 and "5" are one value. A user without an access context is granted
// nothing. The tenant is the request's apiKey, as internal calls carry no caller.
//
// It costs one context read per readerBatch users, and per user a binary search of their fields
// for each value the contexts name.
func (s *Server) MatchContexts(ctx context.Context, req *accessv1.MatchContextsRequest) (*accessv1.MatchContextsResponse, error) {
	apiKey, org := req.GetApiKey(), req.GetOrganizationId()
	if err := validate.ID("apiKey", apiKey); err != nil {
		return nil, err
	}
	if err := validate.ID("organizationId", org); err != nil {
		return nil, err
	}
	if err := validate.OptionalID("organizationGeneration", req.GetOrganizationGeneration()); err != nil {
		return nil, err
	}
	userIDs, err := validate.IDs("userIds", req.GetUserIds(), true, maxMatchUsers)
	if err != nil {
		return nil, err
	}
	if err := checkCount("contexts", "context", len(req.GetContexts()), maxMatchContexts); err != nil {
		return nil, err
	}
	if len(userIDs)*len(req.GetContexts()) > maxMatchPairs {
		return nil, apierr.InvalidArgument("userIds times contexts must be at most %d.", maxMatchPairs)
	}
	wanted := make([][]string, len(req.GetContexts()))
	for i, c := range req.GetContexts() {
		if wanted[i], err = requiredFields(fmt.Sprintf("contexts[%d]", i), c); err != nil {
			return nil, err
		}
	}
	orgRef := lifecycle.Ref(org, req.GetOrganizationGeneration())
	resp := &accessv1.MatchContextsResponse{}
	for start := 0; start < len(userIDs); start += readerBatch {
		batch := userIDs[start:min(start+readerBatch, len(userIDs))]
		held, err := s.store.ContextFields(ctx, apiKey, orgRef, batch)
		if err != nil {
			return nil, fmt.Errorf("match contexts: %w", err)
		}
		for _, u := range batch {
			if m := match(u, held[u], wanted); m != nil {
				resp.Matches = append(resp.Matches, m)
			}
		}
	}
	return resp, nil
}

// requiredFields checks one context of MatchContexts and returns the "<field>:<value>" strings
// a user must hold for it, sorted and distinct, normalised as Add Permissions normalises the
// fields it stores (contextFields).
func requiredFields(field string, c *structpb.Struct) ([]string, error) {
	n := len(c.GetFields())
	if n == 0 || n > maxMatchFields {
		return nil, apierr.InvalidArgument("%s must name 1 to %d fields.", field, maxMatchFields)
	}
	for _, name := range slices.Sorted(maps.Keys(c.GetFields())) { // the same refusal on every call
		if err := checkFieldName(field, name); err != nil {
			return nil, err
		}
		if _, ok := scalar(c.GetFields()[name]); !ok {
			return nil, apierr.InvalidArgument("%s.%s must be a string or a number.", field, name)
		}
	}
	return contextFields(field, c)
}

// match returns which of the wanted contexts (each a sorted list of "<field>:<value>") the
// user's fields hold every value of, or nil when none.
func match(userID string, fields []string, wanted [][]string) *accessv1.ContextMatch {
	if len(fields) == 0 {
		return nil
	}
	if !slices.IsSorted(fields) { // stored sorted by contextFields; a record that is not still matches
		fields = slices.Sorted(slices.Values(fields))
	}
	var m *accessv1.ContextMatch
	for i, want := range wanted {
		if holdsAll(fields, want) {
			if m == nil {
				m = &accessv1.ContextMatch{UserId: userID}
			}
			m.Contexts = append(m.Contexts, int32(i))
		}
	}
	return m
}

// holdsAll reports whether sorted fields hold every string of want.
func holdsAll(fields, want []string) bool {
	for _, w := range want {
		if _, ok := slices.BinarySearch(fields, w); !ok {
			return false
		}
	}
	return true
}
