package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
)

// These tests hold the invariants that must survive concurrent requests on a real MongoDB-wire
// server without transactions (the embedded FerretDB of --data-dir): no more API keys than the
// limit, no document outliving its organization, no grant or contact outliving its document.

// concurrentCall posts {"data": data} from any goroutine and returns the HTTP status and the
// decoded body; transport failures are reported through errs.
func (s *system) concurrentCall(path string, headers map[string]string, data any) (int, map[string]any, error) {
	raw, err := json.Marshal(map[string]any{"data": data})
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequest(http.MethodPost, s.base+path, bytes.NewReader(raw))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		return resp.StatusCode, nil, fmt.Errorf("%s: %d %s", path, resp.StatusCode, b)
	}
	if resp.StatusCode >= 500 {
		return resp.StatusCode, body, fmt.Errorf("%s: %d %s", path, resp.StatusCode, b)
	}
	return resp.StatusCode, body, nil
}

// together runs every function at once and fails the test on any error.
func together(t *testing.T, fns ...func() error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(fns))
	for _, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func persistentSystem(t *testing.T) *system {
	t.Helper()
	return newSystem(t, "--data-dir="+t.TempDir())
}

// 150 concurrent API key creations in one workspace make exactly the limit of 100 keys. On the
// memory store: the workspace store suite holds the same race on the embedded MongoDB-wire
// server (the key limit holds under concurrent creations), where 150 creations through the
// whole process took 88 s under the race detector.
func TestAPIKeyLimitHoldsUnderConcurrency(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	id, token := s.newWorkspace("limit@example.com") // its first key counts
	w := workspaceHeaders(id, token)
	calls := make([]func() error, 150)
	for i := range calls {
		calls[i] = func() error {
			code, _, err := s.concurrentCall("/v2/workspace/apikey/create", w, map[string]any{"apiKeyName": "k"})
			if err == nil && code != 200 && code != 400 {
				err = fmt.Errorf("apikey/create: HTTP %d", code)
			}
			return err
		}
	}
	together(t, calls...)
	keys := 0
	var page map[string]any
	for first := true; first || page["pageToken"] != nil; first = false {
		data := map[string]any{"pageSize": 1000}
		if !first {
			data["pageToken"] = page["pageToken"]
		}
		page = s.call("/v2/workspace/apikeys/get", w, data).ok(t)
		keys += len(page["data"].([]any))
	}
	if keys != 100 {
		t.Fatalf("%d keys after 150 concurrent creations, want the limit of 100", keys)
	}
}

// An organization deleted while documents are added to it leaves no document behind: once it is
// created again, it is empty.
func TestNoDocumentOutlivesItsOrganization(t *testing.T) {
	t.Parallel()
	s := persistentSystem(t)
	k := s.devKey()
	for round := range 4 {
		org := fmt.Sprintf("org-%d", round)
		s.call("/v2/organizations/add", k, map[string]any{"organizations": []any{map[string]any{"organizationId": org, "organizationName": "O"}}}).data(t, "")
		calls := []func() error{func() error {
			_, _, err := s.concurrentCall("/v2/organizations/delete", k, map[string]any{"organizationIds": []string{org}})
			return err
		}}
		for i := range 6 {
			calls = append(calls, func() error {
				_, _, err := s.concurrentCall("/v2/organizations/documents/add", k, map[string]any{"organizationId": org,
					"documents": []any{map[string]any{"documentId": fmt.Sprintf("d%d", i), "documentName": "D"}}})
				return err
			})
		}
		together(t, calls...)
		// Whatever the interleaving, the organization is gone now; made again, it has nothing.
		s.call("/v2/organizations/delete", k, map[string]any{"organizationIds": []string{org}})
		s.call("/v2/organizations/add", k, map[string]any{"organizations": []any{map[string]any{"organizationId": org, "organizationName": "O"}}}).data(t, "")
		if docs := s.call("/v1/organizations/documents/get", k, map[string]any{"organizationId": org}).ok(t)["data"].([]any); len(docs) != 0 {
			t.Fatalf("round %d: %d documents outlived their organization: %v", round, len(docs), docs)
		}
	}
}

