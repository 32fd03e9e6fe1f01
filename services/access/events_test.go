package access

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/lifecycle"
)

// eventWorld gives users a and b grants and contexts in organizations o and o2 of k1, and the
// same in o of k2, so every test can check that an event touches only what it names.
func eventWorld(t *testing.T) *harness {
	h := newHarness(t)
	ctx := context.Background()
	for _, apiKey := range []string{"k1", "k2"} {
		for _, org := range []string{"o", "o2"} {
			for _, u := range []string{"a", "b"} {
				if err := h.store.PutGrants(ctx, apiKey, []Grant{
					orgGrant(org, u, "editor"), docGrant(org, "d1", u, "viewer"), docGrant(org, "d2", u, "editor"),
					folderGrant(org, "f1", u, "viewer"), folderGrant(org, "d1", u, "editor"),
				}); err != nil {
					t.Fatal(err)
				}
				if err := h.store.SetContextFields(ctx, apiKey, org, u, []string{"region:eu"}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return h
}

// snapshot lists every grant and context of one tenant and organization as sorted strings.
func (h *harness) snapshot(apiKey, org string) []string {
	h.t.Helper()
	ctx := context.Background()
	users := []string{"a", "b"}
	gs, err := h.store.Grants(ctx, apiKey, org, users, h.clock.Now())
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, g := range gs {
		out = append(out, fmt.Sprintf("%s %s/%s %s", g.UserID, g.ResourceType, g.ResourceID, g.AccessRole))
	}
	cs, err := h.store.ContextFields(ctx, apiKey, org, users)
	if err != nil {
		h.t.Fatal(err)
	}
	for u, f := range cs {
		out = append(out, fmt.Sprintf("%s context %v", u, f))
	}
	slices.Sort(out)
	return out
}

func without(all []string, drop ...string) []string {
	return slices.DeleteFunc(slices.Clone(all), func(s string) bool { return slices.Contains(drop, s) })
}

func TestHandleEvent(t *testing.T) {
	full := eventWorld(t).snapshot("k1", "o")
	if len(full) != 12 {
		t.Fatalf("world %v", full)
	}
	ev := func(p any) *lifecyclev1.Event {
		e := &lifecyclev1.Event{Id: "e1", ApiKey: "k1", OrganizationId: "o", CreatedAt: float64(start.UnixMilli())}
		switch p := p.(type) {
		case *lifecyclev1.OrganizationDeleted:
			e.Type, e.Payload = "organization.deleted", &lifecyclev1.Event_OrganizationDeleted{OrganizationDeleted: p}
		case *lifecyclev1.DocumentsDeleted:
			e.Type, e.Payload = "document.deleted", &lifecyclev1.Event_DocumentsDeleted{DocumentsDeleted: p}
		case *lifecyclev1.FolderDeleted:
			e.Type, e.Payload = "folder.deleted", &lifecyclev1.Event_FolderDeleted{FolderDeleted: p}
		case *lifecyclev1.DocumentMigrated:
			e.Type, e.Payload = "document.migrated", &lifecyclev1.Event_DocumentMigrated{DocumentMigrated: p}
		case *lifecyclev1.UsersRemoved:
			e.Type, e.Payload = "users.removed", &lifecyclev1.Event_UsersRemoved{UsersRemoved: p}
		case *lifecyclev1.LocationDataDeleted:
			e.Type, e.Payload = "location.data_deleted", &lifecyclev1.Event_LocationDataDeleted{LocationDataDeleted: p}
		}
		return e
	}
	cases := []struct {
		name  string
		event *lifecyclev1.Event
		setup func(h *harness)
		want  []string
	}{
		{"organization.deleted", ev(&lifecyclev1.OrganizationDeleted{}), nil, nil},
		{"document.deleted", ev(&lifecyclev1.DocumentsDeleted{DocumentIds: []string{"d1", "d2", "gone"}}), nil,
			without(full, "a document/d1 viewer", "b document/d1 viewer", "a document/d2 editor", "b document/d2 editor")},
		{"folder.deleted", ev(&lifecyclev1.FolderDeleted{FolderId: "f1"}), nil,
			without(full, "a folder/f1 viewer", "b folder/f1 viewer")},
		{"document.migrated", ev(&lifecyclev1.DocumentMigrated{FromDocumentId: "d1", ToDocumentId: "d3", MigrationId: "m"}),
			func(h *harness) { // b already has a grant on d3 and keeps it
				if err := h.store.PutGrants(context.Background(), "k1", []Grant{docGrant("o", "d3", "b", "editor")}); err != nil {
					t.Fatal(err)
				}
			},
			append(without(full, "a document/d1 viewer", "b document/d1 viewer"), "a document/d3 viewer", "b document/d3 editor")},
		{"users.removed", ev(&lifecyclev1.UsersRemoved{UserIds: []string{"a"}}), nil,
			without(full, "a organization/o editor", "a document/d1 viewer", "a document/d2 editor", "a folder/f1 viewer", "a folder/d1 editor", "a context [region:eu]")},
		{"users.removed from a document", ev(&lifecyclev1.UsersRemoved{UserIds: []string{"a"}, DocumentId: "d1"}), nil,
			without(full, "a document/d1 viewer")},
		{"users.removed from a folder", ev(&lifecyclev1.UsersRemoved{UserIds: []string{"a", "b"}, FolderId: "d1"}), nil,
			without(full, "a folder/d1 editor", "b folder/d1 editor")},
		{"location.data_deleted", ev(&lifecyclev1.LocationDataDeleted{LocationId: "l"}), nil, full},
		{"unknown payload", &lifecyclev1.Event{Id: "e", Type: "something.new", ApiKey: "k1", OrganizationId: "o"}, nil, full},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := eventWorld(t)
			if c.setup != nil {
				c.setup(h)
			}
			others := [][]string{h.snapshot("k1", "o2"), h.snapshot("k2", "o")}
			for i := range 2 { // a second delivery changes nothing
				if err := h.srv.HandleEvent(context.Background(), c.event); err != nil {
					t.Fatalf("delivery %d: %v", i+1, err)
				}
				want := slices.Sorted(slices.Values(c.want))
				if got := h.snapshot("k1", "o"); !slices.Equal(got, want) {
					t.Fatalf("delivery %d:\n got %q\nwant %q", i+1, got, want)
				}
			}
			if !slices.Equal(h.snapshot("k1", "o2"), others[0]) || !slices.Equal(h.snapshot("k2", "o"), others[1]) {
				t.Fatal("the event reached another organization or tenant")
			}
		})
	}
}

func TestHandleEventMigrationSkipsLapsedGrants(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if err := h.store.PutGrants(ctx, "k1", []Grant{expiring(docGrant("o", "from", "a", "editor"), start.Add(time.Hour)), expiring(docGrant("o", "to", "b", "viewer"), start.Add(time.Minute))}); err != nil {
		t.Fatal(err)
	}
	if err := h.store.PutGrants(ctx, "k1", []Grant{docGrant("o", "from", "b", "editor")}); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(30 * time.Minute) // b's grant on "to" lapsed: the moved one replaces it
	e := &lifecyclev1.Event{Id: "e", Type: "document.migrated", ApiKey: "k1", OrganizationId: "o",
		Payload: &lifecyclev1.Event_DocumentMigrated{DocumentMigrated: &lifecyclev1.DocumentMigrated{FromDocumentId: "from", ToDocumentId: "to"}}}
	if err := h.srv.HandleEvent(ctx, e); err != nil {
		t.Fatal(err)
	}
	sameGrants(t, "migrated", func() []Grant {
		g, _ := h.store.Grants(ctx, "k1", "o", []string{"a", "b"}, h.clock.Now())
		return g
	}(), []Grant{expiring(docGrant("o", "to", "a", "editor"), start.Add(time.Hour)), docGrant("o", "to", "b", "editor")})
}

func TestHandleEventRefusesIncompleteEvents(t *testing.T) {
	h := newHarness(t)
	for name, e := range map[string]*lifecyclev1.Event{
		"no api key":      {Id: "e", Type: "organization.deleted", OrganizationId: "o", Payload: &lifecyclev1.Event_OrganizationDeleted{OrganizationDeleted: &lifecyclev1.OrganizationDeleted{}}},
		"no organization": {Id: "e", Type: "users.removed", ApiKey: "k1", Payload: &lifecyclev1.Event_UsersRemoved{UsersRemoved: &lifecyclev1.UsersRemoved{UserIds: []string{"a"}}}},
		"no folder":       {Id: "e", Type: "folder.deleted", ApiKey: "k1", OrganizationId: "o", Payload: &lifecyclev1.Event_FolderDeleted{FolderDeleted: &lifecyclev1.FolderDeleted{}}},
		"no target":       {Id: "e", Type: "document.migrated", ApiKey: "k1", OrganizationId: "o", Payload: &lifecyclev1.Event_DocumentMigrated{DocumentMigrated: &lifecyclev1.DocumentMigrated{FromDocumentId: "d"}}},
	} {
		err := h.srv.HandleEvent(context.Background(), e)
		if st(err).Code() != codes.InvalidArgument || !lifecycle.Permanent(err) {
			t.Errorf("%s: %v (want a permanent InvalidArgument)", name, err)
		}
	}
}
