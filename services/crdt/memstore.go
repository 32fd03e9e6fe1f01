package crdt

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/collab/collab/internal/ids"
	"github.com/collab/collab/internal/lifecycle"
)

// MemoryStore keeps everything in the process, guarded by one mutex, following the same rules
// as MongoStore (a snapshot is immutable and replaces the entries it covers; a compaction merges
// outside the lock, like a replica would, and writes its snapshot only if it is still news).
// Byte slices are copied in and out, so callers never share memory with the store.
type MemoryStore struct {
	// The generation markers (Bury, Buried), by generation (lifecycle.ByGeneration), under
	// their own lock.
	*lifecycle.MemoryMarkers

	mu      sync.RWMutex
	metas   map[editorKey]*memMeta
	streams map[string]*memStream
}

// editorKey is what keys an editor's record: the document incarnation by its generation
// (docKey), so a migration leaves the key as it is.
type editorKey struct{ apiKey, orgID, orgGen, doc, editorID string }

type memMeta struct {
	meta   Meta
	base   []byte // nil once a snapshot holds it
	baseAt int64
}

type memStream struct {
	log       []Update      // ascending by Seq
	snapshots []memSnapshot // ascending by upTo
}

type memSnapshot struct {
	upTo, at int64
	data     []byte
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{MemoryMarkers: lifecycle.NewMemoryMarkers(lifecycle.ByGeneration), metas: map[editorKey]*memMeta{}, streams: map[string]*memStream{}}
}

// docKey names a document incarnation within its organization: its generation, or for a
// document without one (made before generations) its id after a separator no generation holds.
func (e Editor) docKey() string {
	if e.DocGen != "" {
		return e.DocGen
	}
	return "\x1e" + e.DocumentID
}

func keyOf(e Editor) editorKey {
	return editorKey{e.APIKey, e.OrganizationID, e.OrgGen, e.docKey(), e.EditorID}
}

func (s *MemoryStore) Create(_ context.Context, m *Meta, first []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := keyOf(m.Editor)
	if _, ok := s.metas[k]; ok {
		return ErrExists
	}
	if m.Stream == "" {
		m.Stream = ids.Random(24)
	}
	s.metas[k] = &memMeta{meta: *m, base: slices.Clone(first), baseAt: m.CreatedAt}
	return nil
}

func (s *MemoryStore) Meta(_ context.Context, e Editor) (*Meta, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	mm, ok := s.metas[keyOf(e)]
	if !ok {
		return nil, ErrNotFound
	}
	m := mm.meta
	return &m, nil
}

func (s *MemoryStore) Load(_ context.Context, e Editor) (*State, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	mm, ok := s.metas[keyOf(e)]
	if !ok {
		return nil, ErrNotFound
	}
	return s.state(mm), nil
}

// state copies an editor's state out; the caller holds the lock.
func (s *MemoryStore) state(mm *memMeta) *State {
	st := &State{Meta: mm.meta, Base: slices.Clone(mm.base), BaseAt: mm.baseAt}
	str := s.streams[mm.meta.Stream]
	if str == nil {
		return st
	}
	if n := len(str.snapshots); n > 0 {
		snap := str.snapshots[n-1]
		st.Base, st.BaseSeq, st.BaseAt = slices.Clone(snap.data), snap.upTo, snap.at
	}
	for _, u := range str.log {
		if u.Seq > st.BaseSeq {
			u.Data = slices.Clone(u.Data)
			st.Updates = append(st.Updates, u)
		}
	}
	return st
}

