package documents

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/cursor"
	"github.com/collab/collab/internal/outbox"
)

func TestNewNeedsStoreAndPublisher(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		store Store
		pub   Publisher
	}{
		{"refuses no store", nil, &recordingPublisher{}},
		{"refuses no publisher", NewMemoryStore(), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if _, err := New(c.store, []byte("s"), c.pub); err == nil {
				t.Error("accepted")
			}
		})
	}
}

func TestCallerIsRequired(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, err := h.srv.GetOrganizations(context.Background(), &documentsv1.GetOrganizationsRequest{})
	wantErr(t, "no caller", err, codes.Internal, "Internal error.")
}

func TestOrganizations(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.step("add trims names", func(t *testing.T) {
		resp, err := h.srv.AddOrganizations(k1, &documentsv1.AddOrganizationsRequest{Organizations: []*documentsv1.Organization{
			{OrganizationId: "o1", OrganizationName: " One "}, {OrganizationId: "o2", OrganizationName: "Two"},
		}})
		wantItems(t, "add", resp, err, "Organization(s) added successfully.", map[string]string{"o1": "ok: Organization added.", "o2": "ok: Organization added."})
	})
	h.step("add refuses an existing id and adds the rest", func(t *testing.T) {
		resp, err := h.srv.AddOrganizations(k1, &documentsv1.AddOrganizationsRequest{Organizations: []*documentsv1.Organization{
			{OrganizationId: "o1", OrganizationName: "again"}, {OrganizationId: "o3"},
		}})
		wantItems(t, "add again", resp, err, "Organization(s) added successfully.", map[string]string{"o1": "fail: Organization already exists.", "o3": "ok: Organization added."})
	})
	h.step("get lists all in one page by creation time then id", func(t *testing.T) {
		got, err := h.srv.GetOrganizations(k1, &documentsv1.GetOrganizationsRequest{})
		if err != nil || got.GetMessage() != "Organizations retrieved successfully." || got.PageToken != nil {
			t.Fatalf("get all: %v %v", got, err)
		}
		var names []string
		for _, o := range got.GetData() {
			names = append(names, o.GetOrganizationId()+"="+o.GetOrganizationName())
		}
		// Same creation time: ordered by id. The name was trimmed; the refused add kept the name.
		if !slices.Equal(names, []string{"o1=One", "o2=Two", "o3="}) {
			t.Fatalf("organizations %v", names)
		}
	})
	h.step("get by ids skips unknown ids", func(t *testing.T) {
		some, err := h.srv.GetOrganizations(k1, &documentsv1.GetOrganizationsRequest{OrganizationIds: []string{"o3", "nope", "o1"}})
		if err != nil || len(some.GetData()) != 2 || some.GetData()[0].GetOrganizationId() != "o1" || some.GetData()[1].GetOrganizationId() != "o3" {
			t.Fatalf("by ids: %v %v", some, err)
		}
	})
	h.step("update renames and fails unknown ids", func(t *testing.T) {
		resp, err := h.srv.UpdateOrganizations(k1, &documentsv1.UpdateOrganizationsRequest{Organizations: []*documentsv1.Organization{
			{OrganizationId: "o2", OrganizationName: "Zwei"}, {OrganizationId: "ghost", OrganizationName: "x"},
		}})
		wantItems(t, "update", resp, err, "Organization(s) updated successfully.", map[string]string{"o2": "ok: Organization updated.", "ghost": "fail: Organization does not exist."})
		if o, _ := h.store.Organization(context.Background(), "k1", "o2"); o.Name != "Zwei" {
			t.Fatalf("renamed to %q", o.Name)
		}
	})
	h.step("delete takes folders and documents through its event", func(t *testing.T) {
		h.folder(k1, "o1", "f", "", "")
		h.docs(k1, "o1", "f", "d1")
		h.docs(k1, "o2", "", "keep")
		resp, err := h.srv.DeleteOrganizations(k1, &documentsv1.DeleteOrganizationsRequest{OrganizationIds: []string{"o1", "ghost"}})
		wantItems(t, "delete", resp, err, "Organization(s) deleted successfully.", map[string]string{"o1": "ok: Organization deleted.", "ghost": "fail: Organization does not exist."})
		events := h.pub.published()
		if len(events) != 1 || events[0].GetType() != "organization.deleted" || events[0].GetApiKey() != "k1" || events[0].GetOrganizationId() != "o1" || events[0].GetOrganizationDeleted() == nil {
			t.Fatalf("events %v", events)
		}
		if r, err := h.ob.Get(context.Background(), events[0].GetId()); err != nil || r.State() != "completed" {
			t.Fatalf("event delivered at once: %v %v", r, err)
		}
		if _, err := h.store.Organization(context.Background(), "k1", "o1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("organization left: %v", err)
		}
		if f, _ := h.store.ListFolders(context.Background(), "k1", "o1", FolderFilter{}, nil, 0); len(f) != 0 {
			t.Fatalf("folders left: %v", folderIDs(f))
		}
		if h.document("k1", "o1", "d1") != nil || h.document("k1", "o2", "keep") == nil {
			t.Fatal("documents of the wrong organization deleted")
		}
	})
}

func TestOrganizationPaging(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for i := range 5 {
		h.clock.Advance(time.Millisecond)
		h.org(k1, fmt.Sprintf("o%d", i))
	}
	h.org(k2, "theirs")
	page := func(t *testing.T, size int32, token string, ids ...string) ([]string, string) {
		t.Helper()
		resp, err := h.srv.GetOrganizations(k1, &documentsv1.GetOrganizationsRequest{PageSize: size, PageToken: token, OrganizationIds: ids})
		if err != nil {
			t.Fatalf("page after %q: %v", token, err)
		}
		var out []string
		for _, o := range resp.GetData() {
			out = append(out, o.GetOrganizationId())
		}
		return out, resp.GetPageToken()
	}
	var tok string
	h.step("first page", func(t *testing.T) {
		var first []string
		first, tok = page(t, 2, "")
		if !slices.Equal(first, []string{"o0", "o1"}) || tok == "" {
			t.Fatalf("page 1 %v %q", first, tok)
		}
	})
	h.step("later pages skip deletions and end with arrivals", func(t *testing.T) {
		// Between pages: one listed and one not yet listed go, one arrives.
		for _, id := range []string{"o1", "o3"} {
			if _, err := h.srv.DeleteOrganizations(k1, &documentsv1.DeleteOrganizationsRequest{OrganizationIds: []string{id}}); err != nil {
				t.Fatal(err)
			}
		}
		h.clock.Advance(time.Millisecond)
		h.org(k1, "a-new")
		second, tok2 := page(t, 2, tok)
		if !slices.Equal(second, []string{"o2", "o4"}) || tok2 == "" {
			t.Fatalf("page 2 %v %q", second, tok2)
		}
		third, tok3 := page(t, 2, tok2)
		if !slices.Equal(third, []string{"a-new"}) || tok3 != "" {
			t.Fatalf("page 3 %v %q", third, tok3)
		}
	})
	h.step("a token belongs to its filters and its tenant", func(t *testing.T) {
		_, tok := page(t, 1, "")
		for _, c := range []struct {
			name string
			ctx  context.Context
			req  *documentsv1.GetOrganizationsRequest
		}{
			{"token with other ids", k1, &documentsv1.GetOrganizationsRequest{PageToken: tok, OrganizationIds: []string{"o0"}}},
			{"token of another key", k2, &documentsv1.GetOrganizationsRequest{PageToken: tok}},
			{"forged token", k1, &documentsv1.GetOrganizationsRequest{PageToken: "garbage"}},
		} {
			t.Run(c.name, func(t *testing.T) {
				_, err := h.srv.GetOrganizations(c.ctx, c.req)
				wantErr(t, c.name, err, codes.InvalidArgument, "pageToken is invalid.")
			})
		}
	})
	h.step("ids in another order keep the token valid", func(t *testing.T) {
		_, tok := page(t, 1, "", "o2", "o0")
		if got, _ := page(t, 1, tok, "o0", "o2"); !slices.Equal(got, []string{"o2"}) {
			t.Fatalf("ids in another order keep the token valid: %v", got)
		}
	})
	h.step("pageSize out of range", func(t *testing.T) {
		for _, size := range []int32{-1, 1001} {
			t.Run(fmt.Sprint(size), func(t *testing.T) {
				_, err := h.srv.GetOrganizations(k1, &documentsv1.GetOrganizationsRequest{PageSize: size})
				wantErr(t, fmt.Sprint("pageSize ", size), err, codes.InvalidArgument, "pageSize must be between 1 and 1000.")
			})
		}
	})
	h.step("another key sees only its own", func(t *testing.T) {
		theirs, _ := h.srv.GetOrganizations(k2, &documentsv1.GetOrganizationsRequest{})
		if len(theirs.GetData()) != 1 || theirs.GetData()[0].GetOrganizationId() != "theirs" {
			t.Fatalf("k2 sees %v", theirs.GetData())
		}
	})
}

