package memory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	memoryv1 "github.com/collab/collab/proto/collab/memory/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/cursor"
	"github.com/collab/collab/internal/embed"
	"github.com/collab/collab/internal/ids"
	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/validate"

	"google.golang.org/grpc/codes"
)

const statusSuccess = "success"

// Messages the caller sees (docs/api.md "Memory and agents").
const (
	msgRecorded         = "Judgment(s) recorded successfully."
	msgItemRecorded     = "Judgment recorded."
	msgItemUpdated      = "Judgment updated."
	msgDeleted          = "Judgment(s) deleted successfully."
	msgItemDeleted      = "Judgment deleted."
	msgItemMissing      = "Judgment does not exist."
	msgStarted          = "Agent execution started successfully."
	msgCompleted        = "Agent execution completed successfully."
	msgExecutionMissing = "Agent execution not found."
	msgFinished         = "Agent execution is already finished."
	msgOrgMissing       = "Organization does not exist."
	msgDocumentMissing  = "Document does not exist."
	msgUnavailable      = "The embedding model is unavailable; nothing was stored. Try again later."
	msgSearchDown       = "The embedding model is unavailable. Try again later."
)

var (
	_ memoryv1.MemoryServiceServer = (*Server)(nil)
	_ lifecycle.Handler            = (*Server)(nil)
)

// vectorSearcher is a store that searches its own vector index (the memory store's flat int8
// codes); other stores scan and the server scores (topK). The observed store
// (store_observed.go) implements it when the store it wraps does.
//
//storeobserve:optional
type vectorSearcher interface {
	SearchVectors(ctx context.Context, sc Scope, f Filter, kind, embedder string, q []float32, k int) ([]scored, int, error)
}

// Server implements the memory service.
type Server struct {
	memoryv1.UnimplementedMemoryServiceServer

	store    Store
	docs     documentsv1.DocumentsServiceClient
	embedder embed.Embedder
	pages    *cursor.Sealer
	clock    clock.Clock
	log      *slog.Logger
	reembed  reembedState
	metrics  *embedMetrics
}

// Option configures a Server.
type Option func(*Server)

func WithClock(c clock.Clock) Option   { return func(s *Server) { s.clock = c } }
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// New returns a Server on store that embeds with e. docs tells the generations judgments and
// executions are written under; secret keys the cursors.
func New(store Store, docs documentsv1.DocumentsServiceClient, e embed.Embedder, secret []byte, opts ...Option) (*Server, error) {
	if store == nil || docs == nil || e == nil {
		return nil, errors.New("memory: a store, a documents client and an embedder are required")
	}
	s := &Server{store: store, docs: docs, embedder: e, clock: clock.Real(), log: slog.Default(), metrics: newEmbedMetrics()}
	for _, o := range opts {
		o(s)
	}
	key, err := cursor.DeriveKey(secret, "memory.executions")
	if err != nil {
		return nil, err
	}
	if s.pages, err = cursor.NewSealer(key, s.clock); err != nil {
		return nil, err
	}
	return s, nil
}

// Ping reports whether the store answers.
func (s *Server) Ping(ctx context.Context) error { return s.store.Ping(ctx) }

func (s *Server) now() int64 { return s.clock.Now().UnixMilli() }

// embedTexts embeds texts, checking what the model returns: any failure is UNAVAILABLE with
// msg, since nothing may be stored without its vectors.
func (s *Server) embedTexts(ctx context.Context, texts []string, msg string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	start := time.Now()
	vecs, err := s.embedder.Embed(ctx, texts)
	if err == nil && len(vecs) != len(texts) {
		err = fmt.Errorf("%d vectors for %d texts", len(vecs), len(texts))
	}
	for i := 0; err == nil && i < len(vecs); i++ {
		if len(vecs[i]) != s.embedder.Dim() {
			err = fmt.Errorf("vector of %d dimensions, want %d", len(vecs[i]), s.embedder.Dim())
		}
	}
	s.metrics.observe(time.Since(start), len(texts), err)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		s.log.WarnContext(ctx, "embedding failed", "embedder", s.embedder.Name(), "error", err)
		return nil, apierr.New(codes.Unavailable, msg).WithCause(err)
	}
	return vecs, nil
}