// A document deleted while users and permissions are added for it leaves no contact entry and no
// grant behind: once it is created again, nobody is on its contact list or holds a role on it.
func TestNoGrantOrContactOutlivesItsDocument(t *testing.T) {
	t.Parallel()
	s := persistentSystem(t)
	k := s.devKey()
	s.call("/v2/organizations/add", k, map[string]any{"organizations": []any{map[string]any{"organizationId": "o", "organizationName": "O"}}}).data(t, "")
	for round := range 4 {
		doc := fmt.Sprintf("doc-%d", round)
		s.call("/v2/organizations/documents/add", k, map[string]any{"organizationId": "o", "documents": []any{map[string]any{"documentId": doc, "documentName": "D"}}}).data(t, "")
		calls := []func() error{func() error {
			_, _, err := s.concurrentCall("/v2/organizations/documents/delete", k, map[string]any{"organizationId": "o", "documentIds": []string{doc}})
			return err
		}}
		var granted []string
		for i := range 4 {
			contact, grantee := fmt.Sprintf("c%d-%d", round, i), fmt.Sprintf("g%d-%d", round, i)
			granted = append(granted, grantee)
			calls = append(calls, func() error {
				_, _, err := s.concurrentCall("/v2/users/add", k, map[string]any{"organizationId": "o", "documentId": doc,
					"users": []any{map[string]any{"userId": contact, "name": "C"}}})
				return err
			}, func() error {
				_, _, err := s.concurrentCall("/v2/auth/permissions/add", k, map[string]any{"user": map[string]any{"userId": grantee},
					"permissions": map[string]any{"resources": []any{map[string]any{"type": "document", "id": doc, "organizationId": "o", "accessRole": "editor"}}}})
				return err
			})
		}
		together(t, calls...)
		s.call("/v2/organizations/documents/delete", k, map[string]any{"organizationId": "o", "documentIds": []string{doc}})
		s.call("/v2/organizations/documents/add", k, map[string]any{"organizationId": "o", "documents": []any{map[string]any{"documentId": doc, "documentName": "D"}}}).data(t, "")
		s.call("/v1/organizations/documents/access/update", k, map[string]any{"organizationId": "o", "documentIds": []string{doc}, "accessType": "restricted"}).data(t, "")

		if got := s.call("/v1/users/get", k, map[string]any{"organizationId": "o", "documentId": doc}).ok(t)["data"].([]any); len(got) != 0 {
			t.Errorf("round %d: contacts outlived the document: %v", round, got)
		}
		perms := s.call("/v2/auth/permissions/get", k, map[string]any{"organizationId": "o", "userIds": granted, "documentIds": []string{doc}}).data(t, "")
		for _, u := range granted {
			entry := perms[u].(map[string]any)["documents"].(map[string]any)[doc].(map[string]any)
			if entry["errorCode"] != "permission_denied" {
				t.Errorf("round %d: %s holds a grant that outlived the document: %v", round, u, entry)
			}
		}
	}
}

// An organization deleted while events are published and activities added for it leaves no
// activity record behind: once it is created again, its log is empty.
func TestNoActivityOutlivesItsOrganization(t *testing.T) {
	t.Parallel()
	s := persistentSystem(t)
	k := s.devKey()
	s.call("/v2/workspace/activityconfig/update", k, map[string]any{"isEnabled": true}).data(t, "")
	for round := range 8 {
		org := fmt.Sprintf("org-%d", round)
		s.call("/v2/organizations/add", k, map[string]any{"organizations": []any{map[string]any{"organizationId": org, "organizationName": "O"}}}).data(t, "")
		calls := []func() error{func() error {
			_, _, err := s.concurrentCall("/v2/organizations/delete", k, map[string]any{"organizationIds": []string{org}})
			return err
		}}
		for i := range 8 {
			calls = append(calls, func() error {
				_, _, err := s.concurrentCall("/v2/events/publish", k, map[string]any{"type": "comment.add", "organizationId": org, "id": fmt.Sprintf("e%d", i)})
				return err
			}, func() error {
				_, _, err := s.concurrentCall("/v2/activities/add", k, map[string]any{"organizationId": org,
					"activities": []any{map[string]any{"featureType": "custom", "actionType": "custom.x"}}})
				return err
			})
		}
		together(t, calls...)
		s.call("/v2/organizations/delete", k, map[string]any{"organizationIds": []string{org}})
		s.call("/v2/organizations/add", k, map[string]any{"organizations": []any{map[string]any{"organizationId": org, "organizationName": "O"}}}).data(t, "")
		if recs := s.call("/v2/activities/get", k, map[string]any{"organizationId": org}).ok(t)["data"].([]any); len(recs) != 0 {
			t.Fatalf("round %d: %d activity records outlived their organization: %v", round, len(recs), recs)
		}
	}
}
