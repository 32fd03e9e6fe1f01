package memory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"
	memoryv1 "github.com/collab/collab/proto/collab/memory/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/lifecycle"
)

// fakeDocs knows organizations and documents of tenant k1 and their generations.
type fakeDocs struct {
	documentsv1.DocumentsServiceClient
	mu   sync.Mutex
	orgs map[string]string // org -> generation
	docs map[string]string // org/doc -> generation
}

func (f *fakeDocs) ResolveResources(_ context.Context, in *documentsv1.ResolveResourcesRequest, _ ...grpc.CallOption) (*documentsv1.ResolveResourcesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &documentsv1.ResolveResourcesResponse{Documents: map[string]*documentsv1.ResolvedResource{}}
	gen, ok := f.orgs[in.GetOrganizationId()]
	if !ok || in.GetApiKey() != "k1" {
		return out, nil
	}
	out.OrganizationExists, out.OrganizationGeneration = true, gen
	for _, d := range in.GetDocumentIds() {
		g, ok := f.docs[in.GetOrganizationId()+"/"+d]
		out.Documents[d] = &documentsv1.ResolvedResource{Exists: ok, Generation: g}
	}
	return out, nil
}

var t0 = time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)

type harness struct {
	srv   *Server
	store Store
	docs  *fakeDocs
	clock *clock.Fake
	emb   *bagEmbedder
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessOn(t, NewMemoryStore(), newBag(64))
}