func TestFolders(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	get := func(t *testing.T, req *documentsv1.GetFoldersRequest) []string {
		t.Helper()
		req.OrganizationId = "o"
		resp, err := h.srv.GetFolders(k1, req)
		if err != nil || resp.GetMessage() != "Folders retrieved successfully." {
			t.Fatalf("get folders %v: %v %v", req, resp, err)
		}
		var out []string
		for _, f := range resp.GetData() {
			out = append(out, fmt.Sprintf("%s(%s) parent=%s ancestors=%s %s", f.GetFolderId(), f.GetFolderName(), f.GetParentFolderId(), strings.Join(f.GetAncestors(), "/"), f.GetAccessType()))
		}
		return out
	}
	h.step("add needs an organization", func(t *testing.T) {
		_, err := h.srv.AddFolders(k1, &documentsv1.AddFoldersRequest{OrganizationId: "o", Folders: []*documentsv1.Folder{{FolderId: "f"}}})
		wantErr(t, "missing organization", err, codes.NotFound, "Organization does not exist.")
	})
	h.step("add with createOrganization takes parents made earlier only", func(t *testing.T) {
		resp, err := h.srv.AddFolders(k1, &documentsv1.AddFoldersRequest{OrganizationId: "o", CreateOrganization: true, Folders: []*documentsv1.Folder{
			{FolderId: "a", FolderName: "A", AccessType: "restricted"},
			{FolderId: "b", FolderName: "B", ParentFolderId: "a"}, // parent earlier in the batch
			{FolderId: "c", ParentFolderId: "later"},              // parent later in the batch: not yet
			{FolderId: "later"},
			{FolderId: "x", ParentFolderId: "ghost"},
		}})
		wantItems(t, "add", resp, err, "Folder(s) added successfully.", map[string]string{
			"a": "ok: Folder added.", "b": "ok: Folder added.", "c": "fail: Parent folder does not exist.",
			"later": "ok: Folder added.", "x": "fail: Parent folder does not exist.",
		})
		if _, err := h.store.Organization(context.Background(), "k1", "o"); err != nil {
			t.Fatalf("createOrganization: %v", err)
		}
	})
	h.step("add refuses an existing id and adds the rest", func(t *testing.T) {
		h.clock.Advance(time.Millisecond)
		resp, err := h.srv.AddFolders(k1, &documentsv1.AddFoldersRequest{OrganizationId: "o", Folders: []*documentsv1.Folder{
			{FolderId: "a"}, {FolderId: "c", ParentFolderId: "b"},
		}})
		wantItems(t, "add more", resp, err, "Folder(s) added successfully.", map[string]string{"a": "fail: Folder already exists.", "c": "ok: Folder added."})
	})
	want := []string{
		"a(A) parent= ancestors= restricted",
		"b(B) parent=a ancestors=a restricted",
		"later() parent= ancestors= public",
		"c() parent=b ancestors=a/b restricted",
	}
	h.step("get lists all with ancestors and inherited access", func(t *testing.T) {
		if all := get(t, &documentsv1.GetFoldersRequest{}); !slices.Equal(all, want) {
			t.Fatalf("all folders\n%s\nwant\n%s", strings.Join(all, "\n"), strings.Join(want, "\n"))
		}
	})
	h.step("get filters", func(t *testing.T) {
		for _, c := range []struct {
			name string
			req  *documentsv1.GetFoldersRequest
			want []string
		}{
			{"by id skips unknown ids", &documentsv1.GetFoldersRequest{FolderIds: []string{"c", "nope"}}, want[3:]},
			{"children of a parent", &documentsv1.GetFoldersRequest{ParentFolderId: "a"}, want[1:2]},
			{"ids and parent both apply", &documentsv1.GetFoldersRequest{ParentFolderId: "a", FolderIds: []string{"c"}}, nil},
		} {
			t.Run(c.name, func(t *testing.T) {
				if got := get(t, c.req); !slices.Equal(got, c.want) {
					t.Fatalf("got %v, want %v", got, c.want)
				}
			})
		}
	})
	var paged *documentsv1.GetFoldersResponse
	h.step("get pages", func(t *testing.T) {
		var err error
		paged, err = h.srv.GetFolders(k1, &documentsv1.GetFoldersRequest{OrganizationId: "o", PageSize: 3})
		if err != nil || len(paged.GetData()) != 3 || paged.PageToken == nil {
			t.Fatalf("page 1: %v %v", paged, err)
		}
		rest, err := h.srv.GetFolders(k1, &documentsv1.GetFoldersRequest{OrganizationId: "o", PageSize: 3, PageToken: paged.GetPageToken()})
		if err != nil || len(rest.GetData()) != 1 || rest.GetData()[0].GetFolderId() != "c" || rest.PageToken != nil {
			t.Fatalf("page 2: %v %v", rest, err)
		}
	})
	h.step("get refusals", func(t *testing.T) {
		for _, c := range []struct {
			name string
			req  *documentsv1.GetFoldersRequest
			code codes.Code
			msg  string
		}{
			{"token with another parent filter", &documentsv1.GetFoldersRequest{OrganizationId: "o", ParentFolderId: "a", PageToken: paged.GetPageToken()}, codes.InvalidArgument, "pageToken is invalid."},
			{"unknown parent filter", &documentsv1.GetFoldersRequest{OrganizationId: "o", ParentFolderId: "ghost"}, codes.NotFound, "Folder does not exist."},
			{"unknown organization", &documentsv1.GetFoldersRequest{OrganizationId: "nope"}, codes.NotFound, "Organization does not exist."},
		} {
			t.Run(c.name, func(t *testing.T) {
				_, err := h.srv.GetFolders(k1, c.req)
				wantErr(t, c.name, err, c.code, c.msg)
			})
		}
	})
	h.step("update refuses a folder named twice", func(t *testing.T) {
		_, err := h.srv.UpdateFolders(k1, &documentsv1.UpdateFoldersRequest{OrganizationId: "o", Folders: []*documentsv1.FolderUpdate{
			{FolderId: "later", FolderName: ptr(" Later ")},
			{FolderId: "a", ParentFolderId: ptr("c")},     // into its own descendant
			{FolderId: "b", ParentFolderId: ptr("b")},     // into itself
			{FolderId: "c", ParentFolderId: ptr("later")}, // a real move
			{FolderId: "ghost", FolderName: ptr("x")},
			{FolderId: "later", ParentFolderId: ptr("nope")},
		}})
		if err == nil {
			t.Fatal("a folder named twice in one update accepted")
		}
		wantErr(t, "duplicate folder in update", err, codes.InvalidArgument, "folders[5].folderId repeats folders[0].folderId: each id may appear once.")
	})
	h.step("update renames, moves and refuses cycles", func(t *testing.T) {
		resp, err := h.srv.UpdateFolders(k1, &documentsv1.UpdateFoldersRequest{OrganizationId: "o", Folders: []*documentsv1.FolderUpdate{
			{FolderId: "later", FolderName: ptr(" Later ")},
			{FolderId: "a", ParentFolderId: ptr("c")},
			{FolderId: "b", ParentFolderId: ptr("b")},
			{FolderId: "c", ParentFolderId: ptr("later")},
			{FolderId: "ghost", FolderName: ptr("x")},
		}})
		wantItems(t, "update", resp, err, "Folder(s) updated successfully.", map[string]string{
			"later": "ok: Folder updated.",
			"a":     "fail: A folder cannot be moved into itself or its subfolders.",
			"b":     "fail: A folder cannot be moved into itself or its subfolders.",
			"c":     "ok: Folder updated.",
			"ghost": "fail: Folder does not exist.",
		})
	})
	h.step("update moves a folder below one that left it", func(t *testing.T) {
		resp, err := h.srv.UpdateFolders(k1, &documentsv1.UpdateFoldersRequest{OrganizationId: "o", Folders: []*documentsv1.FolderUpdate{
			{FolderId: "a", ParentFolderId: ptr("c")}, // c is no longer below a
			{FolderId: "later", ParentFolderId: ptr("nope")},
		}})
		wantItems(t, "update 2", resp, err, "Folder(s) updated successfully.", map[string]string{"a": "ok: Folder updated.", "later": "fail: Parent folder does not exist."})
		want := []string{
			"a(A) parent=c ancestors=later/c restricted",
			"b(B) parent=a ancestors=later/c/a restricted",
			"later(Later) parent= ancestors= public",
			"c() parent=later ancestors=later public",
		}
		if got := get(t, &documentsv1.GetFoldersRequest{}); !slices.Equal(got, want) {
			t.Fatalf("after moves\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
	h.step("update moves a folder to the root", func(t *testing.T) {
		resp, err := h.srv.UpdateFolders(k1, &documentsv1.UpdateFoldersRequest{OrganizationId: "o", Folders: []*documentsv1.FolderUpdate{{FolderId: "a", ParentFolderId: ptr("")}}})
		wantItems(t, "move to the root", resp, err, "Folder(s) updated successfully.", map[string]string{"a": "ok: Folder updated."})
		if got := get(t, &documentsv1.GetFoldersRequest{FolderIds: []string{"b"}}); !slices.Equal(got, []string{"b(B) parent=a ancestors=a restricted"}) {
			t.Fatalf("after move to the root %v", got)
		}
	})
	h.step("delete takes empty folders only, through its event", func(t *testing.T) {
		h.docs(k1, "o", "c", "in-c")
		resp, err := h.srv.DeleteFolders(k1, &documentsv1.DeleteFoldersRequest{OrganizationId: "o", FolderIds: []string{"a", "c", "b", "ghost"}})
		wantItems(t, "delete", resp, err, "Folder(s) deleted successfully.", map[string]string{
			"a": "fail: Folder is not empty.", "c": "fail: Folder is not empty.", "b": "ok: Folder deleted.", "ghost": "fail: Folder does not exist.",
		})
		events := h.pub.published()
		if len(events) != 1 || events[0].GetType() != "folder.deleted" || events[0].GetFolderDeleted().GetFolderId() != "b" || events[0].GetOrganizationId() != "o" {
			t.Fatalf("events %v", events)
		}
	})
	h.step("delete of a subfolder named before its parent empties the parent in time", func(t *testing.T) {
		h.folder(k1, "o", "p", "", "")
		h.folder(k1, "o", "q", "p", "")
		resp, err := h.srv.DeleteFolders(k1, &documentsv1.DeleteFoldersRequest{OrganizationId: "o", FolderIds: []string{"q", "p", "a"}})
		wantItems(t, "delete child then parent", resp, err, "Folder(s) deleted successfully.", map[string]string{"q": "ok: Folder deleted.", "p": "ok: Folder deleted.", "a": "ok: Folder deleted."})
		if got := get(t, &documentsv1.GetFoldersRequest{}); len(got) != 2 {
			t.Fatalf("left %v", got)
		}
	})
}

func TestFolderDepthIsBounded(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.org(k1, "o")
	parent := ""
	for i := range maxFolderDepth {
		id := fmt.Sprintf("f%02d", i)
		h.folder(k1, "o", id, parent, "")
		parent = id
	}
	h.step("add one level too deep", func(t *testing.T) {
		resp, err := h.srv.AddFolders(k1, &documentsv1.AddFoldersRequest{OrganizationId: "o", Folders: []*documentsv1.Folder{{FolderId: "deep", ParentFolderId: parent}}})
		wantItems(t, "one level too deep", resp, err, "Folder(s) added successfully.", map[string]string{"deep": "fail: Folders can be nested at most 64 levels deep."})
	})
	h.step("move counts the moved folder's subfolders", func(t *testing.T) {
		// Moving a folder with a subfolder under the 63rd level would put the subfolder at 65.
		h.folder(k1, "o", "m", "", "")
		h.folder(k1, "o", "m-child", "m", "")
		resp, err := h.srv.UpdateFolders(k1, &documentsv1.UpdateFoldersRequest{OrganizationId: "o", Folders: []*documentsv1.FolderUpdate{
			{FolderId: "m", ParentFolderId: ptr(fmt.Sprintf("f%02d", maxFolderDepth-2))},
			{FolderId: "m-child", ParentFolderId: ptr(fmt.Sprintf("f%02d", maxFolderDepth-2))},
		}})
		wantItems(t, "moves near the bound", resp, err, "Folder(s) updated successfully.", map[string]string{
			"m": "fail: Folders can be nested at most 64 levels deep.", "m-child": "ok: Folder updated.",
		})
		f, err := h.srv.GetFolders(k1, &documentsv1.GetFoldersRequest{OrganizationId: "o", FolderIds: []string{"m-child"}})
		if err != nil || len(f.GetData()[0].GetAncestors()) != maxFolderDepth-1 {
			t.Fatalf("m-child at the bound: %v", err)
		}
	})
}

func TestDocuments(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.step("add needs an organization", func(t *testing.T) {
		_, err := h.srv.AddDocuments(k1, &documentsv1.AddDocumentsRequest{OrganizationId: "o", Documents: []*documentsv1.DocumentInput{{DocumentId: "d"}}})
		wantErr(t, "missing organization", err, codes.NotFound, "Organization does not exist.")
	})
	h.org(k1, "o")
	h.folder(k1, "o", "f", "", "restricted")
	h.step("add needs the folder to exist", func(t *testing.T) {
		resp, err := h.srv.AddDocuments(k1, &documentsv1.AddDocumentsRequest{OrganizationId: "o", Documents: []*documentsv1.DocumentInput{
			{DocumentId: "d1", DocumentName: " One "}, {DocumentId: "d2", FolderId: "f"}, {DocumentId: "d3", FolderId: "ghost"},
		}})
		wantItems(t, "add", resp, err, "Document(s) added successfully.", map[string]string{
			"d1": "ok: Document added.", "d2": "ok: Document added.", "d3": "fail: Folder does not exist.",
		})
	})
	h.step("add with createFolder makes the folder at the root", func(t *testing.T) {
		h.clock.Advance(time.Millisecond)
		resp, err := h.srv.AddDocuments(k1, &documentsv1.AddDocumentsRequest{OrganizationId: "o", CreateFolder: true, Documents: []*documentsv1.DocumentInput{
			{DocumentId: "d1"}, {DocumentId: "d3", FolderId: "new-folder"}, {DocumentId: "d4", FolderId: "new-folder"},
		}})
		wantItems(t, "add with createFolder", resp, err, "Document(s) added successfully.", map[string]string{
			"d1": "fail: Document already exists.", "d3": "ok: Document added.", "d4": "ok: Document added.",
		})
		nf, _ := h.store.ListFolders(context.Background(), "k1", "o", FolderFilter{IDs: []string{"new-folder"}}, nil, 0)
		if len(nf) != 1 || nf[0].ParentID != "" || nf[0].AccessType != "" {
			t.Fatalf("created folder %+v", nf)
		}
	})
	h.step("add stores a trimmed name and keeps a refused document as it was", func(t *testing.T) {
		if d := h.document("k1", "o", "d1"); d.Name != "One" || d.FolderID != "" || d.Disabled || !d.CreatedAt.Equal(t0) {
			t.Fatalf("d1 stored as %+v", d)
		}
	})
	h.step("add with createOrganization", func(t *testing.T) {
		resp, err := h.srv.AddDocuments(k1, &documentsv1.AddDocumentsRequest{OrganizationId: "new-org", CreateOrganization: true, Documents: []*documentsv1.DocumentInput{{DocumentId: "d1"}}})
		wantItems(t, "add with createOrganization", resp, err, "Document(s) added successfully.", map[string]string{"d1": "ok: Document added."})
	})
	h.step("update name, folder and disabled", func(t *testing.T) {
		resp, err := h.srv.UpdateDocuments(k1, &documentsv1.UpdateDocumentsRequest{OrganizationId: "o", Documents: []*documentsv1.DocumentUpdate{
			{DocumentId: "d1", DocumentName: ptr("Renamed"), Disabled: ptr(true)},
			{DocumentId: "d2", FolderId: ptr("")},
			{DocumentId: "d3", FolderId: ptr("f")},
			{DocumentId: "d4", FolderId: ptr("ghost")},
			{DocumentId: "nope", FolderId: ptr("ghost2")},
		}})
		wantItems(t, "update", resp, err, "Document(s) updated successfully.", map[string]string{
			"d1": "ok: Document updated.", "d2": "ok: Document updated.", "d3": "ok: Document updated.",
			"d4": "fail: Folder does not exist.", "nope": "fail: Document does not exist.",
		})
		if d := h.document("k1", "o", "d1"); d.Name != "Renamed" || !d.Disabled {
			t.Fatalf("d1 after update %+v", d)
		}
		if got := h.v1(k1, "o"); !slices.Equal(got, []string{"d1:public", "d2:public", "d3:restricted", "d4:public"}) {
			t.Fatalf("after moves %v", got)
		}
	})
	h.step("update with createFolder makes folders for existing documents only", func(t *testing.T) {
		resp, err := h.srv.UpdateDocuments(k1, &documentsv1.UpdateDocumentsRequest{OrganizationId: "o", CreateFolder: true, Documents: []*documentsv1.DocumentUpdate{
			{DocumentId: "d4", FolderId: ptr("made-on-update")}, {DocumentId: "nope", FolderId: ptr("never-made")},
		}})
		wantItems(t, "update with createFolder", resp, err, "Document(s) updated successfully.", map[string]string{"d4": "ok: Document updated.", "nope": "fail: Document does not exist."})
		made, _ := h.store.ListFolders(context.Background(), "k1", "o", FolderFilter{IDs: []string{"made-on-update", "never-made"}}, nil, 0)
		if !slices.Equal(folderIDs(made), []string{"made-on-update"}) || h.document("k1", "o", "d4").FolderID != "made-on-update" {
			t.Fatalf("folders made on update %v", folderIDs(made))
		}
	})
	h.step("delete takes the existing ones in one event", func(t *testing.T) {
		resp, err := h.srv.DeleteDocuments(k1, &documentsv1.DeleteDocumentsRequest{OrganizationId: "o", DocumentIds: []string{"d1", "nope", "d2"}})
		wantItems(t, "delete", resp, err, "Document(s) deleted successfully.", map[string]string{
			"d1": "ok: Document deleted.", "d2": "ok: Document deleted.", "nope": "fail: Document does not exist.",
		})
		events := h.pub.published()
		if len(events) != 1 || events[0].GetType() != "document.deleted" || !slices.Equal(events[0].GetDocumentsDeleted().GetDocumentIds(), []string{"d1", "d2"}) {
			t.Fatalf("events %v", events)
		}
		if got := h.v1(k1, "o"); !slices.Equal(got, []string{"d3:restricted", "d4:public"}) {
			t.Fatalf("after delete %v", got)
		}
	})
	h.step("delete of nothing publishes nothing", func(t *testing.T) {
		resp, err := h.srv.DeleteDocuments(k1, &documentsv1.DeleteDocumentsRequest{OrganizationId: "o", DocumentIds: []string{"d1"}})
		wantItems(t, "delete again", resp, err, "Document(s) deleted successfully.", map[string]string{"d1": "fail: Document does not exist."})
		if len(h.pub.published()) != 1 {
			t.Fatal("an event for nothing to delete")
		}
	})
	h.step("a missing organization is not found", func(t *testing.T) {
		for _, c := range []struct {
			name string
			call func() error
		}{
			{"update", func() error {
				_, err := h.srv.UpdateDocuments(k1, &documentsv1.UpdateDocumentsRequest{OrganizationId: "nope", Documents: []*documentsv1.DocumentUpdate{{DocumentId: "d", Disabled: ptr(true)}}})
				return err
			}},
			{"delete", func() error {
				_, err := h.srv.DeleteDocuments(k1, &documentsv1.DeleteDocumentsRequest{OrganizationId: "nope", DocumentIds: []string{"d"}})
				return err
			}},
			{"v1", func() error {
				_, err := h.srv.GetDocumentsV1(k1, &documentsv1.GetDocumentsV1Request{OrganizationId: "nope"})
				return err
			}},
			{"v2", func() error {
				_, err := h.srv.GetDocuments(k1, &documentsv1.GetDocumentsRequest{OrganizationId: "nope"})
				return err
			}},
			{"update folders", func() error {
				_, err := h.srv.UpdateFolders(k1, &documentsv1.UpdateFoldersRequest{OrganizationId: "nope", Folders: []*documentsv1.FolderUpdate{{FolderId: "f", FolderName: ptr("x")}}})
				return err
			}},
			{"delete folders", func() error {
				_, err := h.srv.DeleteFolders(k1, &documentsv1.DeleteFoldersRequest{OrganizationId: "nope", FolderIds: []string{"f"}})
				return err
			}},
		} {
			t.Run(c.name, func(t *testing.T) {
				wantErr(t, c.name+" in a missing organization", c.call(), codes.NotFound, "Organization does not exist.")
			})
		}
	})
}

func TestGetDocumentsV1(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.org(k1, "o")
	h.folder(k1, "o", "f", "", "organizationPrivate")
	h.docs(k1, "o", "f", "z-first")
	h.docs(k1, "o", "", "a-second", "m-third")
	h.step("lists all in creation order with their effective access", func(t *testing.T) {
		resp, err := h.srv.GetDocumentsV1(k1, &documentsv1.GetDocumentsV1Request{OrganizationId: "o"})
		if err != nil || resp.GetStatus() != "success" || resp.GetMessage() != "Documents retrieved successfully." {
			t.Fatalf("%v %v", resp, err)
		}
		first := resp.GetData()[0]
		if first.GetId() != "z-first" || first.GetDocumentName() != "Doc z-first" || first.GetDisabled() || first.GetAccessType() != "organizationPrivate" {
			t.Fatalf("first %v", first)
		}
		if got := docIDsOf(resp.GetData()); !slices.Equal(got, []string{"z-first", "a-second", "m-third"}) {
			t.Fatalf("creation order %v", got)
		}
	})
	h.step("by ids skips unknown ids", func(t *testing.T) {
		if got := h.v1(k1, "o", "m-third", "unknown", "z-first"); !slices.Equal(got, []string{"z-first:organizationPrivate", "m-third:public"}) {
			t.Fatalf("by ids %v", got)
		}
	})
	h.step("needs no advanced queries", func(t *testing.T) {
		if _, err := h.srv.GetDocumentsV1(callerCtx("k1", false), &documentsv1.GetDocumentsV1Request{OrganizationId: "o"}); err != nil {
			t.Fatalf("v1 with advanced queries off: %v", err)
		}
	})
	h.step("only unknown ids list nothing", func(t *testing.T) {
		if empty := h.v1(k1, "o", "unknown"); len(empty) != 0 {
			t.Fatalf("only unknown ids %v", empty)
		}
	})
}

// Get Documents v1 is not paged: past its cap it refuses and points to v2, rather than building an
// answer the transport cannot carry.
func TestGetDocumentsV1IsBounded(t *testing.T) {
	t.Parallel()
	t.Run("over the count cap", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.org(k1, "o")
		for i := range maxV1Documents + 1 {
			id := fmt.Sprintf("doc-%06d", i)
			if err := h.store.CreateDocument(context.Background(), &Document{APIKey: "k1", OrganizationID: "o", ID: id, Name: id, CreatedAt: t0}); err != nil {
				t.Fatal(err)
			}
		}
		_, err := h.srv.GetDocumentsV1(k1, &documentsv1.GetDocumentsV1Request{OrganizationId: "o"})
		wantErr(t, "over the count cap", err, codes.FailedPrecondition, msgV1TooMany)
		if got := h.v1(k1, "o", "doc-000003"); len(got) != 1 {
			t.Fatalf("by id: %v", got)
		}
		// v2 pages through them.
		resp, err := h.srv.GetDocuments(k1, &documentsv1.GetDocumentsRequest{OrganizationId: "o", PageSize: 1000})
		if err != nil || len(resp.GetData()) != 1000 || resp.GetPageToken() == "" {
			t.Fatalf("v2: %d %v", len(resp.GetData()), err)
		}
	})
	t.Run("under the count cap but over the message size", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.org(k1, "o")
		name := strings.Repeat("\u00e9", maxDocumentNameLength)
		for i := range 9000 {
			id := fmt.Sprintf("doc-%06d-%s", i, strings.Repeat("x", 200))
			if err := h.store.CreateDocument(context.Background(), &Document{APIKey: "k1", OrganizationID: "o", ID: id, Name: name, CreatedAt: t0}); err != nil {
				t.Fatal(err)
			}
		}
		_, err := h.srv.GetDocumentsV1(k1, &documentsv1.GetDocumentsV1Request{OrganizationId: "o"})
		wantErr(t, "over the size cap", err, codes.FailedPrecondition, msgV1TooMany)
	})
}

func TestGetDocumentsV2(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.step("needs advanced queries", func(t *testing.T) {
		_, err := h.srv.GetDocuments(callerCtx("k1", false), &documentsv1.GetDocumentsRequest{OrganizationId: "o"})
		wantErr(t, "switch off", err, codes.FailedPrecondition, "Advanced queries are not enabled for this workspace. Turn them on with Update Workspace Settings (advancedQueries).")
	})
	h.org(k1, "o")
	h.folder(k1, "o", "f", "", "restricted")
	var all []string
	for i := range 7 {
		id := fmt.Sprintf("doc-%02d", i)
		folder := ""
		if i%2 == 0 {
			folder = "f"
		}
		h.docs(k1, "o", folder, id)
		all = append(all, id)
	}
	get := func(t *testing.T, req *documentsv1.GetDocumentsRequest) *documentsv1.GetDocumentsResponse {
		t.Helper()
		if req.OrganizationId == "" {
			req.OrganizationId = "o"
		}
		resp, err := h.srv.GetDocuments(k1, req)
		if err != nil || resp.GetMessage() != "Documents retrieved successfully." || resp.GetStatus() != "success" {
			t.Fatalf("get %v: %v %v", req, resp, err)
		}
		return resp
	}
	h.step("one default page holds them all", func(t *testing.T) {
		if resp := get(t, &documentsv1.GetDocumentsRequest{}); !slices.Equal(docIDsOf(resp.GetData()), all) || resp.PageToken != nil {
			t.Fatalf("one default page: %v %v", docIDsOf(resp.GetData()), resp.PageToken)
		}
	})
	h.step("a record carries name and effective access", func(t *testing.T) {
		if d := get(t, &documentsv1.GetDocumentsRequest{DocumentIds: []string{"doc-00"}}).GetData()[0]; d.GetAccessType() != "restricted" || d.GetDocumentName() != "Doc doc-00" {
			t.Fatalf("record %v", d)
		}
	})
	h.step("paging while documents come and go skips and repeats nothing", func(t *testing.T) {
		// Nothing that stays is skipped or repeated, new ones come at the end.
		var got []string
		tok := ""
		for page := 0; ; page++ {
			resp := get(t, &documentsv1.GetDocumentsRequest{PageSize: 3, PageToken: tok})
			got = append(got, docIDsOf(resp.GetData())...)
			switch page {
			case 0: // listed: 00 01 02. Drop the last listed and one ahead; add one.
				if _, err := h.srv.DeleteDocuments(k1, &documentsv1.DeleteDocumentsRequest{OrganizationId: "o", DocumentIds: []string{"doc-02", "doc-04"}}); err != nil {
					t.Fatal(err)
				}
				h.docs(k1, "o", "", "doc-new")
				all = slices.DeleteFunc(all, func(s string) bool { return s == "doc-04" })
				all = append(all, "doc-new")
			case 1:
				h.docs(k1, "o", "f", "doc-newer")
				all = append(all, "doc-newer")
			}
			if resp.PageToken == nil {
				break
			}
			tok = resp.GetPageToken()
			if page > 10 {
				t.Fatal("paging does not end")
			}
		}
		if !slices.Equal(got, all) {
			t.Fatalf("paged %v\nwant  %v", got, all)
		}
	})
	h.step("filters", func(t *testing.T) {
		for _, c := range []struct {
			name string
			req  *documentsv1.GetDocumentsRequest
			want []string
		}{
			{"folder", &documentsv1.GetDocumentsRequest{FolderId: "f"}, []string{"doc-00", "doc-06", "doc-newer"}},
			{"ids", &documentsv1.GetDocumentsRequest{DocumentIds: []string{"doc-03", "doc-01", "missing"}}, []string{"doc-01", "doc-03"}},
			{"folder and ids", &documentsv1.GetDocumentsRequest{FolderId: "f", DocumentIds: []string{"doc-03", "doc-06", "doc-00"}}, []string{"doc-00", "doc-06"}},
		} {
			t.Run(c.name, func(t *testing.T) {
				if got := docIDsOf(get(t, c.req).GetData()); !slices.Equal(got, c.want) {
					t.Fatalf("got %v, want %v", got, c.want)
				}
			})
		}
	})
	h.step("ids in another order keep the token valid", func(t *testing.T) {
		byIDs := get(t, &documentsv1.GetDocumentsRequest{DocumentIds: []string{"doc-03", "doc-01", "doc-05"}, PageSize: 1})
		next := get(t, &documentsv1.GetDocumentsRequest{DocumentIds: []string{"doc-05", "doc-03", "doc-01"}, PageSize: 2, PageToken: byIDs.GetPageToken()})
		if !slices.Equal(docIDsOf(next.GetData()), []string{"doc-03", "doc-05"}) || next.PageToken != nil {
			t.Fatalf("ids page 2 (ids in another order) %v", docIDsOf(next.GetData()))
		}
	})
	h.step("a token only works with the query it came from", func(t *testing.T) {
		first := get(t, &documentsv1.GetDocumentsRequest{PageSize: 1})
		h.org(k1, "o2")
		h.org(k2, "o")
		orgToken, _ := h.srv.GetOrganizations(k1, &documentsv1.GetOrganizationsRequest{PageSize: 1})
		for _, c := range []struct {
			name string
			ctx  context.Context
			req  *documentsv1.GetDocumentsRequest
		}{
			{"token reused with another folder", k1, &documentsv1.GetDocumentsRequest{OrganizationId: "o", FolderId: "f", PageToken: first.GetPageToken()}},
			{"token reused with other ids", k1, &documentsv1.GetDocumentsRequest{OrganizationId: "o", DocumentIds: []string{"doc-01"}, PageToken: first.GetPageToken()}},
			{"token reused with another organization", k1, &documentsv1.GetDocumentsRequest{OrganizationId: "o2", PageToken: first.GetPageToken()}},
			{"token of another tenant", k2, &documentsv1.GetDocumentsRequest{OrganizationId: "o", PageToken: first.GetPageToken()}},
			{"organization listing token", k1, &documentsv1.GetDocumentsRequest{OrganizationId: "o", PageToken: orgToken.GetPageToken()}},
		} {
			t.Run(c.name, func(t *testing.T) {
				_, err := h.srv.GetDocuments(c.ctx, c.req)
				wantErr(t, c.name, err, codes.InvalidArgument, "pageToken is invalid.")
			})
		}
	})
	h.step("refusals", func(t *testing.T) {
		for _, c := range []struct {
			name string
			req  *documentsv1.GetDocumentsRequest
			code codes.Code
			msg  string
		}{
			{"unknown folder", &documentsv1.GetDocumentsRequest{OrganizationId: "o", FolderId: "ghost"}, codes.NotFound, "Folder does not exist."},
			{"31 ids", &documentsv1.GetDocumentsRequest{OrganizationId: "o", DocumentIds: make31("d")}, codes.InvalidArgument, "documentIds must contain at most 30 ids."},
			{"pageSize -1", &documentsv1.GetDocumentsRequest{OrganizationId: "o", PageSize: -1}, codes.InvalidArgument, "pageSize must be between 1 and 1000."},
			{"pageSize 1001", &documentsv1.GetDocumentsRequest{OrganizationId: "o", PageSize: 1001}, codes.InvalidArgument, "pageSize must be between 1 and 1000."},
			{"no organization", &documentsv1.GetDocumentsRequest{}, codes.InvalidArgument, "organizationId is required."},
		} {
			t.Run(c.name, func(t *testing.T) {
				_, err := h.srv.GetDocuments(k1, c.req)
				wantErr(t, c.name, err, c.code, c.msg)
			})
		}
	})
}

func make31(prefix string) []string {
	out := make([]string, 31)
	for i := range out {
		out[i] = fmt.Sprint(prefix, i)
	}
	return out
}

func TestEffectiveAccessType(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.org(k1, "o")
	h.folder(k1, "o", "top", "", "organizationPrivate")
	h.folder(k1, "o", "mid", "top", "")
	h.folder(k1, "o", "low", "mid", "")
	h.folder(k1, "o", "open", "mid", "public")
	h.folder(k1, "o", "plain", "", "")
	h.docs(k1, "o", "low", "in-low")
	h.docs(k1, "o", "open", "in-open")
	h.docs(k1, "o", "plain", "in-plain")
	h.docs(k1, "o", "", "at-root")
	h.step("inherited down the chain, a folder's own type wins below it, default public", func(t *testing.T) {
		want := []string{"in-low:organizationPrivate", "in-open:public", "in-plain:public", "at-root:public"}
		if got := h.v1(k1, "o"); !slices.Equal(got, want) {
			t.Fatalf("effective %v, want %v", got, want)
		}
	})
	h.step("folder access update reaches documents below", func(t *testing.T) {
		resp, err := h.srv.UpdateFolderAccess(k1, &documentsv1.UpdateFolderAccessRequest{OrganizationId: "o", FolderIds: []string{"mid", "ghost"}, AccessType: "restricted"})
		if err != nil || resp.GetStatus() != "success" || resp.GetMessage() != "Updated access for folders successfully." {
			t.Fatalf("folder access: %v %v", resp, err)
		}
		if r := resp.GetData()["mid"]; !r.GetSuccess() || r.GetAccessType() != "restricted" || r.GetMessage() != "Folder access type updated." {
			t.Fatalf("mid %v", r)
		}
		if r := resp.GetData()["ghost"]; r.GetSuccess() || r.GetAccessType() != "restricted" || r.GetMessage() != "Folder does not exist." {
			t.Fatalf("ghost %v", r)
		}
		if got := h.v1(k1, "o", "in-low", "in-open"); !slices.Equal(got, []string{"in-low:restricted", "in-open:public"}) {
			t.Fatalf("after folder update %v", got)
		}
	})
	h.step("document access update", func(t *testing.T) {
		dresp, err := h.srv.UpdateDocumentAccess(k1, &documentsv1.UpdateDocumentAccessRequest{OrganizationId: "o", DocumentIds: []string{"in-low", "ghost"}, AccessType: "public"})
		if err != nil || dresp.GetStatus() != "success" || dresp.GetMessage() != "Updated access for documents successfully." {
			t.Fatalf("document access: %v %v", dresp, err)
		}
		if r := dresp.GetData()["in-low"]; !r.GetSuccess() || r.GetAccessType() != "public" || r.GetMessage() != "Document access type updated." {
			t.Fatalf("in-low %v", r)
		}
		if r := dresp.GetData()["ghost"]; r.GetSuccess() || r.GetAccessType() != "public" || r.GetMessage() != "Document does not exist." {
			t.Fatalf("ghost %v", r)
		}
	})
	h.step("a document's own type wins over its folder's and stays when it moves", func(t *testing.T) {
		if got := h.v1(k1, "o", "in-low"); !slices.Equal(got, []string{"in-low:public"}) {
			t.Fatalf("own type %v", got)
		}
		if _, err := h.srv.UpdateDocuments(k1, &documentsv1.UpdateDocumentsRequest{OrganizationId: "o", Documents: []*documentsv1.DocumentUpdate{
			{DocumentId: "in-low", FolderId: ptr("top")}, {DocumentId: "in-plain", FolderId: ptr("top")},
		}}); err != nil {
			t.Fatal(err)
		}
		if got := h.v1(k1, "o", "in-low", "in-plain"); !slices.Equal(got, []string{"in-low:public", "in-plain:organizationPrivate"}) {
			t.Fatalf("after moving documents %v", got)
		}
	})
	h.step("moving a folder changes what it inherits", func(t *testing.T) {
		if _, err := h.srv.UpdateFolders(k1, &documentsv1.UpdateFoldersRequest{OrganizationId: "o", Folders: []*documentsv1.FolderUpdate{{FolderId: "plain", ParentFolderId: ptr("mid")}}}); err != nil {
			t.Fatal(err)
		}
		f, err := h.srv.GetFolders(k1, &documentsv1.GetFoldersRequest{OrganizationId: "o", FolderIds: []string{"plain"}})
		if err != nil || f.GetData()[0].GetAccessType() != "restricted" || !slices.Equal(f.GetData()[0].GetAncestors(), []string{"top", "mid"}) {
			t.Fatalf("moved folder %v %v", f, err)
		}
	})
}

// Another API key's organizations, folders and documents do not exist for a caller.
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.org(k1, "acme")
	h.folder(k1, "acme", "f", "", "restricted")
	h.docs(k1, "acme", "f", "secret")
	before := dump(h.mem)

	h.step("another key's organization is not found", func(t *testing.T) {
		for _, c := range []struct {
			name string
			call func() error
		}{
			{"v1", func() error {
				_, err := h.srv.GetDocumentsV1(k2, &documentsv1.GetDocumentsV1Request{OrganizationId: "acme"})
				return err
			}},
			{"v2", func() error {
				_, err := h.srv.GetDocuments(k2, &documentsv1.GetDocumentsRequest{OrganizationId: "acme"})
				return err
			}},
			{"folders", func() error {
				_, err := h.srv.GetFolders(k2, &documentsv1.GetFoldersRequest{OrganizationId: "acme"})
				return err
			}},
			{"add folder", func() error {
				_, err := h.srv.AddFolders(k2, &documentsv1.AddFoldersRequest{OrganizationId: "acme", Folders: []*documentsv1.Folder{{FolderId: "x"}}})
				return err
			}},
			{"add document", func() error {
				_, err := h.srv.AddDocuments(k2, &documentsv1.AddDocumentsRequest{OrganizationId: "acme", Documents: []*documentsv1.DocumentInput{{DocumentId: "x"}}})
				return err
			}},
			{"update document", func() error {
				_, err := h.srv.UpdateDocuments(k2, &documentsv1.UpdateDocumentsRequest{OrganizationId: "acme", Documents: []*documentsv1.DocumentUpdate{{DocumentId: "secret", Disabled: ptr(true)}}})
				return err
			}},
			{"delete documents", func() error {
				_, err := h.srv.DeleteDocuments(k2, &documentsv1.DeleteDocumentsRequest{OrganizationId: "acme", DocumentIds: []string{"secret"}})
				return err
			}},
			{"document access", func() error {
				_, err := h.srv.UpdateDocumentAccess(k2, &documentsv1.UpdateDocumentAccessRequest{OrganizationId: "acme", DocumentIds: []string{"secret"}, AccessType: "public"})
				return err
			}},
			{"folder access", func() error {
				_, err := h.srv.UpdateFolderAccess(k2, &documentsv1.UpdateFolderAccessRequest{OrganizationId: "acme", FolderIds: []string{"f"}, AccessType: "public"})
				return err
			}},
			{"update folder", func() error {
				_, err := h.srv.UpdateFolders(k2, &documentsv1.UpdateFoldersRequest{OrganizationId: "acme", Folders: []*documentsv1.FolderUpdate{{FolderId: "f", FolderName: ptr("x")}}})
				return err
			}},
			{"delete folder", func() error {
				_, err := h.srv.DeleteFolders(k2, &documentsv1.DeleteFoldersRequest{OrganizationId: "acme", FolderIds: []string{"f"}})
				return err
			}},
			{"migrate", func() error {
				_, err := h.srv.MigrateDocument(k2, &documentsv1.MigrateDocumentRequest{OrganizationId: "acme", DocumentId: "secret", NewDocumentId: "mine"})
				return err
			}},
		} {
			t.Run(c.name, func(t *testing.T) {
				wantErr(t, "k2 "+c.name, c.call(), codes.NotFound, "Organization does not exist.")
			})
		}
	})
	h.step("another key lists, renames and deletes nothing", func(t *testing.T) {
		orgs, err := h.srv.GetOrganizations(k2, &documentsv1.GetOrganizationsRequest{OrganizationIds: []string{"acme"}})
		if err != nil || len(orgs.GetData()) != 0 {
			t.Fatalf("k2 lists %v %v", orgs, err)
		}
		resp, err := h.srv.UpdateOrganizations(k2, &documentsv1.UpdateOrganizationsRequest{Organizations: []*documentsv1.Organization{{OrganizationId: "acme", OrganizationName: "Mine"}}})
		wantItems(t, "k2 rename", resp, err, "Organization(s) updated successfully.", map[string]string{"acme": "fail: Organization does not exist."})
		resp, err = h.srv.DeleteOrganizations(k2, &documentsv1.DeleteOrganizationsRequest{OrganizationIds: []string{"acme"}})
		wantItems(t, "k2 delete", resp, err, "Organization(s) deleted successfully.", map[string]string{"acme": "fail: Organization does not exist."})
	})
	h.step("another key changed nothing and published nothing", func(t *testing.T) {
		if after := dump(h.mem); after != before || len(h.pub.published()) != 0 {
			t.Fatalf("k2 changed k1's data:\n%s\nevents %v", after, h.pub.published())
		}
	})
	h.step("another key's organization of the same id is separate", func(t *testing.T) {
		h.org(k2, "acme")
		h.docs(k2, "acme", "", "secret")
		if got := h.v1(k2, "acme"); !slices.Equal(got, []string{"secret:public"}) {
			t.Fatalf("k2's own %v", got)
		}
		if got := h.v1(k1, "acme"); !slices.Equal(got, []string{"secret:restricted"}) {
			t.Fatalf("k1's after k2 wrote %v", got)
		}
	})
}

// Every refused request answers INVALID_ARGUMENT with a message naming the field, and writes
// nothing, even when its first items were fine.
func TestBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.org(k1, "o")
	h.folder(k1, "o", "f", "", "")
	h.docs(k1, "o", "f", "d")
	before := dump(h.mem)
	long := strings.Repeat("x", 257)
	orgs := func(os ...*documentsv1.Organization) []*documentsv1.Organization { return os }
	many := func(n int) []*documentsv1.Organization {
		out := make([]*documentsv1.Organization, n)
		for i := range out {
			out[i] = &documentsv1.Organization{OrganizationId: fmt.Sprint("n", i)}
		}
		return out
	}
	manyDocs := make([]*documentsv1.DocumentInput, 101)
	for i := range manyDocs {
		manyDocs[i] = &documentsv1.DocumentInput{DocumentId: fmt.Sprint("n", i)}
	}
	ids1001 := make([]string, 1001)
	for i := range ids1001 {
		ids1001[i] = fmt.Sprint("d", i)
	}
	s := h.srv
	cases := []struct {
		rpc, msg string
		call     func() error
	}{
		{"AddOrganizations", "organizations must contain at least one organization.", func() error {
			_, err := s.AddOrganizations(k1, &documentsv1.AddOrganizationsRequest{})
			return err
		}},
		{"AddOrganizations", "organizations must contain at most 100 organizations.", func() error {
			_, err := s.AddOrganizations(k1, &documentsv1.AddOrganizationsRequest{Organizations: many(101)})
			return err
		}},
		{"AddOrganizations", "organizations[1].organizationId is required.", func() error {
			_, err := s.AddOrganizations(k1, &documentsv1.AddOrganizationsRequest{Organizations: orgs(&documentsv1.Organization{OrganizationId: "fine"}, &documentsv1.Organization{})})
			return err
		}},
		{"AddOrganizations", "organizations[1].organizationId must not contain control characters.", func() error {
			_, err := s.AddOrganizations(k1, &documentsv1.AddOrganizationsRequest{Organizations: orgs(&documentsv1.Organization{OrganizationId: "fine"}, &documentsv1.Organization{OrganizationId: "a\nb"})})
			return err
		}},
		{"AddOrganizations", "organizations[0].organizationId must be at most 256 characters.", func() error {
			_, err := s.AddOrganizations(k1, &documentsv1.AddOrganizationsRequest{Organizations: orgs(&documentsv1.Organization{OrganizationId: long})})
			return err
		}},
		{"AddOrganizations", "organizations[1].organizationName must be at most 200 characters.", func() error {
			_, err := s.AddOrganizations(k1, &documentsv1.AddOrganizationsRequest{Organizations: orgs(&documentsv1.Organization{OrganizationId: "fine"}, &documentsv1.Organization{OrganizationId: "n", OrganizationName: strings.Repeat("é", 201)})})
			return err
		}},
		{"AddOrganizations", "organizations[1].organizationId repeats organizations[0].organizationId: each id may appear once.", func() error {
			_, err := s.AddOrganizations(k1, &documentsv1.AddOrganizationsRequest{Organizations: orgs(&documentsv1.Organization{OrganizationId: "n"}, &documentsv1.Organization{OrganizationId: "n"})})
			return err
		}},
		{"UpdateOrganizations", "organizations[0].organizationName must be at most 200 characters.", func() error {
			_, err := s.UpdateOrganizations(k1, &documentsv1.UpdateOrganizationsRequest{Organizations: orgs(&documentsv1.Organization{OrganizationId: "o", OrganizationName: strings.Repeat("x", 201)})})
			return err
		}},
		{"UpdateOrganizations", "organizations must contain at least one organization.", func() error {
			_, err := s.UpdateOrganizations(k1, &documentsv1.UpdateOrganizationsRequest{})
			return err
		}},
		{"GetOrganizations", "organizationIds must contain at most 30 ids.", func() error {
			_, err := s.GetOrganizations(k1, &documentsv1.GetOrganizationsRequest{OrganizationIds: make31("o")})
			return err
		}},
		{"DeleteOrganizations", "organizationIds must contain at least one id.", func() error {
			_, err := s.DeleteOrganizations(k1, &documentsv1.DeleteOrganizationsRequest{})
			return err
		}},
		{"DeleteOrganizations", "organizationIds must contain at most 30 ids.", func() error {
			_, err := s.DeleteOrganizations(k1, &documentsv1.DeleteOrganizationsRequest{OrganizationIds: make31("o")})
			return err
		}},
		{"DeleteOrganizations", "organizationIds[1] must not be empty.", func() error {
			_, err := s.DeleteOrganizations(k1, &documentsv1.DeleteOrganizationsRequest{OrganizationIds: []string{"o", ""}})
			return err
		}},
		{"AddFolders", "organizationId is required.", func() error {
			_, err := s.AddFolders(k1, &documentsv1.AddFoldersRequest{Folders: []*documentsv1.Folder{{FolderId: "x"}}})
			return err
		}},
		{"AddFolders", "folders must contain at least one folder.", func() error {
			_, err := s.AddFolders(k1, &documentsv1.AddFoldersRequest{OrganizationId: "o"})
			return err
		}},
		{"AddFolders", "folders[1].accessType must be one of organizationPrivate, restricted, public.", func() error {
			_, err := s.AddFolders(k1, &documentsv1.AddFoldersRequest{OrganizationId: "o", Folders: []*documentsv1.Folder{{FolderId: "fine"}, {FolderId: "x", AccessType: "private"}}})
			return err
		}},
		{"AddFolders", "folders[0].parentFolderId must not be the folder itself.", func() error {
			_, err := s.AddFolders(k1, &documentsv1.AddFoldersRequest{OrganizationId: "o", Folders: []*documentsv1.Folder{{FolderId: "x", ParentFolderId: "x"}}})
			return err
		}},
		{"AddFolders", "folders[0].parentFolderId must not start or end with white space.", func() error {
			_, err := s.AddFolders(k1, &documentsv1.AddFoldersRequest{OrganizationId: "o", Folders: []*documentsv1.Folder{{FolderId: "x", ParentFolderId: " f"}}})
			return err
		}},
		{"AddFolders", "folders[0].folderName must be at most 200 characters.", func() error {
			_, err := s.AddFolders(k1, &documentsv1.AddFoldersRequest{OrganizationId: "o", CreateOrganization: true, Folders: []*documentsv1.Folder{{FolderId: "x", FolderName: strings.Repeat("x", 201)}}})
			return err
		}},
		{"GetFolders", "folderIds must contain at most 30 ids.", func() error {
			_, err := s.GetFolders(k1, &documentsv1.GetFoldersRequest{OrganizationId: "o", FolderIds: make31("f")})
			return err
		}},
		{"GetFolders", "parentFolderId must not contain control characters.", func() error {
			_, err := s.GetFolders(k1, &documentsv1.GetFoldersRequest{OrganizationId: "o", ParentFolderId: "a\x00"})
			return err
		}},
		{"GetFolders", "pageSize must be between 1 and 1000.", func() error {
			_, err := s.GetFolders(k1, &documentsv1.GetFoldersRequest{OrganizationId: "o", PageSize: 1001})
			return err
		}},
		{"UpdateFolders", "folders[0] must change folderName or parentFolderId.", func() error {
			_, err := s.UpdateFolders(k1, &documentsv1.UpdateFoldersRequest{OrganizationId: "o", Folders: []*documentsv1.FolderUpdate{{FolderId: "f"}}})
			return err
		}},
		{"UpdateFolders", "folders[1].folderId is required.", func() error {
			_, err := s.UpdateFolders(k1, &documentsv1.UpdateFoldersRequest{OrganizationId: "o", Folders: []*documentsv1.FolderUpdate{{FolderId: "f", FolderName: ptr("fine")}, {FolderName: ptr("x")}}})
			return err
		}},
		{"DeleteFolders", "folderIds must contain at least one id.", func() error {
			_, err := s.DeleteFolders(k1, &documentsv1.DeleteFoldersRequest{OrganizationId: "o"})
			return err
		}},
		{"DeleteFolders", "folderIds must contain at most 30 ids.", func() error {
			_, err := s.DeleteFolders(k1, &documentsv1.DeleteFoldersRequest{OrganizationId: "o", FolderIds: make31("f")})
			return err
		}},
		{"AddDocuments", "documents must contain at most 100 documents.", func() error {
			_, err := s.AddDocuments(k1, &documentsv1.AddDocumentsRequest{OrganizationId: "o", Documents: manyDocs})
			return err
		}},
		{"AddDocuments", "documents must contain at least one document.", func() error {
			_, err := s.AddDocuments(k1, &documentsv1.AddDocumentsRequest{OrganizationId: "o"})
			return err
		}},
		{"AddDocuments", "documents[1].documentId must be at most 256 characters.", func() error {
			_, err := s.AddDocuments(k1, &documentsv1.AddDocumentsRequest{OrganizationId: "o", Documents: []*documentsv1.DocumentInput{{DocumentId: "fine"}, {DocumentId: long}}})
			return err
		}},
		{"AddDocuments", "documents[0].documentName must be at most 500 characters.", func() error {
			_, err := s.AddDocuments(k1, &documentsv1.AddDocumentsRequest{OrganizationId: "o", Documents: []*documentsv1.DocumentInput{{DocumentId: "x", DocumentName: strings.Repeat("x", 501)}}})
			return err
		}},
		{"AddDocuments", "documents[1].folderId must not contain control characters.", func() error {
			_, err := s.AddDocuments(k1, &documentsv1.AddDocumentsRequest{OrganizationId: "o", CreateFolder: true, Documents: []*documentsv1.DocumentInput{{DocumentId: "fine", FolderId: "new"}, {DocumentId: "x", FolderId: "a\tb"}}})
			return err
		}},
		{"AddDocuments", "documents[1].documentId repeats documents[0].documentId: each id may appear once.", func() error {
			_, err := s.AddDocuments(k1, &documentsv1.AddDocumentsRequest{OrganizationId: "o", Documents: []*documentsv1.DocumentInput{{DocumentId: "x"}, {DocumentId: "x"}}})
			return err
		}},
		{"UpdateDocuments", "documents[0] must change documentName, folderId or disabled.", func() error {
			_, err := s.UpdateDocuments(k1, &documentsv1.UpdateDocumentsRequest{OrganizationId: "o", Documents: []*documentsv1.DocumentUpdate{{DocumentId: "d"}}})
			return err
		}},
		{"UpdateDocuments", "documents[1].documentName must be at most 500 characters.", func() error {
			_, err := s.UpdateDocuments(k1, &documentsv1.UpdateDocumentsRequest{OrganizationId: "o", Documents: []*documentsv1.DocumentUpdate{{DocumentId: "d", Disabled: ptr(true)}, {DocumentId: "x", DocumentName: ptr(strings.Repeat("x", 501))}}})
			return err
		}},
		{"DeleteDocuments", "documentIds must contain at least one id.", func() error {
			_, err := s.DeleteDocuments(k1, &documentsv1.DeleteDocumentsRequest{OrganizationId: "o"})
			return err
		}},
		{"DeleteDocuments", "documentIds must contain at most 30 ids.", func() error {
			_, err := s.DeleteDocuments(k1, &documentsv1.DeleteDocumentsRequest{OrganizationId: "o", DocumentIds: make31("d")})
			return err
		}},
		{"GetDocumentsV1", "organizationId is required.", func() error {
			_, err := s.GetDocumentsV1(k1, &documentsv1.GetDocumentsV1Request{})
			return err
		}},
		{"GetDocumentsV1", "documentIds must contain at most 1000 ids.", func() error {
			_, err := s.GetDocumentsV1(k1, &documentsv1.GetDocumentsV1Request{OrganizationId: "o", DocumentIds: ids1001})
			return err
		}},
		{"UpdateDocumentAccess", "organizationId is required.", func() error {
			_, err := s.UpdateDocumentAccess(k1, &documentsv1.UpdateDocumentAccessRequest{DocumentIds: []string{"d"}, AccessType: "public"})
			return err
		}},
		{"UpdateDocumentAccess", "documentIds must contain at least one id.", func() error {
			_, err := s.UpdateDocumentAccess(k1, &documentsv1.UpdateDocumentAccessRequest{OrganizationId: "o", AccessType: "public"})
			return err
		}},
		{"UpdateDocumentAccess", "documentIds must contain at most 30 ids.", func() error {
			_, err := s.UpdateDocumentAccess(k1, &documentsv1.UpdateDocumentAccessRequest{OrganizationId: "o", DocumentIds: make31("d"), AccessType: "public"})
			return err
		}},
		{"UpdateDocumentAccess", "accessType must be one of organizationPrivate, restricted, public.", func() error {
			_, err := s.UpdateDocumentAccess(k1, &documentsv1.UpdateDocumentAccessRequest{OrganizationId: "o", DocumentIds: []string{"d"}, AccessType: "private"})
			return err
		}},
		{"UpdateDocumentAccess", "accessType is required.", func() error {
			_, err := s.UpdateDocumentAccess(k1, &documentsv1.UpdateDocumentAccessRequest{OrganizationId: "o", DocumentIds: []string{"d"}})
			return err
		}},
		{"UpdateDocumentAccess", "documentIds[0] must not contain control characters.", func() error {
			_, err := s.UpdateDocumentAccess(k1, &documentsv1.UpdateDocumentAccessRequest{OrganizationId: "o", DocumentIds: []string{"bad\u0007id"}, AccessType: "public"})
			return err
		}},
		{"UpdateFolderAccess", "folderIds must contain at least one id.", func() error {
			_, err := s.UpdateFolderAccess(k1, &documentsv1.UpdateFolderAccessRequest{OrganizationId: "o", AccessType: "public"})
			return err
		}},
		{"UpdateFolderAccess", "accessType must be one of organizationPrivate, restricted, public.", func() error {
			_, err := s.UpdateFolderAccess(k1, &documentsv1.UpdateFolderAccessRequest{OrganizationId: "o", FolderIds: []string{"f"}, AccessType: "Public"})
			return err
		}},
		{"UpdateFolderAccess", "folderIds must contain at most 30 ids.", func() error {
			_, err := s.UpdateFolderAccess(k1, &documentsv1.UpdateFolderAccessRequest{OrganizationId: "o", FolderIds: make31("f"), AccessType: "public"})
			return err
		}},
		// The folder side of the access update and of the item checkers, which share their code
		// with the document side.
		{"UpdateFolderAccess", "organizationId is required.", func() error {
			_, err := s.UpdateFolderAccess(k1, &documentsv1.UpdateFolderAccessRequest{FolderIds: []string{"f"}, AccessType: "public"})
			return err
		}},
		{"UpdateFolderAccess", "accessType is required.", func() error {
			_, err := s.UpdateFolderAccess(k1, &documentsv1.UpdateFolderAccessRequest{OrganizationId: "o", FolderIds: []string{"f"}})
			return err
		}},
		{"UpdateFolderAccess", "folderIds[1] must not contain control characters.", func() error {
			_, err := s.UpdateFolderAccess(k1, &documentsv1.UpdateFolderAccessRequest{OrganizationId: "o", FolderIds: []string{"f", "bad\u0007id"}, AccessType: "public"})
			return err
		}},
		{"AddFolders", "folders[1].folderId repeats folders[0].folderId: each id may appear once.", func() error {
			_, err := s.AddFolders(k1, &documentsv1.AddFoldersRequest{OrganizationId: "o", Folders: []*documentsv1.Folder{{FolderId: "x"}, {FolderId: "x"}}})
			return err
		}},
		{"AddFolders", "folders[0].folderId must not contain control characters.", func() error {
			_, err := s.AddFolders(k1, &documentsv1.AddFoldersRequest{OrganizationId: "o", Folders: []*documentsv1.Folder{{FolderId: "a\x00"}}})
			return err
		}},
		{"UpdateFolders", "folders must contain at most 100 folders.", func() error {
			_, err := s.UpdateFolders(k1, &documentsv1.UpdateFoldersRequest{OrganizationId: "o", Folders: make([]*documentsv1.FolderUpdate, 101)})
			return err
		}},
		{"UpdateDocuments", "documents must contain at most 100 documents.", func() error {
			_, err := s.UpdateDocuments(k1, &documentsv1.UpdateDocumentsRequest{OrganizationId: "o", Documents: make([]*documentsv1.DocumentUpdate, 101)})
			return err
		}},
		{"UpdateDocuments", "documents[1].documentId repeats documents[0].documentId: each id may appear once.", func() error {
			_, err := s.UpdateDocuments(k1, &documentsv1.UpdateDocumentsRequest{OrganizationId: "o", Documents: []*documentsv1.DocumentUpdate{{DocumentId: "x", Disabled: ptr(true)}, {DocumentId: "x", Disabled: ptr(true)}}})
			return err
		}},
		{"UpdateFolders", "folders[0].folderName must be at most 200 characters.", func() error {
			_, err := s.UpdateFolders(k1, &documentsv1.UpdateFoldersRequest{OrganizationId: "o", Folders: []*documentsv1.FolderUpdate{{FolderId: "f", FolderName: ptr(strings.Repeat("x", 201))}}})
			return err
		}},
		{"MigrateDocument", "newDocumentId is required.", func() error {
			_, err := s.MigrateDocument(k1, &documentsv1.MigrateDocumentRequest{OrganizationId: "o", DocumentId: "d"})
			return err
		}},
		{"MigrateDocument", "newDocumentId must differ from documentId.", func() error {
			_, err := s.MigrateDocument(k1, &documentsv1.MigrateDocumentRequest{OrganizationId: "o", DocumentId: "d", NewDocumentId: "d"})
			return err
		}},
		{"MigrateDocument", "newDocumentId must be at most 256 characters.", func() error {
			_, err := s.MigrateDocument(k1, &documentsv1.MigrateDocumentRequest{OrganizationId: "o", DocumentId: "d", NewDocumentId: long})
			return err
		}},
		{"MigrateDocument", "documentId is required.", func() error {
			_, err := s.MigrateDocument(k1, &documentsv1.MigrateDocumentRequest{OrganizationId: "o", NewDocumentId: "n"})
			return err
		}},
		{"GetMigrationStatus", "migrationId is required.", func() error {
			_, err := s.GetMigrationStatus(k1, &documentsv1.GetMigrationStatusRequest{OrganizationId: "o"})
			return err
		}},
		{"GetMigrationStatus", "organizationId is required.", func() error {
			_, err := s.GetMigrationStatus(k1, &documentsv1.GetMigrationStatusRequest{MigrationId: "m"})
			return err
		}},
		{"DeleteDataByLocation", "location.id or location.locationName is required.", func() error {
			_, err := s.DeleteDataByLocation(k1, &documentsv1.DeleteDataByLocationRequest{DocumentId: "d"})
			return err
		}},
		{"DeleteDataByLocation", "location.id or location.locationName is required.", func() error {
			_, err := s.DeleteDataByLocation(k1, &documentsv1.DeleteDataByLocationRequest{Location: &documentsv1.Location{LocationName: "  "}})
			return err
		}},
		{"DeleteDataByLocation", "location.id must not contain control characters.", func() error {
			_, err := s.DeleteDataByLocation(k1, &documentsv1.DeleteDataByLocationRequest{Location: &documentsv1.Location{Id: "a\x1fb"}})
			return err
		}},
		{"DeleteDataByLocation", "documentId must be at most 256 characters.", func() error {
			_, err := s.DeleteDataByLocation(k1, &documentsv1.DeleteDataByLocationRequest{DocumentId: long, Location: &documentsv1.Location{Id: "l"}})
			return err
		}},
		{"DeleteDataByLocation", "organizationId must not contain control characters.", func() error {
			_, err := s.DeleteDataByLocation(k1, &documentsv1.DeleteDataByLocationRequest{OrganizationId: "\x01", Location: &documentsv1.Location{Id: "l"}})
			return err
		}},
		{"ResolveResources", "apiKey is required.", func() error {
			_, err := s.ResolveResources(context.Background(), &documentsv1.ResolveResourcesRequest{OrganizationId: "o"})
			return err
		}},
		{"ResolveResources", "documentIds[0] must not be empty.", func() error {
			_, err := s.ResolveResources(context.Background(), &documentsv1.ResolveResourcesRequest{ApiKey: "k1", OrganizationId: "o", DocumentIds: []string{""}})
			return err
		}},
		{"EnsureResources", "organizationId is required.", func() error {
			_, err := s.EnsureResources(context.Background(), &documentsv1.EnsureResourcesRequest{ApiKey: "k1", CreateOrganization: true})
			return err
		}},
		{"EnsureResources", "folderId must not contain control characters.", func() error {
			_, err := s.EnsureResources(context.Background(), &documentsv1.EnsureResourcesRequest{ApiKey: "k1", OrganizationId: "new", CreateOrganization: true, FolderId: "a\nb", CreateFolder: true})
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.rpc+": "+c.msg, func(t *testing.T) {
			wantErr(t, c.msg, c.call(), codes.InvalidArgument, c.msg)
		})
	}
	t.Run("refused requests wrote nothing", func(t *testing.T) {
		if after := dump(h.mem); after != before {
			t.Fatalf("refused requests wrote:\n%s\nwas\n%s", after, before)
		}
	})
	t.Run("refused requests published nothing", func(t *testing.T) {
		if ev := h.pub.published(); len(ev) != 0 {
			t.Fatalf("refused requests published %v", ev)
		}
	})
}

func (h *harness) migrate(ctx context.Context, org, from, to string) string {
	h.t.Helper()
	resp, err := h.srv.MigrateDocument(ctx, &documentsv1.MigrateDocumentRequest{OrganizationId: org, DocumentId: from, NewDocumentId: to})
	if err != nil || resp.GetStatus() != "success" || resp.GetMessage() != "Document migration started successfully." {
		h.t.Fatalf("migrate %s → %s: %v %v", from, to, resp, err)
	}
	return resp.GetData().GetMigrationId()
}

func (h *harness) migrationStatus(ctx context.Context, org, id string) string {
	h.t.Helper()
	resp, err := h.srv.GetMigrationStatus(ctx, &documentsv1.GetMigrationStatusRequest{OrganizationId: org, MigrationId: id})
	if err != nil || resp.GetStatus() != "success" || resp.GetMessage() != "Migration status retrieved successfully." || resp.GetData().GetMigrationId() != id {
		h.t.Fatalf("status of %s: %v %v", id, resp, err)
	}
	return resp.GetData().GetStatus()
}

func TestMigration(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.org(k1, "o")
	h.folder(k1, "o", "f", "", "")
	h.docs(k1, "o", "f", "old", "taken")
	if _, err := h.srv.UpdateDocumentAccess(k1, &documentsv1.UpdateDocumentAccessRequest{OrganizationId: "o", DocumentIds: []string{"old"}, AccessType: "restricted"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.srv.UpdateDocuments(k1, &documentsv1.UpdateDocumentsRequest{OrganizationId: "o", Documents: []*documentsv1.DocumentUpdate{{DocumentId: "old", Disabled: ptr(true)}}}); err != nil {
		t.Fatal(err)
	}
	old := h.document("k1", "o", "old")

	h.step("refusals publish nothing", func(t *testing.T) {
		for _, c := range []struct {
			name string
			req  *documentsv1.MigrateDocumentRequest
			code codes.Code
			msg  string
		}{
			{"onto an existing document", &documentsv1.MigrateDocumentRequest{OrganizationId: "o", DocumentId: "old", NewDocumentId: "taken"}, codes.AlreadyExists, "A document with id taken already exists."},
			{"missing document", &documentsv1.MigrateDocumentRequest{OrganizationId: "o", DocumentId: "ghost", NewDocumentId: "new"}, codes.NotFound, "Document does not exist."},
			{"missing organization", &documentsv1.MigrateDocumentRequest{OrganizationId: "nope", DocumentId: "old", NewDocumentId: "new"}, codes.NotFound, "Organization does not exist."},
		} {
			t.Run(c.name, func(t *testing.T) {
				_, err := h.srv.MigrateDocument(k1, c.req)
				wantErr(t, c.name, err, c.code, c.msg)
			})
		}
		if len(h.pub.published()) != 0 {
			t.Fatal("a refused migration published an event")
		}
	})
	var id string
	h.step("starts with an id and publishes its event", func(t *testing.T) {
		h.clock.Advance(time.Hour)
		id = h.migrate(k1, "o", "old", "new")
		if !strings.HasPrefix(id, "mig_") || len(id) != 24 {
			t.Fatalf("migration id %q", id)
		}
		events := h.pub.published()
		if len(events) != 1 || events[0].GetId() != id || events[0].GetType() != "document.migrated" || events[0].GetApiKey() != "k1" || events[0].GetOrganizationId() != "o" {
			t.Fatalf("event %v", events)
		}
		m := events[0].GetDocumentMigrated()
		if m.GetFromDocumentId() != "old" || m.GetToDocumentId() != "new" || m.GetMigrationId() != id {
			t.Fatalf("payload %v", m)
		}
	})
	h.step("pending until the relay runs", func(t *testing.T) {
		if st := h.migrationStatus(k1, "o", id); st != "pending" {
			t.Fatalf("before the relay: %s", st)
		}
		if h.document("k1", "o", "new") != nil {
			t.Fatal("moved before the relay ran")
		}
	})
	h.step("the relay moves the document with its fields", func(t *testing.T) {
		h.ob.RunDue(context.Background())
		if st := h.migrationStatus(k1, "o", id); st != "completed" {
			t.Fatalf("after the relay: %s", st)
		}
		moved := h.document("k1", "o", "new")
		if h.document("k1", "o", "old") != nil || moved == nil {
			t.Fatalf("old %v new %v", h.document("k1", "o", "old"), moved)
		}
		if moved.Name != old.Name || moved.FolderID != "f" || moved.AccessType != "restricted" || !moved.Disabled || !moved.CreatedAt.Equal(old.CreatedAt) {
			t.Fatalf("moved %+v, was %+v", moved, old)
		}
	})
	h.step("the migrated document keeps its place in creation order", func(t *testing.T) {
		v2, _ := h.srv.GetDocuments(k1, &documentsv1.GetDocumentsRequest{OrganizationId: "o"})
		if got := docIDsOf(v2.GetData()); !slices.Equal(got, []string{"new", "taken"}) {
			t.Fatalf("order after migration %v", got)
		}
	})
	h.step("status is scoped to the tenant, the organization and migrations", func(t *testing.T) {
		h.org(k1, "o2")
		if _, err := h.srv.DeleteDocuments(k1, &documentsv1.DeleteDocumentsRequest{OrganizationId: "o", DocumentIds: []string{"taken"}}); err != nil {
			t.Fatal(err)
		}
		deletion := h.pub.published()[1]
		for _, c := range []struct {
			name    string
			ctx     context.Context
			org, id string
		}{
			{"another organization", k1, "o2", id},
			{"another key", k2, "o", id},
			{"unknown id", k1, "o", "mig_nope"},
			{"an event that is no migration", k1, "o", deletion.GetId()},
		} {
			t.Run(c.name, func(t *testing.T) {
				_, err := h.srv.GetMigrationStatus(c.ctx, &documentsv1.GetMigrationStatusRequest{OrganizationId: c.org, MigrationId: c.id})
				wantErr(t, c.name, err, codes.NotFound, "Migration not found.")
			})
		}
	})
}

// A document put in the way after the request fails the migration for good; nothing moves.
func TestMigrationConflictFails(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.org(k1, "o")
	h.docs(k1, "o", "", "a")
	id := h.migrate(k1, "o", "a", "b")
	h.docs(k1, "o", "", "b")
	h.ob.RunDue(context.Background())
	if st := h.migrationStatus(k1, "o", id); st != "failed" {
		t.Fatalf("conflict: %s", st)
	}
	r, _ := h.ob.Get(context.Background(), id)
	if !strings.Contains(r.LastError(), "A document with id b already exists.") {
		t.Fatalf("last error %q", r.LastError())
	}
	if h.document("k1", "o", "a") == nil || h.document("k1", "o", "b").MigrationID != "" {
		t.Fatal("a conflicting migration changed documents")
	}
}

// A migration interrupted by a failed delivery finishes in a new process on the same stores.
func TestMigrationResumesAfterRestart(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.org(k1, "o")
	h.docs(k1, "o", "", "a")
	id := h.migrate(k1, "o", "a", "b")
	h.step("a failed delivery leaves it in progress", func(t *testing.T) {
		h.failNext(status.Error(codes.Unavailable, "documents restarting"))
		h.ob.RunDue(context.Background())
		if st := h.migrationStatus(k1, "o", id); st != "in_progress" {
			t.Fatalf("after a failed delivery: %s", st)
		}
		if h.document("k1", "o", "b") != nil {
			t.Fatal("moved although the delivery failed")
		}
	})
	h.step("a new process retries at its time and finishes", func(t *testing.T) {
		h.start() // a new Server and outbox on the same document and outbox stores
		h.ob.RunDue(context.Background())
		if st := h.migrationStatus(k1, "o", id); st != "in_progress" {
			t.Fatalf("retried before its time: %s", st)
		}
		h.clock.Advance(2 * time.Second)
		h.ob.RunDue(context.Background())
		if st := h.migrationStatus(k1, "o", id); st != "completed" {
			t.Fatalf("after the restart: %s", st)
		}
		if h.document("k1", "o", "a") != nil || h.document("k1", "o", "b") == nil {
			t.Fatal("document not moved")
		}
	})
}

// The migration handler decides on what it finds, so every redelivery is safe.
func TestMigrationHandlerStates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	event := func(from, to, id string) *lifecyclev1.Event {
		return &lifecyclev1.Event{Id: id, Type: "document.migrated", ApiKey: "k1", OrganizationId: "o",
			Payload: &lifecyclev1.Event_DocumentMigrated{DocumentMigrated: &lifecyclev1.DocumentMigrated{FromDocumentId: from, ToDocumentId: to, MigrationId: id}}}
	}
	h := newHarness(t)
	h.org(k1, "o")
	h.docs(k1, "o", "", "a", "c", "x", "y")

	h.step("a half-done migration is finished, twice over", func(t *testing.T) {
		// A crash between the copy and the removal: the copy carries this migration's id.
		half := *h.document("k1", "o", "a")
		half.ID, half.MigrationID = "b", "mig_half"
		if err := h.store.CreateDocument(ctx, &half); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := h.srv.HandleEvent(ctx, event("a", "b", "mig_half")); err != nil {
				t.Fatalf("finishing a half-done migration: %v", err)
			}
		}
		if h.document("k1", "o", "a") != nil || h.document("k1", "o", "b") == nil {
			t.Fatal("half-done migration not finished")
		}
	})
	h.step("refused for good", func(t *testing.T) {
		// A copy of another migration.
		other := *h.document("k1", "o", "c")
		other.ID, other.MigrationID = "d", "mig_other"
		_ = h.store.CreateDocument(ctx, &other)
		for _, c := range []struct {
			name string
			e    *lifecyclev1.Event
			code codes.Code
			msg  string
		}{
			// Both there, and the target is someone else's: a conflict.
			{"both present", event("x", "y", "mig_xy"), codes.AlreadyExists, "A document with id y already exists."},
			{"another migration's copy", event("c", "d", "mig_cd"), codes.AlreadyExists, "A document with id d already exists."},
			{"neither present", event("ghost", "ghost2", "mig_g"), codes.NotFound, "Document does not exist."},
			{"no source id", event("", "z", "mig_z"), codes.InvalidArgument, ""},
		} {
			t.Run(c.name, func(t *testing.T) {
				wantErr(t, c.name, h.srv.HandleEvent(ctx, c.e), c.code, c.msg)
			})
		}
	})
}

func TestEventsAreIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t)
	h.org(k1, "o")
	h.folder(k1, "o", "empty", "", "")
	h.folder(k1, "o", "full", "", "")
	h.docs(k1, "o", "full", "d1", "d2")
	h.org(k1, "keep")
	h.docs(k1, "keep", "", "d1")
	orgGen, _ := h.store.Organization(ctx, "k1", "o")
	folderGen := func(id string) string {
		f, _ := h.store.ListFolders(ctx, "k1", "o", FolderFilter{IDs: []string{id}}, nil, 0)
		return f[0].Generation
	}
	ev := func(id, typ string, e *lifecyclev1.Event) *lifecyclev1.Event {
		e.Id, e.Type, e.ApiKey, e.OrganizationId, e.OrganizationGeneration = id, typ, "k1", "o", orgGen.Generation
		return e
	}
	deliver := func(t *testing.T, e *lifecyclev1.Event) {
		t.Helper()
		for i := range 2 {
			if err := h.srv.HandleEvent(ctx, e); err != nil {
				t.Fatalf("%s delivery %d: %v", e.GetType(), i+1, err)
			}
		}
	}
	h.step("document.deleted removes the named documents", func(t *testing.T) {
		deliver(t, ev("e1", "document.deleted", &lifecyclev1.Event{Payload: &lifecyclev1.Event_DocumentsDeleted{DocumentsDeleted: &lifecyclev1.DocumentsDeleted{DocumentIds: []string{"d1", "nope"},
			Generations: []string{h.document("k1", "o", "d1").Generation, "x"}}}}))
		if h.document("k1", "o", "d1") != nil || h.document("k1", "o", "d2") == nil || h.document("k1", "keep", "d1") == nil {
			t.Fatal("document.deleted removed the wrong documents")
		}
	})
	h.step("folder.deleted removes an empty folder", func(t *testing.T) {
		deliver(t, ev("e2", "folder.deleted", &lifecyclev1.Event{Payload: &lifecyclev1.Event_FolderDeleted{FolderDeleted: &lifecyclev1.FolderDeleted{FolderId: "empty", Generation: folderGen("empty")}}}))
		if f, _ := h.store.ListFolders(ctx, "k1", "o", FolderFilter{}, nil, 0); !slices.Equal(folderIDs(f), []string{"full"}) {
			t.Fatalf("after folder.deleted %v", folderIDs(f))
		}
	})
	h.step("folder.deleted of a full folder is refused for good", func(t *testing.T) {
		// Refused for good, so other services keep its grants.
		err := h.srv.HandleEvent(ctx, ev("e3", "folder.deleted", &lifecyclev1.Event{Payload: &lifecyclev1.Event_FolderDeleted{FolderDeleted: &lifecyclev1.FolderDeleted{FolderId: "full", Generation: folderGen("full")}}}))
		wantErr(t, "folder not empty", err, codes.FailedPrecondition, "Folder is not empty.")
	})
	h.step("events of no concern change nothing", func(t *testing.T) {
		before := dump(h.mem)
		deliver(t, ev("e4", "location.data_deleted", &lifecyclev1.Event{Payload: &lifecyclev1.Event_LocationDataDeleted{LocationDataDeleted: &lifecyclev1.LocationDataDeleted{LocationId: "l"}}}))
		deliver(t, ev("e5", "users.removed", &lifecyclev1.Event{Payload: &lifecyclev1.Event_UsersRemoved{UsersRemoved: &lifecyclev1.UsersRemoved{UserIds: []string{"u"}}}}))
		deliver(t, ev("e6", "something.new", &lifecyclev1.Event{}))
		if dump(h.mem) != before {
			t.Fatal("an event of no concern to documents changed data")
		}
	})
	h.step("organization.deleted removes that organization only", func(t *testing.T) {
		deliver(t, ev("e7", "organization.deleted", &lifecyclev1.Event{Payload: &lifecyclev1.Event_OrganizationDeleted{OrganizationDeleted: &lifecyclev1.OrganizationDeleted{}}}))
		if _, err := h.store.Organization(ctx, "k1", "o"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("organization after organization.deleted: %v", err)
		}
		if h.document("k1", "o", "d2") != nil || h.document("k1", "keep", "d1") == nil {
			t.Fatal("organization.deleted removed the wrong documents")
		}
	})
	h.step("an event that can never apply is refused for good", func(t *testing.T) {
		for _, c := range []struct {
			name string
			e    *lifecyclev1.Event
		}{
			{"organization.deleted without organization", &lifecyclev1.Event{Id: "x1", Type: "organization.deleted", ApiKey: "k1", Payload: &lifecyclev1.Event_OrganizationDeleted{OrganizationDeleted: &lifecyclev1.OrganizationDeleted{}}}},
			{"document.deleted without api key", &lifecyclev1.Event{Id: "x2", Type: "document.deleted", OrganizationId: "o", Payload: &lifecyclev1.Event_DocumentsDeleted{DocumentsDeleted: &lifecyclev1.DocumentsDeleted{DocumentIds: []string{"d"}}}}},
			{"folder.deleted without folder", &lifecyclev1.Event{Id: "x3", Type: "folder.deleted", ApiKey: "k1", OrganizationId: "o", Payload: &lifecyclev1.Event_FolderDeleted{FolderDeleted: &lifecyclev1.FolderDeleted{}}}},
		} {
			t.Run(c.name, func(t *testing.T) {
				wantErr(t, c.e.GetId(), h.srv.HandleEvent(ctx, c.e), codes.InvalidArgument, "")
			})
		}
	})
}

