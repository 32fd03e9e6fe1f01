package memory

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"

	memoryv1 "github.com/collab/collab/proto/collab/memory/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/validate"
)

// Limits (docs/api.md "Memory and agents"). Every request is checked whole before anything is
// embedded or written.
const (
	maxJudgments       = 100      // per Record Judgments
	maxDeleteIDs       = 100      // recordIds per Delete Judgments
	maxReasoningChars  = 8000     // reasoning
	maxContentBytes    = 64 << 10 // content, UTF-8 bytes
	maxShortChars      = 256      // decision, names, trigger
	maxQueryChars      = 2000     // query
	maxMessageChars    = 4000     // an execution's message
	defaultLimit       = 10
	maxLimit           = 50
	maxRecencyDays     = 365
	defaultPageSize    = 50
	maxPageSize        = 500
	maxEpochMs         = 1 << 53 // exact in a double
	dayMs              = 24 * 60 * 60 * 1000
	msgJudgeType       = "must be human or agent."
	msgExecutionStatus = "must be one of passed, failed, error, skipped."
)

// Search scopes (docs/api.md, "Memory and agents").
const (
	ScopeDocument     = "document"
	ScopeOrganization = "organization"
	ScopeAPIKey       = "apiKey"
)

func checkText(field, v string, max int) error {
	if !utf8.ValidString(v) {
		return apierr.InvalidArgument("%s must be valid UTF-8.", field)
	}
	return validate.MaxLength(field, v, max)
}

func checkUser(field string, u *memoryv1.JudgmentUser) error {
	if err := validate.OptionalID(field+".userId", u.GetUserId()); err != nil {
		return err
	}
	if err := validate.Name(field+".name", u.GetName(), maxShortChars); err != nil {
		return err
	}
	if e := u.GetEmail(); e != "" && !validate.IsEmail(e) {
		return apierr.InvalidArgument("%s.email must be a valid email address.", field)
	}
	return nil
}

func checkVersion(field string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > maxEpochMs {
		return apierr.InvalidArgument("%s must be a number from 0.", field)
	}
	return nil
}

// checkRecord checks Record Judgments and returns the judgments to embed and write (tenant,
// generations, revision and vectors left to the caller; CreatedAt -1 means now).
func checkRecord(req *memoryv1.RecordJudgmentsRequest) ([]*Judgment, error) {
	if err := validate.ID("organizationId", req.GetOrganizationId()); err != nil {
		return nil, err
	}
	items := req.GetJudgments()
	if len(items) == 0 {
		return nil, apierr.InvalidArgument("judgments must contain at least one judgment.")
	}
	if len(items) > maxJudgments {
		return nil, apierr.InvalidArgument("judgments must contain at most %d judgments.", maxJudgments)
	}
	seen := map[string]int{}
	out := make([]*Judgment, len(items))
	for i, n := range items {
		field := fmt.Sprintf("judgments[%d]", i)
		if err := validate.TokenID(field+".recordId", n.GetRecordId()); err != nil {
			return nil, err
		}
		if id := n.GetRecordId(); id != "" {
			if j, dup := seen[id]; dup {
				return nil, apierr.InvalidArgument("%s.recordId repeats judgments[%d].recordId: each judgment may appear once.", field, j)
			}
			seen[id] = i
		}
		j, err := checkJudgment(field, n)
		if err != nil {
			return nil, err
		}
		j.OrganizationID = req.GetOrganizationId()
		out[i] = j
	}
	return out, nil
}

