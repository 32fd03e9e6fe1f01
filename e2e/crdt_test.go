package e2e

import (
	"encoding/base64"
	"fmt"
	"reflect"
	"slices"
	"testing"
)

// crdtRows returns Get CRDT Data's rows keyed by editor id, checking their order and shape.
func (s *system) crdtRows(t *testing.T, k map[string]string, query map[string]any) map[string]map[string]any {
	t.Helper()
	result := s.call("/v2/crdt/get", k, query).ok(t)
	if result["status"] != "success" || result["message"] != "CRDT data retrieved successfully." {
		t.Fatalf("get answered %v", result)
	}
	out := map[string]map[string]any{}
	var ids []string
	for _, r := range result["data"].([]any) {
		row := r.(map[string]any)
		id := row["id"].(string)
		if _, ok := row["lastUpdate"].(float64); !ok {
			t.Fatalf("row without a numeric lastUpdate: %v", row)
		}
		ids = append(ids, id)
		out[id] = row
	}
	if !slices.IsSorted(ids) {
		t.Fatalf("rows not sorted by editor id: %v", ids)
	}
	return out
}

// statusOnly checks a result with status and message only (Update and Apply CRDT Data).
func statusOnly(t *testing.T, r response, message string) {
	t.Helper()
	result := r.ok(t)
	if len(result) != 2 || result["status"] != "success" || result["message"] != message {
		t.Fatalf("result %v, want status and message %q only", result, message)
	}
}

// The CRDT operations over HTTP, on both stores: Add, Get (JSON and Yjs), Update, Apply,
// Delete, the refusals of the spec, crdt.update_data in the activity log, and the data going
// with its document.
func TestCrdtOverHTTP(t *testing.T) { onBothStores(t, testCrdtOverHTTP) }

