package lifecycle

import (
	"context"
	"slices"
	"testing"

	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"
)

// markedLog is a Marked store that keeps its markers and logs the sweeps and moves.
type markedLog struct {
	buried map[string]bool   // kind/id/gen
	moved  map[string]string // doc/gen -> to
	log    []string
}

func (m *markedLog) DeleteOrganization(_ context.Context, _, org, gen string) error {
	m.log = append(m.log, "delete org "+org+"@"+gen)
	return nil
}

func (m *markedLog) DeleteDocument(_ context.Context, _, _, doc, gen string) error {
	m.log = append(m.log, "delete doc "+doc+"@"+gen)
	return nil
}

func (m *markedLog) MoveDocument(_ context.Context, _, _, from, to, gen string) error {
	m.log = append(m.log, "move "+from+"@"+gen+" to "+to)
	return nil
}

func (m *markedLog) Bury(_ context.Context, _, _, kind, id, gen string) error {
	m.buried[kind+"/"+id+"/"+gen] = true
	return nil
}

func (m *markedLog) Buried(_ context.Context, _, _, kind, id, gen string) (bool, error) {
	return m.buried[kind+"/"+id+"/"+gen], nil
}

func (m *markedLog) MarkMoved(_ context.Context, _, _, doc, gen, to string) error {
	m.moved[doc+"/"+gen] = to
	return nil
}

func (m *markedLog) MovedTo(_ context.Context, _, _, doc, gen string) (string, error) {
	return m.moved[doc+"/"+gen], nil
}

func newMarkedLog() *markedLog {
	return &markedLog{buried: map[string]bool{}, moved: map[string]string{}}
}

// Settle sweeps a deleted organization's or document's generation, follows a chain of
// migrations to its end (and a deletion at its end), and stops after maxMoves on a loop.
func TestSettle(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		prepare func(m *markedLog)
		want    Gone
		log     []string
	}{
		{"nothing happened", func(*markedLog) {}, NothingGone, nil},
		{"organization deleted", func(m *markedLog) { m.buried["organization/o/g1"] = true }, OrganizationGone, []string{"delete org o@g1"}},
		{"document deleted", func(m *markedLog) { m.buried["document/d/g2"] = true }, DocumentGone, []string{"delete doc d@g2"}},
		{"migrated twice", func(m *markedLog) { m.moved["d/g2"] = "e"; m.moved["e/g2"] = "f" }, NothingGone, []string{"move d@g2 to e", "move e@g2 to f"}},
		{"migrated, then deleted", func(m *markedLog) { m.moved["d/g2"] = "e"; m.buried["document/e/g2"] = true }, DocumentGone, []string{"move d@g2 to e", "delete doc e@g2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newMarkedLog()
			c.prepare(m)
			gone, err := Settle(ctx, m, "k", "o", "g1", "d", "g2")
			if err != nil || gone != c.want || !slices.Equal(m.log, c.log) {
				t.Fatalf("gone %v, log %q (%v), want %v %q", gone, m.log, err, c.want, c.log)
			}
		})
	}
	loop := newMarkedLog()
	loop.moved["d/g2"], loop.moved["e/g2"] = "e", "d"
	if gone, err := Settle(ctx, loop, "k", "o", "g1", "d", "g2"); err != nil || gone != NothingGone || len(loop.log) != maxMoves {
		t.Fatalf("a loop of migrations: %v, %d moves (%v), want %d", gone, len(loop.log), err, maxMoves)
	}
}

// MarkedHandlers set the marker, then change the records, for each kind they follow.
func TestMarkedHandlers(t *testing.T) {
	ctx := context.Background()
	m := newMarkedLog()
	h := MarkedHandlers(m)
	for _, p := range []any{
		&lifecyclev1.OrganizationDeleted{},
		&lifecyclev1.DocumentsDeleted{DocumentIds: []string{"d1", "d2"}, Generations: []string{"g1", ""}},
		&lifecyclev1.DocumentMigrated{FromDocumentId: "d3", ToDocumentId: "d4", Generation: "g3"},
		&lifecyclev1.UsersRemoved{UserIds: []string{"u"}}, // not followed
	} {
		if _, err := Dispatch(ctx, scoped(p), h); err != nil {
			t.Fatal(err)
		}
	}
	wantLog := []string{"delete org o@og", "delete doc d1@g1", "delete doc d2@", "move d3@g3 to d4"}
	if !slices.Equal(m.log, wantLog) || len(m.buried) != 2 || !m.buried["organization/o/og"] || !m.buried["document/d1/g1"] || m.moved["d3/g3"] != "d4" {
		t.Fatalf("log %q, buried %v, moved %v; want log %q", m.log, m.buried, m.moved, wantLog)
	}
}