// Delete Folders answers "not empty" when a document lands in the folder between its check and
// the event's delivery: the handler refuses, and the event fails before other services act.
func TestFolderFilledBeforeDeliveryIsKept(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.org(k1, "o")
	h.step("filled before a retried delivery: the event fails and the folder stays", func(t *testing.T) {
		h.folder(k1, "o", "f", "", "")
		h.failNext(status.Error(codes.Unavailable, "busy"))
		resp, err := h.srv.DeleteFolders(k1, &documentsv1.DeleteFoldersRequest{OrganizationId: "o", FolderIds: []string{"f"}})
		wantItems(t, "delete", resp, err, "Folder(s) deleted successfully.", map[string]string{"f": "ok: Folder deleted."})
		h.docs(k1, "o", "f", "late")
		h.clock.Advance(2 * time.Second)
		h.ob.RunDue(context.Background())
		r, _ := h.ob.Get(context.Background(), h.pub.published()[0].GetId())
		if r.State() != "failed" {
			t.Fatalf("event %s", r.State())
		}
		if f, _ := h.store.ListFolders(context.Background(), "k1", "o", FolderFilter{}, nil, 0); len(f) != 1 {
			t.Fatal("a folder with a document was deleted")
		}
	})
	h.step("filled during Publish: answered not empty at once", func(t *testing.T) {
		h.folder(k1, "o", "g", "", "")
		h.srv.events = &fillingPublisher{Publisher: h.pub, fill: func() { h.docs(k1, "o", "g", "racer") }}
		resp, err := h.srv.DeleteFolders(k1, &documentsv1.DeleteFoldersRequest{OrganizationId: "o", FolderIds: []string{"g"}})
		wantItems(t, "delete racing", resp, err, "Folder(s) deleted successfully.", map[string]string{"g": "fail: Folder is not empty."})
	})
}