// vectorize fills the judgments' vectors: review always, content when there is content.
func (s *Server) vectorize(ctx context.Context, js []*Judgment, msg string) error {
	var texts []string
	for _, j := range js {
		texts = append(texts, reviewText(j))
		if j.Content != "" {
			texts = append(texts, j.Content)
		}
	}
	vecs, err := s.embedTexts(ctx, texts, msg)
	if err != nil {
		return err
	}
	for _, j := range js {
		j.ReviewVector, vecs = vecs[0], vecs[1:]
		j.ContentVector = nil
		if j.Content != "" {
			j.ContentVector, vecs = vecs[0], vecs[1:]
		}
		j.Embedder, j.Dim = s.embedder.Name(), s.embedder.Dim()
	}
	return nil
}

func (s *Server) RecordJudgments(ctx context.Context, req *memoryv1.RecordJudgmentsRequest) (*memoryv1.ItemResultsResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	js, err := checkRecord(req)
	if err != nil {
		return nil, err
	}
	org := req.GetOrganizationId()
	var docIDs []string
	for _, j := range js {
		if j.DocumentID != "" {
			docIDs = append(docIDs, j.DocumentID)
		}
	}
	orgGen, docGens, err := s.generations(ctx, c.APIKey, org, docIDs)
	if err != nil {
		return nil, err
	}
	if err := s.vectorize(ctx, js, msgUnavailable); err != nil {
		return nil, err
	}
	now := s.now()
	data := map[string]*memoryv1.ItemResult{}
	for _, j := range js {
		if j.RecordID == "" {
			j.RecordID = "jdg_" + ids.Random(24)
		}
		if j.CreatedAt < 0 {
			j.CreatedAt = now
		}
		j.APIKey, j.OrganizationGeneration, j.DocumentGeneration, j.Rev = c.APIKey, orgGen, docGens[j.DocumentID], ids.Random(12)
		created, err := s.store.PutJudgment(ctx, j)
		if err != nil {
			return nil, fmt.Errorf("record judgment: %w", err)
		}
		msg := msgItemUpdated
		if created {
			msg = msgItemRecorded
		}
		data[j.RecordID] = &memoryv1.ItemResult{Success: true, Id: j.RecordID, Message: msg}
	}
	// The organization or a document may have been deleted or migrated meanwhile.
	for _, doc := range append([]string{""}, docIDs...) {
		if gone, err := s.settle(ctx, c.APIKey, org, orgGen, doc, docGens[doc]); err != nil {
			return nil, err
		} else if gone != "" {
			return nil, apierr.NotFound("%s", gone)
		}
	}
	return &memoryv1.ItemResultsResponse{Status: statusSuccess, Message: msgRecorded, Data: data}, nil
}

func (s *Server) DeleteJudgments(ctx context.Context, req *memoryv1.DeleteJudgmentsRequest) (*memoryv1.ItemResultsResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	if err := validate.ID("organizationId", req.GetOrganizationId()); err != nil {
		return nil, err
	}
	idList, err := validate.IDs("recordIds", req.GetRecordIds(), true, maxDeleteIDs)
	if err != nil {
		return nil, err
	}
	deleted, err := s.store.DeleteJudgments(ctx, c.APIKey, req.GetOrganizationId(), idList)
	if err != nil {
		return nil, fmt.Errorf("delete judgments: %w", err)
	}
	gone := map[string]bool{}
	for _, id := range deleted {
		gone[id] = true
	}
	data := map[string]*memoryv1.ItemResult{}
	for _, id := range idList {
		if gone[id] {
			data[id] = &memoryv1.ItemResult{Success: true, Id: id, Message: msgItemDeleted}
		} else {
			data[id] = &memoryv1.ItemResult{Id: id, Message: msgItemMissing}
		}
	}
	return &memoryv1.ItemResultsResponse{Status: statusSuccess, Message: msgDeleted, Data: data}, nil
}

