package activity

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/collab/collab/internal/lifecycle"
)

// MemoryStore keeps everything in the process. Records are copied in and out, so callers never
// share memory with the store.
//
// Each organization keeps its records sorted by (Timestamp, ID), once whole and once per
// document, per target entity and per acting user, so a listing seeks to its position by binary
// search and walks from there: its cost depends on the page, not on how deep it is. Inserts
// nearly always land at the end (timestamps are "now"), where a sorted slice takes them for an
// append.
type MemoryStore struct {
	// The generation markers (Bury, Buried, MarkMoved, MovedTo), under their own lock.
	*lifecycle.MemoryMarkers

	mu      sync.RWMutex
	orgs    map[orgKey]*orgRecords
	configs map[string]*Config
}

type orgKey struct{ apiKey, orgID string }

// orgRecords are the records of one organization. Every list holds the same *Record values as
// byID; the store never hands them out.
type orgRecords struct {
	byID     map[string]*Record
	all      sortedRecords
	byDoc    map[string]sortedRecords
	byTarget map[string]sortedRecords
	byUser   map[string]sortedRecords
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{MemoryMarkers: lifecycle.NewMemoryMarkers(lifecycle.ByID), orgs: map[orgKey]*orgRecords{}, configs: map[string]*Config{}}
}

// sortedRecords is ordered by (Timestamp, ID) ascending.
type sortedRecords []*Record

func compareKey(r *Record, ts int64, id string) int {
	if c := cmp.Compare(r.Timestamp, ts); c != 0 {
		return c
	}
	return cmp.Compare(r.ID, id)
}

// firstAfter returns the index of the first record whose key is greater than (ts, id).
func (l sortedRecords) firstAfter(ts int64, id string) int {
	return sort.Search(len(l), func(i int) bool { return compareKey(l[i], ts, id) > 0 })
}

// firstFrom returns the index of the first record whose key is not less than (ts, id).
func (l sortedRecords) firstFrom(ts int64, id string) int {
	return sort.Search(len(l), func(i int) bool { return compareKey(l[i], ts, id) >= 0 })
}

func (l sortedRecords) insert(r *Record) sortedRecords {
	if n := len(l); n == 0 || compareKey(l[n-1], r.Timestamp, r.ID) < 0 {
		return append(l, r) // the usual case: the newest record
	}
	return slices.Insert(l, l.firstFrom(r.Timestamp, r.ID), r)
}

func (l sortedRecords) remove(r *Record) sortedRecords {
	i := l.firstFrom(r.Timestamp, r.ID)
	if i < len(l) && l[i] == r {
		return slices.Delete(l, i, i+1) // which clears the freed slot at the end
	}
	return l
}

// merge adds rs, sorted, to l.
func (l sortedRecords) merge(rs sortedRecords) sortedRecords {
	if len(l) == 0 {
		return slices.Clone(rs)
	}
	out := make(sortedRecords, 0, len(l)+len(rs))
	i, j := 0, 0
	for i < len(l) && j < len(rs) {
		if compareKey(l[i], rs[j].Timestamp, rs[j].ID) < 0 {
			out = append(out, l[i])
			i++
		} else {
			out = append(out, rs[j])
			j++
		}
	}
	out = append(out, l[i:]...)
	return append(out, rs[j:]...)
}

// addTo and removeFrom keep a per-value list; records without the value are not listed, as
// an empty filter value selects nothing to seek by. Emptied lists are dropped.
func addTo(m map[string]sortedRecords, v string, r *Record) {
	if v != "" {
		m[v] = m[v].insert(r)
	}
}

func removeFrom(m map[string]sortedRecords, v string, r *Record) {
	if v == "" {
		return
	}
	if l := m[v].remove(r); len(l) == 0 {
		delete(m, v)
	} else {
		m[v] = l
	}
}

func (o *orgRecords) add(r *Record) {
	o.byID[r.ID] = r
	o.all = o.all.insert(r)
	addTo(o.byDoc, r.DocumentID, r)
	addTo(o.byTarget, r.TargetEntityID, r)
	addTo(o.byUser, r.ActionUser.UserID, r)
}

func (o *orgRecords) remove(r *Record) {
	delete(o.byID, r.ID)
	o.all = o.all.remove(r)
	removeFrom(o.byDoc, r.DocumentID, r)
	removeFrom(o.byTarget, r.TargetEntityID, r)
	removeFrom(o.byUser, r.ActionUser.UserID, r)
}

// removeAll removes the records gone reports, a pass over each list instead of a search and a
// shift per record.
func (o *orgRecords) removeAll(gone func(*Record) bool) {
	victims := false
	for id, r := range o.byID {
		if gone(r) {
			delete(o.byID, id)
			victims = true
		}
	}
	if !victims {
		return
	}
	o.all = slices.DeleteFunc(o.all, gone)
	for _, m := range []map[string]sortedRecords{o.byDoc, o.byTarget, o.byUser} {
		for v, l := range m {
			if l = slices.DeleteFunc(l, gone); len(l) == 0 {
				delete(m, v)
			} else {
				m[v] = l
			}
		}
	}
}