func newHarnessOn(t *testing.T, store Store, emb *bagEmbedder) *harness {
	t.Helper()
	h := &harness{store: store, emb: emb, clock: clock.NewFake(t0),
		docs: &fakeDocs{orgs: map[string]string{"o": "g1"}, docs: map[string]string{"o/d": "dg1"}}}
	srv, err := New(h.store, h.docs, emb, make([]byte, 32), WithClock(h.clock), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	h.srv = srv
	return h
}

var k1 = authn.WithCaller(context.Background(), authn.Caller{APIKey: "k1", WorkspaceID: "w"})

func (h *harness) record(t *testing.T, js ...*memoryv1.NewJudgment) *memoryv1.ItemResultsResponse {
	t.Helper()
	resp, err := h.srv.RecordJudgments(k1, &memoryv1.RecordJudgmentsRequest{OrganizationId: "o", Judgments: js})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func (h *harness) search(t *testing.T, req *memoryv1.SearchJudgmentsRequest) *memoryv1.SearchJudgmentsResponse {
	t.Helper()
	resp, err := h.srv.SearchJudgments(k1, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func recordIDs(resp *memoryv1.SearchJudgmentsResponse) []string {
	var out []string
	for _, r := range resp.GetResults() {
		out = append(out, r.GetRecordId())
	}
	return out
}

func jdg(id, decision, reasoning string) *memoryv1.NewJudgment {
	return &memoryv1.NewJudgment{RecordId: id, Decision: decision, Reasoning: reasoning}
}

func wantErr(t *testing.T, err error, code codes.Code, msg string) {
	t.Helper()
	st, _ := status.FromError(apierr.ToStatus(context.Background(), slog.New(slog.DiscardHandler), err))
	if err == nil || st.Code() != code || st.Message() != msg {
		t.Errorf("got %v %q, want %v %q", st.Code(), st.Message(), code, msg)
	}
}

// step runs one step of a scenario as a subtest of t, so that a failure names the step. Steps
// share their test's state and run in order: a step after a failed one is skipped, since it
// would start from a state the story did not reach.
func step(t *testing.T, name string, f func(t *testing.T)) {
	t.Helper()
	t.Run(name, func(st *testing.T) {
		if t.Failed() {
			st.Skip("an earlier step failed")
		}
		f(st)
	})
}

func i32(v int32) *int32            { return &v }
func f64(v float64) *float64        { return &v }
func num(v float64) *structpb.Value { return structpb.NewNumberValue(v) }
func str(v string) *structpb.Value  { return structpb.NewStringValue(v) }

func TestRecordValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ok := func() *memoryv1.NewJudgment { return jdg("", "approve", "fine") }
	with := func(f func(*memoryv1.NewJudgment)) []*memoryv1.NewJudgment {
		j := ok()
		f(j)
		return []*memoryv1.NewJudgment{j}
	}
	many := make([]*memoryv1.NewJudgment, maxJudgments+1)
	for i := range many {
		many[i] = ok()
	}
	for _, c := range []struct {
		org  string
		js   []*memoryv1.NewJudgment
		want string
	}{
		{"", []*memoryv1.NewJudgment{ok()}, "organizationId is required."},
		{"o", nil, "judgments must contain at least one judgment."},
		{"o", many, "judgments must contain at most 100 judgments."},
		{"o", with(func(j *memoryv1.NewJudgment) { j.RecordId = "a b" }), "judgments[0].recordId may contain only letters, digits, _ and -."},
		{"o", []*memoryv1.NewJudgment{jdg("x", "a", "b"), jdg("x", "a", "b")}, "judgments[1].recordId repeats judgments[0].recordId: each judgment may appear once."},
		{"o", with(func(j *memoryv1.NewJudgment) { j.DocumentId = " d" }), "judgments[0].documentId must not start or end with white space."},
		{"o", with(func(j *memoryv1.NewJudgment) { j.Decision = strings.Repeat("x", 257) }), "judgments[0].decision must be at most 256 characters."},
		{"o", with(func(j *memoryv1.NewJudgment) { j.Reasoning = strings.Repeat("x", 8001) }), "judgments[0].reasoning must be at most 8000 characters."},
		{"o", with(func(j *memoryv1.NewJudgment) { j.Decision, j.Reasoning = "", " " }), "judgments[0] needs a decision or a reasoning: they are what a search finds."},
		{"o", with(func(j *memoryv1.NewJudgment) { j.Content = strings.Repeat("x", 64<<10+1) }), "judgments[0].content must be at most 64 KiB."},
		{"o", with(func(j *memoryv1.NewJudgment) { j.Confidence = f64(1.5) }), "judgments[0].confidence must be between 0 and 1."},
		{"o", with(func(j *memoryv1.NewJudgment) { j.Confidence = f64(-0.1) }), "judgments[0].confidence must be between 0 and 1."},
		{"o", with(func(j *memoryv1.NewJudgment) { j.ActionUser = &memoryv1.JudgmentUser{Email: "nope"} }), "judgments[0].actionUser.email must be a valid email address."},
		{"o", with(func(j *memoryv1.NewJudgment) { j.CreatedAt = f64(1.5) }), "judgments[0].createdAt must be epoch milliseconds (a whole number from 0)."},
		{"o", with(func(j *memoryv1.NewJudgment) { j.CreatedAt = f64(-1) }), "judgments[0].createdAt must be epoch milliseconds (a whole number from 0)."},
		{"o", with(func(j *memoryv1.NewJudgment) { j.JudgeType = "robot" }), "judgments[0].judgeType must be human or agent."},
		{"o", with(func(j *memoryv1.NewJudgment) { j.JudgeType = "agent" }), "judgments[0].agent is required when judgeType is agent."},
		{"o", with(func(j *memoryv1.NewJudgment) { j.Agent = &memoryv1.Agent{AgentId: "a"} }), "judgments[0].agent may be given only when judgeType is agent."},
		{"o", with(func(j *memoryv1.NewJudgment) { j.JudgeType, j.Agent = "agent", &memoryv1.Agent{} }), "judgments[0].agent.agentId is required."},
		{"o", with(func(j *memoryv1.NewJudgment) {
			j.JudgeType, j.Agent = "agent", &memoryv1.Agent{AgentId: "a", AgentVersion: -1}
		}), "judgments[0].agent.agentVersion must be a number from 0."},
	} {
		t.Run(c.want, func(t *testing.T) {
			_, err := h.srv.RecordJudgments(k1, &memoryv1.RecordJudgmentsRequest{OrganizationId: c.org, Judgments: c.js})
			wantErr(t, err, codes.InvalidArgument, c.want)
		})
	}
	t.Run("refused requests embed nothing", func(t *testing.T) {
		if h.emb.calls != 0 {
			t.Errorf("refused requests embedded %d times", h.emb.calls)
		}
	})
}

func TestSearchValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, c := range []struct {
		req  *memoryv1.SearchJudgmentsRequest
		want string
	}{
		{&memoryv1.SearchJudgmentsRequest{}, "query is required and must not be empty."},
		{&memoryv1.SearchJudgmentsRequest{Query: "  "}, "query is required and must not be empty."},
		{&memoryv1.SearchJudgmentsRequest{Query: strings.Repeat("q", 2001)}, "query must be at most 2000 characters."},
		{&memoryv1.SearchJudgmentsRequest{Query: "q", EmbeddingType: "both"}, "embeddingType must be review or content."},
		{&memoryv1.SearchJudgmentsRequest{Query: "q", DocumentId: "d"}, "documentId requires organizationId."},
		{&memoryv1.SearchJudgmentsRequest{Query: "q", Scope: "folder"}, "scope must be document, organization or apiKey."},
		{&memoryv1.SearchJudgmentsRequest{Query: "q", Scope: "document", OrganizationId: "o"}, "scope document requires organizationId and documentId."},
		{&memoryv1.SearchJudgmentsRequest{Query: "q", Scope: "organization"}, "scope organization requires organizationId."},
		{&memoryv1.SearchJudgmentsRequest{Query: "q", Limit: i32(0)}, "limit must be between 1 and 50."},
		{&memoryv1.SearchJudgmentsRequest{Query: "q", Limit: i32(51)}, "limit must be between 1 and 50."},
		{&memoryv1.SearchJudgmentsRequest{Query: "q", Filters: &memoryv1.SearchFilters{JudgeType: "robot"}}, "filters.judgeType must be human or agent."},
		{&memoryv1.SearchJudgmentsRequest{Query: "q", Filters: &memoryv1.SearchFilters{AnnotationId: "t"}}, "filters.annotationId requires organizationId."},
		{&memoryv1.SearchJudgmentsRequest{Query: "q", Filters: &memoryv1.SearchFilters{ReviewerId: "\x01"}}, "filters.reviewerId must not contain control characters."},
		{&memoryv1.SearchJudgmentsRequest{Query: "q", Filters: &memoryv1.SearchFilters{DateRange: &memoryv1.DateRange{Start: str("yesterday")}}},
			"filters.dateRange.start must be an ISO-8601 date or date-time, or epoch milliseconds."},
		{&memoryv1.SearchJudgmentsRequest{Query: "q", Filters: &memoryv1.SearchFilters{DateRange: &memoryv1.DateRange{End: num(1.5)}}},
			"filters.dateRange.end must be an ISO-8601 date or date-time, or epoch milliseconds."},
		{&memoryv1.SearchJudgmentsRequest{Query: "q", Filters: &memoryv1.SearchFilters{DateRange: &memoryv1.DateRange{End: structpb.NewBoolValue(true)}}},
			"filters.dateRange.end must be an ISO-8601 date or date-time, or epoch milliseconds."},
		{&memoryv1.SearchJudgmentsRequest{Query: "q", Filters: &memoryv1.SearchFilters{DateRange: &memoryv1.DateRange{Start: str("2026-02-01T00:00:00Z"), End: num(1000)}}},
			"filters.dateRange.start must not be after filters.dateRange.end."},
		{&memoryv1.SearchJudgmentsRequest{Query: "q", RecencyDays: i32(0)}, "recencyDays must be between 1 and 365."},
		{&memoryv1.SearchJudgmentsRequest{Query: "q", RecencyDays: i32(366)}, "recencyDays must be between 1 and 365."},
	} {
		t.Run(c.want, func(t *testing.T) {
			_, err := h.srv.SearchJudgments(k1, c.req)
			wantErr(t, err, codes.InvalidArgument, c.want)
		})
	}
}

func TestExecutionValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, c := range []struct {
		req  *memoryv1.StartAgentExecutionRequest
		want string
	}{
		{&memoryv1.StartAgentExecutionRequest{}, "agentId is required."},
		{&memoryv1.StartAgentExecutionRequest{AgentId: "a", AgentName: "x\ny"}, "agentName must not contain control characters."},
		{&memoryv1.StartAgentExecutionRequest{AgentId: "a", AgentVersion: -2}, "agentVersion must be a number from 0."},
		{&memoryv1.StartAgentExecutionRequest{AgentId: "a", DocumentId: "d"}, "documentId requires organizationId."},
		{&memoryv1.StartAgentExecutionRequest{AgentId: "a", Trigger: strings.Repeat("t", 257)}, "trigger must be at most 256 characters."},
	} {
		t.Run("StartAgentExecution: "+c.want, func(t *testing.T) {
			_, err := h.srv.StartAgentExecution(k1, c.req)
			wantErr(t, err, codes.InvalidArgument, c.want)
		})
	}
	for _, c := range []struct {
		req  *memoryv1.CompleteAgentExecutionRequest
		want string
	}{
		{&memoryv1.CompleteAgentExecutionRequest{Status: "passed"}, "executionId is required."},
		{&memoryv1.CompleteAgentExecutionRequest{ExecutionId: "e"}, "status is required."},
		{&memoryv1.CompleteAgentExecutionRequest{ExecutionId: "e", Status: "running"}, "status must be one of passed, failed, error, skipped."},
		{&memoryv1.CompleteAgentExecutionRequest{ExecutionId: "e", Status: "passed", Message: strings.Repeat("m", 4001)}, "message must be at most 4000 characters."},
	} {
		t.Run("CompleteAgentExecution: "+c.want, func(t *testing.T) {
			_, err := h.srv.CompleteAgentExecution(k1, c.req)
			wantErr(t, err, codes.InvalidArgument, c.want)
		})
	}
	t.Run("CompleteAgentExecution: unknown execution", func(t *testing.T) {
		_, err := h.srv.CompleteAgentExecution(k1, &memoryv1.CompleteAgentExecutionRequest{ExecutionId: "e", Status: "passed"})
		wantErr(t, err, codes.NotFound, "Agent execution not found.")
	})
	for _, c := range []struct {
		req  *memoryv1.ListAgentExecutionsRequest
		want string
	}{
		{&memoryv1.ListAgentExecutionsRequest{Status: "done"}, "status must be one of running, passed, failed, error, skipped."},
		{&memoryv1.ListAgentExecutionsRequest{PageSize: i32(0)}, "pageSize must be between 1 and 500."},
		{&memoryv1.ListAgentExecutionsRequest{PageSize: i32(501)}, "pageSize must be between 1 and 500."},
		{&memoryv1.ListAgentExecutionsRequest{OrderDirection: "up"}, "orderDirection must be asc or desc."},
		{&memoryv1.ListAgentExecutionsRequest{AgentId: " a"}, "agentId must not start or end with white space."},
		{&memoryv1.ListAgentExecutionsRequest{Cursor: "forged"}, "cursor is invalid."},
	} {
		t.Run("ListAgentExecutions: "+c.want, func(t *testing.T) {
			_, err := h.srv.ListAgentExecutions(k1, c.req)
			wantErr(t, err, codes.InvalidArgument, c.want)
		})
	}
	for _, c := range []struct {
		req  *memoryv1.DeleteJudgmentsRequest
		want string
	}{
		{&memoryv1.DeleteJudgmentsRequest{RecordIds: []string{"a"}}, "organizationId is required."},
		{&memoryv1.DeleteJudgmentsRequest{OrganizationId: "o"}, "recordIds must contain at least one id."},
		{&memoryv1.DeleteJudgmentsRequest{OrganizationId: "o", RecordIds: make([]string, 101)}, "recordIds must contain at most 100 ids."},
	} {
		t.Run("DeleteJudgments: "+c.want, func(t *testing.T) {
			_, err := h.srv.DeleteJudgments(k1, c.req)
			wantErr(t, err, codes.InvalidArgument, c.want)
		})
	}
}

func TestRecordUpdateDeleteAndSearch(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	step(t, "record answers each judgment, generating missing ids", func(t *testing.T) {
		resp := h.record(t,
			&memoryv1.NewJudgment{RecordId: "contrast", DocumentId: "d", Decision: "reject", Reasoning: "low contrast text on the banner",
				Confidence: f64(0.9), ActionUser: &memoryv1.JudgmentUser{UserId: "u1", Name: "Ada", Email: "ada@example.com"}, ContentType: "image",
				JudgeType: "agent", Agent: &memoryv1.Agent{AgentId: "a1", AgentName: "Checker", AgentVersion: 3}, Content: "banner with grey text"},
			&memoryv1.NewJudgment{RecordId: "invoice", Decision: "approve", Reasoning: "invoice totals match the order", Content: "invoice 42"},
			&memoryv1.NewJudgment{Decision: "approve", Reasoning: "logo placement is fine"},
		)
		if resp.GetStatus() != "success" || resp.GetMessage() != "Judgment(s) recorded successfully." || len(resp.GetData()) != 3 {
			t.Fatalf("record: %v", resp)
		}
		for id, r := range resp.GetData() {
			if !r.GetSuccess() || r.GetId() != id || r.GetMessage() != "Judgment recorded." {
				t.Errorf("%s: %v", id, r)
			}
			if id != "contrast" && id != "invoice" && !strings.HasPrefix(id, "jdg_") {
				t.Errorf("generated id %q", id)
			}
		}
	})
	step(t, "a given createdAt, even 0, is kept", func(t *testing.T) {
		h.record(t, &memoryv1.NewJudgment{RecordId: "epoch", Decision: "approve", CreatedAt: f64(0)})
		if got := h.search(t, &memoryv1.SearchJudgmentsRequest{RecencyDays: i32(365)}); slices.Contains(recordIDs(got), "epoch") {
			t.Fatalf("createdAt 0 became now: %v", recordIDs(got))
		}
		if _, err := h.srv.DeleteJudgments(k1, &memoryv1.DeleteJudgmentsRequest{OrganizationId: "o", RecordIds: []string{"epoch"}}); err != nil {
			t.Fatal(err)
		}
	})
	step(t, "search ranks by similarity and answers the whole judgment", func(t *testing.T) {
		got := h.search(t, &memoryv1.SearchJudgmentsRequest{Query: "contrast of the text", OrganizationId: "o"})
		if recordIDs(got)[0] != "contrast" || got.GetTotalInScope() != 3 || len(got.GetResults()) != 3 {
			t.Fatalf("search: %v", got)
		}
		r := got.GetResults()[0]
		if r.GetDecision() != "reject" || r.GetReasoning() != "low contrast text on the banner" || r.GetConfidence().GetValue() != 0.9 ||
			r.GetActionUser().GetName() != "Ada" || r.GetCreatedAt() != float64(t0.UnixMilli()) || r.GetScope() != "organization" ||
			r.GetAgent().GetAgentId() != "a1" || r.GetAgent().GetAgentVersion() != 3 || r.GetSimilarity() <= got.GetResults()[1].GetSimilarity() {
			t.Fatalf("result: %v", r)
		}
		if got.GetResults()[1].GetAgent() != nil || got.GetResults()[1].GetConfidence() != nil {
			t.Fatalf("a human judgment without confidence: %v", got.GetResults()[1])
		}
	})
	step(t, "the search response has only results, totalInScope and searchLatencyMs", func(t *testing.T) {
		// The response has no status or message (docs/api.md, "Memory and agents"): results, totalInScope, searchLatencyMs.
		var names []string
		fields := (&memoryv1.SearchJudgmentsResponse{}).ProtoReflect().Descriptor().Fields()
		for i := range fields.Len() {
			names = append(names, fields.Get(i).JSONName())
		}
		if !slices.Equal(names, []string{"results", "totalInScope", "searchLatencyMs"}) {
			t.Fatalf("search result fields %v", names)
		}
	})

	step(t, "a repeated record id updates the judgment", func(t *testing.T) {
		h.clock.Advance(time.Minute)
		upd := h.record(t, &memoryv1.NewJudgment{RecordId: "invoice", Decision: "reject", Reasoning: "invoice totals do not match"})
		if r := upd.GetData()["invoice"]; !r.GetSuccess() || r.GetMessage() != "Judgment updated." {
			t.Fatalf("update: %v", upd)
		}
		got := h.search(t, &memoryv1.SearchJudgmentsRequest{Query: "invoice totals", OrganizationId: "o", Filters: &memoryv1.SearchFilters{Decision: "reject"}})
		if !slices.Equal(recordIDs(got), []string{"invoice", "contrast"}) || got.GetTotalInScope() != 2 || got.GetResults()[0].GetCreatedAt() != float64(t0.Add(time.Minute).UnixMilli()) {
			t.Fatalf("after update: %v", got)
		}
	})
	step(t, "content search uses the content vector", func(t *testing.T) {
		// The content vector: the updated invoice has no content any more.
		got := h.search(t, &memoryv1.SearchJudgmentsRequest{Query: "grey banner", EmbeddingType: "content"})
		if !slices.Equal(recordIDs(got), []string{"contrast"}) || got.GetResults()[0].GetScope() != "apiKey" {
			t.Fatalf("content search: %v", got)
		}
	})

	step(t, "delete answers each id once", func(t *testing.T) {
		del, err := h.srv.DeleteJudgments(k1, &memoryv1.DeleteJudgmentsRequest{OrganizationId: "o", RecordIds: []string{"invoice", "missing", "invoice"}})
		if err != nil {
			t.Fatal(err)
		}
		if del.GetMessage() != "Judgment(s) deleted successfully." || len(del.GetData()) != 2 ||
			!proto.Equal(del.GetData()["invoice"], &memoryv1.ItemResult{Success: true, Id: "invoice", Message: "Judgment deleted."}) ||
			!proto.Equal(del.GetData()["missing"], &memoryv1.ItemResult{Id: "missing", Message: "Judgment does not exist."}) {
			t.Fatalf("delete: %v", del)
		}
		if got := h.search(t, &memoryv1.SearchJudgmentsRequest{Query: "invoice", OrganizationId: "o"}); got.GetTotalInScope() != 2 || slices.Contains(recordIDs(got), "invoice") {
			t.Fatalf("after delete: %v", got)
		}
	})
}

func TestSearchScopesFiltersAndLimit(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.docs.orgs["p"] = "gp"
	var js []*memoryv1.NewJudgment
	for i := range 30 {
		j := jdg(fmt.Sprint("j", i), "approve", fmt.Sprintf("spacing of the header row %d", i))
		j.CreatedAt = f64(float64(t0.Add(time.Duration(i) * time.Hour).UnixMilli()))
		if i%2 == 0 {
			j.DocumentId = "d"
		}
		if i%3 == 0 {
			j.ReviewerId, j.ContentType = "rev", "text"
		}
		js = append(js, j)
	}
	h.record(t, js...)
	if _, err := h.srv.RecordJudgments(k1, &memoryv1.RecordJudgmentsRequest{OrganizationId: "p", Judgments: []*memoryv1.NewJudgment{jdg("elsewhere", "approve", "spacing of the header")}}); err != nil {
		t.Fatal(err)
	}
	q := func(t *testing.T, req *memoryv1.SearchJudgmentsRequest) *memoryv1.SearchJudgmentsResponse {
		t.Helper()
		req.Query = "header spacing"
		return h.search(t, req)
	}
	step(t, "default limit, tenant scope", func(t *testing.T) {
		if got := q(t, &memoryv1.SearchJudgmentsRequest{}); len(got.GetResults()) != 10 || got.GetTotalInScope() != 31 {
			t.Fatalf("default limit, tenant scope: %d of %v", len(got.GetResults()), got.GetTotalInScope())
		}
	})
	step(t, "organization scope", func(t *testing.T) {
		if got := q(t, &memoryv1.SearchJudgmentsRequest{OrganizationId: "o", Limit: i32(50)}); len(got.GetResults()) != 30 || got.GetTotalInScope() != 30 {
			t.Fatalf("organization: %d of %v", len(got.GetResults()), got.GetTotalInScope())
		}
	})
	step(t, "scope apiKey with an organization searches the whole tenant", func(t *testing.T) {
		if got := q(t, &memoryv1.SearchJudgmentsRequest{OrganizationId: "o", Scope: "apiKey"}); got.GetTotalInScope() != 31 {
			t.Fatalf("apiKey scope: %v", got.GetTotalInScope())
		}
	})
	step(t, "document scope", func(t *testing.T) {
		if got := q(t, &memoryv1.SearchJudgmentsRequest{OrganizationId: "o", DocumentId: "d", Limit: i32(50)}); got.GetTotalInScope() != 15 || got.GetResults()[0].GetScope() != "document" {
			t.Fatalf("document: %v", got)
		}
	})
	step(t, "scope organization with a document", func(t *testing.T) {
		if got := q(t, &memoryv1.SearchJudgmentsRequest{OrganizationId: "o", DocumentId: "d", Scope: "organization"}); got.GetTotalInScope() != 30 {
			t.Fatalf("organization scope with a document: %v", got.GetTotalInScope())
		}
	})
	step(t, "reviewer and content type filters", func(t *testing.T) {
		if got := q(t, &memoryv1.SearchJudgmentsRequest{Filters: &memoryv1.SearchFilters{ReviewerId: "rev", ContentType: "text"}, Limit: i32(50)}); got.GetTotalInScope() != 10 || len(got.GetResults()) != 10 {
			t.Fatalf("reviewer filter: %v", got.GetTotalInScope())
		}
	})
	step(t, "dateRange in ISO-8601 and epoch ms, inclusive", func(t *testing.T) {
		start, end := t0.Add(2*time.Hour), t0.Add(5*time.Hour)
		for _, dr := range []*memoryv1.DateRange{
			{Start: str(start.Format(time.RFC3339)), End: str(end.Format(time.RFC3339))},
			{Start: num(float64(start.UnixMilli())), End: str(fmt.Sprint(end.UnixMilli()))},
		} {
			t.Run(fmt.Sprint(dr), func(t *testing.T) {
				got := q(t, &memoryv1.SearchJudgmentsRequest{OrganizationId: "o", Filters: &memoryv1.SearchFilters{DateRange: dr}})
				if got.GetTotalInScope() != 4 {
					t.Fatalf("date range %v: %v", dr, got)
				}
			})
		}
	})
	step(t, "a date-only end covers its whole day", func(t *testing.T) {
		if got := q(t, &memoryv1.SearchJudgmentsRequest{OrganizationId: "o", Filters: &memoryv1.SearchFilters{DateRange: &memoryv1.DateRange{End: str("2026-11-02")}}}); got.GetTotalInScope() != 15 {
			t.Fatalf("date-only end: %v", got.GetTotalInScope())
		}
	})
	step(t, "results ordered by similarity, best first", func(t *testing.T) {
		got := q(t, &memoryv1.SearchJudgmentsRequest{OrganizationId: "o", Limit: i32(50)})
		for i := 1; i < len(got.GetResults()); i++ {
			if got.GetResults()[i].GetSimilarity() > got.GetResults()[i-1].GetSimilarity() {
				t.Fatalf("not ordered at %d", i)
			}
		}
	})
}

func TestAnnotationAndRecencyPaths(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var js []*memoryv1.NewJudgment
	for i := range 6 {
		j := jdg(fmt.Sprint("j", i), "approve", "anything")
		j.CreatedAt = f64(float64(t0.Add(-time.Duration(i) * 24 * time.Hour).UnixMilli()))
		if i < 4 {
			j.AnnotationId = "thread"
		}
		js = append(js, j)
	}
	h.record(t, js...)
	step(t, "annotation thread, oldest first, query ignored", func(t *testing.T) {
		// The thread, oldest first, the query ignored (even empty), similarity 1.
		got := h.search(t, &memoryv1.SearchJudgmentsRequest{OrganizationId: "o", Filters: &memoryv1.SearchFilters{AnnotationId: "thread"}})
		if !slices.Equal(recordIDs(got), []string{"j3", "j2", "j1", "j0"}) || got.GetTotalInScope() != 4 {
			t.Fatalf("annotation: %v", got)
		}
		for _, r := range got.GetResults() {
			if r.GetSimilarity() != 1 {
				t.Fatalf("similarity %v", r.GetSimilarity())
			}
		}
	})
	step(t, "annotation thread with a limit", func(t *testing.T) {
		if got := h.search(t, &memoryv1.SearchJudgmentsRequest{Query: "whatever", OrganizationId: "o", Limit: i32(2), Filters: &memoryv1.SearchFilters{AnnotationId: "thread"}}); !slices.Equal(recordIDs(got), []string{"j3", "j2"}) {
			t.Fatalf("annotation with limit: %v", recordIDs(got))
		}
	})
	step(t, "recency window, newest first, overriding dateRange", func(t *testing.T) {
		h.clock.Advance(time.Hour)
		got := h.search(t, &memoryv1.SearchJudgmentsRequest{RecencyDays: i32(3), Filters: &memoryv1.SearchFilters{DateRange: &memoryv1.DateRange{Start: num(0), End: num(1)}}})
		if !slices.Equal(recordIDs(got), []string{"j0", "j1", "j2"}) || got.GetTotalInScope() != 3 || got.GetResults()[0].GetSimilarity() != 1 {
			t.Fatalf("recency: %v", got)
		}
	})
}

func TestEmbedFailureStoresNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.emb.failWith(errModelDown)
	step(t, "record with the model down stores nothing", func(t *testing.T) {
		_, err := h.srv.RecordJudgments(k1, &memoryv1.RecordJudgmentsRequest{OrganizationId: "o", Judgments: []*memoryv1.NewJudgment{jdg("a", "approve", "fine")}})
		wantErr(t, err, codes.Unavailable, "The embedding model is unavailable; nothing was stored. Try again later.")
	})
	step(t, "search with the model down is unavailable", func(t *testing.T) {
		_, err := h.srv.SearchJudgments(k1, &memoryv1.SearchJudgmentsRequest{Query: "fine"})
		wantErr(t, err, codes.Unavailable, "The embedding model is unavailable. Try again later.")
	})
	step(t, "shortcut paths need no model and find nothing stored", func(t *testing.T) {
		if got := h.search(t, &memoryv1.SearchJudgmentsRequest{RecencyDays: i32(1)}); got.GetTotalInScope() != 0 {
			t.Fatalf("stored while the model was down: %v", got)
		}
	})
	step(t, "vectors of the wrong size are a failure too", func(t *testing.T) {
		h.emb.failWith(nil)
		h.srv.embedder = &wrongDim{h.emb}
		_, err := h.srv.RecordJudgments(k1, &memoryv1.RecordJudgmentsRequest{OrganizationId: "o", Judgments: []*memoryv1.NewJudgment{jdg("a", "approve", "fine")}})
		wantErr(t, err, codes.Unavailable, "The embedding model is unavailable; nothing was stored. Try again later.")
	})
}