func (s *Server) SearchJudgments(ctx context.Context, req *memoryv1.SearchJudgmentsRequest) (*memoryv1.SearchJudgmentsResponse, error) {
	started := time.Now()
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	q, err := checkSearch(req, c.APIKey, s.clock.Now())
	if err != nil {
		return nil, err
	}
	resp := &memoryv1.SearchJudgmentsResponse{Results: []*memoryv1.JudgmentResult{}}
	if q.annotation || q.recency {
		// The shortcut paths: no vectors, every judgment of the scope counts.
		var cands []*Judgment
		if err := s.store.ScanJudgments(ctx, q.scope, q.filter, "", func(j *Judgment) bool {
			cands = append(cands, j)
			return true
		}); err != nil {
			return nil, fmt.Errorf("search judgments: %w", err)
		}
		resp.TotalInScope = float64(len(cands))
		for _, j := range newest(cands, q.limit, q.annotation) {
			resp.Results = append(resp.Results, toResult(j, 1, q.scopeName))
		}
	} else {
		vecs, err := s.embedTexts(ctx, []string{q.query}, msgSearchDown)
		if err != nil {
			return nil, err
		}
		name, total := s.embedder.Name(), 0
		if vs, ok := s.store.(vectorSearcher); ok {
			top, n, err := vs.SearchVectors(ctx, q.scope, q.filter, q.kind, name, vecs[0], q.limit)
			if err != nil {
				return nil, fmt.Errorf("search judgments: %w", err)
			}
			resp.TotalInScope = float64(n)
			for _, r := range top {
				resp.Results = append(resp.Results, toResult(r.j, float64(r.score), q.scopeName))
			}
			resp.SearchLatencyMs = float64(time.Since(started).Microseconds()) / 1000
			return resp, nil
		}
		var cands []*Judgment
		if err := s.store.ScanJudgments(ctx, q.scope, q.filter, q.kind, func(j *Judgment) bool {
			total++
			// Vectors of another model are never compared with this one's (they wait for
			// re-embedding); a judgment without content has no content vector.
			if j.Embedder == name && len(j.Vector(q.kind)) == len(vecs[0]) {
				cands = append(cands, j)
			}
			return true
		}); err != nil {
			return nil, fmt.Errorf("search judgments: %w", err)
		}
		resp.TotalInScope = float64(total)
		for _, r := range topK(vecs[0], cands, q.kind, q.limit) {
			resp.Results = append(resp.Results, toResult(r.j, float64(r.score), q.scopeName))
		}
	}
	resp.SearchLatencyMs = float64(time.Since(started).Microseconds()) / 1000
	return resp, nil
}

func toResult(j *Judgment, similarity float64, scope string) *memoryv1.JudgmentResult {
	r := &memoryv1.JudgmentResult{
		RecordId: j.RecordID, Reasoning: j.Reasoning, Decision: j.Decision,
		ActionUser: &memoryv1.JudgmentResultUser{Name: j.ActionUser.Name},
		CreatedAt:  float64(j.CreatedAt), Similarity: similarity, Scope: scope,
	}
	if j.Confidence != nil {
		r.Confidence = wrapperspb.Double(*j.Confidence)
	}
	if j.Agent != nil {
		r.Agent = &memoryv1.Agent{AgentId: j.Agent.ID, AgentName: j.Agent.Name, AgentVersion: j.Agent.Version}
	}
	return r
}

func (s *Server) StartAgentExecution(ctx context.Context, req *memoryv1.StartAgentExecutionRequest) (*memoryv1.AgentExecutionResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkStart(req); err != nil {
		return nil, err
	}
	org, doc := req.GetOrganizationId(), req.GetDocumentId()
	e := &Execution{
		APIKey: c.APIKey, ID: "exec_" + ids.Random(24), OrganizationID: org, DocumentID: doc,
		AgentID: req.GetAgentId(), AgentName: req.GetAgentName(), AgentVersion: req.GetAgentVersion(),
		Trigger: req.GetTrigger(), Status: StatusRunning, StartedAt: s.now(),
	}
	if org != "" {
		var docs []string
		if doc != "" {
			docs = []string{doc}
		}
		orgGen, docGens, err := s.generations(ctx, c.APIKey, org, docs)
		if err != nil {
			return nil, err
		}
		e.OrganizationGeneration, e.DocumentGeneration = orgGen, docGens[doc]
	}
	if err := s.store.InsertExecution(ctx, e); err != nil {
		return nil, fmt.Errorf("start agent execution: %w", err)
	}
	if org != "" {
		if gone, err := s.settle(ctx, c.APIKey, org, e.OrganizationGeneration, doc, e.DocumentGeneration); err != nil {
			return nil, err
		} else if gone != "" {
			return nil, apierr.NotFound("%s", gone)
		}
	}
	return &memoryv1.AgentExecutionResponse{Status: statusSuccess, Message: msgStarted, Data: toExecution(e)}, nil
}

