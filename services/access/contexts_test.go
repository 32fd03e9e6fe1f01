package access

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"

	"github.com/collab/collab/internal/clock"
)

// setContext gives user the access context access in org, as Add Permissions does.
func (h *harness) setContext(ctx context.Context, user, org string, access map[string]any) {
	h.t.Helper()
	s, err := structpb.NewStruct(access)
	if err != nil {
		h.t.Fatal(err)
	}
	_, err = h.srv.AddPermissions(ctx, &accessv1.AddPermissionsRequest{User: &accessv1.UserRef{UserId: user}, Permissions: &accessv1.Permissions{
		Resources: []*accessv1.Resource{resource("organization", org, org)},
		Context:   &accessv1.ContextAccess{Access: s},
	}})
	if err != nil {
		h.t.Fatal(st(err))
	}
}

func contexts(t *testing.T, cs ...map[string]any) []*structpb.Struct {
	t.Helper()
	out := make([]*structpb.Struct, len(cs))
	for i, c := range cs {
		s, err := structpb.NewStruct(c)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = s
	}
	return out
}

// matches calls MatchContexts and writes its answer as "user:[indexes]" in order.
func (h *harness) matches(req *accessv1.MatchContextsRequest) string {
	h.t.Helper()
	resp, err := h.srv.MatchContexts(context.Background(), req)
	if err != nil {
		h.t.Fatalf("MatchContexts: %v", st(err))
	}
	var out []string
	for _, m := range resp.GetMatches() {
		out = append(out, fmt.Sprintf("%s:%v", m.GetUserId(), m.GetContexts()))
	}
	return strings.Join(out, " ")
}

// Issue 21 (1): a context is granted to a user whose access context in the organization (under
// its generation, in the tenant) holds every field and value it names; 5 and "5" are one value;
// a user without an access context is granted nothing.
func TestMatchContexts(t *testing.T) {
	h := newHarness(t)
	h.docs.addOrg("k1", "o").addOrg("k1", "o2").addOrg("k2", "o")
	h.docs.setGen("org", "k1", "o", "", "og1")
	h.setContext(k1, "p12", "o", map[string]any{"projectId": []any{"p1", "p2"}})
	h.setContext(k1, "p9", "o", map[string]any{"projectId": "p9"})
	h.setContext(k1, "p9eu", "o", map[string]any{"projectId": []any{"p9", "p3"}, "region": "eu"})
	h.setContext(k1, "n5", "o", map[string]any{"level": 5})
	h.setContext(k1, "s5", "o", map[string]any{"level": "5", "projectId": "p9"})
	h.setContext(k1, "elsewhere", "o2", map[string]any{"projectId": "p9"})
	h.setContext(k2, "p9", "o", map[string]any{"projectId": "p1"})
	h.add(k1, "none", resource("organization", "o", "o"))

	cs := contexts(t,
		map[string]any{"projectId": "p9"},
		map[string]any{"projectId": "p9", "region": "eu"},
		map[string]any{"level": 5},
		map[string]any{"level": "5"},
		map[string]any{"projectId": "p1"},
		map[string]any{"level": 5.0, "projectId": "p9"},
	)
	users := []string{"p12", "p9", "p9eu", "n5", "s5", "none", "elsewhere", "nobody", "p9"}
	got := h.matches(&accessv1.MatchContextsRequest{ApiKey: "k1", OrganizationId: "o", OrganizationGeneration: "og1", UserIds: users, Contexts: cs})
	if want := "p12:[4] p9:[0] p9eu:[0 1] n5:[2 3] s5:[0 2 3 5]"; got != want {
		t.Fatalf("matches %q, want %q", got, want)
	}
	// Another tenant's fields, and a generation that is not the one the fields were set under.
	if got := h.matches(&accessv1.MatchContextsRequest{ApiKey: "k2", OrganizationId: "o", UserIds: []string{"p9"}, Contexts: cs}); got != "p9:[4]" {
		t.Fatalf("k2: %q", got)
	}
	if got := h.matches(&accessv1.MatchContextsRequest{ApiKey: "k1", OrganizationId: "o", OrganizationGeneration: "og0", UserIds: users, Contexts: cs}); got != "" {
		t.Fatalf("a stale generation granted %q", got)
	}
	// A changed context answers as it now is.
	h.setContext(k1, "p9", "o", map[string]any{"projectId": "p1"})
	if got := h.matches(&accessv1.MatchContextsRequest{ApiKey: "k1", OrganizationId: "o", OrganizationGeneration: "og1", UserIds: []string{"p9"}, Contexts: cs}); got != "p9:[4]" {
		t.Fatalf("after the change: %q", got)
	}
}

// A fan-out batch of 10,000 users costs one context read per thousand.
func TestMatchContextsReadsInBatches(t *testing.T) {
	h := newHarness(t)
	h.docs.addOrg("k1", "o")
	users := make([]string, maxMatchUsers)
	for i := range users {
		users[i] = fmt.Sprintf("u%05d", i)
	}
	for _, u := range users[:3] {
		h.setContext(k1, u, "o", map[string]any{"team": "red"})
	}
	h.store.contexts.Store(0)
	got := h.matches(&accessv1.MatchContextsRequest{ApiKey: "k1", OrganizationId: "o", UserIds: users, Contexts: contexts(t, map[string]any{"team": "red"})})
	if got != "u00000:[0] u00001:[0] u00002:[0]" {
		t.Fatalf("matches %q", got)
	}
	if n := h.store.contexts.Load(); n != maxMatchUsers/readerBatch {
		t.Fatalf("%d context reads, want %d", n, maxMatchUsers/readerBatch)
	}
}