// fillingPublisher runs fill just before publishing, like a writer racing the request.
type fillingPublisher struct {
	Publisher
	fill func()
}

func (p *fillingPublisher) Publish(ctx context.Context, e *lifecyclev1.Event) (*outbox.Record, error) {
	p.fill()
	return p.Publisher.Publish(ctx, e)
}

func TestDeleteDataByLocation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.org(k1, "o")
	h.docs(k1, "o", "", "d")
	before := dump(h.mem)
	h.step("answers success, again too", func(t *testing.T) {
		for range 2 {
			resp, err := h.srv.DeleteDataByLocation(k1, &documentsv1.DeleteDataByLocationRequest{ApiKey: "k1", AuthToken: "t", DocumentId: "d",
				Location: &documentsv1.Location{Id: "loc-1", LocationName: " Intro "}, OrganizationId: "o"})
			if err != nil || resp.GetStatus() != "success" || resp.GetMessage() != "Data deleted successfully." || resp.Data != nil {
				t.Fatalf("%v %v", resp, err)
			}
		}
	})
	h.step("a name alone, without organization, is enough", func(t *testing.T) {
		resp, err := h.srv.DeleteDataByLocation(k1, &documentsv1.DeleteDataByLocationRequest{Location: &documentsv1.Location{LocationName: "Only a name"}})
		if err != nil || resp.Data != nil {
			t.Fatalf("name only, no organization: %v %v", resp, err)
		}
	})
	h.step("each request publishes its event, delivered at once", func(t *testing.T) {
		events := h.pub.published()
		if len(events) != 3 {
			t.Fatalf("events %v", events)
		}
		e := events[0]
		p := e.GetLocationDataDeleted()
		if e.GetType() != "location.data_deleted" || e.GetApiKey() != "k1" || e.GetOrganizationId() != "o" || p.GetDocumentId() != "d" || p.GetLocationId() != "loc-1" || p.GetLocationName() != "Intro" {
			t.Fatalf("event %v", e)
		}
		if r, _ := h.ob.Get(context.Background(), e.GetId()); r.State() != "completed" {
			t.Fatalf("delivered at once: %s", r.State())
		}
		if events[2].GetOrganizationId() != "" || events[2].GetLocationDataDeleted().GetLocationName() != "Only a name" {
			t.Fatalf("event without organization %v", events[2])
		}
	})
	h.step("documents are unchanged", func(t *testing.T) {
		if dump(h.mem) != before {
			t.Fatal("documents changed: this service holds no location data")
		}
	})
}