// checkJudgment checks one judgment of Record Judgments (its fields' ids, texts, sizes and
// numbers, then who judged) and returns it to be written.
func checkJudgment(field string, n *memoryv1.NewJudgment) (*Judgment, error) {
	for _, c := range []struct{ name, v string }{
		{"documentId", n.GetDocumentId()}, {"contentType", n.GetContentType()},
		{"reviewerId", n.GetReviewerId()}, {"annotationId", n.GetAnnotationId()},
	} {
		if err := validate.OptionalID(field+"."+c.name, c.v); err != nil {
			return nil, err
		}
	}
	if err := checkJudgmentText(field, n); err != nil {
		return nil, err
	}
	if n.Confidence != nil {
		if c := n.GetConfidence(); math.IsNaN(c) || c < 0 || c > 1 {
			return nil, apierr.InvalidArgument("%s.confidence must be between 0 and 1.", field)
		}
	}
	if err := checkUser(field+".actionUser", n.GetActionUser()); err != nil {
		return nil, err
	}
	created := int64(-1) // now, set when written
	if n.CreatedAt != nil {
		c := n.GetCreatedAt()
		if math.IsNaN(c) || c < 0 || c > maxEpochMs || c != math.Trunc(c) {
			return nil, apierr.InvalidArgument("%s.createdAt must be epoch milliseconds (a whole number from 0).", field)
		}
		created = int64(c)
	}
	judge, agent, err := checkJudge(field, n)
	if err != nil {
		return nil, err
	}
	u := n.GetActionUser()
	j := &Judgment{
		RecordID: n.GetRecordId(), DocumentID: n.GetDocumentId(),
		Reasoning: n.GetReasoning(), Decision: n.GetDecision(),
		ActionUser: User{UserID: u.GetUserId(), Name: u.GetName(), Email: u.GetEmail()},
		CreatedAt:  created, ContentType: n.GetContentType(), ReviewerID: n.GetReviewerId(),
		AnnotationID: n.GetAnnotationId(), JudgeType: judge, Agent: agent, Content: n.GetContent(),
	}
	if n.Confidence != nil {
		c := n.GetConfidence()
		j.Confidence = &c
	}
	return j, nil
}

// checkJudgmentText checks a judgment's decision, reasoning (one of them at least: they are
// what a search finds) and content.
func checkJudgmentText(field string, n *memoryv1.NewJudgment) error {
	if err := validate.Name(field+".decision", n.GetDecision(), maxShortChars); err != nil {
		return err
	}
	if err := checkText(field+".reasoning", n.GetReasoning(), maxReasoningChars); err != nil {
		return err
	}
	if strings.TrimSpace(n.GetDecision()) == "" && strings.TrimSpace(n.GetReasoning()) == "" {
		return apierr.InvalidArgument("%s needs a decision or a reasoning: they are what a search finds.", field)
	}
	if !utf8.ValidString(n.GetContent()) {
		return apierr.InvalidArgument("%s.content must be valid UTF-8.", field)
	}
	if len(n.GetContent()) > maxContentBytes {
		return apierr.InvalidArgument("%s.content must be at most %d KiB.", field, maxContentBytes>>10)
	}
	return nil
}

// checkJudge checks who judged: judgeType (human when absent) and the agent, given exactly
// when the judge is an agent.
func checkJudge(field string, n *memoryv1.NewJudgment) (string, *Agent, error) {
	judge := n.GetJudgeType()
	switch judge {
	case "":
		judge = JudgeHuman
	case JudgeHuman, JudgeAgent:
	default:
		return "", nil, apierr.InvalidArgument("%s.judgeType %s", field, msgJudgeType)
	}
	switch a := n.GetAgent(); {
	case judge == JudgeAgent && a == nil:
		return "", nil, apierr.InvalidArgument("%s.agent is required when judgeType is agent.", field)
	case judge == JudgeHuman && a != nil:
		return "", nil, apierr.InvalidArgument("%s.agent may be given only when judgeType is agent.", field)
	case a != nil:
		if err := validate.ID(field+".agent.agentId", a.GetAgentId()); err != nil {
			return "", nil, err
		}
		if err := validate.Name(field+".agent.agentName", a.GetAgentName(), maxShortChars); err != nil {
			return "", nil, err
		}
		if err := checkVersion(field+".agent.agentVersion", a.GetAgentVersion()); err != nil {
			return "", nil, err
		}
		return judge, &Agent{ID: a.GetAgentId(), Name: a.GetAgentName(), Version: a.GetAgentVersion()}, nil
	}
	return judge, nil, nil
}

// reviewText is what the review vector embeds.
func reviewText(j *Judgment) string {
	switch {
	case j.Decision == "":
		return j.Reasoning
	case j.Reasoning == "":
		return j.Decision
	}
	return j.Decision + ": " + j.Reasoning
}

// search is a checked Search Judgments request.
type search struct {
	query      string
	kind       string
	scope      Scope
	scopeName  string
	limit      int
	filter     Filter
	annotation bool // the annotation path: the thread, oldest first
	recency    bool // the recency path: newest first
}

