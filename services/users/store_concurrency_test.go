package users

import (
	"context"
	"fmt"
	"testing"

	"github.com/collab/collab/internal/racetest"
)

// runConcurrencySuite is the part of the conformance suite that proves MongoDB's
// single-document atomicity, which Update Users relies on: concurrent updates of one user, each
// to a field of its own, all land, whether the user exists or the updates create it (issue
// 20, finding 1; the embedded server lost them).
func runConcurrencySuite(t *testing.T, newStore func(t *testing.T) Store) {
	ctx := context.Background()
	t.Run("concurrent updates of one user's fields all land", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		for round := range 10 {
			id := fmt.Sprint("u", round)
			if round%2 == 0 { // odd rounds: the updates create the user
				must(t, s.UpsertUser(ctx, "k1", UserPatch{UserID: id, Name: ptr("old"), Email: ptr("old@example.com"), PhotoURL: ptr("old")}))
			}
			name, email, photo := fmt.Sprint("name ", round), fmt.Sprintf("u%d@example.com", round), fmt.Sprintf("https://x.example/%d.png", round)
			racetest.Together(
				func() { fail(t, s.UpsertUser(ctx, "k1", UserPatch{UserID: id, Name: &name})) },
				func() { fail(t, s.UpsertUser(ctx, "k1", UserPatch{UserID: id, Email: &email})) },
				func() { fail(t, s.UpsertUser(ctx, "k1", UserPatch{UserID: id, PhotoURL: &photo})) },
			)
			got, err := s.Users(ctx, "k1", []string{id})
			must(t, err)
			if want := (User{UserID: id, Name: name, Email: email, PhotoURL: photo}); len(got) != 1 || *got[0] != want {
				t.Fatalf("round %d: an acknowledged update was lost: %s, want %+v", round, describe(got), want)
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

func describe(users []*User) string {
	s := ""
	for _, u := range users {
		s += fmt.Sprintf("%+v ", *u)
	}
	return s
}