// countingStore counts reads, to show how many queries an operation costs.
type countingStore struct {
	Store
	reads int
}

func (c *countingStore) Organization(ctx context.Context, apiKey, id string) (*Organization, error) {
	c.reads++
	return c.Store.Organization(ctx, apiKey, id)
}

func (c *countingStore) ListFolders(ctx context.Context, apiKey, org string, f FolderFilter, after *Position, limit int) ([]*Folder, error) {
	c.reads++
	return c.Store.ListFolders(ctx, apiKey, org, f, after, limit)
}

func (c *countingStore) ListDocuments(ctx context.Context, apiKey, org string, f DocumentFilter, after *Position, limit int) ([]*Document, error) {
	c.reads++
	return c.Store.ListDocuments(ctx, apiKey, org, f, after, limit)
}

func TestResolveResources(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	counter := &countingStore{Store: h.mem}
	h.store = counter
	h.start()
	h.org(k1, "o")
	h.folder(k1, "o", "top", "", "restricted")
	h.folder(k1, "o", "mid", "top", "")
	h.folder(k1, "o", "low", "mid", "organizationPrivate")
	h.folder(k1, "o", "side", "", "")
	var docs []string
	for i := range 30 {
		id := fmt.Sprint("d", i)
		folder := []string{"low", "mid", "top", "side", ""}[i%5]
		h.docs(k1, "o", folder, id)
		docs = append(docs, id)
	}
	if _, err := h.srv.UpdateDocumentAccess(k1, &documentsv1.UpdateDocumentAccessRequest{OrganizationId: "o", DocumentIds: []string{"d1"}, AccessType: "public"}); err != nil {
		t.Fatal(err)
	}
	var resp *documentsv1.ResolveResourcesResponse
	h.step("costs reads by nesting depth, not by resources", func(t *testing.T) {
		ask := &documentsv1.ResolveResourcesRequest{ApiKey: "k1", OrganizationId: "o", FolderIds: []string{"low", "top", "ghost"}, DocumentIds: append(docs, "ghost")}
		counter.reads = 0
		var err error
		resp, err = h.srv.ResolveResources(context.Background(), ask)
		if err != nil {
			t.Fatal(err)
		}
		// The organization, the documents, then one folder query per level of nesting (three) and
		// one that finds no further parents: independent of the number of resources.
		if counter.reads > 5 {
			t.Fatalf("%d store reads for 30 documents and 3 folders", counter.reads)
		}
		if !resp.GetOrganizationExists() || len(resp.GetFolders()) != 3 || len(resp.GetDocuments()) != 31 {
			t.Fatalf("shape %v", resp)
		}
	})
	describe := func(r *documentsv1.ResolvedResource) string {
		if !r.GetExists() {
			return fmt.Sprintf("missing %q %v", r.GetAccessType(), r.GetFolderChain())
		}
		return r.GetAccessType() + " " + strings.Join(r.GetFolderChain(), ">")
	}
	h.step("folders answer their access and chain", func(t *testing.T) {
		for _, c := range []struct{ id, want string }{
			{"low", "organizationPrivate mid>top"}, {"top", "restricted "}, {"ghost", "missing \"\" []"},
		} {
			t.Run(c.id, func(t *testing.T) {
				if got := describe(resp.GetFolders()[c.id]); got != c.want {
					t.Errorf("folder %s: %s, want %s", c.id, got, c.want)
				}
			})
		}
	})
	h.step("documents answer their effective access and chain", func(t *testing.T) {
		for _, c := range []struct{ id, want string }{
			{"d0", "organizationPrivate low>mid>top"}, {"d1", "public mid>top"}, {"d6", "restricted mid>top"},
			{"d2", "restricted top"}, {"d3", "public side"}, {"d4", "public "}, {"ghost", "missing \"\" []"},
		} {
			t.Run(c.id, func(t *testing.T) {
				if got := describe(resp.GetDocuments()[c.id]); got != c.want {
					t.Errorf("document %s: %s, want %s", c.id, got, c.want)
				}
			})
		}
	})
	h.step("another tenant's organization and its contents do not exist", func(t *testing.T) {
		other, err := h.srv.ResolveResources(context.Background(), &documentsv1.ResolveResourcesRequest{ApiKey: "k2", OrganizationId: "o", FolderIds: []string{"top"}, DocumentIds: []string{"d0"}})
		if err != nil || other.GetOrganizationExists() || other.GetFolders()["top"].GetExists() || other.GetDocuments()["d0"].GetExists() {
			t.Fatalf("another key: %v %v", other, err)
		}
	})
	h.step("the organization alone", func(t *testing.T) {
		empty, err := h.srv.ResolveResources(context.Background(), &documentsv1.ResolveResourcesRequest{ApiKey: "k1", OrganizationId: "o"})
		if err != nil || !empty.GetOrganizationExists() || len(empty.GetFolders())+len(empty.GetDocuments()) != 0 {
			t.Fatalf("organization only: %v %v", empty, err)
		}
	})
}

