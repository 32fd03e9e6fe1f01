package users

import (
	"strings"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/grpcserver"
)

// Input checks are buf.validate rules beside the fields (proto/collab/users/v1/users.proto),
// which the interceptor internal/grpcserver.RequestRules evaluates before any handler runs, so
// a refused request leaves no trace. What the rules cannot word stays here: a repeated id names
// the earlier item that has it.

// maxGetUsers bounds the answer of Get Users, which the spec does not page.
const maxGetUsers = 50000

// maxMembersAmong is the most userIds MembersAmong takes (its rule in users.proto): more than
// any request of the notifications service names (Set Notification Config: 100).
const maxMembersAmong = 1000

// ListMembers pages: limit 0 means defaultListMembers (the rule bounds it to 5000); a page is
// cut short before its members pass maxListMembersBytes, well inside a gRPC message.
const (
	defaultListMembers  = 1000
	maxListMembersBytes = grpcserver.MaxMessageBytes - 64<<10
)

// checkRepeats refuses an id that an earlier item of the list has: "<list>[i].<field> repeats
// <list>[j].<field>: each <item> may appear once."
func checkRepeats[T any](list, field, item string, items []T, id func(T) string) error {
	seen := make(map[string]int, len(items))
	for i, it := range items {
		if j, dup := seen[id(it)]; dup {
			return apierr.InvalidArgument("%s[%d].%s repeats %s[%d].%s: each %s may appear once.", list, i, field, list, j, field, item)
		}
		seen[id(it)] = i
	}
	return nil
}

// unique returns ids without repeats, in first-seen order.
func unique(ids []string) []string {
	seen := make(map[string]struct{}, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if _, dup := seen[id]; !dup {
			seen[id] = struct{}{}
			out = append(out, id)
		}
	}
	return out
}

func trim(v string) string { return strings.TrimSpace(v) }

// nonEmpty returns a pointer to v, or nil when v is empty (not given).
func nonEmpty(v string) *string {
	if v == "" {
		return nil
	}
	return &v
}

// trimPtr returns the trimmed value of an optional field, nil when it was not sent.
func trimPtr(v *string) *string {
	if v == nil {
		return nil
	}
	t := strings.TrimSpace(*v)
	return &t
}
