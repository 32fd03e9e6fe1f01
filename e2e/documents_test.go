package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// org creates an organization for the dev key.
func (s *system) org(id string) {
	s.t.Helper()
	d := s.call("/v2/organizations/add", s.devKey(), map[string]any{"organizations": []any{map[string]any{"organizationId": id, "organizationName": "Org " + id}}}).data(s.t, "")
	if item := d[id].(map[string]any); item["success"] != true {
		s.t.Fatalf("organization %s: %v", id, item)
	}
}

// docs adds documents (id → folder id, "" for none) to an organization of the dev key.
func (s *system) docs(org string, folder string, ids ...string) {
	s.t.Helper()
	var list []any
	for _, id := range ids {
		list = append(list, map[string]any{"documentId": id, "documentName": "Doc " + id, "folderId": folder})
	}
	d := s.call("/v2/organizations/documents/add", s.devKey(), map[string]any{"organizationId": org, "documents": list}).data(s.t, "")
	for _, id := range ids {
		if item := d[id].(map[string]any); item["success"] != true {
			s.t.Fatalf("document %s: %v", id, item)
		}
	}
}

func (s *system) folder(org, id, parent, accessType string) {
	s.t.Helper()
	f := map[string]any{"folderId": id, "folderName": "Folder " + id, "parentFolderId": parent}
	if accessType != "" {
		f["accessType"] = accessType
	}
	d := s.call("/v2/organizations/folders/add", s.devKey(), map[string]any{"organizationId": org, "folders": []any{f}}).data(s.t, "")
	if item := d[id].(map[string]any); item["success"] != true {
		s.t.Fatalf("folder %s: %v", id, item)
	}
}

func docIDs(t *testing.T, data any) []string {
	t.Helper()
	var out []string
	for _, d := range data.([]any) {
		out = append(out, d.(map[string]any)["id"].(string))
	}
	return out
}

func TestDocumentsAndFolders(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	k := s.devKey()
	s.org("acme")
	s.folder("acme", "f1", "", "restricted")
	s.folder("acme", "f2", "f1", "")
	s.docs("acme", "", "d-root")
	s.docs("acme", "f2", "d-deep")

	// Get Documents v1: all, with effective access types (inherited through the folder chain).
	r := s.call("/v1/organizations/documents/get", k, map[string]any{"organizationId": "acme"}).ok(t)
	if r["message"] != "Documents retrieved successfully." {
		t.Fatalf("message %v", r["message"])
	}
	byID := map[string]map[string]any{}
	for _, d := range r["data"].([]any) {
		m := d.(map[string]any)
		byID[m["id"].(string)] = m
	}
	if len(byID) != 2 || byID["d-root"]["accessType"] != "public" || byID["d-deep"]["accessType"] != "restricted" {
		t.Fatalf("documents %v", byID)
	}
	if byID["d-deep"]["documentName"] != "Doc d-deep" || byID["d-deep"]["disabled"] != false {
		t.Fatalf("document fields %v", byID["d-deep"])
	}

	folders := s.call("/v2/organizations/folders/get", k, map[string]any{"organizationId": "acme", "folderIds": []string{"f2"}}).ok(t)["data"].([]any)
	f2 := folders[0].(map[string]any)
	if f2["parentFolderId"] != "f1" || !equalStrings(f2["ancestors"], "f1") || f2["accessType"] != "restricted" {
		t.Fatalf("folder f2 %v", f2)
	}

	// Update Access for Documents: per item results, a missing one fails inside a success.
	d := s.call("/v1/organizations/documents/access/update", k, map[string]any{
		"organizationId": "acme", "documentIds": []string{"d-deep", "ghost"}, "accessType": "public",
	}).data(t, "Updated access for documents successfully.")
	if got := d["d-deep"].(map[string]any); got["success"] != true || got["accessType"] != "public" || got["message"] != "Document access type updated." {
		t.Fatalf("d-deep %v", got)
	}
	if got := d["ghost"].(map[string]any); got["success"] != false || got["message"] != "Document does not exist." {
		t.Fatalf("ghost %v", got)
	}
	// The document's own type now wins over its folder's.
	v1 := s.call("/v1/organizations/documents/get", k, map[string]any{"organizationId": "acme", "documentIds": []string{"d-deep"}}).ok(t)["data"].([]any)
	if len(v1) != 1 || v1[0].(map[string]any)["accessType"] != "public" {
		t.Fatalf("after update %v", v1)
	}

	fd := s.call("/v1/organizations/folders/access/update", k, map[string]any{
		"organizationId": "acme", "folderIds": []string{"f1", "nope"}, "accessType": "organizationPrivate",
	}).data(t, "Updated access for folders successfully.")
	if got := fd["f1"].(map[string]any); got["success"] != true || got["message"] != "Folder access type updated." {
		t.Fatalf("f1 %v", got)
	}
	if got := fd["nope"].(map[string]any); got["success"] != false || got["message"] != "Folder does not exist." {
		t.Fatalf("nope %v", got)
	}
	f2 = s.call("/v2/organizations/folders/get", k, map[string]any{"organizationId": "acme", "folderIds": []string{"f2"}}).ok(t)["data"].([]any)[0].(map[string]any)
	if f2["accessType"] != "organizationPrivate" {
		t.Fatalf("f2 inherits %v", f2["accessType"])
	}
}

