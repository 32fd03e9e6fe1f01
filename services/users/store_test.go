package users

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/collab/collab/internal/testkit/mongotest"
)

func TestMain(m *testing.M) { os.Exit(mongotest.Run(m)) }

// The conformance suite: every Store implementation must pass it unchanged.
func TestMemoryStore(t *testing.T) {
	runStoreSuite(t, func(t *testing.T) Store { return NewMemoryStore() })
}

func TestMongoStore(t *testing.T) {
	runStoreSuite(t, func(t *testing.T) Store { return newMongoStore(t) })
}

func newMongoStore(t *testing.T) *MongoStore {
	t.Helper()
	s, err := NewMongoStore(context.Background(), mongotest.Connect(t).Database("users"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// An identity is stored with exactly its fields: nothing else a request carried (isAdmin) can
// reach the database.
func TestMongoStoreKeepsOnlyIdentityFields(t *testing.T) {
	s := newMongoStore(t)
	ctx := context.Background()
	must(t, s.UpsertUser(ctx, "k1", UserPatch{UserID: "u1", Name: ptr("Ann")}))
	var raw bson.M
	if err := s.users.FindOne(ctx, bson.M{"userId": "u1"}).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if want := []string{"_id", "apiKey", "email", "name", "photoUrl", "userId"}; !slices.Equal(keys, want) {
		t.Fatalf("stored identity has fields %v, want %v", keys, want)
	}
}

func ptr(s string) *string { return &s }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// ids asserts a listing's result.
func ids(t *testing.T, what string, got []string, err error, want ...string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if want == nil {
		want = []string{}
	}
	if got == nil || !slices.Equal(got, want) {
		t.Fatalf("%s: %#v, want %#v", what, got, want)
	}
}

func runStoreSuite(t *testing.T, newStore func(t *testing.T) Store) {
	ctx := context.Background()

	t.Run("identities: upsert, patch, read, scope", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		must(t, s.UpsertUser(ctx, "k1", UserPatch{UserID: "u2", Name: ptr("Bob"), Email: ptr("bob@example.com"), PhotoURL: ptr("https://x.example/b.png")}))
		must(t, s.UpsertUser(ctx, "k1", UserPatch{UserID: "u1", Name: ptr("Ann")}))
		must(t, s.UpsertUser(ctx, "k2", UserPatch{UserID: "u1", Name: ptr("Other tenant")}))

		got, err := s.Users(ctx, "k1", []string{"u2", "nobody", "u1", "u2"})
		must(t, err)
		want := []User{{UserID: "u1", Name: "Ann"}, {UserID: "u2", Name: "Bob", Email: "bob@example.com", PhotoURL: "https://x.example/b.png"}}
		if len(got) != len(want) || *got[0] != want[0] || *got[1] != want[1] {
			t.Fatalf("Users: %+v", got)
		}

		// Only the fields a patch holds change; an empty value is a value.
		must(t, s.UpsertUser(ctx, "k1", UserPatch{UserID: "u2", Email: ptr("robert@example.com")}))
		must(t, s.UpsertUser(ctx, "k1", UserPatch{UserID: "u2", PhotoURL: ptr("")}))
		must(t, s.UpsertUser(ctx, "k1", UserPatch{UserID: "u2"}))
		got, err = s.Users(ctx, "k1", []string{"u2"})
		must(t, err)
		if len(got) != 1 || *got[0] != (User{UserID: "u2", Name: "Bob", Email: "robert@example.com"}) {
			t.Fatalf("after patches: %+v", got)
		}

		// The other tenant's u1 is its own.
		got, err = s.Users(ctx, "k2", []string{"u1", "u2"})
		must(t, err)
		if len(got) != 1 || got[0].Name != "Other tenant" {
			t.Fatalf("k2 sees %+v", got)
		}
		if got, err := s.Users(ctx, "k3", []string{"u1"}); err != nil || got == nil || len(got) != 0 {
			t.Fatalf("unknown tenant: %+v %v", got, err)
		}
		if got, err := s.Users(ctx, "k1", nil); err != nil || got == nil || len(got) != 0 {
			t.Fatalf("no ids: %+v %v", got, err)
		}
	})

	t.Run("organization members", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		must(t, s.AddMembers(ctx, "k1", "o1", []string{"u3", "u1"}))
		must(t, s.AddMembers(ctx, "k1", "o1", []string{"u1", "u2"})) // idempotent
		must(t, s.AddMembers(ctx, "k1", "o1", nil))
		must(t, s.AddMembers(ctx, "k1", "o2", []string{"u9"}))
		must(t, s.AddMembers(ctx, "k2", "o1", []string{"u8"}))

		got, err := s.Members(ctx, "k1", "o1", nil, 0)
		ids(t, "all", got, err, "u1", "u2", "u3")
		got, err = s.Members(ctx, "k1", "o1", []string{"u3", "nobody", "u1", "u9", "u8"}, 0)
		ids(t, "only", got, err, "u1", "u3")
		got, err = s.Members(ctx, "k1", "o1", []string{}, 0)
		ids(t, "empty only matches nobody", got, err)
		got, err = s.Members(ctx, "k1", "nope", nil, 0)
		ids(t, "unknown organization", got, err)
		got, err = s.Members(ctx, "k2", "o1", nil, 0)
		ids(t, "other tenant", got, err, "u8")
		got, err = s.Members(ctx, "k1", "o2", nil, 0)
		ids(t, "other organization", got, err, "u9")
		got, err = s.Members(ctx, "k1", "o1", nil, 2)
		ids(t, "limit: the first by id", got, err, "u1", "u2")
		got, err = s.Members(ctx, "k1", "o1", []string{"u3", "u2"}, 1)
		ids(t, "limit within only", got, err, "u2")
	})

	t.Run("count members", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		count := func(what, apiKey, org string, want int) {
			t.Helper()
			if n, err := s.CountMembers(ctx, apiKey, org); err != nil || n != want {
				t.Fatalf("%s: %d %v, want %d", what, n, err, want)
			}
		}
		count("none", "k1", "o1", 0)
		must(t, s.AddMembers(ctx, "k1", "o1", []string{"u1", "u2", "u3"}))
		must(t, s.AddMembers(ctx, "k1", "o1", []string{"u2", "u4"}))
		must(t, s.AddMembers(ctx, "k1", "o2", []string{"u1"}))
		must(t, s.AddMembers(ctx, "k2", "o1", []string{"u1"}))
		count("added, each once", "k1", "o1", 4)
		count("another organization", "k1", "o2", 1)
		count("another tenant", "k2", "o1", 1)
		must(t, s.RemoveUsers(ctx, "k1", "o1", []string{"u1", "u9"}))
		count("after a removal", "k1", "o1", 3)
	})

	t.Run("members page after an id", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		// Ids whose byte order differs from a case- or accent-folding collation.
		odd := []string{"Zed", "a", "a-b", "a_b", "b", "z", "é", "ü", "日本", "😀"}
		must(t, s.AddMembers(ctx, "k1", "o1", odd))
		must(t, s.AddMembers(ctx, "k1", "o2", []string{"a0", "b0"}))
		must(t, s.AddMembers(ctx, "k2", "o1", []string{"a0", "b0"}))
		want := slices.Clone(odd)
		slices.Sort(want)

		got, err := s.MembersAfter(ctx, "k1", "o1", "", 100)
		ids(t, "all from the start", got, err, want...)
		got, err = s.MembersAfter(ctx, "k1", "o1", "", 3)
		ids(t, "the first page", got, err, want[:3]...)
		got, err = s.MembersAfter(ctx, "k1", "o1", want[2], 3)
		ids(t, "after the last of a page, exclusive", got, err, want[3:6]...)
		got, err = s.MembersAfter(ctx, "k1", "o1", "a0", 2)
		ids(t, "after an id that is no member", got, err, "a_b", "b")
		got, err = s.MembersAfter(ctx, "k1", "o1", want[len(want)-1], 3)
		ids(t, "after the last", got, err)
		got, err = s.MembersAfter(ctx, "k1", "o1", "", 0)
		ids(t, "limit 0", got, err)
		got, err = s.MembersAfter(ctx, "k1", "nope", "", 10)
		ids(t, "unknown organization", got, err)
		got, err = s.MembersAfter(ctx, "k2", "o1", "a", 10)
		ids(t, "other tenant", got, err, "a0", "b0")

		// Paging a larger list with its last id as the next start visits each member once, in
		// order, and members added behind the position show up.
		many := make([]string, 0, 250)
		for i := range 250 {
			many = append(many, fmt.Sprintf("m%04d", (i*37)%250))
		}
		must(t, s.AddMembers(ctx, "k1", "big", many))
		var seen []string
		after := ""
		for page := 0; ; page++ {
			got, err := s.MembersAfter(ctx, "k1", "big", after, 100)
			must(t, err)
			seen = append(seen, got...)
			if len(got) < 100 {
				break
			}
			after = got[len(got)-1]
			if page == 0 {
				must(t, s.AddMembers(ctx, "k1", "big", []string{"m0050x", "m9999"})) // one behind, one ahead
			}
		}
		if len(seen) != 251 || !slices.IsSorted(seen) || seen[0] != "m0000" || seen[250] != "m9999" || slices.Contains(seen, "m0050x") {
			t.Fatalf("paged %d members: %v ... %v", len(seen), seen[:3], seen[len(seen)-3:])
		}
	})

	t.Run("remove users from an organization", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		for _, k := range []string{"k1", "k2"} {
			for _, o := range []string{"o1", "o2"} {
				must(t, s.AddMembers(ctx, k, o, []string{"u1", "u2", "u3"}))
				must(t, s.AddDocumentContacts(ctx, k, o, "d1", []string{"u1", "u2"}))
				must(t, s.AddDocumentContacts(ctx, k, o, "d2", []string{"u1", "u3"}))
				_, err := s.UpsertGroup(ctx, k, o, Group{GroupID: "g1", Name: "G"})
				must(t, err)
				must(t, s.AddGroupMembers(ctx, k, o, "g1", []string{"u1", "u2"}))
			}
		}
		must(t, s.RemoveUsers(ctx, "k1", "o1", []string{"u1", "u2", "nobody"}))
		must(t, s.RemoveUsers(ctx, "k1", "o1", []string{"u1", "u2"})) // idempotent
		must(t, s.RemoveUsers(ctx, "k1", "o1", nil))

		got, err := s.Members(ctx, "k1", "o1", nil, 0)
		ids(t, "members", got, err, "u3")
		got, err = s.DocumentContacts(ctx, "k1", "o1", "d1", nil)
		ids(t, "d1", got, err)
		got, err = s.DocumentContacts(ctx, "k1", "o1", "d2", nil)
		ids(t, "d2", got, err, "u3")
		got, err = s.GroupMembers(ctx, "k1", "o1", []string{"g1"}, nil)
		ids(t, "g1", got, err)
		if _, err := s.Group(ctx, "k1", "o1", "g1"); err != nil {
			t.Fatalf("the group itself stays: %v", err)
		}
		// Other organizations and tenants keep theirs.
		for _, sc := range [][2]string{{"k1", "o2"}, {"k2", "o1"}} {
			got, err = s.Members(ctx, sc[0], sc[1], nil, 0)
			ids(t, sc[0]+"/"+sc[1]+" members", got, err, "u1", "u2", "u3")
			got, err = s.DocumentContacts(ctx, sc[0], sc[1], "d1", nil)
			ids(t, sc[0]+"/"+sc[1]+" d1", got, err, "u1", "u2")
			got, err = s.GroupMembers(ctx, sc[0], sc[1], []string{"g1"}, nil)
			ids(t, sc[0]+"/"+sc[1]+" g1", got, err, "u1", "u2")
		}
	})

	t.Run("document contacts", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		must(t, s.AddDocumentContacts(ctx, "k1", "o1", "d1", []string{"u2", "u1"}))
		must(t, s.AddDocumentContacts(ctx, "k1", "o1", "d1", []string{"u1", "u3"}))
		must(t, s.AddDocumentContacts(ctx, "k1", "o1", "d2", []string{"u4"}))
		must(t, s.AddDocumentContacts(ctx, "k1", "o2", "d1", []string{"u5"}))
		must(t, s.AddDocumentContacts(ctx, "k2", "o1", "d1", []string{"u6"}))

		got, err := s.DocumentContacts(ctx, "k1", "o1", "d1", nil)
		ids(t, "d1", got, err, "u1", "u2", "u3")
		got, err = s.DocumentContacts(ctx, "k1", "o1", "d1", []string{"u3", "u4", "u5", "u6", "u3"})
		ids(t, "d1 only", got, err, "u3")
		got, err = s.DocumentContacts(ctx, "k1", "o1", "d1", []string{})
		ids(t, "empty only", got, err)
		got, err = s.DocumentContacts(ctx, "k1", "o2", "d1", nil)
		ids(t, "other organization", got, err, "u5")
		got, err = s.DocumentContacts(ctx, "k2", "o1", "d1", nil)
		ids(t, "other tenant", got, err, "u6")

		must(t, s.RemoveDocumentContacts(ctx, "k1", "o1", "d1", []string{"u2", "nobody"}))
		must(t, s.RemoveDocumentContacts(ctx, "k1", "o1", "d1", []string{"u2"}))
		must(t, s.RemoveDocumentContacts(ctx, "k1", "o1", "d1", nil))
		got, err = s.DocumentContacts(ctx, "k1", "o1", "d1", nil)
		ids(t, "after remove", got, err, "u1", "u3")

		must(t, s.DeleteDocuments(ctx, "k1", "o1", []string{"d1", "d2", "nope"}))
		must(t, s.DeleteDocuments(ctx, "k1", "o1", []string{"d1"}))
		must(t, s.DeleteDocuments(ctx, "k1", "o1", nil))
		for _, d := range []string{"d1", "d2"} {
			got, err = s.DocumentContacts(ctx, "k1", "o1", d, nil)
			ids(t, d+" deleted", got, err)
		}
		got, err = s.DocumentContacts(ctx, "k1", "o2", "d1", nil)
		ids(t, "other organization after delete", got, err, "u5")
		got, err = s.DocumentContacts(ctx, "k2", "o1", "d1", nil)
		ids(t, "other tenant after delete", got, err, "u6")
	})

	t.Run("move a document's contacts", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		must(t, s.AddDocumentContacts(ctx, "k1", "o1", "old", []string{"u1", "u2"}))
		must(t, s.AddDocumentContacts(ctx, "k1", "o1", "new", []string{"u2", "u3"}))
		must(t, s.AddDocumentContacts(ctx, "k1", "o2", "old", []string{"u9"}))
		must(t, s.AddDocumentContacts(ctx, "k2", "o1", "old", []string{"u8"}))

		must(t, s.MoveDocument(ctx, "k1", "o1", "old", "new"))
		got, err := s.DocumentContacts(ctx, "k1", "o1", "new", nil)
		ids(t, "merged", got, err, "u1", "u2", "u3")
		got, err = s.DocumentContacts(ctx, "k1", "o1", "old", nil)
		ids(t, "source", got, err)
		// Again: nothing changes.
		must(t, s.MoveDocument(ctx, "k1", "o1", "old", "new"))
		got, err = s.DocumentContacts(ctx, "k1", "o1", "new", nil)
		ids(t, "after rerun", got, err, "u1", "u2", "u3")
		// A move onto itself keeps the list.
		must(t, s.MoveDocument(ctx, "k1", "o1", "new", "new"))
		got, err = s.DocumentContacts(ctx, "k1", "o1", "new", nil)
		ids(t, "onto itself", got, err, "u1", "u2", "u3")

		got, err = s.DocumentContacts(ctx, "k1", "o2", "old", nil)
		ids(t, "other organization", got, err, "u9")
		got, err = s.DocumentContacts(ctx, "k2", "o1", "old", nil)
		ids(t, "other tenant", got, err, "u8")
	})

	t.Run("groups", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		if _, err := s.Group(ctx, "k1", "o1", "g1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("missing group: %v", err)
		}
		created, err := s.UpsertGroup(ctx, "k1", "o1", Group{GroupID: "g1", Name: "Team"})
		if err != nil || !created {
			t.Fatalf("first upsert: %v %v", created, err)
		}
		created, err = s.UpsertGroup(ctx, "k1", "o1", Group{GroupID: "g1", Name: "Renamed"})
		if err != nil || created {
			t.Fatalf("second upsert: %v %v", created, err)
		}
		g, err := s.Group(ctx, "k1", "o1", "g1")
		if err != nil || *g != (Group{GroupID: "g1", Name: "Renamed"}) {
			t.Fatalf("after rename: %+v %v", g, err)
		}
		created, err = s.UpsertGroup(ctx, "k1", "o1", Group{GroupID: "g1"})
		if err != nil || created {
			t.Fatalf("upsert without a name: %v %v", created, err)
		}
		if g, _ := s.Group(ctx, "k1", "o1", "g1"); g.Name != "Renamed" {
			t.Fatalf("an empty name replaced the name: %+v", g)
		}
		if created, err := s.UpsertGroup(ctx, "k1", "o1", Group{GroupID: "g2"}); err != nil || !created {
			t.Fatalf("new group without a name: %v %v", created, err)
		}
		if g, err := s.Group(ctx, "k1", "o1", "g2"); err != nil || *g != (Group{GroupID: "g2"}) {
			t.Fatalf("g2: %+v %v", g, err)
		}
		for _, sc := range [][2]string{{"k1", "o2"}, {"k2", "o1"}} {
			if _, err := s.Group(ctx, sc[0], sc[1], "g1"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("%v sees g1: %v", sc, err)
			}
		}
		if created, err := s.UpsertGroup(ctx, "k2", "o1", Group{GroupID: "g1", Name: "Theirs"}); err != nil || !created {
			t.Fatalf("same group id in another tenant: %v %v", created, err)
		}
		if g, _ := s.Group(ctx, "k1", "o1", "g1"); g.Name != "Renamed" {
			t.Fatalf("another tenant renamed the group: %+v", g)
		}
	})

	t.Run("group members", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		must(t, s.AddGroupMembers(ctx, "k1", "o1", "g1", []string{"u2", "u1"}))
		must(t, s.AddGroupMembers(ctx, "k1", "o1", "g1", []string{"u1"}))
		must(t, s.AddGroupMembers(ctx, "k1", "o1", "g2", []string{"u2", "u3"}))
		must(t, s.AddGroupMembers(ctx, "k1", "o1", "g3", nil))
		must(t, s.AddGroupMembers(ctx, "k1", "o2", "g1", []string{"u9"}))
		must(t, s.AddGroupMembers(ctx, "k2", "o1", "g1", []string{"u8"}))

		got, err := s.GroupMembers(ctx, "k1", "o1", []string{"g1"}, nil)
		ids(t, "g1", got, err, "u1", "u2")
		got, err = s.GroupMembers(ctx, "k1", "o1", []string{"g1", "g2", "nope"}, nil)
		ids(t, "union", got, err, "u1", "u2", "u3")
		got, err = s.GroupMembers(ctx, "k1", "o1", []string{"g1", "g2"}, []string{"u3", "u2", "u8", "u9"})
		ids(t, "union only", got, err, "u2", "u3")
		got, err = s.GroupMembers(ctx, "k1", "o1", []string{"g1"}, []string{})
		ids(t, "empty only", got, err)
		got, err = s.GroupMembers(ctx, "k1", "o1", nil, nil)
		ids(t, "no groups", got, err)
		got, err = s.GroupMembers(ctx, "k1", "o2", []string{"g1"}, nil)
		ids(t, "other organization", got, err, "u9")
		got, err = s.GroupMembers(ctx, "k2", "o1", []string{"g1"}, nil)
		ids(t, "other tenant", got, err, "u8")

		must(t, s.RemoveGroupMembers(ctx, "k1", "o1", "g1", []string{"u2", "nobody"}))
		must(t, s.RemoveGroupMembers(ctx, "k1", "o1", "g1", []string{"u2"}))
		must(t, s.RemoveGroupMembers(ctx, "k1", "o1", "g1", nil))
		got, err = s.GroupMembers(ctx, "k1", "o1", []string{"g1"}, nil)
		ids(t, "g1 after remove", got, err, "u1")
		got, err = s.GroupMembers(ctx, "k1", "o1", []string{"g2"}, nil)
		ids(t, "g2 untouched", got, err, "u2", "u3")
		got, err = s.GroupMembers(ctx, "k2", "o1", []string{"g1"}, nil)
		ids(t, "other tenant untouched", got, err, "u8")
	})

	t.Run("delete an organization", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		for _, k := range []string{"k1", "k2"} {
			for _, o := range []string{"o1", "o2"} {
				must(t, s.UpsertUser(ctx, k, UserPatch{UserID: "u1", Name: ptr("Ann")}))
				must(t, s.AddMembers(ctx, k, o, []string{"u1"}))
				must(t, s.AddDocumentContacts(ctx, k, o, "d1", []string{"u1"}))
				_, err := s.UpsertGroup(ctx, k, o, Group{GroupID: "g1", Name: "G"})
				must(t, err)
				must(t, s.AddGroupMembers(ctx, k, o, "g1", []string{"u1"}))
			}
		}
		must(t, s.DeleteOrganization(ctx, "k1", "o1"))
		must(t, s.DeleteOrganization(ctx, "k1", "o1")) // idempotent
		got, err := s.Members(ctx, "k1", "o1", nil, 0)
		ids(t, "members", got, err)
		got, err = s.DocumentContacts(ctx, "k1", "o1", "d1", nil)
		ids(t, "contacts", got, err)
		got, err = s.GroupMembers(ctx, "k1", "o1", []string{"g1"}, nil)
		ids(t, "group members", got, err)
		if _, err := s.Group(ctx, "k1", "o1", "g1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("group survived: %v", err)
		}
		if u, err := s.Users(ctx, "k1", []string{"u1"}); err != nil || len(u) != 1 {
			t.Fatalf("identity went with the organization: %v %v", u, err)
		}
		for _, sc := range [][2]string{{"k1", "o2"}, {"k2", "o1"}} {
			got, err = s.Members(ctx, sc[0], sc[1], nil, 0)
			ids(t, sc[0]+"/"+sc[1]+" members", got, err, "u1")
			got, err = s.DocumentContacts(ctx, sc[0], sc[1], "d1", nil)
			ids(t, sc[0]+"/"+sc[1]+" contacts", got, err, "u1")
			got, err = s.GroupMembers(ctx, sc[0], sc[1], []string{"g1"}, nil)
			ids(t, sc[0]+"/"+sc[1]+" group members", got, err, "u1")
			if _, err := s.Group(ctx, sc[0], sc[1], "g1"); err != nil {
				t.Fatalf("%v group: %v", sc, err)
			}
		}
	})

	t.Run("ping", func(t *testing.T) {
		t.Parallel()
		must(t, newStore(t).Ping(ctx))
	})

	runConcurrencySuite(t, newStore)
}
