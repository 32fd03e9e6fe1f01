package activity

import (
	"context"
	"fmt"
	"testing"

	"github.com/collab/collab/internal/racetest"
)

// runConcurrencySuite is the part of the conformance suite that proves MongoDB's
// single-document atomicity, which Update Activity Logs relies on: concurrent updates of one
// record, each to a field of its own, all land (issue 20, finding 1; the embedded server lost
// 16 of 40).
func runConcurrencySuite(t *testing.T, newStore func(t *testing.T) Store) {
	ctx := context.Background()
	t.Run("concurrent updates of one record's fields all land", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		for round := range 10 {
			id := fmt.Sprint("r", round)
			insert(t, s, rec(id, int64(round)))
			v := func(field string) *string { x := fmt.Sprintf(`{"%s":%d}`, field, round); return &x }
			want := Patch{Changes: v("changes"), EntityData: v("entity"), EntityTargetData: v("target"),
				DisplayMessageTemplate: v("template"), DisplayMessageTemplateData: v("data"), ActionIcon: v("icon")}
			racetest.Together(
				func() { fail(t, s.Update(ctx, "k1", "o1", id, Patch{Changes: want.Changes})) },
				func() { fail(t, s.Update(ctx, "k1", "o1", id, Patch{EntityData: want.EntityData})) },
				func() { fail(t, s.Update(ctx, "k1", "o1", id, Patch{EntityTargetData: want.EntityTargetData})) },
				func() {
					fail(t, s.Update(ctx, "k1", "o1", id, Patch{DisplayMessageTemplate: want.DisplayMessageTemplate}))
				},
				func() {
					fail(t, s.Update(ctx, "k1", "o1", id, Patch{DisplayMessageTemplateData: want.DisplayMessageTemplateData}))
				},
				func() { fail(t, s.Update(ctx, "k1", "o1", id, Patch{ActionIcon: want.ActionIcon})) },
			)
			got := getOne(t, s, id)
			if got == nil || got.Changes != *want.Changes || got.EntityData != *want.EntityData || got.EntityTargetData != *want.EntityTargetData ||
				got.DisplayMessageTemplate != *want.DisplayMessageTemplate || got.DisplayMessageTemplateData != *want.DisplayMessageTemplateData ||
				got.ActionIcon != *want.ActionIcon {
				t.Fatalf("round %d: an acknowledged update was lost: %+v", round, got)
			}
		}
	})
}

// fail fails the test, from any goroutine, when err is not nil.
func fail(t *testing.T, err error) {
	if err != nil {
		t.Error(err)
	}
}

// runReplicaSuite proves the same across processes, for the config the store's in-process lock
// guards: two stores on the same data (the memory store's one instance twice, or two MongoDB
// stores on one database) update one config's fields at once, and every update lands.
func runReplicaSuite(t *testing.T, newReplicas func(t *testing.T) [2]Store) {
	ctx := context.Background()
	t.Run("concurrent updates of one config's fields all land across replicas", func(t *testing.T) {
		t.Parallel()
		r := newReplicas(t)
		on, triggers := true, map[string]map[string]bool{"comment": {"add": false}}
		fail := func(_ any, err error) {
			if err != nil {
				t.Error(err)
			}
		}
		for round := range 10 {
			key := fmt.Sprint("k", round)
			if _, err := r[0].UpdateConfig(ctx, key, ConfigPatch{}, t0); err != nil { // created, disabled
				t.Fatal(err)
			}
			racetest.Together(
				func() { fail(r[0].UpdateConfig(ctx, key, ConfigPatch{Enabled: &on}, t0)) },
				func() { fail(r[1].UpdateConfig(ctx, key, ConfigPatch{Immutable: &on}, t0)) },
				func() { fail(r[0].UpdateConfig(ctx, key, ConfigPatch{Triggers: triggers}, t0)) },
			)
			c, err := r[1].Config(ctx, key)
			must(t, err)
			if !c.Enabled || c.Immutable == nil || !*c.Immutable || c.Triggers["comment"] == nil || c.Triggers["comment"]["add"] {
				t.Fatalf("round %d: an acknowledged update was lost: %+v", round, c)
			}
		}
	})
}
