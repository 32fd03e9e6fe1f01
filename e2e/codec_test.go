package e2e

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

const tooDeep = "Request body is nested too deeply: at most 64 levels."

// nestedValue is n levels of arrays and objects, alternating, as a Struct's value takes them.
func nestedValue(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		if i%2 == 1 {
			b.WriteString(`[`)
		} else {
			b.WriteString(`{"k":`)
		}
	}
	b.WriteString(`"x"`)
	for i := n; i >= 1; i-- {
		if i%2 == 1 {
			b.WriteByte(']')
		} else {
			b.WriteByte('}')
		}
	}
	return b.String()
}

// Nesting is bounded at 64 levels on every route: a deep access context used to reach the
// service and fail there as INTERNAL (its decoder's recursion limit), and a body of "[" used to
// cost hundreds of MB of stack in the gateway.
func TestDeepBodiesRefused(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	k := s.devKey()
	s.org("o")
	// data(1).permissions(2).context(3).access(4), then the value of one context field.
	withContext := func(prefix string, levels int) string {
		return `{"data":{` + prefix + `"permissions":{"resources":[{"type":"organization","id":"o","organizationId":"o"}],` +
			`"context":{"access":{"k":` + nestedValue(levels-4) + `}}}}}`
	}
	for _, levels := range []int{9990, 5000, 65} {
		s.post("/v2/auth/permissions/add", k, withContext(`"user":{"userId":"u"},`, levels)).fails(t, http.StatusBadRequest, "INVALID_ARGUMENT", tooDeep)
		s.post("/v2/auth/generate_token", k, withContext(`"userId":"u",`, levels)).fails(t, http.StatusBadRequest, "INVALID_ARGUMENT", tooDeep)
	}
	// At 64 levels the body passes the gateway, and the service judges the value.
	s.post("/v2/auth/permissions/add", k, withContext(`"user":{"userId":"u"},`, 64)).fails(t, http.StatusBadRequest, "INVALID_ARGUMENT",
		"permissions.context.access.k[0] must be a string or a number.")

	// A public route, a body of 4 MiB opening arrays without end.
	prefix := `{"data":{"ownerEmail":"a@b.co","x":`
	body := prefix + strings.Repeat("[", 4<<20-len(prefix))
	s.post("/v2/workspace/email/status", nil, body).fails(t, http.StatusBadRequest, "INVALID_ARGUMENT", tooDeep)
	// 64 levels of an unknown field are fine.
	s.post("/v2/workspace/domains/get", k, `{"data":{"x":`+nestedValue(63)+`}}`).data(t, "Domains retrieved successfully.")
}

// A misspelt field must not widen a destructive call: Delete Users with "documentID" (for
// documentId) used to remove the user from the whole organization.
func TestMisspeltFieldRefused(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	k := s.devKey()
	s.call("/v2/users/add", k, map[string]any{"organizationId": "o", "createOrganization": true, "documentId": "d1", "createDocument": true, "users": users("u1")}).data(t, "")
	s.call("/v2/users/delete", k, map[string]any{"organizationId": "o", "documentID": "d1", "userIds": []string{"u1"}}).
		fails(t, http.StatusBadRequest, "INVALID_ARGUMENT", "Unknown field data.documentID; did you mean documentId?")
	s.call("/v2/users/add", k, map[string]any{"organizationId": "o", "users": []any{map[string]any{"userID": "u2"}}}).
		fails(t, http.StatusBadRequest, "INVALID_ARGUMENT", "Unknown field data.users[0].userID; did you mean userId?")
	if got := userIDs(t, s.call("/v1/users/get", k, map[string]any{"organizationId": "o"}).ok(t)["data"]); !slices.Equal(got, []string{"u1"}) {
		t.Fatalf("organization users after refused calls: %v", got)
	}
	// Fields we do not know, and are no near miss of one, are still ignored.
	s.call("/v2/users/delete", k, map[string]any{"organizationId": "o", "documentId": "d1", "userIds": []string{"u1"}, "notifyUsers": true}).data(t, "User(s) deleted successfully.")
	if got := userIDs(t, s.call("/v1/users/get", k, map[string]any{"organizationId": "o"}).ok(t)["data"]); !slices.Equal(got, []string{"u1"}) {
		t.Fatalf("a document-scoped delete removed the user from the organization: %v", got)
	}
}
