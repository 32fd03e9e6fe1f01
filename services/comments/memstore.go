package comments

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/collab/collab/internal/lifecycle"
)

// annKey is an annotation's identity: unique in its tenant, organization and its generation.
type annKey struct{ apiKey, org, orgGen, id string }

// MemoryStore keeps annotations in the process, for tests and single-process runs. Each
// document's annotations are kept sorted by (LastUpdated, ID), so a listing starts at its
// position by binary search whatever its depth, and counted (tally), so Count reads numbers
// instead of the threads.
type MemoryStore struct {
	*lifecycle.MemoryMarkers
	mu      sync.RWMutex
	byKey   map[annKey]*Annotation
	docs    map[Ref][]*Annotation // sorted by (LastUpdated, ID)
	tallies map[Ref]*tally
	feeds   map[feedKey]*feed
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{MemoryMarkers: lifecycle.NewMemoryMarkers(lifecycle.ByID), byKey: map[annKey]*Annotation{}, docs: map[Ref][]*Annotation{},
		tallies: map[Ref]*tally{}, feeds: map[feedKey]*feed{}}
}

func keyOf(a *Annotation) annKey { return annKey{a.APIKey, a.OrganizationID, a.OrgGen, a.ID} }

func byOrder(a *Annotation, p Position) int {
	return cmp.Or(cmp.Compare(a.LastUpdated, p.LastUpdated), cmp.Compare(a.ID, p.ID))
}

func positionOf(a *Annotation) Position { return Position{LastUpdated: a.LastUpdated, ID: a.ID} }

// place adds a to its document's sorted list and tally; unplace removes it. Every change of
// the threads a document holds goes through them (MarkRead, which changes a thread in place,
// tallies its reader itself).
func (m *MemoryStore) place(a *Annotation) {
	list := m.docs[a.Ref]
	i, _ := slices.BinarySearchFunc(list, positionOf(a), byOrder)
	m.docs[a.Ref] = slices.Insert(list, i, a)
	m.tallyOf(a.Ref).add(a, 1)
}

func (m *MemoryStore) unplace(a *Annotation) {
	list := m.docs[a.Ref]
	if i, ok := slices.BinarySearchFunc(list, positionOf(a), byOrder); ok {
		list = slices.Delete(list, i, i+1)
		m.tallyOf(a.Ref).add(a, -1)
	}
	if len(list) == 0 {
		delete(m.docs, a.Ref)
		delete(m.tallies, a.Ref)
	} else {
		m.docs[a.Ref] = list
	}
}

func (m *MemoryStore) Insert(_ context.Context, a *Annotation, max int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.byKey[keyOf(a)]; ok {
		return ErrExists
	}
	if len(m.docs[a.Ref]) >= max {
		return ErrFull
	}
	c := a.clone()
	m.byKey[keyOf(c)] = c
	m.place(c)
	return nil
}

func (m *MemoryStore) Get(_ context.Context, doc Ref, ids []string) (map[string]*Annotation, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := map[string]*Annotation{}
	for _, id := range ids {
		if a := m.byKey[annKey{doc.APIKey, doc.OrganizationID, doc.OrgGen, id}]; a != nil && a.Ref == doc {
			out[id] = a.clone()
		}
	}
	return out, nil
}

// List walks each document's sorted list from the position and merges them: its cost is the
// page and the annotations the filter skips, never the depth.
func (m *MemoryStore) List(_ context.Context, f Filter, after *Position, desc bool, limit int) ([]*Annotation, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []*Annotation
	for _, doc := range f.Documents {
		out = append(out, m.listDoc(m.docs[doc], f, after, desc, limit)...)
	}
	slices.SortFunc(out, func(a, b *Annotation) int {
		c := byOrder(a, positionOf(b))
		if desc {
			return -c
		}
		return c
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	for i, a := range out {
		out[i] = a.clone()
	}
	return out, nil
}

func (m *MemoryStore) listDoc(list []*Annotation, f Filter, after *Position, desc bool, limit int) []*Annotation {
	var out []*Annotation
	take := func(a *Annotation) bool {
		if f.matches(a) {
			out = append(out, a)
		}
		return limit <= 0 || len(out) < limit
	}
	if desc {
		end := len(list)
		if after != nil {
			end, _ = slices.BinarySearchFunc(list, *after, byOrder)
		}
		for i := end - 1; i >= 0 && take(list[i]); i-- {
		}
		return out
	}
	start := 0
	if after != nil {
		i, found := slices.BinarySearchFunc(list, *after, byOrder)
		if found {
			i++
		}
		start = i
	}
	for i := start; i < len(list) && take(list[i]); i++ {
	}
	return out
}

// matches reports whether the annotation passes the filter's fields other than Documents.
func (f Filter) matches(a *Annotation) bool {
	switch {
	case len(f.IDs) > 0 && !slices.Contains(f.IDs, a.ID),
		len(f.LocationIDs) > 0 && (a.Location == nil || !slices.Contains(f.LocationIDs, a.Location.ID)),
		len(f.StatusIDs) > 0 && !slices.Contains(f.StatusIDs, a.Status.ID),
		len(f.UserIDs) > 0 && !slices.ContainsFunc(a.Authors, func(u string) bool { return slices.Contains(f.UserIDs, u) }),
		f.UpdatedAfter > 0 && a.LastUpdated <= f.UpdatedAfter,
		f.UpdatedBefore > 0 && a.LastUpdated >= f.UpdatedBefore:
		return false
	}
	return true
}

func (m *MemoryStore) Swap(_ context.Context, old, next *Annotation) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.byKey[keyOf(old)]
	switch {
	case cur == nil || cur.Ref != old.Ref:
		return ErrNotFound
	case cur.Version != old.Version:
		return ErrConflict
	}
	m.unplace(cur)
	c := next.clone()
	m.byKey[keyOf(c)] = c
	m.place(c)
	return nil
}

func (m *MemoryStore) Delete(_ context.Context, a *Annotation) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.byKey[keyOf(a)]
	switch {
	case cur == nil || cur.Ref != a.Ref:
		return ErrNotFound
	case cur.Version != a.Version:
		return ErrConflict
	}
	m.remove(cur)
	return nil
}

