package documents

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/testkit/mongotest"
)

func TestMain(m *testing.M) { os.Exit(mongotest.Run(m)) }

// The conformance suite: every Store implementation must pass it unchanged.
func TestMemoryStore(t *testing.T) {
	runStoreSuite(t, func(t *testing.T) Store { return NewMemoryStore() })
}

func TestMongoStore(t *testing.T) {
	runStoreSuite(t, func(t *testing.T) Store {
		s, err := NewMongoStore(context.Background(), mongotest.Connect(t).Database("documents"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// A restart opens the store on a database that has its indexes already.
func TestMongoStoreReopens(t *testing.T) {
	ctx := context.Background()
	db := mongotest.Connect(t).Database("documents")
	first, err := NewMongoStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.CreateFolder(ctx, &Folder{APIKey: "k", OrganizationID: "o", ID: "f", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	second, err := NewMongoStore(ctx, db)
	if err != nil {
		t.Fatalf("second start: %v", err)
	}
	if f, err := second.ListFolders(ctx, "k", "o", FolderFilter{}, nil, 0); err != nil || len(f) != 1 {
		t.Fatalf("data after the second start: %v %v", f, err)
	}
}

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 8_000_000, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func ptr[T any](v T) *T { return &v }

func orgIDs(os []*Organization) []string {
	out := []string{}
	for _, o := range os {
		out = append(out, o.ID)
	}
	return out
}

func folderIDs(fs []*Folder) []string {
	out := []string{}
	for _, f := range fs {
		out = append(out, f.ID)
	}
	return out
}

func documentIDs(ds []*Document) []string {
	out := []string{}
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}

func runStoreSuite(t *testing.T, newStore func(t *testing.T) Store) {
	ctx := context.Background()

	mustOrg := func(t *testing.T, s Store, o *Organization) {
		t.Helper()
		if err := s.CreateOrganization(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	mustFolder := func(t *testing.T, s Store, f *Folder) {
		t.Helper()
		if err := s.CreateFolder(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	mustDoc := func(t *testing.T, s Store, d *Document) {
		t.Helper()
		if err := s.CreateDocument(ctx, d); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("organizations: create, read, rename, duplicates, scope", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		o := &Organization{APIKey: "k1", ID: "o1", Name: "One", CreatedAt: at(0)}
		mustOrg(t, s, o)
		got, err := s.Organization(ctx, "k1", "o1")
		if err != nil || got.APIKey != "k1" || got.ID != "o1" || got.Name != "One" || !got.CreatedAt.Equal(at(0)) {
			t.Fatalf("read %+v %v", got, err)
		}
		if err := s.CreateOrganization(ctx, &Organization{APIKey: "k1", ID: "o1", Name: "again", CreatedAt: at(1)}); !errors.Is(err, ErrExists) {
			t.Fatalf("duplicate: %v", err)
		}
		// The same id under another key is another organization.
		mustOrg(t, s, &Organization{APIKey: "k2", ID: "o1", Name: "Theirs", CreatedAt: at(1)})
		if _, err := s.Organization(ctx, "k1", "nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("missing: %v", err)
		}
		if _, err := s.Organization(ctx, "k3", "o1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("other key: %v", err)
		}
		if err := s.RenameOrganization(ctx, "k1", "o1", "Renamed"); err != nil {
			t.Fatal(err)
		}
		if err := s.RenameOrganization(ctx, "k1", "nope", "x"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("rename missing: %v", err)
		}
		if err := s.RenameOrganization(ctx, "k3", "o1", "x"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("rename with another key: %v", err)
		}
		mine, _ := s.Organization(ctx, "k1", "o1")
		theirs, _ := s.Organization(ctx, "k2", "o1")
		if mine.Name != "Renamed" || theirs.Name != "Theirs" || !mine.CreatedAt.Equal(at(0)) {
			t.Fatalf("after rename: %+v %+v", mine, theirs)
		}
	})

	t.Run("organizations: listing order, filter, paging under inserts and deletes", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		// b and a share a timestamp, so the id breaks the tie.
		for _, o := range []*Organization{{ID: "c", CreatedAt: at(2)}, {ID: "b", CreatedAt: at(1)}, {ID: "a", CreatedAt: at(1)}, {ID: "d", CreatedAt: at(3)}} {
			o.APIKey = "k1"
			mustOrg(t, s, o)
		}
		mustOrg(t, s, &Organization{APIKey: "k2", ID: "x", CreatedAt: at(0)})
		all, err := s.ListOrganizations(ctx, "k1", nil, nil, 0)
		if err != nil || !slices.Equal(orgIDs(all), []string{"a", "b", "c", "d"}) {
			t.Fatalf("all %v %v", orgIDs(all), err)
		}
		page1, _ := s.ListOrganizations(ctx, "k1", nil, nil, 2)
		if !slices.Equal(orgIDs(page1), []string{"a", "b"}) {
			t.Fatalf("page 1 %v", orgIDs(page1))
		}
		last := page1[1].position()
		// Between pages: the next one goes, an old one goes, a new one comes.
		_ = s.DeleteOrganization(ctx, "k1", "c", "")
		_ = s.DeleteOrganization(ctx, "k1", "b", "")
		mustOrg(t, s, &Organization{APIKey: "k1", ID: "0-new", CreatedAt: at(10)})
		page2, _ := s.ListOrganizations(ctx, "k1", nil, &last, 10)
		if !slices.Equal(orgIDs(page2), []string{"d", "0-new"}) {
			t.Fatalf("page 2 %v", orgIDs(page2))
		}
		some, _ := s.ListOrganizations(ctx, "k1", []string{"d", "a", "x", "nope"}, nil, 0)
		if !slices.Equal(orgIDs(some), []string{"a", "d"}) {
			t.Fatalf("by ids %v", orgIDs(some))
		}
		other, _ := s.ListOrganizations(ctx, "k2", nil, nil, 0)
		if !slices.Equal(orgIDs(other), []string{"x"}) {
			t.Fatalf("k2 %v", orgIDs(other))
		}
		none, err := s.ListOrganizations(ctx, "k3", nil, nil, 0)
		if err != nil || len(none) != 0 {
			t.Fatalf("unknown key %v %v", none, err)
		}
	})

	t.Run("folders: create, filters, update, delete, scope", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		f1 := &Folder{APIKey: "k1", OrganizationID: "o", ID: "f1", Name: "F1", AccessType: "restricted", CreatedAt: at(1)}
		mustFolder(t, s, f1)
		mustFolder(t, s, &Folder{APIKey: "k1", OrganizationID: "o", ID: "f2", Name: "F2", ParentID: "f1", CreatedAt: at(2)})
		mustFolder(t, s, &Folder{APIKey: "k1", OrganizationID: "o", ID: "f3", ParentID: "f2", CreatedAt: at(3)})
		mustFolder(t, s, &Folder{APIKey: "k1", OrganizationID: "o", ID: "g", CreatedAt: at(0)})
		// Same ids elsewhere: another organization, another key.
		mustFolder(t, s, &Folder{APIKey: "k1", OrganizationID: "o2", ID: "f1", CreatedAt: at(0)})
		mustFolder(t, s, &Folder{APIKey: "k2", OrganizationID: "o", ID: "f1", CreatedAt: at(0)})
		if err := s.CreateFolder(ctx, &Folder{APIKey: "k1", OrganizationID: "o", ID: "f1", CreatedAt: at(9)}); !errors.Is(err, ErrExists) {
			t.Fatalf("duplicate: %v", err)
		}

		got, err := s.ListFolders(ctx, "k1", "o", FolderFilter{IDs: []string{"f1"}}, nil, 0)
		if err != nil || len(got) != 1 || got[0].APIKey != "k1" || got[0].OrganizationID != "o" || got[0].Name != f1.Name ||
			got[0].AccessType != f1.AccessType || got[0].ParentID != "" || !got[0].CreatedAt.Equal(f1.CreatedAt) {
			t.Fatalf("read f1 %+v %v", got, err)
		}
		all, _ := s.ListFolders(ctx, "k1", "o", FolderFilter{}, nil, 0)
		if !slices.Equal(folderIDs(all), []string{"g", "f1", "f2", "f3"}) {
			t.Fatalf("all %v", folderIDs(all))
		}
		byIDs, _ := s.ListFolders(ctx, "k1", "o", FolderFilter{IDs: []string{"f3", "nope", "g"}}, nil, 0)
		if !slices.Equal(folderIDs(byIDs), []string{"g", "f3"}) {
			t.Fatalf("by ids %v", folderIDs(byIDs))
		}
		// Each record once, however often its id is asked for, in short lists and long ones.
		repeated, _ := s.ListFolders(ctx, "k1", "o", FolderFilter{IDs: []string{"f3", "g", "f3", "g"}}, nil, 0)
		if !slices.Equal(folderIDs(repeated), []string{"g", "f3"}) {
			t.Fatalf("repeated ids %v", folderIDs(repeated))
		}
		long := []string{"f2", "f1"}
		for i := range 70 {
			long = append(long, fmt.Sprintf("nope%d", i), "f2")
		}
		if got, _ := s.ListFolders(ctx, "k1", "o", FolderFilter{IDs: long}, nil, 0); !slices.Equal(folderIDs(got), []string{"f1", "f2"}) {
			t.Fatalf("a long list of repeated ids %v", folderIDs(got))
		}
		roots, _ := s.ListFolders(ctx, "k1", "o", FolderFilter{ParentIDs: []string{""}}, nil, 0)
		if !slices.Equal(folderIDs(roots), []string{"g", "f1"}) {
			t.Fatalf("roots %v", folderIDs(roots))
		}
		children, _ := s.ListFolders(ctx, "k1", "o", FolderFilter{ParentIDs: []string{"f1", "f2"}}, nil, 0)
		if !slices.Equal(folderIDs(children), []string{"f2", "f3"}) {
			t.Fatalf("children %v", folderIDs(children))
		}
		both, _ := s.ListFolders(ctx, "k1", "o", FolderFilter{IDs: []string{"f2", "g"}, ParentIDs: []string{"f1"}}, nil, 0)
		if !slices.Equal(folderIDs(both), []string{"f2"}) {
			t.Fatalf("ids and parents %v", folderIDs(both))
		}
		pos := all[1].position()
		rest, _ := s.ListFolders(ctx, "k1", "o", FolderFilter{}, &pos, 1)
		if !slices.Equal(folderIDs(rest), []string{"f2"}) {
			t.Fatalf("after f1, limit 1: %v", folderIDs(rest))
		}

		up, err := s.UpdateFolder(ctx, "k1", "o", "f3", FolderPatch{Name: ptr("Three"), ParentID: ptr(""), AccessType: ptr("public")})
		if err != nil || up.Name != "Three" || up.ParentID != "" || up.AccessType != "public" || !up.CreatedAt.Equal(at(3)) {
			t.Fatalf("update %+v %v", up, err)
		}
		up, err = s.UpdateFolder(ctx, "k1", "o", "f3", FolderPatch{Name: ptr("Only name")})
		if err != nil || up.Name != "Only name" || up.AccessType != "public" {
			t.Fatalf("partial update %+v %v", up, err)
		}
		if up, err := s.UpdateFolder(ctx, "k1", "o", "f3", FolderPatch{}); err != nil || up.Name != "Only name" {
			t.Fatalf("empty patch %+v %v", up, err)
		}
		for _, scope := range [][2]string{{"k1", "nope-org"}, {"k3", "o"}} {
			if _, err := s.UpdateFolder(ctx, scope[0], scope[1], "f3", FolderPatch{Name: ptr("x")}); !errors.Is(err, ErrNotFound) {
				t.Fatalf("update in %v: %v", scope, err)
			}
		}
		if _, err := s.UpdateFolder(ctx, "k1", "o", "nope", FolderPatch{}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("empty patch of a missing folder: %v", err)
		}

		if err := s.DeleteFolder(ctx, "k1", "o", "f1", ""); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteFolder(ctx, "k1", "o", "f1", ""); err != nil {
			t.Fatalf("second delete: %v", err)
		}
		left, _ := s.ListFolders(ctx, "k1", "o", FolderFilter{}, nil, 0)
		if !slices.Equal(folderIDs(left), []string{"g", "f2", "f3"}) {
			t.Fatalf("after delete %v", folderIDs(left))
		}
		for _, scope := range [][2]string{{"k1", "o2"}, {"k2", "o"}} {
			if others, _ := s.ListFolders(ctx, scope[0], scope[1], FolderFilter{}, nil, 0); !slices.Equal(folderIDs(others), []string{"f1"}) {
				t.Fatalf("%v touched: %v", scope, folderIDs(others))
			}
		}
	})

	t.Run("documents: create, read, update, delete, scope", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		d := &Document{APIKey: "k1", OrganizationID: "o", ID: "d1", Name: "Doc", FolderID: "f", AccessType: "restricted", Disabled: true, CreatedAt: at(1), MigrationID: "mig_1"}
		mustDoc(t, s, d)
		mustDoc(t, s, &Document{APIKey: "k1", OrganizationID: "o2", ID: "d1", CreatedAt: at(1)})
		mustDoc(t, s, &Document{APIKey: "k2", OrganizationID: "o", ID: "d1", CreatedAt: at(1)})
		if err := s.CreateDocument(ctx, &Document{APIKey: "k1", OrganizationID: "o", ID: "d1", CreatedAt: at(5)}); !errors.Is(err, ErrExists) {
			t.Fatalf("duplicate: %v", err)
		}
		got, err := s.ListDocuments(ctx, "k1", "o", DocumentFilter{IDs: []string{"d1"}}, nil, 0)
		if err != nil || len(got) != 1 {
			t.Fatalf("read %v %v", got, err)
		}
		if g := got[0]; g.APIKey != d.APIKey || g.OrganizationID != d.OrganizationID || g.Name != d.Name || g.FolderID != d.FolderID ||
			g.AccessType != d.AccessType || g.Disabled != d.Disabled || !g.CreatedAt.Equal(d.CreatedAt) || g.MigrationID != d.MigrationID {
			t.Fatalf("read back %+v, stored %+v", g, d)
		}

		up, err := s.UpdateDocument(ctx, "k1", "o", "d1", DocumentPatch{Name: ptr("New"), FolderID: ptr(""), Disabled: ptr(false), AccessType: ptr("public")})
		if err != nil || up.Name != "New" || up.FolderID != "" || up.Disabled || up.AccessType != "public" || !up.CreatedAt.Equal(at(1)) {
			t.Fatalf("update %+v %v", up, err)
		}
		up, err = s.UpdateDocument(ctx, "k1", "o", "d1", DocumentPatch{Disabled: ptr(true)})
		if err != nil || !up.Disabled || up.Name != "New" || up.AccessType != "public" {
			t.Fatalf("partial update %+v %v", up, err)
		}
		for _, scope := range [][3]string{{"k1", "o", "nope"}, {"k1", "o3", "d1"}, {"k3", "o", "d1"}} {
			if _, err := s.UpdateDocument(ctx, scope[0], scope[1], scope[2], DocumentPatch{Name: ptr("x")}); !errors.Is(err, ErrNotFound) {
				t.Fatalf("update %v: %v", scope, err)
			}
		}
		if _, err := s.UpdateDocument(ctx, "k1", "o", "nope", DocumentPatch{}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("empty patch of a missing document: %v", err)
		}

		if err := s.DeleteDocuments(ctx, "k1", "o", refs("d1", "nope")); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteDocuments(ctx, "k1", "o", refs("d1")); err != nil {
			t.Fatalf("second delete: %v", err)
		}
		if err := s.DeleteDocuments(ctx, "k1", "o", nil); err != nil {
			t.Fatalf("deleting nothing: %v", err)
		}
		if left, _ := s.ListDocuments(ctx, "k1", "o", DocumentFilter{}, nil, 0); len(left) != 0 {
			t.Fatalf("after delete %v", documentIDs(left))
		}
		for _, scope := range [][2]string{{"k1", "o2"}, {"k2", "o"}} {
			if others, _ := s.ListDocuments(ctx, scope[0], scope[1], DocumentFilter{}, nil, 0); !slices.Equal(documentIDs(others), []string{"d1"}) {
				t.Fatalf("%v touched: %v", scope, documentIDs(others))
			}
		}
	})

	t.Run("documents: listing order, filters, paging under inserts and deletes", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		add := func(id, folder string, ms int) {
			mustDoc(t, s, &Document{APIKey: "k1", OrganizationID: "o", ID: id, FolderID: folder, CreatedAt: at(ms)})
		}
		add("d3", "f", 3)
		add("d1", "", 1)
		add("d2b", "f", 2)
		add("d2a", "", 2)
		add("d4", "f", 4)
		add("d5", "", 5)
		mustDoc(t, s, &Document{APIKey: "k1", OrganizationID: "other", ID: "x", CreatedAt: at(0)})

		all, _ := s.ListDocuments(ctx, "k1", "o", DocumentFilter{}, nil, 0)
		if !slices.Equal(documentIDs(all), []string{"d1", "d2a", "d2b", "d3", "d4", "d5"}) {
			t.Fatalf("all %v", documentIDs(all))
		}
		inF, _ := s.ListDocuments(ctx, "k1", "o", DocumentFilter{FolderID: "f"}, nil, 0)
		if !slices.Equal(documentIDs(inF), []string{"d2b", "d3", "d4"}) {
			t.Fatalf("in f %v", documentIDs(inF))
		}
		both, _ := s.ListDocuments(ctx, "k1", "o", DocumentFilter{FolderID: "f", IDs: []string{"d1", "d4", "d3", "x"}}, nil, 0)
		if !slices.Equal(documentIDs(both), []string{"d3", "d4"}) {
			t.Fatalf("ids in f %v", documentIDs(both))
		}
		repeated, _ := s.ListDocuments(ctx, "k1", "o", DocumentFilter{IDs: []string{"d5", "d1", "d5", "x", "d1"}}, nil, 0)
		if !slices.Equal(documentIDs(repeated), []string{"d1", "d5"}) {
			t.Fatalf("repeated ids %v", documentIDs(repeated))
		}
		long := []string{"d4"}
		for i := range 70 {
			long = append(long, "d2b", fmt.Sprintf("nope%d", i))
		}
		if got, _ := s.ListDocuments(ctx, "k1", "o", DocumentFilter{IDs: long}, nil, 0); !slices.Equal(documentIDs(got), []string{"d2b", "d4"}) {
			t.Fatalf("a long list of repeated ids %v", documentIDs(got))
		}

		page1, _ := s.ListDocuments(ctx, "k1", "o", DocumentFilter{}, nil, 2)
		if !slices.Equal(documentIDs(page1), []string{"d1", "d2a"}) {
			t.Fatalf("page 1 %v", documentIDs(page1))
		}
		pos := page1[1].position()
		// Between pages: the last listed and a later one go, one arrives.
		_ = s.DeleteDocuments(ctx, "k1", "o", refs("d2a", "d3"))
		add("d0", "", 6)
		page2, _ := s.ListDocuments(ctx, "k1", "o", DocumentFilter{}, &pos, 2)
		if !slices.Equal(documentIDs(page2), []string{"d2b", "d4"}) {
			t.Fatalf("page 2 %v", documentIDs(page2))
		}
		pos = page2[1].position()
		page3, _ := s.ListDocuments(ctx, "k1", "o", DocumentFilter{}, &pos, 2)
		if !slices.Equal(documentIDs(page3), []string{"d5", "d0"}) {
			t.Fatalf("page 3 %v", documentIDs(page3))
		}
		pos = page3[1].position()
		if end, err := s.ListDocuments(ctx, "k1", "o", DocumentFilter{}, &pos, 2); err != nil || len(end) != 0 {
			t.Fatalf("after the end %v %v", documentIDs(end), err)
		}
		fpos := Position{CreatedAt: at(2), ID: "d2b"}
		fpage, _ := s.ListDocuments(ctx, "k1", "o", DocumentFilter{FolderID: "f"}, &fpos, 0)
		if !slices.Equal(documentIDs(fpage), []string{"d4"}) {
			t.Fatalf("folder page after d2b %v", documentIDs(fpage))
		}
		if none, _ := s.ListDocuments(ctx, "k2", "o", DocumentFilter{}, nil, 0); len(none) != 0 {
			t.Fatalf("other key %v", documentIDs(none))
		}
	})

	// A deletion names a generation: what another generation of the same ids holds stays.
	t.Run("deletions are scoped by generation", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		mustOrg(t, s, &Organization{APIKey: "k1", ID: "o", Generation: "g2", CreatedAt: at(0)})
		for _, gen := range []string{"g1", "g2"} {
			mustFolder(t, s, &Folder{APIKey: "k1", OrganizationID: "o", ID: "f-" + gen, Generation: "fg", OrgGeneration: gen, CreatedAt: at(1)})
			mustDoc(t, s, &Document{APIKey: "k1", OrganizationID: "o", ID: "d-" + gen, Generation: "dg", OrgGeneration: gen, CreatedAt: at(1)})
		}
		// The old generation's sweep leaves the organization of today and its contents.
		if err := s.DeleteOrganization(ctx, "k1", "o", "g1"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Organization(ctx, "k1", "o"); err != nil {
			t.Fatalf("the newer organization went with the older one's sweep: %v", err)
		}
		f, _ := s.ListFolders(ctx, "k1", "o", FolderFilter{}, nil, 0)
		d, _ := s.ListDocuments(ctx, "k1", "o", DocumentFilter{}, nil, 0)
		if !slices.Equal(folderIDs(f), []string{"f-g2"}) || !slices.Equal(documentIDs(d), []string{"d-g2"}) {
			t.Fatalf("after the g1 sweep: %v %v", folderIDs(f), documentIDs(d))
		}
		// A document or folder of another generation than the one named stays.
		must(t, s.DeleteDocuments(ctx, "k1", "o", []lifecycle.Incarnation{{ID: "d-g2", Generation: "other"}}))
		must(t, s.DeleteFolder(ctx, "k1", "o", "f-g2", "other"))
		f, _ = s.ListFolders(ctx, "k1", "o", FolderFilter{}, nil, 0)
		d, _ = s.ListDocuments(ctx, "k1", "o", DocumentFilter{}, nil, 0)
		if len(f) != 1 || len(d) != 1 {
			t.Fatalf("a deletion of another generation removed %v %v", folderIDs(f), documentIDs(d))
		}
		must(t, s.DeleteDocuments(ctx, "k1", "o", []lifecycle.Incarnation{{ID: "d-g2", Generation: "dg"}}))
		must(t, s.DeleteFolder(ctx, "k1", "o", "f-g2", "fg"))
		f, _ = s.ListFolders(ctx, "k1", "o", FolderFilter{}, nil, 0)
		d, _ = s.ListDocuments(ctx, "k1", "o", DocumentFilter{}, nil, 0)
		if len(f) != 0 || len(d) != 0 {
			t.Fatalf("left %v %v", folderIDs(f), documentIDs(d))
		}
		must(t, s.DeleteOrganization(ctx, "k1", "o", "g2"))
		if _, err := s.Organization(ctx, "k1", "o"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("organization left: %v", err)
		}
	})

	t.Run("delete an organization removes its folders and documents only", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		for _, o := range []*Organization{{APIKey: "k1", ID: "o"}, {APIKey: "k1", ID: "keep"}, {APIKey: "k2", ID: "o"}} {
			o.CreatedAt = at(0)
			mustOrg(t, s, o)
			mustFolder(t, s, &Folder{APIKey: o.APIKey, OrganizationID: o.ID, ID: "f", CreatedAt: at(1)})
			mustDoc(t, s, &Document{APIKey: o.APIKey, OrganizationID: o.ID, ID: "d", FolderID: "f", CreatedAt: at(1)})
		}
		for range 2 { // idempotent
			if err := s.DeleteOrganization(ctx, "k1", "o", ""); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Organization(ctx, "k1", "o"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("organization left: %v", err)
		}
		if f, _ := s.ListFolders(ctx, "k1", "o", FolderFilter{}, nil, 0); len(f) != 0 {
			t.Fatalf("folders left %v", folderIDs(f))
		}
		if d, _ := s.ListDocuments(ctx, "k1", "o", DocumentFilter{}, nil, 0); len(d) != 0 {
			t.Fatalf("documents left %v", documentIDs(d))
		}
		for _, scope := range [][2]string{{"k1", "keep"}, {"k2", "o"}} {
			if _, err := s.Organization(ctx, scope[0], scope[1]); err != nil {
				t.Fatalf("%v gone: %v", scope, err)
			}
			f, _ := s.ListFolders(ctx, scope[0], scope[1], FolderFilter{}, nil, 0)
			d, _ := s.ListDocuments(ctx, scope[0], scope[1], DocumentFilter{}, nil, 0)
			if len(f) != 1 || len(d) != 1 {
				t.Fatalf("%v lost data: %v %v", scope, folderIDs(f), documentIDs(d))
			}
		}
	})

	t.Run("records are copies", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		d := &Document{APIKey: "k1", OrganizationID: "o", ID: "d", Name: "before", CreatedAt: at(0)}
		mustDoc(t, s, d)
		d.Name = "changed by the caller"
		got, _ := s.ListDocuments(ctx, "k1", "o", DocumentFilter{}, nil, 0)
		got[0].Name = "changed again"
		up, _ := s.UpdateDocument(ctx, "k1", "o", "d", DocumentPatch{Disabled: ptr(true)})
		up.Name = "and again"
		if again, _ := s.ListDocuments(ctx, "k1", "o", DocumentFilter{}, nil, 0); again[0].Name != "before" {
			t.Fatalf("stored name %q", again[0].Name)
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

// refs names documents of the empty generation.
func refs(ids ...string) []lifecycle.Incarnation {
	out := make([]lifecycle.Incarnation, len(ids))
	for i, id := range ids {
		out[i].ID = id
	}
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