func TestGetDocumentsV2Paging(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	k := s.devKey()
	s.org("o")
	s.folder("o", "f", "", "")
	var all []string
	for i := range 7 {
		s.clock.Advance(time.Millisecond)
		id := fmt.Sprintf("doc-%02d", i)
		folder := ""
		if i%2 == 0 {
			folder = "f"
		}
		s.docs("o", folder, id)
		all = append(all, id)
	}
	var got []string
	tok := ""
	for page := 0; ; page++ {
		body := map[string]any{"organizationId": "o", "pageSize": 3}
		if tok != "" {
			body["pageToken"] = tok
		}
		r := s.call("/v2/organizations/documents/get", k, body).ok(t)
		got = append(got, docIDs(t, r["data"])...)
		if page == 0 {
			// Between pages: delete one not yet listed, and add one.
			s.call("/v2/organizations/documents/delete", k, map[string]any{"organizationId": "o", "documentIds": []string{"doc-05"}}).data(t, "")
			s.clock.Advance(time.Millisecond)
			s.docs("o", "", "doc-new")
			all = append(slices.DeleteFunc(all, func(s string) bool { return s == "doc-05" }), "doc-new")
		}
		next, ok := r["pageToken"].(string)
		if !ok {
			break
		}
		tok = next
		if page > 10 {
			t.Fatal("paging does not end")
		}
	}
	if !slices.Equal(got, all) {
		t.Fatalf("paged %v\nwant  %v", got, all)
	}

	inFolder := docIDs(t, s.call("/v2/organizations/documents/get", k, map[string]any{"organizationId": "o", "folderId": "f"}).ok(t)["data"])
	if !slices.Equal(inFolder, []string{"doc-00", "doc-02", "doc-04", "doc-06"}) {
		t.Fatalf("folder filter %v", inFolder)
	}
	byIDs := docIDs(t, s.call("/v2/organizations/documents/get", k, map[string]any{"organizationId": "o", "documentIds": []string{"doc-03", "doc-01", "missing"}}).ok(t)["data"])
	if !slices.Equal(byIDs, []string{"doc-01", "doc-03"}) {
		t.Fatalf("ids filter %v", byIDs)
	}

	// A token only works with the filters it came from.
	first := s.call("/v2/organizations/documents/get", k, map[string]any{"organizationId": "o", "pageSize": 1}).ok(t)
	s.call("/v2/organizations/documents/get", k, map[string]any{"organizationId": "o", "folderId": "f", "pageToken": first["pageToken"]}).fails(t, 400, "INVALID_ARGUMENT", "pageToken is invalid.")

	many := make([]string, 31)
	for i := range many {
		many[i] = fmt.Sprint("d", i)
	}
	s.call("/v2/organizations/documents/get", k, map[string]any{"organizationId": "o", "documentIds": many}).fails(t, 400, "INVALID_ARGUMENT", "documentIds must contain at most 30 ids.")
	for _, size := range []int{-1, 1001} {
		s.call("/v2/organizations/documents/get", k, map[string]any{"organizationId": "o", "pageSize": size}).fails(t, 400, "INVALID_ARGUMENT", "pageSize must be between 1 and 1000.")
	}

	// The advanced-queries switch.
	s.call("/v2/workspace/settings/update", s.devWorkspace(), map[string]any{"advancedQueries": false}).data(t, "")
	s.call("/v2/organizations/documents/get", k, map[string]any{"organizationId": "o"}).fails(t, 400, "FAILED_PRECONDITION", "")
	s.call("/v1/organizations/documents/get", k, map[string]any{"organizationId": "o"}).data(t, "") // v1 needs no switch
}