func (m *MemoryStore) remove(a *Annotation) {
	delete(m.byKey, keyOf(a))
	m.unplace(a)
}

// removeWhere removes and returns the annotations that match.
func (m *MemoryStore) removeWhere(match func(*Annotation) bool) []*Annotation {
	var gone []*Annotation
	for _, a := range m.byKey {
		if match(a) {
			gone = append(gone, a)
		}
	}
	for _, a := range gone {
		m.remove(a)
	}
	return gone
}

func (m *MemoryStore) DeleteAtLocation(_ context.Context, apiKey, orgID, docID string, loc Location) ([]*Annotation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.removeWhere(func(a *Annotation) bool {
		return a.APIKey == apiKey && (orgID == "" || a.OrganizationID == orgID) && (docID == "" || a.DocumentID == docID) && loc.holds(a.Location)
	}), nil
}

// holds reports whether a thread's location is this one: by id when it has one, else by name.
func (l Location) holds(at *Location) bool {
	if at == nil {
		return false
	}
	if l.ID != "" {
		return at.ID == l.ID
	}
	return l.Name != "" && at.Name == l.Name
}

// Count reads each document's tally: its cost is the documents and statuses asked, not the
// threads (a scan of 30 documents of 10,000 threads took 3.9 ms: docs/benchmarks.md).
func (m *MemoryStore) Count(_ context.Context, docs []Ref, statusIDs []string, userID string) ([]int, []int, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	total, unread := make([]int, len(docs)), make([]int, len(docs))
	for i, doc := range docs {
		t := m.tallies[doc]
		if t == nil {
			continue
		}
		read := 0
		if len(statusIDs) == 0 {
			total[i], read = t.total, t.read[userID]
		}
		for j, s := range statusIDs {
			if slices.Contains(statusIDs[:j], s) {
				continue // asked twice, counted once
			}
			total[i] += t.byStatus[s]
			read += t.readIn[statusReader{s, userID}]
		}
		if userID != "" {
			unread[i] = total[i] - read
		}
	}
	return total, unread, nil
}

// tally is what Count reads of a document: how many threads it holds, in each status, and
// how many of them each user has read (ReadBy), also in each status. The store keeps it with
// the document's sorted list (place, unplace) and MarkRead, under its lock.
type tally struct {
	total    int
	byStatus map[string]int
	read     map[string]int
	readIn   map[statusReader]int
}

type statusReader struct{ status, user string }

func (m *MemoryStore) tallyOf(r Ref) *tally {
	t := m.tallies[r]
	if t == nil {
		t = &tally{byStatus: map[string]int{}, read: map[string]int{}, readIn: map[statusReader]int{}}
		m.tallies[r] = t
	}
	return t
}

// add counts a thread in (delta 1) or out (-1); a user in its ReadBy twice has read it once.
func (t *tally) add(a *Annotation, delta int) {
	t.total += delta
	bump(t.byStatus, a.Status.ID, delta)
	for i, u := range a.ReadBy {
		if !slices.Contains(a.ReadBy[:i], u) {
			t.addRead(a, u, delta)
		}
	}
}

// addRead counts the user's read of the thread in or out.
func (t *tally) addRead(a *Annotation, user string, delta int) {
	bump(t.read, user, delta)
	bump(t.readIn, statusReader{a.Status.ID, user}, delta)
}

// bump adds delta to m[k], dropping the key at zero so that a tally holds only what is there.
func bump[K comparable](m map[K]int, k K, delta int) {
	if n := m[k] + delta; n != 0 {
		m[k] = n
	} else {
		delete(m, k)
	}
}

