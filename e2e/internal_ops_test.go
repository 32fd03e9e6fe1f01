package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
	usersv1 "github.com/collab/collab/proto/collab/users/v1"

	"github.com/collab/collab/internal/authn"
)

// internalClient connects to the process's gRPC port and returns a context carrying the
// internal token (the process must run with --internal-token=testInternalToken).
func internalClient(t *testing.T, s *system) (*grpc.ClientConn, context.Context) {
	t.Helper()
	conn, err := grpc.NewClient(s.proc.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, metadata.AppendToOutgoingContext(context.Background(), authn.HeaderInternalToken, testInternalToken)
}

// The internal operations the notifications service needs, on data made over HTTP: the users
// service's ListMembers pages the contact list, the access service's FilterReaders answers as
// Get Permissions does; both follow the organization's generation. On the memory store and on
// the embedded FerretDB.
func TestMembersAndReadersForNotifications(t *testing.T) {
	t.Parallel()
	for name, args := range map[string][]string{"memory": nil, "ferretdb": {"--data-dir=" + t.TempDir()}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testMembersAndReaders(t, newSystem(t, append([]string{"--internal-token=" + testInternalToken}, args...)...))
		})
	}
}

func testMembersAndReaders(t *testing.T, s *system) {
	k := s.devKey()
	apiKey := s.proc.Dev.APIKey
	conn, ctx := internalClient(t, s)
	members, access := usersv1.NewUsersServiceClient(conn), accessv1.NewAccessServiceClient(conn)

	s.org("o")
	s.folder("o", "vault", "", "restricted")
	s.docs("o", "vault", "secret")
	s.docs("o", "", "open", "private")
	s.call("/v1/organizations/documents/access/update", k, map[string]any{"organizationId": "o", "documentIds": []string{"private"}, "accessType": "organizationPrivate"}).data(t, "")
	var ids []string
	for i := range 7 {
		ids = append(ids, fmt.Sprintf("u%d", i))
	}
	// Members (editors of the organization) u0..u6, u5 a viewer; a guest with a grant on the
	// secret document only.
	s.call("/v2/users/add", k, map[string]any{"organizationId": "o", "users": users(ids...)}).data(t, "User(s) processed successfully.")
	s.call("/v2/users/update", k, map[string]any{"organizationId": "o", "users": []any{map[string]any{"userId": "u5", "accessRole": "viewer"}}}).data(t, "")
	grant(s, "guest", map[string]any{"type": "document", "id": "secret", "organizationId": "o", "accessRole": "viewer"})

	list := func(after string, limit int32) ([]string, bool) {
		t.Helper()
		resp, err := members.ListMembers(ctx, &usersv1.ListMembersRequest{ApiKey: apiKey, OrganizationId: "o", After: after, Limit: limit})
		if err != nil {
			t.Fatalf("ListMembers: %v", err)
		}
		var out []string
		for _, m := range resp.GetMembers() {
			if m.GetName() != "Name "+m.GetUserId() || m.GetEmail() != m.GetUserId()+"@example.com" {
				t.Fatalf("member %v", m)
			}
			out = append(out, m.GetUserId())
		}
		return out, resp.GetMore()
	}
	var paged []string
	after := ""
	for {
		page, more := list(after, 3)
		paged = append(paged, page...)
		if !more {
			break
		}
		after = page[len(page)-1]
	}
	if !slices.Equal(paged, ids) {
		t.Fatalf("paged members %v", paged)
	}
	if all, more := list("", 0); !slices.Equal(all, ids) || more {
		t.Fatalf("one page: %v %v", all, more)
	}

	readers := func(doc string, asked ...string) []string {
		t.Helper()
		resp, err := access.FilterReaders(ctx, &accessv1.FilterReadersRequest{ApiKey: apiKey, OrganizationId: "o", DocumentId: doc, UserIds: asked})
		if err != nil {
			t.Fatalf("FilterReaders(%s): %v", doc, err)
		}
		return resp.GetUserIds()
	}
	asked := []string{"stranger", "u5", "guest", "u1", "u5"}
	for doc, want := range map[string][]string{
		"open":    {"stranger", "u5", "guest", "u1"},
		"private": {"u5", "u1"},
		"secret":  {"guest"},
	} {
		if got := readers(doc, asked...); !slices.Equal(got, want) {
			t.Errorf("readers of %s: %v, want %v", doc, got, want)
		}
	}
	// The same answer as Get Permissions.
	perms := s.call("/v2/auth/permissions/get", k, map[string]any{"organizationId": "o", "userIds": []string{"stranger", "u5", "guest", "u1"}, "documentIds": []string{"private"}}).data(t, "")
	for _, u := range []string{"stranger", "u5", "guest", "u1"} {
		_, hasRole := perms[u].(map[string]any)["documents"].(map[string]any)["private"].(map[string]any)["accessRole"]
		if hasRole != slices.Contains(readers("private", asked...), u) {
			t.Errorf("%s: Get Permissions role %v, FilterReaders disagrees", u, hasRole)
		}
	}

	for _, c := range []struct {
		err  error
		code codes.Code
		msg  string
	}{
		{errOf(members.ListMembers(ctx, &usersv1.ListMembersRequest{ApiKey: apiKey, OrganizationId: "nope"})), codes.NotFound, "Organization does not exist."},
		{errOf(members.ListMembers(ctx, &usersv1.ListMembersRequest{ApiKey: apiKey, OrganizationId: "o", Limit: 5001})), codes.InvalidArgument, "limit must be between 1 and 5000."},
		{errOf(access.FilterReaders(ctx, &accessv1.FilterReadersRequest{ApiKey: apiKey, OrganizationId: "o", DocumentId: "nope", UserIds: []string{"u1"}})), codes.NotFound, "Document does not exist."},
		{errOf(access.FilterReaders(ctx, &accessv1.FilterReadersRequest{ApiKey: apiKey, OrganizationId: "nope", DocumentId: "open", UserIds: []string{"u1"}})), codes.NotFound, "Organization does not exist."},
		{errOf(access.FilterReaders(ctx, &accessv1.FilterReadersRequest{OrganizationId: "o", DocumentId: "open"})), codes.InvalidArgument, "apiKey is required."},
	} {
		if st := status.Convert(c.err); st.Code() != c.code || st.Message() != c.msg {
			t.Errorf("%v, want %v %q", st, c.code, c.msg)
		}
	}

	// Deleted and made again, the organization has no members, and its former members read
	// only what the new one opens to everyone.
	s.call("/v2/organizations/delete", k, map[string]any{"organizationIds": []string{"o"}}).data(t, "")
	if err := errOf(members.ListMembers(ctx, &usersv1.ListMembersRequest{ApiKey: apiKey, OrganizationId: "o"})); status.Code(err) != codes.NotFound {
		t.Fatalf("deleted organization: %v", err)
	}
	s.org("o")
	s.docs("o", "", "private")
	s.call("/v1/organizations/documents/access/update", k, map[string]any{"organizationId": "o", "documentIds": []string{"private"}, "accessType": "organizationPrivate"}).data(t, "")
	if all, more := list("", 0); len(all) != 0 || more {
		t.Fatalf("members of the new organization: %v", all)
	}
	if got := readers("private", asked...); len(got) != 0 {
		t.Fatalf("readers of the new private document: %v", got)
	}
}

func errOf[T any](_ T, err error) error { return err }
