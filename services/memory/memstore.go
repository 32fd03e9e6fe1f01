package memory

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/collab/collab/internal/ids"
	"github.com/collab/collab/internal/lifecycle"
)

// MemoryStore keeps everything in the process.
//
// Judgments are kept per organization and, within it, per document in plain slices, so a
// search scans exactly its scope without looking at any other judgment. A stored judgment is
// never changed: a write replaces it with a new value, so ScanJudgments can hand out the
// store's own values (read-only) without copying 4 KiB of vectors per judgment.
type MemoryStore struct {
	// The generation markers (Bury, Buried, MarkMoved, MovedTo), under their own lock.
	*lifecycle.MemoryMarkers

	mu    sync.RWMutex
	orgs  map[orgKey]*orgJudgments
	execs map[string]map[string]*Execution // apiKey -> id -> execution
}

type orgKey struct{ apiKey, orgID string }

// orgJudgments are one organization's judgments: byID and the per-document buckets hold the
// same values.
type orgJudgments struct {
	byID map[string]*Judgment
	docs map[string]*bucket
}

// bucket is the judgments of one document ("" for none) in a slice, with each one's index.
// flats are its int8 indexes (flat.go), one per kind of vector and model, row for row.
type bucket struct {
	items []*Judgment
	pos   map[string]int
	flats map[flatKey]*flatVectors
}

func (b *bucket) put(j *Judgment) {
	if i, ok := b.pos[j.RecordID]; ok {
		b.items[i] = j
		b.index(i, j)
		return
	}
	b.pos[j.RecordID] = len(b.items)
	b.items = append(b.items, j)
	b.index(len(b.items)-1, j)
}

func (b *bucket) remove(id string) {
	i, ok := b.pos[id]
	if !ok {
		return
	}
	last := len(b.items) - 1
	b.items[i] = b.items[last]
	b.pos[b.items[i].RecordID] = i
	b.items[last] = nil
	b.items = b.items[:last]
	delete(b.pos, id)
	b.unindex(i)
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{
		MemoryMarkers: lifecycle.NewMemoryMarkers(lifecycle.ByID),
		orgs:          map[orgKey]*orgJudgments{},
		execs:         map[string]map[string]*Execution{},
	}
}

func copyJudgment(j *Judgment) *Judgment {
	out := *j
	if j.Confidence != nil {
		c := *j.Confidence
		out.Confidence = &c
	}
	if j.Agent != nil {
		a := *j.Agent
		out.Agent = &a
	}
	out.ReviewVector = slices.Clone(j.ReviewVector)
	out.ContentVector = slices.Clone(j.ContentVector)
	return &out
}

func (s *MemoryStore) org(apiKey, orgID string, create bool) *orgJudgments {
	k := orgKey{apiKey, orgID}
	o := s.orgs[k]
	if o == nil && create {
		o = &orgJudgments{byID: map[string]*Judgment{}, docs: map[string]*bucket{}}
		s.orgs[k] = o
	}
	return o
}

// put stores j (owned by the store from now on) in o, moving it between documents when its
// document changed.
func (o *orgJudgments) put(j *Judgment) (created bool) {
	old, ok := o.byID[j.RecordID]
	if ok && old.DocumentID != j.DocumentID {
		o.unbucket(old)
	}
	o.byID[j.RecordID] = j
	b := o.docs[j.DocumentID]
	if b == nil {
		b = &bucket{pos: map[string]int{}}
		o.docs[j.DocumentID] = b
	}
	b.put(j)
	return !ok
}

func (o *orgJudgments) unbucket(j *Judgment) {
	if b := o.docs[j.DocumentID]; b != nil {
		b.remove(j.RecordID)
		if len(b.items) == 0 {
			delete(o.docs, j.DocumentID)
		}
	}
}

func (o *orgJudgments) remove(id string) bool {
	j, ok := o.byID[id]
	if !ok {
		return false
	}
	o.unbucket(j)
	delete(o.byID, id)
	return true
}