func (m *MemoryStore) MarkRead(_ context.Context, doc Ref, userID string, ids []string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var found []string
	for _, id := range ids {
		a := m.byKey[annKey{doc.APIKey, doc.OrganizationID, doc.OrgGen, id}]
		if a == nil || a.Ref != doc {
			continue
		}
		found = append(found, id)
		if !slices.Contains(a.ReadBy, userID) && len(a.ReadBy) < maxReaders {
			// Copied, not appended in place: readers hold clones, but a clone shares nothing
			// only if the stored slice is never written in place.
			a.ReadBy = append(slices.Clip(a.ReadBy), userID)
			m.tallies[a.Ref].addRead(a, userID, 1)
		}
	}
	return found, nil
}

func (m *MemoryStore) DeleteOrganization(_ context.Context, apiKey, orgID, gen string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.removeWhere(func(a *Annotation) bool {
		return a.APIKey == apiKey && a.OrganizationID == orgID && (a.OrgGen == gen || a.OrgGen == "")
	})
	m.dropFeeds(func(k feedKey) bool {
		return k.apiKey == apiKey && k.org == orgID && (k.orgGen == gen || k.orgGen == "")
	})
	return nil
}

func (m *MemoryStore) DeleteDocument(_ context.Context, apiKey, orgID, docID, gen string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	gone := m.removeWhere(func(a *Annotation) bool {
		return a.APIKey == apiKey && a.OrganizationID == orgID && a.DocumentID == docID && (a.DocGen == gen || a.DocGen == "")
	})
	if gen != "" {
		m.dropFeeds(func(k feedKey) bool { return k.apiKey == apiKey && k.org == orgID && k.docGen == gen })
	}
	for _, a := range gone {
		delete(m.feeds, feedOf(a.Ref))
	}
	return nil
}

func (m *MemoryStore) MoveDocument(_ context.Context, apiKey, orgID, from, to, gen string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	moved := m.removeWhere(func(a *Annotation) bool {
		return a.APIKey == apiKey && a.OrganizationID == orgID && a.DocumentID == from && (a.DocGen == gen || a.DocGen == "")
	})
	for _, a := range moved {
		c := a.clone()
		c.DocumentID = to
		m.byKey[keyOf(c)] = c
		m.place(c)
	}
	return nil
}

func (m *MemoryStore) Ping(context.Context) error { return nil }

// clone copies the annotation and everything it holds, so the store and its callers share
// nothing.
func (a *Annotation) clone() *Annotation {
	c := *a
	if a.Location != nil {
		l := *a.Location
		c.Location = &l
	}
	if a.Priority != nil {
		p := *a.Priority
		c.Priority = &p
	}
	if a.AssignedTo != nil {
		u := *a.AssignedTo
		c.AssignedTo = &u
	}
	c.Authors, c.ReadBy = slices.Clone(a.Authors), slices.Clone(a.ReadBy)
	c.Comments = make([]Comment, len(a.Comments))
	for i, cm := range a.Comments {
		cm.Mentions = slices.Clone(cm.Mentions)
		cm.Reactions = slices.Clone(cm.Reactions)
		for j, r := range cm.Reactions {
			cm.Reactions[j].UserIDs = slices.Clone(r.UserIDs)
		}
		c.Comments[i] = cm
	}
	return &c
}

// feedKey names a document incarnation's feed: by generation, so a migration keeps it.
type feedKey struct{ apiKey, org, orgGen, docGen string }

func feedOf(r Ref) feedKey { return feedKey{r.APIKey, r.OrganizationID, r.OrgGen, r.DocGen} }

// feed is a document's changes: changes[i] has Seq base+i.
type feed struct {
	base    int64
	changes []Change
}

func (m *MemoryStore) AppendChange(_ context.Context, doc Ref, c Change) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.feeds[feedOf(doc)]
	if f == nil {
		f = &feed{base: 1}
		m.feeds[feedOf(doc)] = f
	}
	c.Seq = f.base + int64(len(f.changes))
	f.changes = append(f.changes, c)
	if drop := len(f.changes) - FeedWindow; drop > 0 {
		f.changes = slices.Delete(f.changes, 0, drop)
		f.base += int64(drop)
	}
	return c.Seq, nil
}

func (m *MemoryStore) Changes(_ context.Context, doc Ref, after int64, limit int) ([]Change, int64, int64, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	f := m.feeds[feedOf(doc)]
	if f == nil || len(f.changes) == 0 {
		return nil, 0, 0, nil
	}
	newest := f.base + int64(len(f.changes)) - 1
	start := max(after+1-f.base, 0)
	if start >= int64(len(f.changes)) {
		return nil, f.base, newest, nil
	}
	out := f.changes[start:]
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return slices.Clone(out), f.base, newest, nil
}

// dropFeeds removes the feeds that match.
func (m *MemoryStore) dropFeeds(match func(feedKey) bool) {
	for k := range m.feeds {
		if match(k) {
			delete(m.feeds, k)
		}
	}
}
