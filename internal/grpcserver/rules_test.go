package grpcserver

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	usersv1 "github.com/collab/collab/proto/collab/users/v1"
	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"
)

// The rules interceptor answers the first broken rule as INVALID_ARGUMENT "<JSON path>
// <message>" (indexes in brackets, the JSON names of nested fields), a rule on the whole request
// with its message alone, and lets a valid request or one without rules through.
func TestRequestRules(t *testing.T) {
	rules := RequestRules()
	called := false
	handler := func(context.Context, any) (any, error) { called = true; return "ok", nil }
	for _, c := range []struct {
		name string
		req  any
		want string // "" when the handler must run
	}{
		{"nested field of a list item", &usersv1.AddUsersRequest{OrganizationId: "o", Users: []*usersv1.User{{UserId: "u1"}, {UserId: "u2", PhotoUrl: "ftp://x"}}}, "users[1].photoUrl must be a valid http(s) URL."},
		{"list element", &usersv1.GetUsersRequest{OrganizationId: "o", OrganizationUserGroupIds: []string{"g", " g"}}, "organizationUserGroupIds[1] must not start or end with white space."},
		{"rule on the request", &usersv1.DeleteUsersRequest{OrganizationId: "o", DocumentId: "d", FolderId: "f", UserIds: []string{"u"}}, "Provide either documentId or folderId, not both."},
		{"valid", &usersv1.AddUsersRequest{OrganizationId: "o", Users: []*usersv1.User{{UserId: "u1", Name: " Ann ", Email: "ann@example.com"}}}, ""},
		{"no rules", &workspacev1.CreateWorkspaceRequest{}, ""},
		{"not a message", "text", ""},
	} {
		called = false
		_, err := rules(context.Background(), c.req, &grpc.UnaryServerInfo{}, handler)
		if c.want == "" {
			if err != nil || !called {
				t.Errorf("%s: %v, handler called %v", c.name, err, called)
			}
			continue
		}
		if st := status.Convert(err); st.Code() != codes.InvalidArgument || st.Message() != c.want || called {
			t.Errorf("%s: %v %q (handler called %v), want InvalidArgument %q", c.name, st.Code(), st.Message(), called, c.want)
		}
	}
}