func TestEnsureResources(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	ensure := func(req *documentsv1.EnsureResourcesRequest) error {
		req.ApiKey = "k1"
		_, err := h.srv.EnsureResources(ctx, req)
		return err
	}
	h.step("a missing resource without its create flag is refused; nothing is made", func(t *testing.T) {
		for _, r := range []struct {
			req *documentsv1.EnsureResourcesRequest
			msg string
		}{
			{&documentsv1.EnsureResourcesRequest{OrganizationId: "o"}, "Organization does not exist."},
			{&documentsv1.EnsureResourcesRequest{OrganizationId: "o", CreateOrganization: true, FolderId: "f"}, "Folder does not exist."},
			{&documentsv1.EnsureResourcesRequest{OrganizationId: "o", CreateOrganization: true, FolderId: "f", CreateFolder: true, DocumentId: "d"}, "Document does not exist."},
		} {
			t.Run(r.msg, func(t *testing.T) {
				wantErr(t, r.msg, ensure(r.req), codes.NotFound, r.msg)
			})
		}
		if dump(h.mem) != "" {
			t.Fatalf("refusals created:\n%s", dump(h.mem))
		}
	})
	h.step("makes organization, folder and document", func(t *testing.T) {
		if err := ensure(&documentsv1.EnsureResourcesRequest{OrganizationId: "o", CreateOrganization: true, FolderId: "f", CreateFolder: true, DocumentId: "d", CreateDocument: true}); err != nil {
			t.Fatal(err)
		}
		if d := h.document("k1", "o", "d"); d == nil || d.FolderID != "f" {
			t.Fatalf("document %+v", d)
		}
		f, _ := h.store.ListFolders(ctx, "k1", "o", FolderFilter{IDs: []string{"f"}}, nil, 0)
		if len(f) != 1 || f[0].ParentID != "" || f[0].AccessType != "" {
			t.Fatalf("folder %+v", f)
		}
	})
	h.step("ensuring what exists changes nothing", func(t *testing.T) {
		before := dump(h.mem)
		for _, c := range []struct {
			name string
			req  *documentsv1.EnsureResourcesRequest
		}{
			{"organization", &documentsv1.EnsureResourcesRequest{OrganizationId: "o"}},
			{"organization, folder and document", &documentsv1.EnsureResourcesRequest{OrganizationId: "o", FolderId: "f", DocumentId: "d"}},
			{"with every create flag", &documentsv1.EnsureResourcesRequest{OrganizationId: "o", CreateOrganization: true, FolderId: "f", CreateFolder: true, DocumentId: "d", CreateDocument: true}},
		} {
			t.Run(c.name, func(t *testing.T) {
				if err := ensure(c.req); err != nil {
					t.Fatalf("%v: %v", c.req, err)
				}
			})
		}
		if dump(h.mem) != before {
			t.Fatal("ensuring what exists changed it")
		}
	})
	h.step("a missing document in an existing folder is refused", func(t *testing.T) {
		wantErr(t, "missing document in an existing folder", ensure(&documentsv1.EnsureResourcesRequest{OrganizationId: "o", FolderId: "f", DocumentId: "d2"}), codes.NotFound, "Document does not exist.")
	})
	h.step("makes a document without folder", func(t *testing.T) {
		if err := ensure(&documentsv1.EnsureResourcesRequest{OrganizationId: "o", DocumentId: "d2", CreateDocument: true}); err != nil {
			t.Fatal(err)
		}
		if d := h.document("k1", "o", "d2"); d == nil || d.FolderID != "" {
			t.Fatalf("document without folder %+v", d)
		}
	})
	h.step("another tenant's organization is not there", func(t *testing.T) {
		_, err := h.srv.EnsureResources(ctx, &documentsv1.EnsureResourcesRequest{ApiKey: "k2", OrganizationId: "o"})
		wantErr(t, "k2", err, codes.NotFound, "Organization does not exist.")
	})
}