func (s *Server) CompleteAgentExecution(ctx context.Context, req *memoryv1.CompleteAgentExecutionRequest) (*memoryv1.AgentExecutionResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkComplete(req); err != nil {
		return nil, err
	}
	e, err := s.store.FinishExecution(ctx, c.APIKey, req.GetExecutionId(), req.GetStatus(), req.GetMessage(), s.now())
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, apierr.NotFound(msgExecutionMissing)
	case errors.Is(err, ErrFinished):
		return nil, apierr.FailedPrecondition(msgFinished)
	case err != nil:
		return nil, fmt.Errorf("complete agent execution: %w", err)
	}
	return &memoryv1.AgentExecutionResponse{Status: statusSuccess, Message: msgCompleted, Data: toExecution(e)}, nil
}

// tokenPosition is the sealed form of an ExecutionPosition.
type tokenPosition struct {
	StartedAt int64  `json:"t"`
	ID        string `json:"i"`
}

func (s *Server) ListAgentExecutions(ctx context.Context, req *memoryv1.ListAgentExecutionsRequest) (*memoryv1.ListAgentExecutionsResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	l, err := checkList(req)
	if err != nil {
		return nil, err
	}
	scope := l.scope(c.APIKey)
	var after *ExecutionPosition
	if tok := req.GetCursor(); tok != "" {
		var p tokenPosition
		if err := s.pages.Open(tok, scope, &p); err != nil {
			return nil, cursor.Refusal("cursor", err)
		}
		after = &ExecutionPosition{StartedAt: p.StartedAt, ID: p.ID}
	}
	es, err := s.store.ListExecutions(ctx, c.APIKey, l.filter, after, l.desc, l.size+1)
	if err != nil {
		return nil, fmt.Errorf("list agent executions: %w", err)
	}
	resp := &memoryv1.ListAgentExecutionsResponse{Items: []*memoryv1.AgentExecution{}}
	if len(es) > l.size {
		last := es[l.size-1]
		tok, err := s.pages.Seal(scope, tokenPosition{StartedAt: last.StartedAt, ID: last.ID})
		if err != nil {
			return nil, fmt.Errorf("seal cursor: %w", err)
		}
		resp.NextCursor, resp.HasMore = tok, true
		es = es[:l.size]
	}
	for _, e := range es {
		resp.Items = append(resp.Items, toExecution(e))
	}
	return resp, nil
}

func toExecution(e *Execution) *memoryv1.AgentExecution {
	out := &memoryv1.AgentExecution{
		Id: e.ID, AgentId: e.AgentID, AgentName: e.AgentName, AgentVersion: e.AgentVersion,
		Status: e.Status, Message: e.Message, StartedAt: float64(e.StartedAt), Trigger: e.Trigger,
	}
	if e.CompletedAt != nil {
		out.CompletedAt = wrapperspb.Double(float64(*e.CompletedAt))
	}
	if e.DurationMs != nil {
		out.DurationMs = wrapperspb.Double(float64(*e.DurationMs))
	}
	return out
}

// generations returns the generations of the organization and documents as the documents
// service knows them now; "" for an organization or document it does not know (judgments and
// executions may be about resources a product never registered).
func (s *Server) generations(ctx context.Context, apiKey, org string, docs []string) (string, map[string]string, error) {
	res, err := s.docs.ResolveResources(ctx, &documentsv1.ResolveResourcesRequest{ApiKey: apiKey, OrganizationId: org, DocumentIds: docs})
	if err != nil {
		return "", nil, fmt.Errorf("resolve %s: %w", org, err)
	}
	gens := map[string]string{}
	if !res.GetOrganizationExists() {
		return "", gens, nil
	}
	for _, d := range docs {
		if r := res.GetDocuments()[d]; r.GetExists() {
			gens[d] = r.GetGeneration()
		}
	}
	return res.GetOrganizationGeneration(), gens, nil
}
