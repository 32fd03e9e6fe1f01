package users

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc"

	usersv1 "github.com/collab/collab/proto/collab/users/v1"

	"github.com/collab/collab/internal/grpcserver"
)

// benchAddUsers is an Add Users request of n users with every field set, all valid.
func benchAddUsers(n int) *usersv1.AddUsersRequest {
	req := &usersv1.AddUsersRequest{OrganizationId: "org-1", DocumentId: "doc-1"}
	for i := range n {
		req.Users = append(req.Users, &usersv1.User{
			UserId: fmt.Sprintf("user-%d", i), Name: fmt.Sprintf("User Number %d", i),
			Email: fmt.Sprintf("user%d@example.com", i), PhotoUrl: fmt.Sprintf("https://img.example.com/u/%d.png", i),
			AccessRole: "viewer",
		})
	}
	return req
}

func benchGetUsers(n int) *usersv1.GetUsersRequest {
	req := &usersv1.GetUsersRequest{OrganizationId: "org-1", DocumentId: "doc-1"}
	for i := range n {
		req.UserIds = append(req.UserIds, fmt.Sprintf("user-%d", i))
	}
	return req
}

func noHandler(context.Context, any) (any, error) { return nil, nil }

// BenchmarkInputChecks compares, on the same valid requests, the hand-written checks
// (handwritten) with the buf.validate rules evaluated by the interceptor (rules).
func BenchmarkInputChecks(b *testing.B) {
	rules := grpcserver.RequestRules()
	info := &grpc.UnaryServerInfo{FullMethod: "/collab.users.v1.UsersService/AddUsers"}
	get := benchGetUsers(100)
	// Once each outside the timing: the first request of a message compiles its rules
	// (BenchmarkRulesFirstCall).
	for _, m := range []any{benchAddUsers(1), get} {
		if _, err := rules(context.Background(), m, info, noHandler); err != nil {
			b.Fatal(err)
		}
	}
	for _, n := range []int{1, 100} {
		add := benchAddUsers(n)
		b.Run(fmt.Sprintf("add%d/rules", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := rules(context.Background(), add, info, noHandler); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("get100/rules", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := rules(context.Background(), get, info, noHandler); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRulesFirstCall is the cold start of the rules: a new validator (its CEL
// environment) and the first Add Users request, which compiles that message's rules.
func BenchmarkRulesFirstCall(b *testing.B) {
	add := benchAddUsers(1)
	info := &grpc.UnaryServerInfo{}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := grpcserver.RequestRules()(context.Background(), add, info, noHandler); err != nil {
			b.Fatal(err)
		}
	}
}
