package access

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/collab/collab/internal/racetest"
)

// runConcurrencySuite is the part of the conformance suite that proves MongoDB's
// single-document atomicity, which a conditional write relies on: a grant put (replacing a
// lapsed one) while another call puts a grant on the same identity only if none is in effect is
// kept whichever comes first, because the conditional write either sees the lapsed grant and
// is replaced after it, or sees the new one and leaves it (issue 20, finding 1; the embedded
// server let the conditional write, applied to the document it had read, overwrite the grant).
func runConcurrencySuite(t *testing.T, newStore func(t *testing.T) Store) {
	ctx := context.Background()
	t.Run("a grant put while another is put if absent is kept", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		now := t0
		for round := range 20 {
			user := fmt.Sprint("u", round)
			lapsed := Grant{OrganizationID: "o", ResourceType: ResourceDocument, ResourceID: "d", UserID: user, AccessRole: "viewer", ExpiresAt: now.Add(-time.Hour)}
			if err := s.PutGrants(ctx, "k1", []Grant{lapsed}); err != nil {
				t.Fatal(err)
			}
			put, ifAbsent := lapsed, lapsed
			put.AccessRole, put.ExpiresAt = "editor", time.Time{}
			ifAbsent.AccessRole = "commenter"
			ifAbsent.ExpiresAt = time.Time{}
			racetest.Together(
				func() { fail(t, s.PutGrants(ctx, "k1", []Grant{put})) },
				func() { fail(t, s.PutGrantsIfAbsent(ctx, "k1", []Grant{ifAbsent}, now)) },
			)
			got, err := s.Grants(ctx, "k1", "o", []string{user}, now)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].AccessRole != "editor" {
				t.Fatalf("round %d: the grant put was lost: %+v", round, got)
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