func (s *MemoryStore) List(_ context.Context, doc Editor, limit int) ([]*Meta, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []*Meta{}
	for k, mm := range s.metas {
		if k.apiKey == doc.APIKey && k.orgID == doc.OrganizationID && k.orgGen == doc.OrgGen && k.doc == doc.docKey() {
			m := mm.meta
			out = append(out, &m)
		}
	}
	slices.SortFunc(out, func(a, b *Meta) int { return cmp.Compare(a.EditorID, b.EditorID) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (s *MemoryStore) Append(_ context.Context, stream string, u Update) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	str := s.streams[stream]
	if str == nil {
		str = &memStream{}
		s.streams[stream] = str
	}
	last := int64(0)
	if n := len(str.log); n > 0 {
		last = str.log[n-1].Seq
	}
	if n := len(str.snapshots); n > 0 {
		last = max(last, str.snapshots[n-1].upTo)
	}
	u.Seq, u.Data = last+1, slices.Clone(u.Data)
	str.log = append(str.log, u)
	return u.Seq, nil
}

func (s *MemoryStore) Tail(_ context.Context, stream string, after int64, limit int) ([]Update, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []Update{}
	str := s.streams[stream]
	if str == nil {
		return out, false, nil
	}
	reload := len(str.snapshots) > 0 && str.snapshots[len(str.snapshots)-1].upTo > after
	for _, u := range str.log {
		if u.Seq > after {
			if limit > 0 && len(out) == limit {
				break
			}
			u.Data = slices.Clone(u.Data)
			out = append(out, u)
		}
	}
	return out, reload, nil
}

func (s *MemoryStore) Compact(ctx context.Context, e Editor, c Compaction, merge MergeFunc) (bool, error) {
	st, err := s.Load(ctx, e)
	if err != nil {
		return false, err
	}
	if !c.due(st) {
		return false, nil
	}
	// Merged outside the lock, as another replica would: appends go on meanwhile.
	merged, err := merge(st.Parts()...)
	if err != nil {
		return false, err
	}
	upTo, at := st.LastSeq(), st.LastUpdate()
	s.mu.Lock()
	defer s.mu.Unlock()
	str := s.streams[st.Meta.Stream]
	if str == nil { // the editor was deleted meanwhile
		return false, nil
	}
	if n := len(str.snapshots); n > 0 && str.snapshots[n-1].upTo >= upTo {
		return false, nil // another compaction came first
	}
	str.snapshots = []memSnapshot{{upTo: upTo, at: at, data: merged}}
	str.log = slices.DeleteFunc(str.log, func(u Update) bool { return u.Seq <= upTo })
	if mm := s.metas[keyOf(e)]; mm != nil && mm.meta.Stream == st.Meta.Stream {
		mm.base = nil
	}
	return true, nil
}

func (s *MemoryStore) DeleteEditor(_ context.Context, e Editor) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := keyOf(e)
	mm, ok := s.metas[k]
	if !ok {
		return false, nil
	}
	delete(s.streams, mm.meta.Stream)
	delete(s.metas, k)
	return true, nil
}

func (s *MemoryStore) DeleteStream(_ context.Context, stream string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.streams, stream)
	return nil
}

// deleteWhere removes the editors whose key gone reports; the caller holds the lock.
func (s *MemoryStore) deleteWhere(gone func(editorKey) bool) {
	for k, mm := range s.metas {
		if gone(k) {
			delete(s.streams, mm.meta.Stream)
			delete(s.metas, k)
		}
	}
}

func (s *MemoryStore) DeleteDocument(_ context.Context, doc Editor) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deleteWhere(func(k editorKey) bool {
		return k.apiKey == doc.APIKey && k.orgID == doc.OrganizationID && k.doc == doc.docKey()
	})
	return nil
}

func (s *MemoryStore) DeleteOrganization(_ context.Context, apiKey, orgID, gen string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deleteWhere(func(k editorKey) bool { return k.apiKey == apiKey && k.orgID == orgID && k.orgGen == gen })
	return nil
}

func (s *MemoryStore) MoveDocument(_ context.Context, apiKey, orgID, from, to, gen string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if gen == "" {
		return nil // keyed by id: a document without a generation does not follow a migration
	}
	for k, mm := range s.metas {
		if k.apiKey == apiKey && k.orgID == orgID && k.doc == gen && mm.meta.DocumentID == from {
			mm.meta.DocumentID = to
		}
	}
	return nil
}

func (s *MemoryStore) Ping(context.Context) error { return nil }