// checkSearch checks Search Judgments: what to embed, the scope, the limit, the filters, the
// recency window, and the query (required unless the request reads a thread or a window).
func checkSearch(req *memoryv1.SearchJudgmentsRequest, apiKey string, now time.Time) (*search, error) {
	s := &search{kind: EmbedReview, limit: defaultLimit}
	switch req.GetEmbeddingType() {
	case "", EmbedReview:
	case EmbedContent:
		s.kind = EmbedContent
	default:
		return nil, apierr.InvalidArgument("embeddingType must be review or content.")
	}
	if err := s.checkScope(req, apiKey); err != nil {
		return nil, err
	}
	if req.Limit != nil {
		if n := req.GetLimit(); n < 1 || n > maxLimit {
			return nil, apierr.InvalidArgument("limit must be between 1 and %d.", maxLimit)
		}
		s.limit = int(req.GetLimit())
	}
	if err := s.checkFilters(req.GetFilters(), req.GetOrganizationId()); err != nil {
		return nil, err
	}
	if req.RecencyDays != nil {
		d := req.GetRecencyDays()
		if d < 1 || d > maxRecencyDays {
			return nil, apierr.InvalidArgument("recencyDays must be between 1 and %d.", maxRecencyDays)
		}
		// The window ends now: a judgment dated in the future is not "recent activity".
		since, until := now.UnixMilli()-int64(d)*dayMs, now.UnixMilli()
		s.filter.Since, s.filter.Until = &since, &until
		s.recency = true
	}
	if !s.annotation && !s.recency {
		s.query = strings.TrimSpace(req.GetQuery())
		if s.query == "" {
			return nil, apierr.InvalidArgument("query is required and must not be empty.")
		}
		if err := checkText("query", s.query, maxQueryChars); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// checkScope checks a search's organization and document and sets its scope: the one named,
// or else the narrowest the ids given allow.
func (s *search) checkScope(req *memoryv1.SearchJudgmentsRequest, apiKey string) error {
	org, doc := req.GetOrganizationId(), req.GetDocumentId()
	if err := validate.OptionalID("organizationId", org); err != nil {
		return err
	}
	if err := validate.OptionalID("documentId", doc); err != nil {
		return err
	}
	if doc != "" && org == "" {
		return apierr.InvalidArgument("documentId requires organizationId.")
	}
	s.scopeName = req.GetScope()
	if s.scopeName == "" {
		switch {
		case doc != "":
			s.scopeName = ScopeDocument
		case org != "":
			s.scopeName = ScopeOrganization
		default:
			s.scopeName = ScopeAPIKey
		}
	}
	s.scope.APIKey = apiKey
	switch s.scopeName {
	case ScopeDocument:
		if doc == "" {
			return apierr.InvalidArgument("scope document requires organizationId and documentId.")
		}
		s.scope.OrganizationID, s.scope.DocumentID = org, doc
	case ScopeOrganization:
		if org == "" {
			return apierr.InvalidArgument("scope organization requires organizationId.")
		}
		s.scope.OrganizationID = org
	case ScopeAPIKey:
	default:
		return apierr.InvalidArgument("scope must be document, organization or apiKey.")
	}
	return nil
}

// checkFilters checks a search's filters and sets them; an annotationId (which needs the
// organization) makes it read that thread.
func (s *search) checkFilters(f *memoryv1.SearchFilters, org string) error {
	s.filter = Filter{Decision: f.GetDecision(), ContentType: f.GetContentType(), ReviewerID: f.GetReviewerId(), AnnotationID: f.GetAnnotationId()}
	if err := validate.Name("filters.decision", f.GetDecision(), maxShortChars); err != nil {
		return err
	}
	for _, c := range []struct{ name, v string }{
		{"filters.contentType", f.GetContentType()}, {"filters.reviewerId", f.GetReviewerId()}, {"filters.annotationId", f.GetAnnotationId()},
	} {
		if err := validate.OptionalID(c.name, c.v); err != nil {
			return err
		}
	}
	switch f.GetJudgeType() {
	case "", JudgeHuman, JudgeAgent:
		s.filter.JudgeType = f.GetJudgeType()
	default:
		return apierr.InvalidArgument("filters.judgeType %s", msgJudgeType)
	}
	if f.GetAnnotationId() != "" {
		if org == "" {
			return apierr.InvalidArgument("filters.annotationId requires organizationId.")
		}
		s.annotation = true
	}
	if dr := f.GetDateRange(); dr != nil {
		start, err := epochMs("filters.dateRange.start", dr.GetStart(), false)
		if err != nil {
			return err
		}
		end, err := epochMs("filters.dateRange.end", dr.GetEnd(), true)
		if err != nil {
			return err
		}
		if start != nil && end != nil && *start > *end {
			return apierr.InvalidArgument("filters.dateRange.start must not be after filters.dateRange.end.")
		}
		s.filter.Since, s.filter.Until = start, end
	}
	return nil
}

// epochMs reads a dateRange bound: epoch milliseconds (a number or a string of digits) or an
// ISO-8601 date-time with a zone (RFC 3339) or date (UTC midnight; an end date means its
// whole day). nil when absent.
func epochMs(field string, v *structpb.Value, end bool) (*int64, error) {
	bad := apierr.InvalidArgument("%s must be an ISO-8601 date or date-time, or epoch milliseconds.", field)
	var ms int64
	switch k := v.GetKind().(type) {
	case nil, *structpb.Value_NullValue:
		return nil, nil
	case *structpb.Value_NumberValue:
		n := k.NumberValue
		if math.IsNaN(n) || n < 0 || n > maxEpochMs || n != math.Trunc(n) {
			return nil, bad
		}
		ms = int64(n)
	case *structpb.Value_StringValue:
		s := k.StringValue
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			if n < 0 || n > maxEpochMs {
				return nil, bad
			}
			ms = n
		} else if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			ms = t.UnixMilli()
		} else if t, err := time.Parse(time.DateOnly, s); err == nil {
			ms = t.UnixMilli()
			if end {
				ms += dayMs - 1
			}
		} else {
			return nil, bad
		}
	default:
		return nil, bad
	}
	return &ms, nil
}