type wrongDim struct{ *bagEmbedder }

func (w *wrongDim) Dim() int { return w.bagEmbedder.Dim() + 1 }

// Vectors of another embedder are never compared with the current one's: those judgments are
// left out (counted in totalInScope and in the embedding status) until re-embedded.
func TestEmbedderChangeReembeds(t *testing.T) {
	t.Parallel()
	store := NewMemoryStore()
	old := newHarnessOn(t, store, newBag(32))
	old.record(t, jdg("a", "reject", "blurry photo"), jdg("b", "approve", "sharp photo"))
	h := newHarnessOn(t, store, newBag(64))
	h.record(t, jdg("c", "approve", "photo crop is fine"))
	step(t, "another embedder's vectors are left out and counted", func(t *testing.T) {
		got := h.search(t, &memoryv1.SearchJudgmentsRequest{Query: "photo"})
		if !slices.Equal(recordIDs(got), []string{"c"}) || got.GetTotalInScope() != 3 {
			t.Fatalf("before re-embedding: %v", got)
		}
		st, err := h.srv.GetEmbeddingStatus(context.Background(), &memoryv1.GetEmbeddingStatusRequest{})
		if err != nil || st.GetPending() != 2 || st.GetEmbedder() != "bag-64" || st.GetDim() != 64 || st.GetState() != "running" {
			t.Fatalf("status: %v %v", st, err)
		}
	})
	step(t, "a failing model leaves them stale", func(t *testing.T) {
		// A failing model leaves them stale and says so.
		h.emb.failWith(errModelDown)
		if _, _, err := h.srv.ReembedBatch(context.Background()); err == nil {
			t.Fatal("re-embedding with the model down succeeded")
		}
		h.emb.failWith(nil)
	})
	step(t, "re-embedding brings them back", func(t *testing.T) {
		n, more, err := h.srv.ReembedBatch(context.Background())
		if err != nil || n != 2 || more {
			t.Fatalf("re-embedded %d (more %v), %v", n, more, err)
		}
		got := h.search(t, &memoryv1.SearchJudgmentsRequest{Query: "blurry photo"})
		if len(got.GetResults()) != 3 || recordIDs(got)[0] != "a" {
			t.Fatalf("after re-embedding: %v", got)
		}
		if st, _ := h.srv.GetEmbeddingStatus(context.Background(), &memoryv1.GetEmbeddingStatusRequest{}); st.GetPending() != 0 || st.GetState() != "idle" {
			t.Fatalf("status after: %v", st)
		}
	})
	step(t, "the background job re-embeds on its own", func(t *testing.T) {
		old2 := newHarnessOn(t, store, newBag(16))
		old2.record(t, jdg("d", "approve", "another photo"))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { h.srv.RunReembedding(ctx); close(done) }()
		deadline := time.Now().Add(5 * time.Second)
		for {
			st, _ := h.srv.GetEmbeddingStatus(context.Background(), &memoryv1.GetEmbeddingStatusRequest{})
			if st.GetPending() == 0 && st.GetReembedded() == 3 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("background re-embedding: %v", st)
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		<-done
		checkFlat(t, store)
	})
}

func TestExecutionsFlow(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var e *memoryv1.AgentExecution
	step(t, "start answers a running execution", func(t *testing.T) {
		start, err := h.srv.StartAgentExecution(k1, &memoryv1.StartAgentExecutionRequest{AgentId: "a1", AgentName: "Checker", AgentVersion: 2, OrganizationId: "o", DocumentId: "d", Trigger: "comment"})
		if err != nil {
			t.Fatal(err)
		}
		e = start.GetData()
		if start.GetStatus() != "success" || start.GetMessage() != "Agent execution started successfully." || e.GetStatus() != "running" ||
			e.GetCompletedAt() != nil || e.GetDurationMs() != nil || e.GetStartedAt() != float64(t0.UnixMilli()) || e.GetAgentVersion() != 2 ||
			e.GetTrigger() != "comment" || !strings.HasPrefix(e.GetId(), "exec_") {
			t.Fatalf("start: %v", start)
		}
	})
	step(t, "complete records status, message and duration", func(t *testing.T) {
		h.clock.Advance(1500 * time.Millisecond)
		done, err := h.srv.CompleteAgentExecution(k1, &memoryv1.CompleteAgentExecutionRequest{ExecutionId: e.GetId(), Status: "failed", Message: "two issues"})
		if err != nil {
			t.Fatal(err)
		}
		if d := done.GetData(); done.GetMessage() != "Agent execution completed successfully." || d.GetStatus() != "failed" || d.GetMessage() != "two issues" ||
			d.GetCompletedAt().GetValue() != float64(t0.UnixMilli()+1500) || d.GetDurationMs().GetValue() != 1500 {
			t.Fatalf("complete: %v", done)
		}
	})
	step(t, "a finished execution cannot complete again", func(t *testing.T) {
		_, err := h.srv.CompleteAgentExecution(k1, &memoryv1.CompleteAgentExecutionRequest{ExecutionId: e.GetId(), Status: "passed"})
		wantErr(t, err, codes.FailedPrecondition, "Agent execution is already finished.")
	})
	step(t, "another tenant does not see it", func(t *testing.T) {
		k2 := authn.WithCaller(context.Background(), authn.Caller{APIKey: "k2", WorkspaceID: "w2"})
		_, err := h.srv.CompleteAgentExecution(k2, &memoryv1.CompleteAgentExecutionRequest{ExecutionId: e.GetId(), Status: "passed"})
		wantErr(t, err, codes.NotFound, "Agent execution not found.")
		if l, _ := h.srv.ListAgentExecutions(k2, &memoryv1.ListAgentExecutionsRequest{}); len(l.GetItems()) != 0 || l.GetHasMore() || l.GetNextCursor() != "" {
			t.Fatalf("another tenant lists %v", l)
		}
	})
}

// Paging walks every execution once while more are started between pages, in both orders;
// a cursor is bound to its filters.
func TestExecutionPaging(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	startN := func(t *testing.T, n int) {
		for range n {
			h.clock.Advance(time.Millisecond)
			if _, err := h.srv.StartAgentExecution(k1, &memoryv1.StartAgentExecutionRequest{AgentId: "a"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	startN(t, 25)
	for _, dir := range []string{"asc", "desc"} {
		t.Run("every execution once, "+dir, func(t *testing.T) {
			seen := map[string]bool{}
			req := &memoryv1.ListAgentExecutionsRequest{AgentId: "a", PageSize: i32(10), OrderDirection: dir}
			var last float64
			for pages := 0; ; pages++ {
				resp, err := h.srv.ListAgentExecutions(k1, req)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range resp.GetItems() {
					if seen[e.GetId()] {
						t.Fatalf("%s: %s twice", dir, e.GetId())
					}
					seen[e.GetId()] = true
					if last != 0 && (dir == "asc" && e.GetStartedAt() < last || dir == "desc" && e.GetStartedAt() > last) {
						t.Fatalf("%s: out of order", dir)
					}
					last = e.GetStartedAt()
				}
				if !resp.GetHasMore() {
					if resp.GetNextCursor() != "" {
						t.Fatalf("a cursor without more")
					}
					break
				}
				startN(t, 3) // added while paging: after the cursor in asc, before it in desc
				req.Cursor = resp.GetNextCursor()
				_, err = h.srv.ListAgentExecutions(k1, &memoryv1.ListAgentExecutionsRequest{AgentId: "b", PageSize: i32(10), OrderDirection: dir, Cursor: req.Cursor})
				wantErr(t, err, codes.InvalidArgument, "cursor is invalid.")
			}
			if dir == "desc" && len(seen) < 25 || dir == "asc" && len(seen) < 31 {
				t.Fatalf("%s: saw %d", dir, len(seen))
			}
		})
	}
	step(t, "nothing matching is an empty list", func(t *testing.T) {
		if resp, _ := h.srv.ListAgentExecutions(k1, &memoryv1.ListAgentExecutionsRequest{Status: "skipped"}); resp.GetItems() == nil || len(resp.GetItems()) != 0 {
			t.Fatalf("nothing matches: %v", resp)
		}
	})
	step(t, "the default page size is 50", func(t *testing.T) {
		startN(t, 20)
		resp, _ := h.srv.ListAgentExecutions(k1, &memoryv1.ListAgentExecutionsRequest{})
		if len(resp.GetItems()) != 50 || !resp.GetHasMore() {
			t.Fatalf("default page size: %d", len(resp.GetItems()))
		}
	})
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.record(t, &memoryv1.NewJudgment{RecordId: "a", DocumentId: "d", Decision: "approve"}, &memoryv1.NewJudgment{RecordId: "b", Decision: "approve"})
	if _, err := h.srv.StartAgentExecution(k1, &memoryv1.StartAgentExecutionRequest{AgentId: "x", OrganizationId: "o", DocumentId: "d"}); err != nil {
		t.Fatal(err)
	}
	deliver := func(t *testing.T, e *lifecyclev1.Event) {
		t.Helper()
		e.ApiKey, e.OrganizationId, e.Id = "k1", "o", "ev"
		if err := h.srv.HandleEvent(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	step(t, "document.migrated moves judgments and executions", func(t *testing.T) {
		deliver(t, &lifecyclev1.Event{Type: lifecycle.DocumentMigrated, OrganizationGeneration: "g1",
			Payload: &lifecyclev1.Event_DocumentMigrated{DocumentMigrated: &lifecyclev1.DocumentMigrated{FromDocumentId: "d", ToDocumentId: "d2", Generation: "dg1"}}})
		if got := h.search(t, &memoryv1.SearchJudgmentsRequest{RecencyDays: i32(1), OrganizationId: "o", DocumentId: "d2"}); !slices.Equal(recordIDs(got), []string{"a"}) {
			t.Fatalf("after migration: %v", recordIDs(got))
		}
		if l, _ := h.srv.ListAgentExecutions(k1, &memoryv1.ListAgentExecutionsRequest{DocumentId: "d2"}); len(l.GetItems()) != 1 {
			t.Fatalf("executions after migration: %v", l)
		}
	})
	step(t, "a migration naming no new id is refused for good", func(t *testing.T) {
		// A migration naming no new id is refused for good; the judgments keep their document (they
		// were moved to the empty id).
		err := h.srv.HandleEvent(context.Background(), &lifecyclev1.Event{Id: "bad", ApiKey: "k1", OrganizationId: "o", Type: lifecycle.DocumentMigrated, OrganizationGeneration: "g1",
			Payload: &lifecyclev1.Event_DocumentMigrated{DocumentMigrated: &lifecyclev1.DocumentMigrated{FromDocumentId: "d2", Generation: "dg1"}}})
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("migration to no id: %v", err)
		}
		if got := h.search(t, &memoryv1.SearchJudgmentsRequest{RecencyDays: i32(1), OrganizationId: "o", DocumentId: "d2"}); !slices.Equal(recordIDs(got), []string{"a"}) {
			t.Fatalf("after a migration to no id: %v", recordIDs(got))
		}
	})
	step(t, "a judgment recorded for the old id afterwards follows it", func(t *testing.T) {
		// A judgment recorded for the old id after the migration follows it.
		h.record(t, &memoryv1.NewJudgment{RecordId: "late", DocumentId: "d", Decision: "approve"})
		if got := h.search(t, &memoryv1.SearchJudgmentsRequest{RecencyDays: i32(1), OrganizationId: "o", DocumentId: "d2"}); !slices.Equal(recordIDs(got), []string{"a", "late"}) && !slices.Equal(recordIDs(got), []string{"late", "a"}) {
			t.Fatalf("late write: %v", recordIDs(got))
		}
	})
	step(t, "document.deleted removes its judgments", func(t *testing.T) {
		deliver(t, &lifecyclev1.Event{Type: lifecycle.DocumentDeleted, OrganizationGeneration: "g1",
			Payload: &lifecyclev1.Event_DocumentsDeleted{DocumentsDeleted: &lifecyclev1.DocumentsDeleted{DocumentIds: []string{"d2"}, Generations: []string{"dg1"}}}})
		if got := h.search(t, &memoryv1.SearchJudgmentsRequest{RecencyDays: i32(1)}); !slices.Equal(recordIDs(got), []string{"b"}) {
			t.Fatalf("after document deletion: %v", recordIDs(got))
		}
	})
	step(t, "organization.deleted removes everything; a late write answers not found", func(t *testing.T) {
		// A write under a generation buried meanwhile is swept and answers NOT_FOUND.
		deliver(t, &lifecyclev1.Event{Type: lifecycle.OrganizationDeleted, OrganizationGeneration: "g1",
			Payload: &lifecyclev1.Event_OrganizationDeleted{OrganizationDeleted: &lifecyclev1.OrganizationDeleted{}}})
		_, err := h.srv.RecordJudgments(k1, &memoryv1.RecordJudgmentsRequest{OrganizationId: "o", Judgments: []*memoryv1.NewJudgment{jdg("z", "approve", "x")}})
		wantErr(t, err, codes.NotFound, "Organization does not exist.")
		if got := h.search(t, &memoryv1.SearchJudgmentsRequest{RecencyDays: i32(1)}); len(got.GetResults()) != 0 || got.GetTotalInScope() != 0 {
			t.Fatalf("after organization deletion: %v", recordIDs(got))
		}
		if l, _ := h.srv.ListAgentExecutions(k1, &memoryv1.ListAgentExecutionsRequest{}); len(l.GetItems()) != 0 {
			t.Fatalf("executions after organization deletion: %v", l)
		}
	})
}

// Judgments of organizations the documents service does not know are kept under no
// generation, and go with an organization.deleted of that id.
func TestUnknownOrganization(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	if _, err := h.srv.RecordJudgments(k1, &memoryv1.RecordJudgmentsRequest{OrganizationId: "unregistered", Judgments: []*memoryv1.NewJudgment{jdg("a", "approve", "x")}}); err != nil {
		t.Fatal(err)
	}
	if err := h.srv.HandleEvent(context.Background(), &lifecyclev1.Event{Id: "e", Type: lifecycle.OrganizationDeleted, ApiKey: "k1", OrganizationId: "unregistered", OrganizationGeneration: "g9",
		Payload: &lifecyclev1.Event_OrganizationDeleted{OrganizationDeleted: &lifecyclev1.OrganizationDeleted{}}}); err != nil {
		t.Fatal(err)
	}
	if got := h.search(t, &memoryv1.SearchJudgmentsRequest{RecencyDays: i32(1)}); got.GetTotalInScope() != 0 {
		t.Fatalf("kept: %v", got)
	}
}

// Searches run while judgments are recorded, updated and deleted (run with -race).
func TestSearchWhileWriting(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				id := fmt.Sprint("j", (w*50+i)%60)
				switch {
				case w%2 == 0:
					if _, err := h.srv.RecordJudgments(k1, &memoryv1.RecordJudgmentsRequest{OrganizationId: "o",
						Judgments: []*memoryv1.NewJudgment{{RecordId: id, DocumentId: fmt.Sprint("d", i%3), Decision: "approve", Reasoning: fmt.Sprint("header spacing ", i), Content: "c"}}}); err != nil {
						t.Error(err)
					}
				case i%5 == 0:
					if _, err := h.srv.DeleteJudgments(k1, &memoryv1.DeleteJudgmentsRequest{OrganizationId: "o", RecordIds: []string{id}}); err != nil {
						t.Error(err)
					}
				default:
					if _, err := h.srv.SearchJudgments(k1, &memoryv1.SearchJudgmentsRequest{Query: "header spacing", EmbeddingType: []string{"review", "content"}[i%2], OrganizationId: "o"}); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	checkFlat(t, h.store.(*MemoryStore))
}

// checkFlat asserts the memory store's flat indexes are row for row with their buckets.
func checkFlat(t *testing.T, s *MemoryStore) {
	t.Helper()
	for _, o := range s.orgs {
		for doc, b := range o.docs {
			for k, f := range b.flats {
				if len(f.err) != len(b.items) || len(f.codes) != len(b.items)*f.dim {
					t.Fatalf("%s %v: %d rows for %d judgments", doc, k, len(f.err), len(b.items))
				}
				valid := 0
				for i, j := range b.items {
					has := j.Embedder == k.embedder && len(j.Vector(k.kind)) == f.dim
					if has != (f.err[i] >= 0) {
						t.Fatalf("%s %v: row %d (%s) valid %v", doc, k, i, j.RecordID, f.err[i] >= 0)
					}
					if has {
						valid++
					}
				}
				if valid != f.valid || valid == 0 {
					t.Fatalf("%s %v: %d valid, counted %d", doc, k, valid, f.valid)
				}
			}
		}
	}
}

// The server on the MongoDB store (embedded FerretDB): vectors stored as bytes come back
// exactly, searches score in Go, and re-embedding works through revisions.
func TestServerOnMongoStore(t *testing.T) {
	t.Parallel()
	store := newMongoStore(t)
	old := newHarnessOn(t, store, newBag(32))
	old.record(t, jdg("a", "reject", "blurry photo"))
	h := newHarnessOn(t, store, newBag(64))
	h.record(t, jdg("b", "approve", "sharp photo"), &memoryv1.NewJudgment{RecordId: "c", Decision: "approve", Reasoning: "invoice", Content: "photo of an invoice", AnnotationId: "t"})
	step(t, "another embedder's vectors are left out", func(t *testing.T) {
		if got := h.search(t, &memoryv1.SearchJudgmentsRequest{Query: "photo"}); !slices.Equal(recordIDs(got), []string{"b", "c"}) || got.GetTotalInScope() != 3 {
			t.Fatalf("before re-embedding: %v", got)
		}
	})
	step(t, "re-embedding brings them back, scored exactly", func(t *testing.T) {
		if n, _, err := h.srv.ReembedBatch(context.Background()); err != nil || n != 1 {
			t.Fatalf("re-embedded %d, %v", n, err)
		}
		got := h.search(t, &memoryv1.SearchJudgmentsRequest{Query: "blurry photo", OrganizationId: "o"})
		if recordIDs(got)[0] != "a" || len(got.GetResults()) != 3 {
			t.Fatalf("after re-embedding: %v", got)
		}
		// Scores equal the dot products of the vectors the embedder gives.
		want := dot(bagVector("blurry photo", 64), bagVector("reject: blurry photo", 64))
		if got.GetResults()[0].GetSimilarity() != float64(want) {
			t.Fatalf("similarity %v, want %v", got.GetResults()[0].GetSimilarity(), want)
		}
	})
	step(t, "content and annotation searches", func(t *testing.T) {
		if got := h.search(t, &memoryv1.SearchJudgmentsRequest{Query: "invoice photo", EmbeddingType: "content"}); !slices.Equal(recordIDs(got), []string{"c"}) {
			t.Fatalf("content: %v", recordIDs(got))
		}
		if got := h.search(t, &memoryv1.SearchJudgmentsRequest{OrganizationId: "o", Filters: &memoryv1.SearchFilters{AnnotationId: "t"}}); !slices.Equal(recordIDs(got), []string{"c"}) {
			t.Fatalf("annotation: %v", recordIDs(got))
		}
	})
}

// refusing is a model that refuses texts holding a word, and embeds the others.
type refusing struct {
	*bagEmbedder
	word string
}

func (r *refusing) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	for _, t := range texts {
		if strings.Contains(t, r.word) {
			return nil, errors.New("input too long for the model's context")
		}
	}
	return r.bagEmbedder.Embed(ctx, texts)
}

// A text the model refuses even alone does not hold back the re-embedding of the others: it
// is set aside and counted, and the rest are re-embedded.
func TestReembeddingSetsAsideWhatTheModelRefuses(t *testing.T) {
	t.Parallel()
	store := NewMemoryStore()
	old := newHarnessOn(t, store, newBag(32))
	old.record(t, jdg("a", "reject", "poison text"), jdg("b", "approve", "fine photo"), jdg("c", "approve", "good crop"))
	h := newHarnessOn(t, store, newBag(64))
	h.srv.embedder = &refusing{bagEmbedder: newBag(64), word: "poison"}
	n, _, err := h.srv.ReembedBatch(context.Background())
	if err != nil || n != 2 {
		t.Fatalf("re-embedded %d, %v", n, err)
	}
	st, err := h.srv.GetEmbeddingStatus(context.Background(), &memoryv1.GetEmbeddingStatusRequest{})
	if err != nil || st.GetPending() != 1 || st.GetRefused() != 1 {
		t.Fatalf("status %v, %v", st, err)
	}
	if n, more, err := h.srv.ReembedBatch(context.Background()); err != nil || n != 0 || more {
		t.Fatalf("after setting aside: %d more %v %v", n, more, err)
	}
}