// brokenStore fails every read, like a store whose server went away.
type brokenStore struct{ Store }

var errStoreDown = errors.New("connection refused by 10.0.0.7:27017")

func (brokenStore) Organization(context.Context, string, string) (*Organization, error) {
	return nil, errStoreDown
}

func TestStoreFailuresAnswerInternal(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.store = brokenStore{h.mem}
	h.start()
	_, err := h.srv.GetDocumentsV1(k1, &documentsv1.GetDocumentsV1Request{OrganizationId: "o"})
	st := asStatus(err)
	if st.Code() != codes.Internal || strings.Contains(st.Message(), "10.0.0.7") || !errors.Is(err, errStoreDown) {
		t.Fatalf("broken store: %v (%v)", st, err)
	}
}

// interleavedStore runs hook once, right after the first document is created: another request's
// write landing between this request's steps.
type interleavedStore struct {
	*MemoryStore
	hook func()
}

func (s *interleavedStore) CreateDocument(ctx context.Context, d *Document) error {
	err := s.MemoryStore.CreateDocument(ctx, d)
	if hook := s.hook; hook != nil {
		s.hook = nil
		hook()
	}
	return err
}

// An organization deleted (and made again) while documents are added to it keeps none of them:
// the add answers NOT_FOUND as if the deletion had come first, and the new organization is
// empty.
func TestDocumentsAddedDuringOrganizationDeletionDoNotSurvive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		recreate bool
	}{
		{"organization deleted", false},
		{"organization deleted and made again", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			store := &interleavedStore{MemoryStore: h.mem}
			h.store = store
			h.start()
			h.org(k1, "o")
			store.hook = func() {
				// The deletion runs whole (its event too) between the write and the check.
				if _, err := h.srv.DeleteOrganizations(k1, &documentsv1.DeleteOrganizationsRequest{OrganizationIds: []string{"o"}}); err != nil {
					t.Fatal(err)
				}
				if c.recreate {
					h.org(k1, "o")
				}
			}
			_, err := h.srv.AddDocuments(k1, &documentsv1.AddDocumentsRequest{OrganizationId: "o", Documents: []*documentsv1.DocumentInput{{DocumentId: "d1"}, {DocumentId: "d2"}}})
			wantErr(t, "add during deletion", err, codes.NotFound, "Organization does not exist.")
			if left, _ := h.mem.ListDocuments(ctx, "k1", "o", DocumentFilter{}, nil, 0); len(left) != 0 {
				t.Fatalf("documents outlived their organization: %v", documentIDs(left))
			}
			if _, err := h.mem.Organization(ctx, "k1", "o"); c.recreate != (err == nil) {
				t.Fatalf("the organization of today: %v", err)
			}
		})
	}
}

