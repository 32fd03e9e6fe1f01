package e2e

import (
	"slices"
	"testing"
	"time"
)

// These tests run the memory service with its default embedder, the local model
// (internal/embed.NewLocal): the semantic search below needs its real vectors.

func judgmentIDs(t *testing.T, result map[string]any) []string {
	t.Helper()
	var out []string
	for _, r := range result["results"].([]any) {
		out = append(out, r.(map[string]any)["recordId"].(string))
	}
	return out
}

// Judgments recorded over HTTP are found by meaning (a paraphrase shares no word with the
// judgment it finds), updated by record id, read on the annotation and recency paths, deleted,
// and go with their organization.
func TestMemoryJudgmentsOverHTTPWithLocalModel(t *testing.T) {
	t.Parallel()
	onBothStores(t, testMemoryJudgmentsOverHTTP)
}

func testMemoryJudgmentsOverHTTP(t *testing.T, s *system) {
	k := s.devKey()
	s.addOrganization(t, k, "o")
	before := float64(s.clock.Now().Add(-time.Hour).UnixMilli()) // the process's clock decides "now"
	added := s.call("/v2/memory/judgments/add", k, map[string]any{"organizationId": "o", "judgments": []any{
		map[string]any{"recordId": "contrast", "documentId": "d", "decision": "reject", "reasoning": "The grey caption has very low contrast on the light photo.",
			"confidence": 0.8, "actionUser": map[string]any{"userId": "u1", "name": "Ada"}, "judgeType": "agent", "annotationId": "thread-1", "createdAt": before,
			"agent": map[string]any{"agentId": "a1", "agentName": "Accessibility", "agentVersion": 2}, "content": "Banner image with a caption"},
		map[string]any{"recordId": "invoice", "decision": "approve", "reasoning": "The invoice total matches the purchase order.", "annotationId": "thread-1", "createdAt": before + 1},
		map[string]any{"recordId": "logo", "decision": "approve", "reasoning": "Logo placement follows the brand guidelines.", "createdAt": before + 2},
	}}).data(t, "Judgment(s) recorded successfully.")
	if len(added) != 3 || added["contrast"].(map[string]any)["message"] != "Judgment recorded." {
		t.Fatalf("add: %v", added)
	}

	r := s.call("/v2/memory/search", k, map[string]any{"query": "text is hard to read against the background", "organizationId": "o"})
	result := r.ok(t)
	if _, has := result["status"]; has || len(result) != 3 || result["totalInScope"] != float64(3) {
		t.Fatalf("search result %s", r.raw)
	}
	if ids := judgmentIDs(t, result); ids[0] != "contrast" {
		t.Fatalf("paraphrase found %v first", ids)
	}
	top := result["results"].([]any)[0].(map[string]any)
	if top["scope"] != "organization" || top["confidence"] != 0.8 || top["actionUser"].(map[string]any)["name"] != "Ada" ||
		top["agent"].(map[string]any)["agentId"] != "a1" || top["similarity"].(float64) <= 0 {
		t.Fatalf("result %v", top)
	}
	if second := result["results"].([]any)[1].(map[string]any); second["agent"] != nil || second["confidence"] != nil {
		t.Fatalf("a human judgment: %v", second)
	}

	// A repeat of a record id is an update.
	upd := s.call("/v2/memory/judgments/add", k, map[string]any{"organizationId": "o", "judgments": []any{
		map[string]any{"recordId": "invoice", "decision": "reject", "reasoning": "The invoice total is higher than the purchase order.", "annotationId": "thread-1"},
	}}).data(t, "")
	if upd["invoice"].(map[string]any)["message"] != "Judgment updated." {
		t.Fatalf("update: %v", upd)
	}
	// The annotation path: the thread, oldest first, similarity 1, no query needed.
	thread := s.call("/v2/memory/search", k, map[string]any{"organizationId": "o", "filters": map[string]any{"annotationId": "thread-1"}}).ok(t)
	if ids := judgmentIDs(t, thread); !slices.Equal(ids, []string{"contrast", "invoice"}) || thread["results"].([]any)[0].(map[string]any)["similarity"] != float64(1) {
		t.Fatalf("thread %v", thread)
	}
	// The recency path: newest first.
	if ids := judgmentIDs(t, s.call("/v2/memory/search", k, map[string]any{"recencyDays": 7}).ok(t)); ids[0] != "invoice" || len(ids) != 3 {
		t.Fatalf("recent %v", ids)
	}
	s.call("/v2/memory/search", k, map[string]any{"query": "x", "limit": 51}).fails(t, 400, "INVALID_ARGUMENT", "limit must be between 1 and 50.")
	s.call("/v2/memory/search", k, map[string]any{"query": "x", "documentId": "d"}).fails(t, 400, "INVALID_ARGUMENT", "documentId requires organizationId.")
	s.call("/v2/memory/search", k, map[string]any{"query": ""}).fails(t, 400, "INVALID_ARGUMENT", "query is required and must not be empty.")

	del := s.call("/v2/memory/judgments/delete", k, map[string]any{"organizationId": "o", "recordIds": []string{"logo", "nope"}}).data(t, "Judgment(s) deleted successfully.")
	if del["logo"].(map[string]any)["success"] != true || del["nope"].(map[string]any)["success"] != false {
		t.Fatalf("delete %v", del)
	}
	s.call("/v2/organizations/delete", k, map[string]any{"organizationIds": []string{"o"}}).data(t, "")
	if got := s.call("/v2/memory/search", k, map[string]any{"recencyDays": 7}).ok(t); got["totalInScope"] != float64(0) {
		t.Fatalf("after the organization's deletion: %v", got)
	}
}