// org returns the records of an organization, nil when it has none.
func (s *MemoryStore) org(apiKey, orgID string) *orgRecords { return s.orgs[orgKey{apiKey, orgID}] }

// dropIfEmpty forgets an organization without records, so deleted data leaves nothing behind.
func (s *MemoryStore) dropIfEmpty(apiKey, orgID string) {
	if o := s.org(apiKey, orgID); o != nil && len(o.byID) == 0 {
		delete(s.orgs, orgKey{apiKey, orgID})
	}
}

func (s *MemoryStore) Insert(_ context.Context, recs []*Record) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	existing := []string{}
	for _, in := range recs {
		k := orgKey{in.APIKey, in.OrganizationID}
		o := s.orgs[k]
		if o == nil {
			o = &orgRecords{byID: map[string]*Record{}, byDoc: map[string]sortedRecords{}, byTarget: map[string]sortedRecords{}, byUser: map[string]sortedRecords{}}
			s.orgs[k] = o
		}
		if _, ok := o.byID[in.ID]; ok {
			existing = append(existing, in.ID)
			continue
		}
		r := *in
		o.add(&r)
	}
	return existing, nil
}

// matcher is a Filter's test of one record; nil slices let everything pass.
type matcher struct {
	f                      Filter
	features, actions, ids map[string]bool
}

func set(vs []string) map[string]bool {
	if vs == nil {
		return nil
	}
	m := make(map[string]bool, len(vs))
	for _, v := range vs {
		m[v] = true
	}
	return m
}

func newMatcher(f Filter) *matcher {
	return &matcher{f: f, features: set(f.FeatureTypes), actions: set(f.ActionTypes), ids: set(f.IDs)}
}

func (m *matcher) match(r *Record) bool {
	return (m.f.DocumentID == "" || r.DocumentID == m.f.DocumentID) &&
		(m.f.TargetEntityID == "" || r.TargetEntityID == m.f.TargetEntityID) &&
		(m.f.UserID == "" || r.ActionUser.UserID == m.f.UserID) &&
		(m.features == nil || m.features[r.FeatureType]) &&
		(m.actions == nil || m.actions[r.ActionType]) &&
		(m.ids == nil || m.ids[r.ID])
}

// selectsNothing reports a filter with an empty (non-nil) value list: no value to match.
func (f Filter) selectsNothing() bool {
	return (f.FeatureTypes != nil && len(f.FeatureTypes) == 0) ||
		(f.ActionTypes != nil && len(f.ActionTypes) == 0) ||
		(f.IDs != nil && len(f.IDs) == 0)
}

func (s *MemoryStore) List(_ context.Context, apiKey, orgID string, f Filter, after *Position, desc bool, limit int) ([]*Record, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	o := s.org(apiKey, orgID)
	if o == nil || f.selectsNothing() {
		return []*Record{}, nil
	}
	var list sortedRecords
	if f.IDs != nil {
		// Looked up one by one: a handful of ids never costs a walk over the organization.
		for _, id := range f.IDs {
			if r, ok := o.byID[id]; ok {
				list = append(list, r)
			}
		}
		slices.SortFunc(list, func(a, b *Record) int { return compareKey(a, b.Timestamp, b.ID) })
		list = slices.CompactFunc(list, func(a, b *Record) bool { return a == b })
	} else {
		// Seek in the shortest list one of the filter's values has.
		list = o.all
		for _, by := range []struct {
			m map[string]sortedRecords
			v string
		}{{o.byDoc, f.DocumentID}, {o.byTarget, f.TargetEntityID}, {o.byUser, f.UserID}} {
			if by.v == "" {
				continue
			}
			l, ok := by.m[by.v]
			if !ok {
				return []*Record{}, nil
			}
			if len(l) < len(list) {
				list = l
			}
		}
	}
	m := newMatcher(f)
	var found []*Record
	if limit > 0 {
		found = make([]*Record, 0, min(limit, len(list)))
	}
	take := func(r *Record) bool {
		if m.match(r) {
			found = append(found, r)
		}
		return limit <= 0 || len(found) < limit
	}
	if desc {
		i := len(list)
		if after != nil {
			i = list.firstFrom(after.Timestamp, after.ID)
		}
		for i--; i >= 0 && take(list[i]); i-- {
		}
	} else {
		i := 0
		if after != nil {
			i = list.firstAfter(after.Timestamp, after.ID)
		}
		for ; i < len(list) && take(list[i]); i++ {
		}
	}
	// One allocation for the copies of the page.
	vals := make([]Record, len(found))
	out := make([]*Record, len(found))
	for i, r := range found {
		vals[i] = *r
		out[i] = &vals[i]
	}
	return out, nil
}