func (s *MemoryStore) dropIfEmpty(apiKey, orgID string) {
	if o := s.orgs[orgKey{apiKey, orgID}]; o != nil && len(o.byID) == 0 {
		delete(s.orgs, orgKey{apiKey, orgID})
	}
}

func (s *MemoryStore) PutJudgment(_ context.Context, j *Judgment) (bool, error) {
	c := copyJudgment(j)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.org(j.APIKey, j.OrganizationID, true).put(c), nil
}

func (s *MemoryStore) DeleteJudgments(_ context.Context, apiKey, orgID string, ids []string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	deleted := []string{}
	o := s.org(apiKey, orgID, false)
	if o == nil {
		return deleted, nil
	}
	for _, id := range ids {
		if o.remove(id) {
			deleted = append(deleted, id)
		}
	}
	s.dropIfEmpty(apiKey, orgID)
	return deleted, nil
}

func (s *MemoryStore) ScanJudgments(ctx context.Context, sc Scope, f Filter, _ string, fn func(*Judgment) bool) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	scan := func(items []*Judgment) bool {
		for _, j := range items {
			if f.Match(j) && !fn(j) {
				return false
			}
		}
		return true
	}
	scanOrg := func(o *orgJudgments) bool {
		if sc.DocumentID != "" {
			if b := o.docs[sc.DocumentID]; b != nil {
				return scan(b.items)
			}
			return true
		}
		for _, b := range o.docs {
			if !scan(b.items) {
				return false
			}
		}
		return true
	}
	if sc.OrganizationID != "" {
		if o := s.org(sc.APIKey, sc.OrganizationID, false); o != nil {
			scanOrg(o)
		}
		return ctx.Err()
	}
	for k, o := range s.orgs {
		if k.apiKey == sc.APIKey && !scanOrg(o) {
			break
		}
	}
	return ctx.Err()
}

func (s *MemoryStore) StaleJudgments(_ context.Context, embedder string, dim, limit int, skip []JudgmentRef) ([]*Judgment, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	skipped := make(map[JudgmentRef]bool, len(skip))
	for _, r := range skip {
		skipped[r] = true
	}
	out := []*Judgment{}
	for _, o := range s.orgs {
		for _, j := range o.byID {
			if len(out) == limit {
				return out, nil
			}
			if stale(j, embedder, dim) && !skipped[RefOf(j)] {
				out = append(out, copyJudgment(j))
			}
		}
	}
	return out, nil
}

func (s *MemoryStore) CountStale(_ context.Context, embedder string, dim int) (int64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var n int64
	for _, o := range s.orgs {
		for _, j := range o.byID {
			if stale(j, embedder, dim) {
				n++
			}
		}
	}
	return n, nil
}

func (s *MemoryStore) SetVectors(_ context.Context, j *Judgment, embedder string, review, content []float32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.org(j.APIKey, j.OrganizationID, false)
	if o == nil {
		return ErrChanged
	}
	cur, ok := o.byID[j.RecordID]
	if !ok || cur.Rev != j.Rev {
		return ErrChanged
	}
	c := copyJudgment(cur)
	c.Embedder, c.Dim = embedder, len(review)
	c.ReviewVector, c.ContentVector = slices.Clone(review), slices.Clone(content)
	c.Rev = ids.Random(12)
	o.put(c)
	return nil
}

func copyExecution(e *Execution) *Execution {
	out := *e
	if e.CompletedAt != nil {
		v := *e.CompletedAt
		out.CompletedAt = &v
	}
	if e.DurationMs != nil {
		v := *e.DurationMs
		out.DurationMs = &v
	}
	return &out
}

func (s *MemoryStore) InsertExecution(_ context.Context, e *Execution) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.execs[e.APIKey]
	if m == nil {
		m = map[string]*Execution{}
		s.execs[e.APIKey] = m
	}
	if _, ok := m[e.ID]; ok {
		return ErrFinished // ids are random: cannot happen
	}
	m[e.ID] = copyExecution(e)
	return nil
}

