package memory

import (
	"context"
	"errors"

	"github.com/collab/collab/internal/lifecycle"
)

var (
	// ErrNotFound is returned for an agent execution that does not exist.
	ErrNotFound = errors.New("not found")
	// ErrFinished is returned by FinishExecution for an execution finished before.
	ErrFinished = errors.New("already finished")
	// ErrChanged is returned by SetVectors when the judgment changed (or went) since it was
	// read.
	ErrChanged = errors.New("changed meanwhile")
)

// User is who took the decision.
type User struct {
	UserID string `bson:"userId"`
	Name   string `bson:"name"`
	Email  string `bson:"email"`
}

// Agent is the AI agent a judgment came from.
type Agent struct {
	ID      string  `bson:"agentId"`
	Name    string  `bson:"agentName"`
	Version float64 `bson:"agentVersion"`
}

// Judge types.
const (
	JudgeHuman = "human"
	JudgeAgent = "agent"
)

// Judgment is one recorded review decision with its two vectors. Timestamps are Unix
// milliseconds.
type Judgment struct {
	APIKey         string `bson:"apiKey"`
	OrganizationID string `bson:"organizationId"`
	RecordID       string `bson:"recordId"`
	// The generations (collab.lifecycle.v1) it was written under; "" when the documents
	// service did not know the organization or document.
	OrganizationGeneration string `bson:"orgGen"`
	DocumentID             string `bson:"documentId"`
	DocumentGeneration     string `bson:"docGen"`

	Reasoning    string   `bson:"reasoning"`
	Decision     string   `bson:"decision"`
	Confidence   *float64 `bson:"confidence,omitempty"`
	ActionUser   User     `bson:"actionUser"`
	CreatedAt    int64    `bson:"createdAt"`
	ContentType  string   `bson:"contentType"`
	ReviewerID   string   `bson:"reviewerId"`
	AnnotationID string   `bson:"annotationId"`
	JudgeType    string   `bson:"judgeType"`
	Agent        *Agent   `bson:"agent,omitempty"`
	Content      string   `bson:"content"`

	// Rev is random per write, so that re-embedding never stores vectors of replaced text.
	Rev string `bson:"rev"`
	// Embedder is the Name of the embedder the vectors come from, Dim their length.
	Embedder      string    `bson:"embedder"`
	Dim           int       `bson:"dim"`
	ReviewVector  []float32 `bson:"-"`
	ContentVector []float32 `bson:"-"`
}

// Vector returns the judgment's vector of the embedding type ("review" or "content").
func (j *Judgment) Vector(kind string) []float32 {
	if kind == EmbedContent {
		return j.ContentVector
	}
	return j.ReviewVector
}

// Embedding types.
const (
	EmbedReview  = "review"
	EmbedContent = "content"
)

// Scope selects the judgments a search reads: a tenant, and within it an organization (""
// for every organization) and a document ("" for every document of the organization).
type Scope struct {
	APIKey         string
	OrganizationID string
	DocumentID     string
}

// Filter narrows a scope; empty fields match everything. Since and Until (Unix ms, inclusive)
// bound CreatedAt when not nil.
type Filter struct {
	Decision     string
	JudgeType    string
	ContentType  string
	ReviewerID   string
	AnnotationID string
	Since, Until *int64
}

// Match reports whether j passes the filter.
func (f *Filter) Match(j *Judgment) bool {
	return (f.Decision == "" || j.Decision == f.Decision) &&
		(f.JudgeType == "" || j.JudgeType == f.JudgeType) &&
		(f.ContentType == "" || j.ContentType == f.ContentType) &&
		(f.ReviewerID == "" || j.ReviewerID == f.ReviewerID) &&
		(f.AnnotationID == "" || j.AnnotationID == f.AnnotationID) &&
		(f.Since == nil || j.CreatedAt >= *f.Since) &&
		(f.Until == nil || j.CreatedAt <= *f.Until)
}

// Execution statuses (docs/api.md, "Memory and agents").
const (
	StatusRunning = "running"
	StatusPassed  = "passed"
	StatusFailed  = "failed"
	StatusError   = "error"
	StatusSkipped = "skipped"
)