func TestMatchContextsBadInput(t *testing.T) {
	h := newHarness(t)
	ok := contexts(t, map[string]any{"team": "red"})
	many := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("u%d", i)
		}
		return out
	}
	wide := map[string]any{}
	for i := range maxMatchFields + 1 {
		wide[fmt.Sprintf("f%02d", i)] = "x"
	}
	manyContexts := make([]*structpb.Struct, maxMatchContexts+1)
	for i := range manyContexts {
		manyContexts[i] = ok[0]
	}
	for _, c := range []struct {
		req *accessv1.MatchContextsRequest
		msg string
	}{
		{&accessv1.MatchContextsRequest{OrganizationId: "o", UserIds: []string{"u"}, Contexts: ok}, "apiKey is required."},
		{&accessv1.MatchContextsRequest{ApiKey: "k1", UserIds: []string{"u"}, Contexts: ok}, "organizationId is required."},
		{&accessv1.MatchContextsRequest{ApiKey: "k1", OrganizationId: "o", OrganizationGeneration: "g\x00h", UserIds: []string{"u"}, Contexts: ok}, "organizationGeneration must not contain control characters."},
		{&accessv1.MatchContextsRequest{ApiKey: "k1", OrganizationId: "o", Contexts: ok}, "userIds must contain at least one id."},
		{&accessv1.MatchContextsRequest{ApiKey: "k1", OrganizationId: "o", UserIds: many(maxMatchUsers + 1), Contexts: ok}, "userIds must contain at most 10000 ids."},
		{&accessv1.MatchContextsRequest{ApiKey: "k1", OrganizationId: "o", UserIds: []string{"u"}}, "contexts must contain at least one context."},
		{&accessv1.MatchContextsRequest{ApiKey: "k1", OrganizationId: "o", UserIds: []string{"u"}, Contexts: manyContexts}, "contexts must contain at most 1000 contexts."},
		{&accessv1.MatchContextsRequest{ApiKey: "k1", OrganizationId: "o", UserIds: many(11), Contexts: manyContexts[:1000]}, "userIds times contexts must be at most 10000."},
		{&accessv1.MatchContextsRequest{ApiKey: "k1", OrganizationId: "o", UserIds: []string{"u"}, Contexts: contexts(t, map[string]any{})}, "contexts[0] must name 1 to 20 fields."},
		{&accessv1.MatchContextsRequest{ApiKey: "k1", OrganizationId: "o", UserIds: []string{"u"}, Contexts: contexts(t, wide)}, "contexts[0] must name 1 to 20 fields."},
		{&accessv1.MatchContextsRequest{ApiKey: "k1", OrganizationId: "o", UserIds: []string{"u"}, Contexts: contexts(t, map[string]any{"team": "red"}, map[string]any{"team": []any{"red"}})}, "contexts[1].team must be a string or a number."},
		{&accessv1.MatchContextsRequest{ApiKey: "k1", OrganizationId: "o", UserIds: []string{"u"}, Contexts: contexts(t, map[string]any{"team": true})}, "contexts[0].team must be a string or a number."},
		{&accessv1.MatchContextsRequest{ApiKey: "k1", OrganizationId: "o", UserIds: []string{"u"}, Contexts: contexts(t, map[string]any{"te\x00am": "red"})}, "contexts[0] field names must be 1 to 256 characters without control characters."},
	} {
		_, err := h.srv.MatchContexts(context.Background(), c.req)
		wantStatus(t, err, codes.InvalidArgument, c.msg)
	}
}

// BenchmarkMatchContexts measures the two shapes the notifications service asks: a fan-out
// batch (10,000 users, each with an access context of three values, one context) and an inbox
// page (one reader, 1,000 contexts of two fields), on the memory store.
func BenchmarkMatchContexts(b *testing.B) {
	store := NewMemoryStore()
	srv, err := New(store, secret, newFakeDocs(), WithClock(clock.NewFake(start)), WithLogger(quiet))
	if err != nil {
		b.Fatal(err)
	}
	users := make([]string, maxMatchUsers)
	fields := []string{"projectId:p1", "projectId:p9", "region:eu"}
	for i := range users {
		users[i] = fmt.Sprintf("u%05d", i)
		if err := store.SetContextFields(context.Background(), "k1", "o", users[i], fields); err != nil {
			b.Fatal(err)
		}
	}
	page := make([]*structpb.Struct, maxMatchContexts)
	for i := range page {
		page[i] = &structpb.Struct{Fields: map[string]*structpb.Value{"projectId": structpb.NewStringValue(fmt.Sprint("p", i%10)), "region": structpb.NewStringValue("eu")}}
	}
	for _, c := range []struct {
		name string
		req  *accessv1.MatchContextsRequest
		want int
	}{
		{"fan-out batch of 10000", &accessv1.MatchContextsRequest{ApiKey: "k1", OrganizationId: "o", UserIds: users,
			Contexts: []*structpb.Struct{{Fields: map[string]*structpb.Value{"projectId": structpb.NewStringValue("p9")}}}}, maxMatchUsers},
		{"inbox page of 1000", &accessv1.MatchContextsRequest{ApiKey: "k1", OrganizationId: "o", UserIds: users[:1], Contexts: page}, 1},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, err := srv.MatchContexts(context.Background(), c.req)
				if err != nil || len(resp.GetMatches()) != c.want {
					b.Fatalf("%d matches, %v", len(resp.GetMatches()), err)
				}
			}
		})
	}
}