// Agent executions over HTTP: start, complete once, list with cursors.
func TestAgentExecutionsOverHTTP(t *testing.T) { onBothStores(t, testAgentExecutionsOverHTTP) }

func testAgentExecutionsOverHTTP(t *testing.T, s *system) {
	k := s.devKey()
	var ids []string
	for range 5 {
		e := s.call("/v2/agents/execution/start", k, map[string]any{"agentId": "a1", "agentName": "Checker", "agentVersion": 1.5, "organizationId": "o", "trigger": "comment"}).
			data(t, "Agent execution started successfully.")
		if e["status"] != "running" || e["completedAt"] != nil || e["durationMs"] != nil {
			t.Fatalf("started %v", e)
		}
		ids = append(ids, e["id"].(string))
	}
	done := s.call("/v2/agents/execution/complete", k, map[string]any{"executionId": ids[0], "status": "passed", "message": "ok"}).data(t, "Agent execution completed successfully.")
	if done["status"] != "passed" || done["completedAt"] == nil || done["durationMs"] == nil {
		t.Fatalf("completed %v", done)
	}
	s.call("/v2/agents/execution/complete", k, map[string]any{"executionId": ids[0], "status": "failed"}).
		fails(t, 400, "FAILED_PRECONDITION", "Agent execution is already finished.")
	seen := map[string]bool{}
	req := map[string]any{"agentId": "a1", "pageSize": 2, "orderDirection": "asc"}
	for {
		page := s.call("/v2/agents/execution/list", k, req).ok(t)
		if _, has := page["status"]; has {
			t.Fatalf("list result with a status: %v", page)
		}
		for _, it := range page["items"].([]any) {
			seen[it.(map[string]any)["id"].(string)] = true
		}
		if page["hasMore"] != true {
			break
		}
		req["cursor"] = page["nextCursor"]
	}
	if len(seen) != 5 {
		t.Fatalf("listed %d", len(seen))
	}
	empty := s.call("/v2/agents/execution/list", k, map[string]any{"status": "skipped"}).ok(t)
	if items := empty["items"].([]any); len(items) != 0 || empty["hasMore"] != false {
		t.Fatalf("nothing matches: %v", empty)
	}
}
