package access

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/collab/collab/internal/testkit/mongotest"
)

func TestMain(m *testing.M) { os.Exit(mongotest.Run(m)) }

// The conformance suite: every Store implementation must pass it unchanged.
func TestMemoryStore(t *testing.T) {
	runStoreSuite(t, func(t *testing.T) Store { return NewMemoryStore() })
}

func TestMongoStore(t *testing.T) {
	runStoreSuite(t, func(t *testing.T) Store {
		s, err := NewMongoStore(context.Background(), mongotest.Connect(t).Database("access"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// A restarted process opens the same database again: index creation must accept what exists
// and the data must be there.
func TestMongoStoreReopens(t *testing.T) {
	ctx := context.Background()
	db := mongotest.Connect(t).Database("access")
	first, err := NewMongoStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.PutGrants(ctx, "k1", []Grant{orgGrant("o", "u", "editor")}); err != nil {
		t.Fatal(err)
	}
	second, err := NewMongoStore(ctx, db)
	if err != nil {
		t.Fatalf("second open: %v", err)
	}
	if got, err := second.Grants(ctx, "k1", "o", []string{"u"}, t0); err != nil || len(got) != 1 {
		t.Fatalf("after reopening: %v %v", got, err)
	}
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC)

func docGrant(org, doc, user, role string) Grant {
	return Grant{OrganizationID: org, ResourceType: ResourceDocument, ResourceID: doc, UserID: user, AccessRole: role}
}

func folderGrant(org, folder, user, role string) Grant {
	return Grant{OrganizationID: org, ResourceType: ResourceFolder, ResourceID: folder, UserID: user, AccessRole: role}
}

func orgGrant(org, user, role string) Grant {
	return Grant{OrganizationID: org, ResourceType: ResourceOrganization, ResourceID: org, UserID: user, AccessRole: role}
}

func expiring(g Grant, at time.Time) Grant { g.ExpiresAt = at; return g }

func sortGrants(gs []Grant) []Grant {
	out := slices.Clone(gs)
	slices.SortFunc(out, func(a, b Grant) int {
		return cmp.Or(cmp.Compare(a.UserID, b.UserID), cmp.Compare(a.ResourceType, b.ResourceType), cmp.Compare(a.ResourceID, b.ResourceID))
	})
	return out
}

func sameGrants(t *testing.T, what string, got, want []Grant) {
	t.Helper()
	got, want = sortGrants(got), sortGrants(want)
	if len(got) != len(want) {
		t.Fatalf("%s: got %d grants %+v, want %+v", what, len(got), got, want)
	}
	for i := range got {
		if got[i] != want[i] && !(got[i].Ref() == want[i].Ref() && got[i].AccessRole == want[i].AccessRole && got[i].ExpiresAt.Equal(want[i].ExpiresAt)) {
			t.Fatalf("%s: grant %d is %+v, want %+v", what, i, got[i], want[i])
		}
	}
}

func runStoreSuite(t *testing.T, newStore func(t *testing.T) Store) {
	ctx := context.Background()
	grants := func(t *testing.T, s Store, apiKey, org string, users []string, now time.Time) []Grant {
		t.Helper()
		gs, err := s.Grants(ctx, apiKey, org, users, now)
		if err != nil {
			t.Fatal(err)
		}
		return gs
	}
	put := func(t *testing.T, s Store, apiKey string, gs ...Grant) {
		t.Helper()
		if err := s.PutGrants(ctx, apiKey, gs); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("grants are stored, replaced and read back with their expiry", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		exp := t0.Add(time.Hour)
		put(t, s, "k1",
			orgGrant("o", "u1", "editor"),
			expiring(docGrant("o", "d", "u1", "viewer"), exp),
			folderGrant("o", "f", "u2", "editor"),
		)
		got := grants(t, s, "k1", "o", []string{"u1", "u2", "nobody"}, t0)
		sameGrants(t, "read", got, []Grant{orgGrant("o", "u1", "editor"), expiring(docGrant("o", "d", "u1", "viewer"), exp), folderGrant("o", "f", "u2", "editor")})
		for _, g := range got {
			if g.ResourceType == ResourceDocument && (!g.ExpiresAt.Equal(exp) || g.ExpiresAt.Location() != time.UTC) {
				t.Fatalf("expiry read back as %v, stored %v", g.ExpiresAt, exp)
			}
			if g.ResourceType != ResourceDocument && !g.ExpiresAt.IsZero() {
				t.Fatalf("permanent grant read back with expiry %v", g.ExpiresAt)
			}
		}
		// One grant per identity: a second write replaces role and expiry.
		put(t, s, "k1", docGrant("o", "d", "u1", "editor"), expiring(orgGrant("o", "u1", "viewer"), exp))
		sameGrants(t, "replaced", grants(t, s, "k1", "o", []string{"u1"}, t0),
			[]Grant{docGrant("o", "d", "u1", "editor"), expiring(orgGrant("o", "u1", "viewer"), exp)})
		if got := grants(t, s, "k1", "o", []string{"u2"}, t0); len(got) != 1 {
			t.Fatalf("only u2's grants: %+v", got)
		}
		if got := grants(t, s, "k1", "o", []string{}, t0); len(got) != 0 {
			t.Fatalf("no users, grants %+v", got)
		}
	})

	t.Run("lapsed grants are left out", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		exp := t0.Add(time.Hour)
		put(t, s, "k1", expiring(docGrant("o", "d", "u", "editor"), exp), docGrant("o", "d2", "u", "viewer"))
		if got := grants(t, s, "k1", "o", []string{"u"}, exp.Add(-time.Millisecond)); len(got) != 2 {
			t.Fatalf("just before expiry: %+v", got)
		}
		sameGrants(t, "at expiry", grants(t, s, "k1", "o", []string{"u"}, exp), []Grant{docGrant("o", "d2", "u", "viewer")})
		sameGrants(t, "after expiry", grants(t, s, "k1", "o", []string{"u"}, exp.Add(time.Hour)), []Grant{docGrant("o", "d2", "u", "viewer")})
	})

	t.Run("grants are scoped by api key and organization", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		put(t, s, "k1", docGrant("o", "d", "u", "editor"), orgGrant("o", "u", "editor"))
		put(t, s, "k2", docGrant("o2", "d", "u", "viewer"))
		if got := grants(t, s, "k2", "o", []string{"u"}, t0); len(got) != 0 {
			t.Fatalf("k2 sees k1's grants: %+v", got)
		}
		if got := grants(t, s, "k1", "o2", []string{"u"}, t0); len(got) != 0 {
			t.Fatalf("k1 sees k2's organization: %+v", got)
		}
		// Deletions in one tenant leave the other alone.
		if err := s.DeleteGrants(ctx, "k2", []GrantRef{docGrant("o", "d", "u", "").Ref()}); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteOrganization(ctx, "k2", "o"); err != nil {
			t.Fatal(err)
		}
		if err := s.RemoveUsers(ctx, "k2", "o", []string{"u"}); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteResourceGrants(ctx, "k2", "o", ResourceDocument, []string{"d"}); err != nil {
			t.Fatal(err)
		}
		if got := grants(t, s, "k1", "o", []string{"u"}, t0); len(got) != 2 {
			t.Fatalf("k2's deletions reached k1: %+v", got)
		}
	})

	t.Run("grants on named resources", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		exp := t0.Add(time.Hour)
		put(t, s, "k1",
			orgGrant("o", "u1", "editor"),
			docGrant("o", "d", "u1", "viewer"),
			docGrant("o", "other", "u1", "editor"),
			folderGrant("o", "f1", "u2", "editor"),
			folderGrant("o", "f9", "u2", "viewer"),
			expiring(folderGrant("o", "f2", "u3", "viewer"), exp),
			expiring(orgGrant("o", "u3", "viewer"), exp.Add(time.Hour)),
			folderGrant("o", "d", "u4", "editor"), // a folder whose id is the document's
			docGrant("o2", "d", "u1", "editor"),
		)
		put(t, s, "k2", docGrant("o", "d", "u1", "editor"))
		on := []Resource{{ResourceOrganization, "o"}, {ResourceDocument, "d"}, {ResourceFolder, "f1"}, {ResourceFolder, "f2"}, {ResourceDocument, "d"}}
		grantsOn := func(apiKey, org string, users []string, on []Resource, now time.Time) []Grant {
			t.Helper()
			gs, err := s.GrantsOn(ctx, apiKey, org, users, on, now)
			if err != nil {
				t.Fatal(err)
			}
			if gs == nil {
				t.Fatal("nil grants")
			}
			return gs
		}
		sameGrants(t, "named resources", grantsOn("k1", "o", []string{"u1", "u2", "u3", "u4", "u1", "nobody"}, on, t0), []Grant{
			orgGrant("o", "u1", "editor"), docGrant("o", "d", "u1", "viewer"), folderGrant("o", "f1", "u2", "editor"),
			expiring(folderGrant("o", "f2", "u3", "viewer"), exp), expiring(orgGrant("o", "u3", "viewer"), exp.Add(time.Hour)),
		})
		sameGrants(t, "after a lapse", grantsOn("k1", "o", []string{"u3"}, on, exp), []Grant{expiring(orgGrant("o", "u3", "viewer"), exp.Add(time.Hour))})
		sameGrants(t, "some users", grantsOn("k1", "o", []string{"u2"}, on, t0), []Grant{folderGrant("o", "f1", "u2", "editor")})
		sameGrants(t, "another tenant", grantsOn("k2", "o", []string{"u1"}, on, t0), []Grant{docGrant("o", "d", "u1", "editor")})
		sameGrants(t, "another organization", grantsOn("k1", "o2", []string{"u1"}, on, t0), []Grant{docGrant("o2", "d", "u1", "editor")})
		sameGrants(t, "no users", grantsOn("k1", "o", nil, on, t0), nil)
		sameGrants(t, "no resources", grantsOn("k1", "o", []string{"u1"}, nil, t0), nil)

		// Thousands of users in one read (few of them with grants: writing is slow on FerretDB).
		var many []Grant
		users := make([]string, 3000)
		for i := range users {
			users[i] = fmt.Sprintf("user-%04d", i)
			if i%30 == 0 {
				many = append(many, docGrant("big", "d", users[i], "viewer"), docGrant("big", "elsewhere", users[i], "editor"))
			}
		}
		put(t, s, "k1", many...)
		if got := grantsOn("k1", "big", users, []Resource{{ResourceDocument, "d"}, {ResourceOrganization, "big"}}, t0); len(got) != 100 {
			t.Fatalf("%d grants of 3000 users, want 100", len(got))
		}
	})

	t.Run("put if absent keeps grants in effect and replaces lapsed ones", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		exp := t0.Add(time.Hour)
		put(t, s, "k1", docGrant("o", "kept", "u", "viewer"), expiring(docGrant("o", "temp", "u", "viewer"), exp), expiring(docGrant("o", "lapsed", "u", "viewer"), t0.Add(-time.Hour)))
		err := s.PutGrantsIfAbsent(ctx, "k1", []Grant{
			docGrant("o", "kept", "u", "editor"), docGrant("o", "temp", "u", "editor"),
			docGrant("o", "lapsed", "u", "editor"), docGrant("o", "new", "u", "editor"),
		}, t0)
		if err != nil {
			t.Fatal(err)
		}
		want := []Grant{docGrant("o", "kept", "u", "viewer"), expiring(docGrant("o", "temp", "u", "viewer"), exp), docGrant("o", "lapsed", "u", "editor"), docGrant("o", "new", "u", "editor")}
		sameGrants(t, "if absent", grants(t, s, "k1", "o", []string{"u"}, t0), want)
		// Again: nothing changes.
		if err := s.PutGrantsIfAbsent(ctx, "k1", []Grant{docGrant("o", "new", "u", "viewer")}, t0); err != nil {
			t.Fatal(err)
		}
		sameGrants(t, "again", grants(t, s, "k1", "o", []string{"u"}, t0), want)
		// Another tenant's grant is no obstacle.
		if err := s.PutGrantsIfAbsent(ctx, "k2", []Grant{docGrant("o", "kept", "u", "editor")}, t0); err != nil {
			t.Fatal(err)
		}
		sameGrants(t, "k2", grants(t, s, "k2", "o", []string{"u"}, t0), []Grant{docGrant("o", "kept", "u", "editor")})
	})

	t.Run("concurrent writes of one grant all succeed", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() {
				if i%2 == 0 {
					errs[i] = s.PutGrants(ctx, "k1", []Grant{docGrant("o", "d", "u", "editor")})
				} else {
					errs[i] = s.PutGrantsIfAbsent(ctx, "k1", []Grant{docGrant("o", "d", "u", "editor")}, t0)
				}
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("write %d: %v", i, err)
			}
		}
		sameGrants(t, "one grant", grants(t, s, "k1", "o", []string{"u"}, t0), []Grant{docGrant("o", "d", "u", "editor")})
	})

	t.Run("delete grants removes only those named", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		put(t, s, "k1", docGrant("o", "d", "u", "editor"), folderGrant("o", "d", "u", "editor"), docGrant("o", "d", "v", "editor"))
		refs := []GrantRef{docGrant("o", "d", "u", "").Ref(), docGrant("o", "missing", "u", "").Ref()}
		for range 2 { // idempotent
			if err := s.DeleteGrants(ctx, "k1", refs); err != nil {
				t.Fatal(err)
			}
		}
		sameGrants(t, "after delete", grants(t, s, "k1", "o", []string{"u", "v"}, t0), []Grant{folderGrant("o", "d", "u", "editor"), docGrant("o", "d", "v", "editor")})
		if err := s.DeleteGrants(ctx, "k1", nil); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("delete resource grants removes every user's grants on those resources", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		put(t, s, "k1",
			docGrant("o", "d1", "u", "editor"), docGrant("o", "d1", "v", "viewer"), docGrant("o", "d2", "u", "editor"),
			docGrant("o", "d3", "u", "editor"), folderGrant("o", "d1", "u", "editor"), docGrant("o2", "d1", "u", "editor"))
		for range 2 {
			if err := s.DeleteResourceGrants(ctx, "k1", "o", ResourceDocument, []string{"d1", "d2"}); err != nil {
				t.Fatal(err)
			}
		}
		sameGrants(t, "o", grants(t, s, "k1", "o", []string{"u", "v"}, t0), []Grant{docGrant("o", "d3", "u", "editor"), folderGrant("o", "d1", "u", "editor")})
		sameGrants(t, "o2", grants(t, s, "k1", "o2", []string{"u"}, t0), []Grant{docGrant("o2", "d1", "u", "editor")})
		if err := s.DeleteResourceGrants(ctx, "k1", "o", ResourceFolder, []string{"d1"}); err != nil {
			t.Fatal(err)
		}
		sameGrants(t, "folder", grants(t, s, "k1", "o", []string{"u"}, t0), []Grant{docGrant("o", "d3", "u", "editor")})
	})

	t.Run("move document grants", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		exp := t0.Add(time.Hour)
		put(t, s, "k1",
			docGrant("o", "from", "a", "editor"),                                     // moves
			expiring(docGrant("o", "from", "b", "viewer"), exp),                      // moves with its expiry
			docGrant("o", "from", "c", "editor"), docGrant("o", "to", "c", "viewer"), // c keeps its own
			expiring(docGrant("o", "from", "d", "editor"), t0.Add(-time.Minute)), // lapsed: not moved
			docGrant("o2", "from", "a", "viewer"),                                // another organization
		)
		for range 2 { // a second delivery changes nothing
			if err := s.MoveDocumentGrants(ctx, "k1", "o", "from", "to", t0); err != nil {
				t.Fatal(err)
			}
			sameGrants(t, "moved", grants(t, s, "k1", "o", []string{"a", "b", "c", "d"}, t0.Add(-2*time.Minute)), []Grant{
				docGrant("o", "to", "a", "editor"), expiring(docGrant("o", "to", "b", "viewer"), exp), docGrant("o", "to", "c", "viewer"),
			})
		}
		sameGrants(t, "o2", grants(t, s, "k1", "o2", []string{"a"}, t0), []Grant{docGrant("o2", "from", "a", "viewer")})
		if err := s.MoveDocumentGrants(ctx, "k1", "o", "to", "to", t0); err != nil {
			t.Fatal(err)
		}
		if got := grants(t, s, "k1", "o", []string{"a", "b", "c"}, t0); len(got) != 3 {
			t.Fatalf("moving onto itself changed grants: %+v", got)
		}
	})

	t.Run("context fields", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		set := func(apiKey, org, user string, fields ...string) {
			t.Helper()
			if err := s.SetContextFields(ctx, apiKey, org, user, fields); err != nil {
				t.Fatal(err)
			}
		}
		read := func(apiKey, org string, users ...string) map[string][]string {
			t.Helper()
			got, err := s.ContextFields(ctx, apiKey, org, users)
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		set("k1", "o", "u", "projectId:p1", "region:eu")
		set("k1", "o", "v", "region:us")
		set("k1", "o2", "u", "region:apac")
		set("k2", "o", "u", "other:x")
		got := read("k1", "o", "u", "v", "w")
		if len(got) != 2 || !slices.Equal(got["u"], []string{"projectId:p1", "region:eu"}) || !slices.Equal(got["v"], []string{"region:us"}) {
			t.Fatalf("contexts %v", got)
		}
		set("k1", "o", "u", "region:us")
		if got := read("k1", "o", "u"); !slices.Equal(got["u"], []string{"region:us"}) {
			t.Fatalf("replaced context %v", got)
		}
		set("k1", "o", "u")
		if got := read("k1", "o", "u"); len(got) != 0 {
			t.Fatalf("cleared context %v", got)
		}
		if got := read("k1", "o2", "u"); !slices.Equal(got["u"], []string{"region:apac"}) {
			t.Fatalf("other organization %v", got)
		}
		if got := read("k2", "o", "u", "v"); len(got) != 1 || !slices.Equal(got["u"], []string{"other:x"}) {
			t.Fatalf("other tenant %v", got)
		}
		if got := read("k1", "o"); len(got) != 0 {
			t.Fatalf("no users %v", got)
		}
	})

	t.Run("remove users and delete organization take grants and contexts", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		put(t, s, "k1", orgGrant("o", "u", "editor"), docGrant("o", "d", "u", "editor"), orgGrant("o", "v", "editor"), orgGrant("o2", "u", "viewer"))
		for _, c := range []struct{ org, user string }{{"o", "u"}, {"o", "v"}, {"o2", "u"}} {
			if err := s.SetContextFields(ctx, "k1", c.org, c.user, []string{"a:1"}); err != nil {
				t.Fatal(err)
			}
		}
		for range 2 {
			if err := s.RemoveUsers(ctx, "k1", "o", []string{"u", "ghost"}); err != nil {
				t.Fatal(err)
			}
		}
		sameGrants(t, "o after remove", grants(t, s, "k1", "o", []string{"u", "v"}, t0), []Grant{orgGrant("o", "v", "editor")})
		sameGrants(t, "o2 after remove", grants(t, s, "k1", "o2", []string{"u"}, t0), []Grant{orgGrant("o2", "u", "viewer")})
		if got, _ := s.ContextFields(ctx, "k1", "o", []string{"u", "v"}); len(got) != 1 || got["v"] == nil {
			t.Fatalf("contexts after remove %v", got)
		}
		for range 2 {
			if err := s.DeleteOrganization(ctx, "k1", "o"); err != nil {
				t.Fatal(err)
			}
		}
		if got := grants(t, s, "k1", "o", []string{"u", "v"}, t0); len(got) != 0 {
			t.Fatalf("grants after delete organization %+v", got)
		}
		if got, _ := s.ContextFields(ctx, "k1", "o", []string{"u", "v"}); len(got) != 0 {
			t.Fatalf("contexts after delete organization %v", got)
		}
		if got, _ := s.ContextFields(ctx, "k1", "o2", []string{"u"}); len(got) != 1 {
			t.Fatalf("other organization's context gone: %v", got)
		}
		sameGrants(t, "o2 after delete", grants(t, s, "k1", "o2", []string{"u"}, t0), []Grant{orgGrant("o2", "u", "viewer")})
	})

	sampleKey := func(n int64, fill byte) *SigningKey {
		from := t0.Truncate(24 * time.Hour).Add(time.Duration(n) * 24 * time.Hour)
		return &SigningKey{
			ID: fmt.Sprintf("k%d", n), PublicKey: bytes.Repeat([]byte{fill}, 32), SealedPrivateKey: bytes.Repeat([]byte{fill + 1}, 60),
			NotBefore: from, NotAfter: from.Add(24 * time.Hour), CreatedAt: t0,
		}
	}
	sameKey := func(t *testing.T, got, want *SigningKey) {
		t.Helper()
		if got.ID != want.ID || !bytes.Equal(got.PublicKey, want.PublicKey) || !bytes.Equal(got.SealedPrivateKey, want.SealedPrivateKey) ||
			!got.NotBefore.Equal(want.NotBefore) || !got.NotAfter.Equal(want.NotAfter) || !got.CreatedAt.Equal(want.CreatedAt) {
			t.Fatalf("key %+v, want %+v", got, want)
		}
	}

	t.Run("signing keys are insert-if-absent", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		if _, err := s.SigningKey(ctx, "k1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("missing key: %v", err)
		}
		first := sampleKey(1, 1)
		if err := s.InsertSigningKey(ctx, first); err != nil {
			t.Fatal(err)
		}
		if err := s.InsertSigningKey(ctx, sampleKey(1, 7)); !errors.Is(err, ErrKeyExists) {
			t.Fatalf("second key for the period: %v", err)
		}
		got, err := s.SigningKey(ctx, "k1")
		if err != nil {
			t.Fatal(err)
		}
		sameKey(t, got, first)
	})

	t.Run("concurrent inserts of one key: exactly one wins", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		const n = 8
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() { errs[i] = s.InsertSigningKey(ctx, sampleKey(5, byte(10*i))) })
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("inserts %d and %d both won", winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, ErrKeyExists):
				t.Fatalf("insert %d: %v", i, err)
			}
		}
		if winner < 0 {
			t.Fatal("no insert won")
		}
		got, err := s.SigningKey(ctx, "k5")
		if err != nil {
			t.Fatal(err)
		}
		sameKey(t, got, sampleKey(5, byte(10*winner)))
	})

	t.Run("signing keys listed by end", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		for _, n := range []int64{3, 1, 2} {
			if err := s.InsertSigningKey(ctx, sampleKey(n, byte(n))); err != nil {
				t.Fatal(err)
			}
		}
		all, err := s.SigningKeys(ctx, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 3 || all[0].ID != "k1" || all[1].ID != "k2" || all[2].ID != "k3" {
			t.Fatalf("all keys %v", all)
		}
		sameKey(t, all[1], sampleKey(2, 2))
		// Keys whose NotAfter is after the bound: k1 ends exactly at it and is left out.
		got, err := s.SigningKeys(ctx, sampleKey(1, 0).NotAfter)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].ID != "k2" || got[1].ID != "k3" {
			t.Fatalf("recent keys %v", got)
		}
	})

	t.Run("ping", func(t *testing.T) {
		t.Parallel()
		if err := newStore(t).Ping(ctx); err != nil {
			t.Fatal(err)
		}
	})

	runConcurrencySuite(t, newStore)
}