func (s *MemoryStore) FinishExecution(_ context.Context, apiKey, id, status, message string, completedAt int64) (*Execution, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.execs[apiKey][id]
	if !ok {
		return nil, ErrNotFound
	}
	if e.Status != StatusRunning {
		return nil, ErrFinished
	}
	d := max(completedAt-e.StartedAt, 0)
	e.Status, e.Message, e.CompletedAt, e.DurationMs = status, message, &completedAt, &d
	return copyExecution(e), nil
}

func compareExec(e *Execution, p ExecutionPosition) int {
	if c := cmp.Compare(e.StartedAt, p.StartedAt); c != 0 {
		return c
	}
	return cmp.Compare(e.ID, p.ID)
}

func (f *ExecutionFilter) match(e *Execution) bool {
	return (f.AgentID == "" || e.AgentID == f.AgentID) &&
		(f.OrganizationID == "" || e.OrganizationID == f.OrganizationID) &&
		(f.DocumentID == "" || e.DocumentID == f.DocumentID) &&
		(f.Status == "" || e.Status == f.Status)
}

func (s *MemoryStore) ListExecutions(_ context.Context, apiKey string, f ExecutionFilter, after *ExecutionPosition, desc bool, limit int) ([]*Execution, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var all []*Execution
	for _, e := range s.execs[apiKey] {
		if !f.match(e) {
			continue
		}
		if after != nil {
			c := compareExec(e, *after)
			if desc && c >= 0 || !desc && c <= 0 {
				continue
			}
		}
		all = append(all, e)
	}
	slices.SortFunc(all, func(a, b *Execution) int {
		c := compareExec(a, ExecutionPosition{b.StartedAt, b.ID})
		if desc {
			return -c
		}
		return c
	})
	if limit > 0 && len(all) > limit {
		all = all[:limit]
	}
	out := make([]*Execution, len(all))
	for i, e := range all {
		out[i] = copyExecution(e)
	}
	return out, nil
}

func ofGen(recGen, gen string) bool { return recGen == gen || recGen == "" }

func (s *MemoryStore) DeleteOrganization(_ context.Context, apiKey, orgID, gen string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.org(apiKey, orgID, false); o != nil {
		for id, j := range o.byID {
			if ofGen(j.OrganizationGeneration, gen) {
				o.remove(id)
			}
		}
		s.dropIfEmpty(apiKey, orgID)
	}
	for id, e := range s.execs[apiKey] {
		if e.OrganizationID == orgID && ofGen(e.OrganizationGeneration, gen) {
			delete(s.execs[apiKey], id)
		}
	}
	return nil
}

func (s *MemoryStore) DeleteDocument(_ context.Context, apiKey, orgID, docID, gen string) error {
	if docID == "" { // data of no document belongs to none
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.org(apiKey, orgID, false); o != nil {
		if b := o.docs[docID]; b != nil {
			for _, j := range slices.Clone(b.items) {
				if ofGen(j.DocumentGeneration, gen) {
					o.remove(j.RecordID)
				}
			}
		}
		s.dropIfEmpty(apiKey, orgID)
	}
	for id, e := range s.execs[apiKey] {
		if e.OrganizationID == orgID && e.DocumentID == docID && ofGen(e.DocumentGeneration, gen) {
			delete(s.execs[apiKey], id)
		}
	}
	return nil
}

func (s *MemoryStore) MoveDocument(_ context.Context, apiKey, orgID, from, to, gen string) error {
	if from == "" || from == to {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.org(apiKey, orgID, false); o != nil {
		if b := o.docs[from]; b != nil {
			for _, j := range slices.Clone(b.items) {
				if ofGen(j.DocumentGeneration, gen) {
					c := copyJudgment(j)
					c.DocumentID = to
					o.put(c)
				}
			}
		}
	}
	for _, e := range s.execs[apiKey] {
		if e.OrganizationID == orgID && e.DocumentID == from && ofGen(e.DocumentGeneration, gen) {
			e.DocumentID = to
		}
	}
	return nil
}

func (s *MemoryStore) Ping(context.Context) error { return nil }