// listing is a checked List Agent Executions request.
type listing struct {
	filter ExecutionFilter
	desc   bool
	size   int
}

func checkList(req *memoryv1.ListAgentExecutionsRequest) (*listing, error) {
	l := &listing{desc: true, size: defaultPageSize, filter: ExecutionFilter{
		AgentID: req.GetAgentId(), OrganizationID: req.GetOrganizationId(), DocumentID: req.GetDocumentId(), Status: req.GetStatus(),
	}}
	for _, c := range []struct{ name, v string }{
		{"agentId", l.filter.AgentID}, {"organizationId", l.filter.OrganizationID}, {"documentId", l.filter.DocumentID},
	} {
		if err := validate.OptionalID(c.name, c.v); err != nil {
			return nil, err
		}
	}
	switch l.filter.Status {
	case "", StatusRunning, StatusPassed, StatusFailed, StatusError, StatusSkipped:
	default:
		return nil, apierr.InvalidArgument("status must be one of running, passed, failed, error, skipped.")
	}
	if req.PageSize != nil {
		if n := req.GetPageSize(); n < 1 || n > maxPageSize {
			return nil, apierr.InvalidArgument("pageSize must be between 1 and %d.", maxPageSize)
		}
		l.size = int(req.GetPageSize())
	}
	switch req.GetOrderDirection() {
	case "", "desc":
	case "asc":
		l.desc = false
	default:
		return nil, apierr.InvalidArgument("orderDirection must be asc or desc.")
	}
	return l, nil
}

// scope is what a cursor is bound to: the tenant, every filter and the order.
func (l *listing) scope(apiKey string) string {
	b, _ := json.Marshal([]any{"executions", apiKey, l.filter.AgentID, l.filter.OrganizationID, l.filter.DocumentID, l.filter.Status, l.desc})
	return string(b)
}

func checkStart(req *memoryv1.StartAgentExecutionRequest) error {
	if err := validate.ID("agentId", req.GetAgentId()); err != nil {
		return err
	}
	if err := validate.Name("agentName", req.GetAgentName(), maxShortChars); err != nil {
		return err
	}
	if err := checkVersion("agentVersion", req.GetAgentVersion()); err != nil {
		return err
	}
	if err := validate.OptionalID("organizationId", req.GetOrganizationId()); err != nil {
		return err
	}
	if err := validate.OptionalID("documentId", req.GetDocumentId()); err != nil {
		return err
	}
	if req.GetDocumentId() != "" && req.GetOrganizationId() == "" {
		return apierr.InvalidArgument("documentId requires organizationId.")
	}
	return validate.Name("trigger", req.GetTrigger(), maxShortChars)
}

func checkComplete(req *memoryv1.CompleteAgentExecutionRequest) error {
	if err := validate.ID("executionId", req.GetExecutionId()); err != nil {
		return err
	}
	switch req.GetStatus() {
	case "":
		return apierr.InvalidArgument("status is required.")
	case StatusPassed, StatusFailed, StatusError, StatusSkipped:
	default:
		return apierr.InvalidArgument("status %s", msgExecutionStatus)
	}
	return checkText("message", req.GetMessage(), maxMessageChars)
}
