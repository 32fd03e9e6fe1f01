package e2e

import (
	"slices"
	"testing"
)

func userIDs(t *testing.T, data any) []string {
	t.Helper()
	var out []string
	for _, u := range data.([]any) {
		out = append(out, u.(map[string]any)["userId"].(string))
	}
	slices.Sort(out)
	return out
}

func users(ids ...string) []any {
	var out []any
	for _, id := range ids {
		out = append(out, map[string]any{"userId": id, "name": "Name " + id, "email": id + "@example.com"})
	}
	return out
}

func TestUsersLifecycle(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	k := s.devKey()
	// createOrganization and createDocument create what is missing.
	added := s.call("/v2/users/add", k, map[string]any{"organizationId": "o", "createOrganization": true, "documentId": "d1", "createDocument": true, "users": users("u1", "u2")}).data(t, "User(s) processed successfully.")
	if item := added["u1"].(map[string]any); item["success"] != true || item["id"] != "u1" || item["message"] != "User added." {
		t.Fatalf("add %v", item)
	}
	s.call("/v2/users/add", k, map[string]any{"organizationId": "o", "users": users("u3", "u4")}).data(t, "")
	s.call("/v2/organizations/usergroups/add", k, map[string]any{"organizationId": "o", "organizationUserGroups": []any{map[string]any{"groupId": "g1", "groupName": "Team"}}}).data(t, "")
	s.call("/v2/organizations/usergroups/users/add", k, map[string]any{"organizationId": "o", "organizationUserGroupId": "g1", "userIds": []string{"u2", "u3"}}).data(t, "")

	get := func(filters map[string]any) []string {
		filters["organizationId"] = "o"
		return userIDs(t, s.call("/v1/users/get", k, filters).ok(t)["data"])
	}
	for name, c := range map[string]struct {
		filters map[string]any
		want    []string
	}{
		"organization":          {map[string]any{}, []string{"u1", "u2", "u3", "u4"}},
		"organization+document": {map[string]any{"documentId": "d1"}, []string{"u1", "u2"}},
		"with user ids":         {map[string]any{"userIds": []string{"u1", "u4", "nobody"}}, []string{"u1", "u4"}},
		"with group ids":        {map[string]any{"organizationUserGroupIds": []string{"g1"}}, []string{"u2", "u3"}},
		"all together":          {map[string]any{"documentId": "d1", "userIds": []string{"u2", "u3"}, "organizationUserGroupIds": []string{"g1"}}, []string{"u2"}},
	} {
		if got := get(c.filters); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}
	one := s.call("/v1/users/get", k, map[string]any{"organizationId": "o", "userIds": []string{"u1"}}).ok(t)["data"].([]any)[0].(map[string]any)
	if one["name"] != "Name u1" || one["email"] != "u1@example.com" || len(one) != 3 {
		t.Fatalf("user record %v", one)
	}

	// Update Users v2: document scope with a role; a missing user fails inside the success.
	up := s.call("/v2/users/update", k, map[string]any{"organizationId": "o", "documentId": "d1", "users": []any{
		map[string]any{"userId": "u1", "name": "Renamed", "accessRole": "viewer", "isAdmin": true},
		map[string]any{"userId": "ghost", "name": "x"},
	}}).data(t, "User(s) processed successfully.")
	if item := up["u1"].(map[string]any); item["success"] != true || item["message"] != "User updated." {
		t.Fatalf("update u1 %v", item)
	}
	if item := up["ghost"].(map[string]any); item["success"] != false || item["message"] != "User does not exist." {
		t.Fatalf("update ghost %v", item)
	}
	perms := s.call("/v2/auth/permissions/get", k, map[string]any{"organizationId": "o", "userIds": []string{"u1"}, "documentIds": []string{"d1"}}).data(t, "")
	if role := perms["u1"].(map[string]any)["documents"].(map[string]any)["d1"].(map[string]any)["accessRole"]; role != "viewer" {
		t.Fatalf("role after update %v", role)
	}
	if got := s.call("/v1/users/get", k, map[string]any{"organizationId": "o", "userIds": []string{"u1"}}).ok(t)["data"].([]any)[0].(map[string]any); got["name"] != "Renamed" {
		t.Fatalf("name after update %v", got)
	}
	s.call("/v2/users/update", k, map[string]any{"organizationId": "o", "users": []any{map[string]any{"userId": "u1", "accessRole": "owner"}}}).fails(t, 400, "INVALID_ARGUMENT", "")
	s.call("/v2/users/update", k, map[string]any{"organizationId": "o", "documentId": "d1", "folderId": "f", "users": users("u1")}).fails(t, 400, "INVALID_ARGUMENT", "Provide either documentId or folderId, not both.")

	// Delete from the document only: still in the organization.
	del := s.call("/v2/users/delete", k, map[string]any{"organizationId": "o", "documentId": "d1", "userIds": []string{"u2", "ghost"}}).data(t, "User(s) deleted successfully.")
	if item := del["u2"].(map[string]any); item["success"] != true || item["message"] != "User removed." {
		t.Fatalf("delete u2 %v", item)
	}
	if item := del["ghost"].(map[string]any); item["success"] != false {
		t.Fatalf("delete ghost %v", item)
	}
	if got := get(map[string]any{"documentId": "d1"}); !slices.Equal(got, []string{"u1"}) {
		t.Fatalf("document users after delete %v", got)
	}
	if got := get(map[string]any{}); !slices.Equal(got, []string{"u1", "u2", "u3", "u4"}) {
		t.Fatalf("organization users after document delete %v", got)
	}

	// Organization-wide: gone from the organization, its documents, groups and permissions.
	s.call("/v2/users/delete", k, map[string]any{"organizationId": "o", "userIds": []string{"u1", "u3"}}).data(t, "")
	if got := get(map[string]any{}); !slices.Equal(got, []string{"u2", "u4"}) {
		t.Fatalf("organization users after delete %v", got)
	}
	if got := get(map[string]any{"organizationUserGroupIds": []string{"g1"}}); !slices.Equal(got, []string{"u2"}) {
		t.Fatalf("group after delete %v", got)
	}
	// d1 is public, so anyone reads it; restricted, only its grants count.
	s.call("/v1/organizations/documents/access/update", k, map[string]any{"organizationId": "o", "documentIds": []string{"d1"}, "accessType": "restricted"}).data(t, "")
	perms = s.call("/v2/auth/permissions/get", k, map[string]any{"organizationId": "o", "userIds": []string{"u1"}, "documentIds": []string{"d1"}}).data(t, "")
	u1 := perms["u1"].(map[string]any)
	if org := u1["organization"].(map[string]any); len(org) != 0 {
		t.Fatalf("u1 still a member: %v", org)
	}
	if entry := u1["documents"].(map[string]any)["d1"].(map[string]any); entry["errorCode"] != "permission_denied" {
		t.Fatalf("u1's document grant survived: %v", entry)
	}
}

