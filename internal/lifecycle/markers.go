package lifecycle

import (
	"context"
	"fmt"
	"sync"
)

// Markers records deleted and migrated generations for writers that check after writing
// (Settle): the marker part of Marked. MemoryMarkers and MongoMarkers implement it, and the
// stores of activity, memory and crdt embed one of them instead of each keeping a copy.
type Markers interface {
	// Bury records that a generation of an organization or document (kind) is deleted; Buried
	// reports whether it is. Writers check after writing under a generation (Settle), so a
	// record written while its organization or document was being deleted does not survive it.
	// Bury refuses a kind other than KindOrganization and KindDocument.
	Bury(ctx context.Context, apiKey, orgID, kind, id, gen string) error
	Buried(ctx context.Context, apiKey, orgID, kind, id, gen string) (bool, error)
	// MarkMoved records that a document incarnation was migrated to another id; MovedTo tells
	// where ("" when it was not). Writers follow it after writing (Settle), so a record written
	// from an event published before the migration ends up under the new id too. A later mark
	// of the same incarnation replaces an earlier one (a document migrated away, back, and away
	// again).
	MarkMoved(ctx context.Context, apiKey, orgID, docID, gen, to string) error
	MovedTo(ctx context.Context, apiKey, orgID, docID, gen string) (string, error)
}

// Layout says what names a buried generation in a marker store.
type Layout int

const (
	// ByID names a buried generation by its kind, id and generation: the layout of the
	// activity and memory stores, whose writers hold the id the generation was deleted under
	// (Settle follows migrations before it asks).
	ByID Layout = iota
	// ByGeneration names it by its kind and generation alone: the layout of the crdt store,
	// which keys its data by generation, so a writer may hold an id the document had before
	// a migration. Generations are random, so a generation alone names one incarnation.
	// Migration marks stay keyed by id and generation in both layouts.
	ByGeneration
)

// kindMoved is the kind under which migration marks live beside the buried generations.
const kindMoved = "moved"

// buryKind refuses what is not a kind of buried generation: a "moved" burial would read as a
// migration mark and the other way round.
func buryKind(kind string) error {
	if kind != KindOrganization && kind != KindDocument {
		return fmt.Errorf("lifecycle markers: %q is not a kind of buried generation", kind)
	}
	return nil
}

// markerKey names one marker in MemoryMarkers.
type markerKey struct{ apiKey, orgID, kind, id, gen string }

// MemoryMarkers keeps markers in the process, guarded by its own mutex: a store embeds a
// pointer to one (NewMemoryMarkers).
type MemoryMarkers struct {
	layout Layout
	mu     sync.RWMutex
	buried map[markerKey]struct{}
	moved  map[markerKey]string
}

// NewMemoryMarkers returns an empty MemoryMarkers with the layout.
func NewMemoryMarkers(layout Layout) *MemoryMarkers {
	return &MemoryMarkers{layout: layout, buried: map[markerKey]struct{}{}, moved: map[markerKey]string{}}
}

func (m *MemoryMarkers) buriedKey(apiKey, orgID, kind, id, gen string) markerKey {
	if m.layout == ByGeneration {
		id = ""
	}
	return markerKey{apiKey, orgID, kind, id, gen}
}

func (m *MemoryMarkers) Bury(_ context.Context, apiKey, orgID, kind, id, gen string) error {
	if err := buryKind(kind); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.buried[m.buriedKey(apiKey, orgID, kind, id, gen)] = struct{}{}
	return nil
}

func (m *MemoryMarkers) Buried(_ context.Context, apiKey, orgID, kind, id, gen string) (bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	_, ok := m.buried[m.buriedKey(apiKey, orgID, kind, id, gen)]
	return ok, nil
}

func (m *MemoryMarkers) MarkMoved(_ context.Context, apiKey, orgID, docID, gen, to string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.moved[markerKey{apiKey, orgID, kindMoved, docID, gen}] = to
	return nil
}

func (m *MemoryMarkers) MovedTo(_ context.Context, apiKey, orgID, docID, gen string) (string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.moved[markerKey{apiKey, orgID, kindMoved, docID, gen}], nil
}