// Execution is one run of an agent. CompletedAt and DurationMs are nil while running.
type Execution struct {
	APIKey                 string  `bson:"apiKey"`
	ID                     string  `bson:"id"`
	OrganizationID         string  `bson:"organizationId"`
	OrganizationGeneration string  `bson:"orgGen"`
	DocumentID             string  `bson:"documentId"`
	DocumentGeneration     string  `bson:"docGen"`
	AgentID                string  `bson:"agentId"`
	AgentName              string  `bson:"agentName"`
	AgentVersion           float64 `bson:"agentVersion"`
	Trigger                string  `bson:"trigger"`
	Status                 string  `bson:"status"`
	Message                string  `bson:"message"`
	StartedAt              int64   `bson:"startedAt"`
	CompletedAt            *int64  `bson:"completedAt,omitempty"`
	DurationMs             *int64  `bson:"durationMs,omitempty"`
}

// ExecutionFilter selects executions; empty fields match everything.
type ExecutionFilter struct {
	AgentID        string
	OrganizationID string
	DocumentID     string
	Status         string
}

// ExecutionPosition is where a listing stopped.
type ExecutionPosition struct {
	StartedAt int64
	ID        string
}

// Kinds of buried generations: lifecycle.Settle and MarkedHandlers name them.
const (
	KindOrganization = lifecycle.KindOrganization
	KindDocument     = lifecycle.KindDocument
)

// Store keeps judgments and agent executions, scoped by tenant (API key). Every write is a
// single-document operation, so the store runs on any MongoDB-wire server without
// transactions.
type Store interface {
	// PutJudgment stores j under (APIKey, OrganizationID, RecordID), replacing the judgment of
	// that key when there is one: concurrent puts of one key leave exactly one judgment, the
	// last writer's. created reports that no judgment had the key.
	PutJudgment(ctx context.Context, j *Judgment) (created bool, err error)
	// DeleteJudgments removes the organization's judgments among ids and returns the ids it
	// removed.
	DeleteJudgments(ctx context.Context, apiKey, orgID string, ids []string) (deleted []string, err error)
	// ScanJudgments calls fn with every judgment of the scope that passes f, in no particular
	// order, until fn returns false. withVector names the vector the caller reads ("review",
	// "content"); the other one, and both when it is "", may be left nil. fn must not keep or
	// change the judgment: the memory store hands out its own.
	ScanJudgments(ctx context.Context, sc Scope, f Filter, withVector string, fn func(*Judgment) bool) error

	// StaleJudgments returns up to limit judgments (of any tenant) whose vectors do not come
	// from the embedder named, with their texts; CountStale counts them.
	// skip names judgments to leave out (JudgmentRef), those the embedder refused.
	// dim, when positive, is the embedder's dimension: vectors of the same name but another
	// length (a remote model's server changed) are stale too.
	StaleJudgments(ctx context.Context, embedder string, dim int, limit int, skip []JudgmentRef) ([]*Judgment, error)
	CountStale(ctx context.Context, embedder string, dim int) (int64, error)
	// SetVectors replaces the vectors of the judgment j names, if it is still the revision j
	// holds (ErrChanged otherwise).
	SetVectors(ctx context.Context, j *Judgment, embedder string, review, content []float32) error

	// InsertExecution adds a running execution, unique by (APIKey, ID).
	InsertExecution(ctx context.Context, e *Execution) error
	// FinishExecution sets the outcome of a running execution, its completion time and
	// duration, and returns it: ErrNotFound when it does not exist, ErrFinished when it was
	// finished before (also when another finish races this one: exactly one wins).
	FinishExecution(ctx context.Context, apiKey, id, status, message string, completedAt int64) (*Execution, error)
	// ListExecutions returns up to limit executions of the tenant matching f, ordered by
	// (StartedAt, ID) ascending or descending, strictly after `after` when not nil.
	ListExecutions(ctx context.Context, apiKey string, f ExecutionFilter, after *ExecutionPosition, desc bool, limit int) ([]*Execution, error)

	// Judgments and executions follow their organization's and document's deletions and
	// migrations by the generations they were written under (lifecycle.MarkedHandlers,
	// lifecycle.Settle).
	lifecycle.Marked

	// Ping reports whether the store answers.
	Ping(ctx context.Context) error
}

// JudgmentRef names one judgment: its tenant, organization and record id.
type JudgmentRef struct{ APIKey, OrganizationID, RecordID string }

// RefOf is the judgment's JudgmentRef.
func RefOf(j *Judgment) JudgmentRef {
	return JudgmentRef{APIKey: j.APIKey, OrganizationID: j.OrganizationID, RecordID: j.RecordID}
}

// stale reports whether a judgment's vectors are not the embedder's: another name, or (dim
// positive) another length.
func stale(j *Judgment, embedder string, dim int) bool {
	return j.Embedder != embedder || (dim > 0 && j.Dim != dim)
}