func TestUsersBadInputAndIsolation(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	k := s.devKey()
	s.org("o")
	cases := []struct {
		path string
		data map[string]any
		http int
		code string
		msg  string
	}{
		{"/v2/users/add", map[string]any{"users": users("u1")}, 400, "INVALID_ARGUMENT", "organizationId is required."},
		{"/v2/users/add", map[string]any{"organizationId": "o", "users": []any{}}, 400, "INVALID_ARGUMENT", ""},
		{"/v2/users/add", map[string]any{"organizationId": "o", "users": []any{map[string]any{"name": "no id"}}}, 400, "INVALID_ARGUMENT", ""},
		{"/v2/users/add", map[string]any{"organizationId": "o", "users": []any{map[string]any{"userId": "u1", "accessRole": "admin"}}}, 400, "INVALID_ARGUMENT", ""},
		{"/v2/users/add", map[string]any{"organizationId": "nope", "users": users("u1")}, 404, "NOT_FOUND", "Organization does not exist."},
		{"/v2/users/add", map[string]any{"organizationId": "o", "documentId": "nope", "users": users("u1")}, 404, "NOT_FOUND", "Document does not exist."},
		{"/v2/users/delete", map[string]any{"organizationId": "o"}, 400, "INVALID_ARGUMENT", ""},
		{"/v1/users/get", map[string]any{}, 400, "INVALID_ARGUMENT", "organizationId is required."},
		{"/v2/users/update", map[string]any{"organizationId": "o", "users": "u1"}, 400, "INVALID_ARGUMENT", "data.users must be an array of objects."},
	}
	for _, c := range cases {
		s.call(c.path, k, c.data).fails(t, c.http, c.code, c.msg)
	}
	if got := s.call("/v1/users/get", k, map[string]any{"organizationId": "o"}).ok(t)["data"].([]any); len(got) != 0 {
		t.Fatalf("refused requests wrote users: %v", got)
	}

	s.call("/v2/users/add", k, map[string]any{"organizationId": "o", "users": users("u1")}).data(t, "")
	id, token := s.newWorkspace("iso@example.com")
	key, auth := s.newKey(id, token)
	other := keyHeaders(key, auth)
	s.call("/v1/users/get", other, map[string]any{"organizationId": "o"}).fails(t, 404, "NOT_FOUND", "Organization does not exist.")
	s.call("/v2/users/delete", other, map[string]any{"organizationId": "o", "userIds": []string{"u1"}}).fails(t, 404, "NOT_FOUND", "")
	if got := s.call("/v1/users/get", k, map[string]any{"organizationId": "o"}).ok(t)["data"].([]any); len(got) != 1 {
		t.Fatalf("another key changed the users: %v", got)
	}
}