func testCrdtOverHTTP(t *testing.T, s *system) {
	k := s.devKey()
	s.call("/v2/organizations/documents/add", k, map[string]any{"organizationId": "o", "createOrganization": true,
		"documents": []any{map[string]any{"documentId": "d", "documentName": "D"}, map[string]any{"documentId": "d2", "documentName": "D2"}}}).data(t, "")
	at := func(extra map[string]any) map[string]any {
		q := map[string]any{"organizationId": "o", "documentId": "d"}
		for key, v := range extra {
			q[key] = v
		}
		return q
	}
	s.call("/v2/workspace/activityconfig/update", k, map[string]any{"isEnabled": true}).data(t, "")

	add := s.call("/v2/crdt/add", k, at(map[string]any{"editorId": "e1", "data": "Hello", "type": "text"})).ok(t)
	if add["message"] != "CRDT data added successfully." || add["data"] != nil {
		t.Fatalf("add answered %v", add)
	}
	s.call("/v2/crdt/add", k, at(map[string]any{"editorId": "e1", "data": "again", "type": "text"})).fails(t, 409, "ALREADY_EXISTS", "CRDT data already exists for this editor ID.")
	s.call("/v2/crdt/add", k, at(map[string]any{"editorId": "m", "data": map[string]any{"title": "T", "count": 2}, "type": "map", "contentKey": "default"})).data(t, "CRDT data added successfully.")

	rows := s.crdtRows(t, k, at(nil))
	if len(rows) != 2 || rows["e1"]["data"] != "Hello" || !reflect.DeepEqual(rows["m"]["data"], map[string]any{"title": "T", "count": 2.0}) {
		t.Fatalf("get: %v", rows)
	}

	statusOnly(t, s.call("/v2/crdt/update", k, at(map[string]any{"editorId": "e1", "data": "Hello, world", "type": "text"})), "CRDT data updated successfully.")
	s.call("/v2/crdt/update", k, at(map[string]any{"editorId": "e1", "data": []any{1}, "type": "text"})).fails(t, 400, "INVALID_ARGUMENT", "Data must be a string for type text.")
	s.call("/v2/crdt/update", k, at(map[string]any{"editorId": "m", "data": "x", "type": "map"})).fails(t, 400, "INVALID_ARGUMENT", "Data must be an object for type map.")
	s.call("/v2/crdt/update", k, at(map[string]any{"editorId": "nobody", "data": "x", "type": "text"})).fails(t, 404, "NOT_FOUND", "No CRDT data found for this editor ID.")
	s.call("/v2/crdt/update", k, at(map[string]any{"editorId": "e1", "data": "x", "type": "markdown"})).fails(t, 400, "INVALID_ARGUMENT", "type must be one of text, map, array, xml.")
	// A root keeps its type: a map over the text (or a text over the map) is refused and
	// changes nothing; another contentKey is another root, free to take any type.
	s.call("/v2/crdt/update", k, at(map[string]any{"editorId": "e1", "data": map[string]any{"a": 1}, "type": "map"})).fails(t, 400, "INVALID_ARGUMENT",
		`The editor's content at contentKey "content" is of type text; update it with type text.`)
	s.call("/v2/crdt/update", k, at(map[string]any{"editorId": "m", "data": "x", "type": "text", "contentKey": "default"})).fails(t, 400, "INVALID_ARGUMENT",
		`The editor's content at contentKey "default" is of type map; update it with type map.`)
	if rows := s.crdtRows(t, k, at(nil)); rows["e1"]["data"] != "Hello, world" || !reflect.DeepEqual(rows["m"]["data"], map[string]any{"title": "T", "count": 2.0}) {
		t.Fatalf("a refused type change wrote: %v", rows)
	}
	statusOnly(t, s.call("/v2/crdt/update", k, at(map[string]any{"editorId": "e1", "data": []any{"x"}, "type": "array", "contentKey": "other"})), "CRDT data updated successfully.")
	s.call("/v2/crdt/update", k, at(map[string]any{"editorId": "e1", "data": "x", "type": "text", "contentKey": "other"})).fails(t, 400, "INVALID_ARGUMENT",
		`The editor's content at contentKey "other" is of type array; update it with type array.`)
	if got := s.crdtRows(t, k, at(map[string]any{"editorId": "e1", "contentKey": "other"}))["e1"]["data"]; fmt.Sprint(got) != "[x]" {
		t.Fatalf("the other root reads %v", got)
	}

	// The state as Yjs, applied to another editor, which Apply creates.
	one := s.crdtRows(t, k, at(map[string]any{"editorId": "e1", "format": "yjs"}))["e1"]
	update, err := base64.StdEncoding.DecodeString(one["data"].(string))
	if err != nil || len(update) == 0 {
		t.Fatalf("yjs data %v: %v", one["data"], err)
	}
	statusOnly(t, s.call("/v2/crdt/apply", k, at(map[string]any{"editorId": "copy", "update": one["data"]})), "CRDT update applied successfully.")
	if got := s.crdtRows(t, k, at(map[string]any{"editorId": "copy"}))["copy"]["data"]; got != "Hello, world" {
		t.Fatalf("applied copy reads %v", got)
	}
	s.call("/v2/crdt/apply", k, at(map[string]any{"editorId": "copy", "update": "%%"})).fails(t, 400, "INVALID_ARGUMENT", "update must be base64.")
	s.call("/v2/crdt/apply", k, at(map[string]any{"editorId": "copy", "update": base64.StdEncoding.EncodeToString([]byte{0xff, 0xff, 0xff})})).fails(t, 400, "INVALID_ARGUMENT", "update is not a valid Yjs update.")

	// Every change became a crdt.update_data activity record.
	eventually(t, "crdt activity", func() bool {
		n := 0
		for _, r := range s.call("/v2/activities/get", k, map[string]any{"organizationId": "o", "featureTypes": []string{"crdt"}}).ok(t)["data"].([]any) {
			if r.(map[string]any)["actionType"] == "crdt.update_data" {
				n++
			}
		}
		return n == 5 // add e1, add m, update e1 twice (its root, "other"), apply copy
	})

	// Delete one editor, then every editor of the document.
	s.call("/v2/crdt/delete", k, at(map[string]any{"editorId": "copy"})).data(t, "CRDT data deleted successfully.")
	s.call("/v2/crdt/delete", k, at(map[string]any{"editorId": "copy"})).fails(t, 404, "NOT_FOUND", "No CRDT data found for this editor ID.")
	s.call("/v2/crdt/get", k, at(map[string]any{"editorId": "copy"})).fails(t, 404, "NOT_FOUND", "No CRDT data found for this editor ID.")
	s.call("/v2/crdt/delete", k, at(nil)).data(t, "CRDT data deleted successfully.")
	if rows := s.crdtRows(t, k, at(nil)); len(rows) != 0 {
		t.Fatalf("left after deleting all: %v", rows)
	}

	// Data goes with its document, and follows a migrated one.
	s.call("/v2/crdt/add", k, map[string]any{"organizationId": "o", "documentId": "d2", "editorId": "e", "data": []any{"a"}, "type": "array"}).data(t, "")
	migration := s.call("/v2/organizations/documents/migrate", k, map[string]any{"organizationId": "o", "documentId": "d2", "newDocumentId": "d3"}).data(t, "")
	if st := s.waitMigration("o", migration["migrationId"].(string)); st != "completed" {
		t.Fatalf("migration %s", st)
	}
	moved := s.crdtRows(t, k, map[string]any{"organizationId": "o", "documentId": "d3"})
	if fmt.Sprint(moved["e"]["data"]) != "[a]" {
		t.Fatalf("after the migration: %v", moved)
	}
	s.call("/v2/organizations/documents/delete", k, map[string]any{"organizationId": "o", "documentIds": []string{"d3"}}).data(t, "")
	s.call("/v2/crdt/get", k, map[string]any{"organizationId": "o", "documentId": "d3"}).fails(t, 404, "NOT_FOUND", "Document does not exist.")
	s.call("/v2/organizations/documents/add", k, map[string]any{"organizationId": "o", "documents": []any{map[string]any{"documentId": "d3", "documentName": "again"}}}).data(t, "")
	if rows := s.crdtRows(t, k, map[string]any{"organizationId": "o", "documentId": "d3"}); len(rows) != 0 {
		t.Fatalf("a document made again under the id has the old data: %v", rows)
	}
}
