package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestConformance26 pins, over HTTP against one process on the memory store, the answers that
// the second conformance audit (issue 26) found differing from the contract: each row sends one
// operation and compares the answer with the contract's text (field names, presence of empty
// fields, messages, statuses).
func TestConformance26(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	k := s.devKey()
	loc := func(extra map[string]any) map[string]any {
		out := map[string]any{"organizationId": "o26", "documentId": "d26"}
		for key, v := range extra {
			out[key] = v
		}
		return out
	}
	thread := func(id string, status map[string]any) map[string]any {
		a := map[string]any{"annotationId": id, "from": map[string]any{"userId": "u1"},
			"commentData": []any{map[string]any{"commentText": "x", "from": map[string]any{"userId": "u1"}}}}
		if status != nil {
			a["status"] = status
		}
		return a
	}
	s.call("/v2/commentannotations/add", k, loc(map[string]any{"createOrganization": true, "createDocument": true,
		"commentAnnotations": []any{thread("open", nil), thread("done", map[string]any{"id": "DONE", "type": "terminal"})}})).
		data(t, "Comment annotation(s) added successfully.")

	cases := []struct {
		name  string
		path  string
		data  map[string]any
		check func(t *testing.T, r response)
	}{
		{
			// An annotation's resolvedByUserId is "(or null)" like priority and assignedTo,
			// which are answered null: an unresolved thread answers it null, not absent
			// (docs/comments.md, "Annotations").
			name: "resolvedByUserId is null on an open thread and the resolver on a resolved one",
			path: "/v2/commentannotations/get",
			data: loc(map[string]any{"order": "asc"}),
			check: func(t *testing.T, r response) {
				got := map[string]json.RawMessage{}
				for _, a := range rawAnnotations(t, r) {
					var id string
					if err := json.Unmarshal(a["annotationId"], &id); err != nil {
						t.Fatal(err)
					}
					by, present := a["resolvedByUserId"]
					if !present {
						t.Errorf("annotation %s has no resolvedByUserId field", id)
					}
					got[id] = by
				}
				if string(got["open"]) != "null" || string(got["done"]) != `"u1"` {
					t.Errorf("resolvedByUserId: open %s, done %s; want null and \"u1\"", got["open"], got["done"])
				}
			},
		},
		{
			// docs/comments.md, "Annotations": an annotationId of the limit's length is taken,
			// one more character is refused with the limit named.
			name: "annotationId of 128 characters is accepted",
			path: "/v2/commentannotations/add",
			data: loc(map[string]any{"commentAnnotations": []any{thread(strings.Repeat("a", 128), nil)}}),
			check: func(t *testing.T, r response) {
				if d := r.data(t, "Comment annotation(s) added successfully."); d[strings.Repeat("a", 128)].(map[string]any)["success"] != true {
					t.Errorf("added %v", d)
				}
			},
		},
		{
			name: "annotationId of 129 characters is refused",
			path: "/v2/commentannotations/add",
			data: loc(map[string]any{"commentAnnotations": []any{thread(strings.Repeat("a", 129), nil)}}),
			check: func(t *testing.T, r response) {
				r.fails(t, 400, "INVALID_ARGUMENT", "commentAnnotations[0].annotationId must be at most 128 characters.")
			},
		},
		{
			// Count answers keyed by document id {total, unread}, and userId is optional (the
			// user whose unread counts are given): without one there is no unread to give
			// (docs/comments.md, "Operations"). Three threads: open, done and the one of 128 characters.
			name: "count keyed by document id, unread only with a userId",
			path: "/v2/commentannotations/count",
			data: map[string]any{"organizationId": "o26", "documentIds": []any{"d26"}},
			check: func(t *testing.T, r response) {
				if got := fmt.Sprint(r.data(t, "")); got != "map[d26:map[total:3]]" {
					t.Errorf("count %s, want map[d26:map[total:3]]", got)
				}
			},
		},
		{
			name: "count with a userId has unread",
			path: "/v2/commentannotations/count",
			data: map[string]any{"organizationId": "o26", "documentIds": []any{"d26"}, "userId": "u1"},
			check: func(t *testing.T, r response) {
				if got := fmt.Sprint(r.data(t, "")); got != "map[d26:map[total:3 unread:3]]" {
					t.Errorf("count %s, want map[d26:map[total:3 unread:3]]", got)
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.check(t, s.call(c.path, k, c.data))
		})
	}
}

// rawAnnotations returns result.data of Get Comment Annotations with each annotation's fields
// as written, so that a field sent as null is told from one left out.
func rawAnnotations(t *testing.T, r response) []map[string]json.RawMessage {
	t.Helper()
	r.ok(t)
	var env struct {
		Result struct {
			Data []map[string]json.RawMessage `json:"data"`
		} `json:"result"`
	}
	dec := json.NewDecoder(bytes.NewReader(r.raw))
	if err := dec.Decode(&env); err != nil {
		t.Fatalf("decode: %v\n%s", err, r.raw)
	}
	return env.Result.Data
}