func TestDocumentsTenantIsolationAndBadInput(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	s.org("acme")
	s.docs("acme", "", "secret-doc")
	id, token := s.newWorkspace("other@example.com")
	otherKey, otherAuth := s.newKey(id, token)
	other := keyHeaders(otherKey, otherAuth)
	// Another API key's organization does not exist for this one.
	s.call("/v1/organizations/documents/get", other, map[string]any{"organizationId": "acme"}).fails(t, 404, "NOT_FOUND", "Organization does not exist.")
	s.call("/v1/organizations/documents/access/update", other, map[string]any{"organizationId": "acme", "documentIds": []string{"secret-doc"}, "accessType": "public"}).fails(t, 404, "NOT_FOUND", "")

	k := s.devKey()
	cases := []struct {
		path string
		data map[string]any
		msg  string
	}{
		{"/v1/organizations/documents/access/update", map[string]any{"documentIds": []string{"secret-doc"}, "accessType": "public"}, "organizationId is required."},
		{"/v1/organizations/documents/access/update", map[string]any{"organizationId": "acme", "documentIds": []string{}, "accessType": "public"}, "documentIds must contain at least one id."},
		{"/v1/organizations/documents/access/update", map[string]any{"organizationId": "acme", "documentIds": []string{"secret-doc"}, "accessType": "private"}, "accessType must be one of organizationPrivate, restricted, public."},
		{"/v1/organizations/documents/access/update", map[string]any{"organizationId": "acme", "documentIds": []string{"secret-doc"}}, "accessType is required."},
		{"/v1/organizations/documents/access/update", map[string]any{"organizationId": "acme", "documentIds": []string{"bad\u0007id"}, "accessType": "public"}, "documentIds[0] must not contain control characters."},
		{"/v1/organizations/documents/access/update", map[string]any{"organizationId": "acme", "documentIds": "secret-doc", "accessType": "public"}, "data.documentIds must be an array of strings."},
		{"/v2/organizations/documents/add", map[string]any{"organizationId": "acme", "documents": []any{map[string]any{"documentId": strings.Repeat("x", 257)}}}, ""},
		{"/v1/organizations/folders/access/update", map[string]any{"organizationId": "acme", "folderIds": []string{"f"}, "accessType": 3}, "data.accessType must be a string."},
	}
	for _, c := range cases {
		s.call(c.path, k, c.data).fails(t, 400, "INVALID_ARGUMENT", c.msg)
	}
	// Nothing was written.
	docs := s.call("/v1/organizations/documents/get", k, map[string]any{"organizationId": "acme"}).ok(t)["data"].([]any)
	if len(docs) != 1 || docs[0].(map[string]any)["accessType"] != "public" {
		t.Fatalf("refused requests wrote: %v", docs)
	}
}