// A late delivery of an organization's deletion removes that generation only: the organization
// made again since, and its documents, stay.
func TestLateDeletionSparesTheNextGeneration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t)
	h.org(k1, "o")
	old, _ := h.mem.Organization(ctx, "k1", "o")
	h.docs(k1, "o", "", "d")
	oldDoc := h.document("k1", "o", "d").Generation
	if _, err := h.srv.DeleteOrganizations(k1, &documentsv1.DeleteOrganizationsRequest{OrganizationIds: []string{"o"}}); err != nil {
		t.Fatal(err)
	}
	h.org(k1, "o")
	h.docs(k1, "o", "", "d")
	for _, e := range []*lifecyclev1.Event{
		{Id: "late1", Type: "organization.deleted", ApiKey: "k1", OrganizationId: "o", OrganizationGeneration: old.Generation,
			Payload: &lifecyclev1.Event_OrganizationDeleted{OrganizationDeleted: &lifecyclev1.OrganizationDeleted{}}},
		{Id: "late2", Type: "document.deleted", ApiKey: "k1", OrganizationId: "o", OrganizationGeneration: old.Generation,
			Payload: &lifecyclev1.Event_DocumentsDeleted{DocumentsDeleted: &lifecyclev1.DocumentsDeleted{DocumentIds: []string{"d"}, Generations: []string{oldDoc}}}},
	} {
		if err := h.srv.HandleEvent(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	h.step("the organization of today stays", func(t *testing.T) {
		now, err := h.mem.Organization(ctx, "k1", "o")
		if err != nil || now.Generation == old.Generation {
			t.Fatalf("the organization of today went with a late deletion of the old one: %v", err)
		}
	})
	h.step("the document of today stays", func(t *testing.T) {
		if d := h.document("k1", "o", "d"); d == nil || d.Generation == oldDoc {
			t.Fatalf("the document of today went with a late deletion of the old one: %+v", d)
		}
	})
}

// EnsureResources and ResolveResources answer generations; a resource made again has another.
func TestResourcesAnswerTheirGenerations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t)
	ens := func(t *testing.T) *documentsv1.EnsureResourcesResponse {
		t.Helper()
		r, err := h.srv.EnsureResources(ctx, &documentsv1.EnsureResourcesRequest{ApiKey: "k1", OrganizationId: "o", CreateOrganization: true,
			FolderId: "f", CreateFolder: true, DocumentId: "d", CreateDocument: true})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	var first *documentsv1.EnsureResourcesResponse
	h.step("ensure answers generations", func(t *testing.T) {
		first = ens(t)
		if first.GetOrganizationGeneration() == "" || first.GetFolderGeneration() == "" || first.GetDocumentGeneration() == "" {
			t.Fatalf("generations %v", first)
		}
	})
	h.step("ensure answers the same generations again", func(t *testing.T) {
		if again := ens(t); !proto.Equal(again, first) {
			t.Fatalf("the same resources answered other generations: %v, then %v", first, again)
		}
	})
	h.step("resolve answers the same generations", func(t *testing.T) {
		res, err := h.srv.ResolveResources(ctx, &documentsv1.ResolveResourcesRequest{ApiKey: "k1", OrganizationId: "o", FolderIds: []string{"f"}, DocumentIds: []string{"d"}})
		if err != nil {
			t.Fatal(err)
		}
		d := res.GetDocuments()["d"]
		if res.GetOrganizationGeneration() != first.GetOrganizationGeneration() || res.GetFolders()["f"].GetGeneration() != first.GetFolderGeneration() ||
			d.GetGeneration() != first.GetDocumentGeneration() || !slices.Equal(d.GetFolderChainGenerations(), []string{first.GetFolderGeneration()}) {
			t.Fatalf("resolved %v, ensured %v", res, first)
		}
	})
	h.step("a document made again has another generation", func(t *testing.T) {
		if _, err := h.srv.DeleteDocuments(callerCtx("k1", true), &documentsv1.DeleteDocumentsRequest{OrganizationId: "o", DocumentIds: []string{"d"}}); err != nil {
			t.Fatal(err)
		}
		if next := ens(t); next.GetDocumentGeneration() == first.GetDocumentGeneration() || next.GetOrganizationGeneration() != first.GetOrganizationGeneration() {
			t.Fatalf("a document made again kept its generation: %v, %v", first, next)
		}
	})
}

// Names go into other people's screens, logs and mail: a line break, another control
// character or a bidi override in any of them is refused, and nothing is written.
func TestNamesRefuseControlCharacters(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.org(k1, "o")
	h.folder(k1, "o", "f", "", "")
	h.docs(k1, "o", "f", "d")
	before := dump(h.mem)
	s := h.srv
	bads := []struct{ name, value string }{
		{"CRLF header injection", "Q3\r\nBcc: x@example.com"},
		{"tab", "tab\there"},
		{"NUL", "nul\x00"},
		{"DEL", "del\x7f"},
		{"C1 next line", "c1\u0085next"},
		{"line separator", "line\u2028sep"},
		{"bidi override", "invoice\u202Efdp.exe"},
	}
	calls := []struct {
		rpc, msg string
		call     func(bad string) error
	}{
		{"AddOrganizations", "organizations[0].organizationName must not contain control characters.", func(bad string) error {
			_, err := s.AddOrganizations(k1, &documentsv1.AddOrganizationsRequest{Organizations: []*documentsv1.Organization{{OrganizationId: "n", OrganizationName: bad}}})
			return err
		}},
		{"UpdateOrganizations", "organizations[1].organizationName must not contain control characters.", func(bad string) error {
			_, err := s.UpdateOrganizations(k1, &documentsv1.UpdateOrganizationsRequest{Organizations: []*documentsv1.Organization{{OrganizationId: "o", OrganizationName: "fine"}, {OrganizationId: "o2", OrganizationName: bad}}})
			return err
		}},
		{"AddFolders", "folders[0].folderName must not contain control characters.", func(bad string) error {
			_, err := s.AddFolders(k1, &documentsv1.AddFoldersRequest{OrganizationId: "o", Folders: []*documentsv1.Folder{{FolderId: "x", FolderName: bad}}})
			return err
		}},
		{"UpdateFolders", "folders[1].folderName must not contain control characters.", func(bad string) error {
			_, err := s.UpdateFolders(k1, &documentsv1.UpdateFoldersRequest{OrganizationId: "o", Folders: []*documentsv1.FolderUpdate{{FolderId: "f", FolderName: ptr("fine")}, {FolderId: "g", FolderName: ptr(bad)}}})
			return err
		}},
		{"AddDocuments", "documents[0].documentName must not contain control characters.", func(bad string) error {
			_, err := s.AddDocuments(k1, &documentsv1.AddDocumentsRequest{OrganizationId: "o", Documents: []*documentsv1.DocumentInput{{DocumentId: "x", DocumentName: bad}}})
			return err
		}},
		{"UpdateDocuments", "documents[0].documentName must not contain control characters.", func(bad string) error {
			_, err := s.UpdateDocuments(k1, &documentsv1.UpdateDocumentsRequest{OrganizationId: "o", Documents: []*documentsv1.DocumentUpdate{{DocumentId: "d", DocumentName: ptr(bad)}}})
			return err
		}},
		{"DeleteDataByLocation", "location.locationName must not contain control characters.", func(bad string) error {
			_, err := s.DeleteDataByLocation(k1, &documentsv1.DeleteDataByLocationRequest{OrganizationId: "o", Location: &documentsv1.Location{LocationName: bad}})
			return err
		}},
	}
	for _, c := range calls {
		t.Run(c.rpc, func(t *testing.T) {
			for _, bad := range bads {
				t.Run(bad.name, func(t *testing.T) {
					wantErr(t, fmt.Sprintf("%q: %s", bad.value, c.msg), c.call(bad.value), codes.InvalidArgument, c.msg)
				})
			}
		})
	}
	t.Run("refused names wrote and published nothing", func(t *testing.T) {
		if dump(h.mem) != before {
			t.Fatal("a refused name changed the store")
		}
		if n := len(h.pub.published()); n != 0 {
			t.Fatalf("a refused location name published %d events", n)
		}
	})
	t.Run("names of every script and emoji with joiners are kept, trimmed", func(t *testing.T) {
		resp, err := s.AddDocuments(k1, &documentsv1.AddDocumentsRequest{OrganizationId: "o", Documents: []*documentsv1.DocumentInput{{DocumentId: "ok", DocumentName: " Plan \U0001F468\u200D\U0001F469 \u0645\u06CC\u200C\u062E\u0648\u0627\u0647\u0645\n"}}})
		if err != nil || !resp.GetData()["ok"].GetSuccess() {
			t.Fatalf("ordinary name: %v %v", resp, err)
		}
		if got := h.document("k1", "o", "ok").Name; got != "Plan \U0001F468\u200D\U0001F469 \u0645\u06CC\u200C\u062E\u0648\u0627\u0647\u0645" {
			t.Fatalf("stored name %q", got)
		}
	})
}

// Page tokens are honoured for cursor.DefaultLifetime after they were issued, by the clock the
// server was given; then the caller is told to start again.
func TestPageTokensExpire(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		list func(h *harness, token string) (string, error)
	}{
		{"organizations", func(h *harness, tok string) (string, error) {
			resp, err := h.srv.GetOrganizations(k1, &documentsv1.GetOrganizationsRequest{PageSize: 1, PageToken: tok})
			return resp.GetPageToken(), err
		}},
		{"folders", func(h *harness, tok string) (string, error) {
			resp, err := h.srv.GetFolders(k1, &documentsv1.GetFoldersRequest{OrganizationId: "o", PageSize: 1, PageToken: tok})
			return resp.GetPageToken(), err
		}},
		{"documents", func(h *harness, tok string) (string, error) {
			resp, err := h.srv.GetDocuments(k1, &documentsv1.GetDocumentsRequest{OrganizationId: "o", PageSize: 1, PageToken: tok})
			return resp.GetPageToken(), err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.org(k1, "o")
			h.org(k1, "p")
			h.folder(k1, "o", "f1", "", "")
			h.folder(k1, "o", "f2", "", "")
			h.docs(k1, "o", "", "d1", "d2")
			tok, err := c.list(h, "")
			if err != nil || tok == "" {
				t.Fatalf("first page %q %v", tok, err)
			}
			h.clock.Advance(cursor.DefaultLifetime)
			if _, err := c.list(h, tok); err != nil {
				t.Fatalf("a token at the end of its lifetime: %v", err)
			}
			h.clock.Advance(time.Second)
			_, err = c.list(h, tok)
			wantErr(t, "expired token", err, codes.InvalidArgument, "pageToken has expired; request the first page again.")
			if tok, err := c.list(h, ""); err != nil || tok == "" {
				t.Fatalf("starting again: %q %v", tok, err)
			}
		})
	}
}