func (s *MemoryStore) Get(_ context.Context, apiKey, orgID string, ids []string) (map[string]*Record, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[string]*Record{}
	if o := s.org(apiKey, orgID); o != nil {
		for _, id := range ids {
			if r, ok := o.byID[id]; ok {
				c := *r
				out[id] = &c
			}
		}
	}
	return out, nil
}

func (s *MemoryStore) Update(_ context.Context, apiKey, orgID, id string, p Patch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.org(apiKey, orgID)
	if o == nil {
		return ErrNotFound
	}
	r, ok := o.byID[id]
	if !ok {
		return ErrNotFound
	}
	if r.Immutable {
		return ErrImmutable
	}
	// None of the patched fields is a sort or list key, so the record changes in place.
	for _, f := range []struct {
		to *string
		v  *string
	}{
		{&r.Changes, p.Changes},
		{&r.EntityData, p.EntityData},
		{&r.EntityTargetData, p.EntityTargetData},
		{&r.DisplayMessageTemplate, p.DisplayMessageTemplate},
		{&r.DisplayMessageTemplateData, p.DisplayMessageTemplateData},
		{&r.ActionIcon, p.ActionIcon},
	} {
		if f.v != nil {
			*f.to = *f.v
		}
	}
	return nil
}

func (s *MemoryStore) DeleteOrganization(_ context.Context, apiKey, orgID, gen string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.org(apiKey, orgID)
	if o == nil {
		return nil
	}
	o.removeAll(func(r *Record) bool { return r.OrganizationGeneration == gen || r.OrganizationGeneration == "" })
	s.dropIfEmpty(apiKey, orgID)
	return nil
}

// ofDocument returns the records of document docID written under generation gen or the empty
// one, sorted.
func (o *orgRecords) ofDocument(docID, gen string) sortedRecords {
	var out sortedRecords
	for _, r := range o.byDoc[docID] {
		if r.DocumentGeneration == gen || r.DocumentGeneration == "" {
			out = append(out, r)
		}
	}
	return out
}

func (s *MemoryStore) DeleteDocument(_ context.Context, apiKey, orgID, docID, gen string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.org(apiKey, orgID)
	if o == nil || docID == "" {
		return nil
	}
	gone := o.ofDocument(docID, gen)
	if len(gone) == 0 {
		return nil
	}
	if len(gone) <= 16 {
		for _, r := range gone {
			o.remove(r)
		}
	} else {
		victims := make(map[*Record]bool, len(gone))
		for _, r := range gone {
			victims[r] = true
		}
		o.removeAll(func(r *Record) bool { return victims[r] })
	}
	s.dropIfEmpty(apiKey, orgID)
	return nil
}

func (s *MemoryStore) MoveDocument(_ context.Context, apiKey, orgID, from, to, gen string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.org(apiKey, orgID)
	if o == nil || from == to || from == "" {
		return nil
	}
	moving := o.ofDocument(from, gen)
	if len(moving) == 0 {
		return nil
	}
	if len(moving) == len(o.byDoc[from]) {
		delete(o.byDoc, from)
	} else {
		o.byDoc[from] = slices.DeleteFunc(o.byDoc[from], func(r *Record) bool {
			return r.DocumentGeneration == gen || r.DocumentGeneration == ""
		})
	}
	for _, r := range moving {
		r.DocumentID = to
	}
	if to != "" {
		o.byDoc[to] = o.byDoc[to].merge(moving)
	}
	return nil
}

func copyConfig(c *Config) *Config {
	out := *c
	if c.Immutable != nil {
		v := *c.Immutable
		out.Immutable = &v
	}
	out.Triggers = copyTriggers(c.Triggers)
	return &out
}

func copyTriggers(t map[string]map[string]bool) map[string]map[string]bool {
	if t == nil {
		return nil
	}
	out := make(map[string]map[string]bool, len(t))
	for feature, actions := range t {
		out[feature] = maps.Clone(actions)
		if out[feature] == nil {
			out[feature] = map[string]bool{}
		}
	}
	return out
}

func (s *MemoryStore) Config(_ context.Context, apiKey string) (*Config, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c, ok := s.configs[apiKey]
	if !ok {
		return nil, ErrNotFound
	}
	return copyConfig(c), nil
}

func (s *MemoryStore) UpdateConfig(_ context.Context, apiKey string, p ConfigPatch, now time.Time) (*Config, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.configs[apiKey]
	if !ok {
		c = &Config{}
		s.configs[apiKey] = c
	}
	if p.Enabled != nil {
		c.Enabled = *p.Enabled
	}
	if p.Immutable != nil {
		v := *p.Immutable
		c.Immutable = &v
	}
	if p.Triggers != nil {
		c.Triggers = copyTriggers(p.Triggers)
	}
	// As MongoDB keeps it: milliseconds, UTC.
	c.UpdatedAt = time.UnixMilli(now.UnixMilli()).UTC()
	return copyConfig(c), nil
}

func (s *MemoryStore) Ping(context.Context) error { return nil }