// waitStatus polls a migration until it leaves pending/in_progress.
func (s *system) waitMigration(org, id string) string {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d := s.call("/v2/organizations/documents/migrate/status", s.devKey(), map[string]any{"organizationId": org, "migrationId": id}).data(s.t, "Migration status retrieved successfully.")
		if d["migrationId"] != id {
			s.t.Fatalf("status of %v", d)
		}
		st := d["status"].(string)
		if st == "completed" || st == "failed" {
			return st
		}
		if !slices.Contains([]string{"pending", "in_progress"}, st) {
			s.t.Fatalf("status %q", st)
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("migration %s still %s", id, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestMigrateDocument(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	k := s.devKey()
	s.org("o")
	s.folder("o", "f", "", "")
	s.docs("o", "f", "old", "taken")
	s.call("/v1/organizations/documents/access/update", k, map[string]any{"organizationId": "o", "documentIds": []string{"old"}, "accessType": "restricted"}).data(t, "")
	s.call("/v2/users/add", k, map[string]any{"organizationId": "o", "documentId": "old", "users": []any{map[string]any{"userId": "u1", "name": "U1", "email": "u1@example.com"}}}).data(t, "")
	s.call("/v2/auth/permissions/add", k, map[string]any{"user": map[string]any{"userId": "u2"}, "permissions": map[string]any{"resources": []any{
		map[string]any{"type": "document", "id": "old", "organizationId": "o", "accessRole": "viewer"},
	}}}).data(t, "Permissions added successfully.")

	s.call("/v2/organizations/documents/migrate", k, map[string]any{"organizationId": "o", "documentId": "old", "newDocumentId": "taken"}).fails(t, 409, "ALREADY_EXISTS", "")
	s.call("/v2/organizations/documents/migrate", k, map[string]any{"organizationId": "o", "documentId": "ghost", "newDocumentId": "new"}).fails(t, 404, "NOT_FOUND", "")
	started := s.call("/v2/organizations/documents/migrate", k, map[string]any{"organizationId": "o", "documentId": "old", "newDocumentId": "new"}).data(t, "Document migration started successfully.")
	id := started["migrationId"].(string)
	if st := s.waitMigration("o", id); st != "completed" {
		t.Fatalf("migration %s", st)
	}

	docs := s.call("/v1/organizations/documents/get", k, map[string]any{"organizationId": "o", "documentIds": []string{"old", "new"}}).ok(t)["data"].([]any)
	if len(docs) != 1 || docs[0].(map[string]any)["id"] != "new" || docs[0].(map[string]any)["accessType"] != "restricted" {
		t.Fatalf("after migration %v", docs)
	}
	// The document's users and permissions moved with it.
	users := s.call("/v1/users/get", k, map[string]any{"organizationId": "o", "documentId": "new"}).ok(t)["data"].([]any)
	if len(users) != 1 || users[0].(map[string]any)["userId"] != "u1" {
		t.Fatalf("document users after migration %v", users)
	}
	perms := s.call("/v2/auth/permissions/get", k, map[string]any{"organizationId": "o", "userIds": []string{"u2"}, "documentIds": []string{"new"}}).data(t, "")
	entry := perms["u2"].(map[string]any)["documents"].(map[string]any)["new"].(map[string]any)
	if entry["accessRole"] != "viewer" {
		t.Fatalf("grant after migration %v", entry)
	}
	s.call("/v2/auth/permissions/get", k, map[string]any{"organizationId": "o", "userIds": []string{"u2"}, "documentIds": []string{"old"}}).fails(t, 404, "NOT_FOUND", "Folder or document does not exist")

	s.call("/v2/organizations/documents/migrate/status", k, map[string]any{"organizationId": "o", "migrationId": "nope"}).fails(t, 404, "NOT_FOUND", "")
	s.call("/v2/organizations/documents/migrate/status", k, map[string]any{"organizationId": "other", "migrationId": id}).fails(t, 404, "NOT_FOUND", "")
}

// A migration interrupted by a shutdown finishes after the restart.
func TestMigrationResumesAfterRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := start(t, config(t, "--data-dir="+dir))
	k := first.devKey()
	first.org("o")
	first.docs("o", "", "a")
	first.call("/v2/users/add", k, map[string]any{"organizationId": "o", "documentId": "a", "users": []any{map[string]any{"userId": "u1"}}}).data(t, "")
	id := first.call("/v2/organizations/documents/migrate", k, map[string]any{"organizationId": "o", "documentId": "a", "newDocumentId": "b"}).data(t, "")["migrationId"].(string)
	// Stop at once: the job may be anywhere between pending and completed.
	if err := first.proc.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	second := start(t, config(t, "--data-dir="+dir))
	if st := second.waitMigration("o", id); st != "completed" {
		t.Fatalf("after restart: %s", st)
	}
	users := second.call("/v1/users/get", second.devKey(), map[string]any{"organizationId": "o", "documentId": "b"}).ok(t)["data"].([]any)
	if len(users) != 1 {
		t.Fatalf("users of the migrated document %v", users)
	}
}

func TestDeleteDataByLocation(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	k := s.devKey()
	s.org("o")
	s.docs("o", "", "d")
	body := map[string]any{"apiKey": s.proc.Dev.APIKey, "authToken": s.proc.Dev.AuthToken, "documentId": "d", "location": map[string]any{"id": "loc-1", "locationName": "Intro"}}
	r := s.call("/v1/organizations/documents/locations/data/delete", k, body).ok(t)
	if r["status"] != "success" || r["data"] != nil {
		t.Fatalf("result %v", r)
	}
	if _, present := r["data"]; !present {
		t.Fatalf("data must be null, not absent: %s", s.call("/v1/organizations/documents/locations/data/delete", k, body).raw)
	}
	// Repeating it is fine (idempotent).
	s.call("/v1/organizations/documents/locations/data/delete", k, body).ok(t)

	wrong := map[string]any{"apiKey": "someone-else", "authToken": s.proc.Dev.AuthToken, "location": map[string]any{"id": "x"}}
	s.call("/v1/organizations/documents/locations/data/delete", k, wrong).fails(t, 400, "INVALID_ARGUMENT", "apiKey in data does not match the x-service-api-key header.")
	s.call("/v1/organizations/documents/locations/data/delete", k, map[string]any{"documentId": "d"}).fails(t, 400, "INVALID_ARGUMENT", "")
	s.call("/v1/organizations/documents/locations/data/delete", nil, body).fails(t, 400, "INVALID_ARGUMENT", "API key not found in headers.")
}
