package notifications

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// runQuotaSuite is the conformance suite of the quota counts (store.go, TakeRecipients and
// TakeInbox), run on every Store by runStoreSuite.
func runQuotaSuite(t *testing.T, newStore func(t *testing.T) Store) {
	ctx := context.Background()

	t.Run("recipients per workspace and minute", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		take := func(what, ws string, minute int64, n, limit int, want bool) {
			t.Helper()
			if ok, err := s.TakeRecipients(ctx, ws, minute, n, limit); err != nil || ok != want {
				t.Fatalf("%s: %v %v, want %v", what, ok, err, want)
			}
		}
		take("first", "w1", 100, 6000, 10000, true)
		take("past the limit", "w1", 100, 4001, 10000, false)
		take("up to the limit", "w1", 100, 4000, 10000, true)
		take("full", "w1", 100, 1, 10000, false)
		take("another workspace", "w2", 100, 10000, 10000, true)
		take("the next minute", "w1", 101, 10000, 10000, true)
		take("alone past the limit", "w3", 100, 10001, 10000, false)
		take("no limit", "w1", 100, 1_000_000, 0, true)
		must(t, s.ReturnRecipients(ctx, "w1", 100, 1_000_000))
		must(t, s.ReturnRecipients(ctx, "w1", 100, 4000))
		take("given back", "w1", 100, 4000, 10000, true)
		take("full again", "w1", 100, 1, 10000, false)
		// Minutes long gone are forgotten; returning to a forgotten one is harmless.
		take("much later", "w1", 200, 1, 10000, true)
		must(t, s.ReturnRecipients(ctx, "w1", 100, 10000))
		take("the next minute's", "w1", 201, 10000, 10000, true)
	})

	t.Run("inbox counts", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		takeInbox := func(what string, org Scope, all bool, users []string, limit int, want *InboxFull) {
			t.Helper()
			got, err := s.TakeInbox(ctx, org, all, users, limit)
			if err != nil || (got == nil) != (want == nil) || got != nil && *got != *want {
				t.Fatalf("%s: %+v %v, want %+v", what, got, err, want)
			}
		}
		counts := func(what string, org Scope, want map[string]int) {
			t.Helper()
			for u, n := range want {
				if got, err := s.InboxCount(ctx, org, u); err != nil || got != n {
					t.Fatalf("%s: %s counts %d (%v), want %d", what, u, got, err, n)
				}
			}
		}
		takeInbox("everyone", org1, true, nil, 3, nil)
		takeInbox("u1, u2", org1, false, []string{"u1", "u2", "u1"}, 3, nil)
		takeInbox("u1", org1, false, []string{"u1"}, 3, nil)
		counts("taken", org1, map[string]int{"u1": 3, "u2": 2, "u3": 1})
		takeInbox("u1 full", org1, false, []string{"u2", "u1"}, 3, &InboxFull{UserID: "u1", Count: 3})
		takeInbox("everyone: u1 full", org1, true, nil, 3, &InboxFull{UserID: "u1", Count: 3})
		counts("nothing counted when full", org1, map[string]int{"u1": 3, "u2": 2, "u3": 1})
		takeInbox("u2", org1, false, []string{"u2", "u3"}, 3, nil)
		takeInbox("u2 full", org1, false, []string{"u3", "u2"}, 3, &InboxFull{UserID: "u2", Count: 3})
		takeInbox("no limit", org1, true, nil, 0, nil)
		counts("past it without a limit", org1, map[string]int{"u1": 4, "u2": 4, "u3": 3})
		must(t, s.ReturnInbox(ctx, org1, true, nil))
		must(t, s.ReturnInbox(ctx, org1, false, []string{"u1", "u2"}))
		counts("given back", org1, map[string]int{"u1": 2, "u2": 2, "u3": 2})
		takeInbox("everyone, with room", org1, true, nil, 3, nil)
		takeInbox("everyone, full", org1, true, nil, 3, &InboxFull{UserID: "u1", Count: 3})
		// Everyone's alone.
		g2 := elsewhere[0]
		takeInbox("g2", g2, true, nil, 1, nil)
		takeInbox("g2 full", g2, true, nil, 1, &InboxFull{Count: 1})
		takeInbox("g2: u1 full", g2, false, []string{"u1"}, 1, &InboxFull{UserID: "u1", Count: 1})
		// Counts never go below zero.
		must(t, s.ReturnInbox(ctx, g2, true, nil))
		must(t, s.ReturnInbox(ctx, g2, true, nil))
		must(t, s.ReturnInbox(ctx, g2, false, []string{"u9"}))
		counts("g2 at zero", g2, map[string]int{"u1": 0, "u9": 0})
		for _, sc := range elsewhere[1:] {
			counts(fmt.Sprint("nothing in ", sc), sc, map[string]int{"u1": 0})
		}
		counts("org1 at the end", org1, map[string]int{"u1": 3, "u2": 3, "u3": 3, "u9": 2})
	})

	t.Run("deleting a counted notification takes its count back", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		counted := func(n *Notification) { n.Counted = true }
		toAll := func(n *Notification) { n.NotifyAll = true }
		for _, c := range []struct {
			all   bool
			users []string
		}{{true, nil}, {true, nil}, {false, []string{"u1", "u2"}}, {false, []string{"u1", "u2"}}, {false, []string{"u1"}}} {
			takeOK(t, s, org1, c.all, c.users)
		}
		// n1, n2: to everyone; n3, n4: naming u1 and u2, n4 in document d2; n5: counted by no one.
		add(t, s, notif(org1, "n1", 1, counted, toAll), notif(org1, "n2", 2, counted, toAll),
			notif(org1, "n3", 3, counted), notif(org1, "n4", 4, counted, inDoc("d2", "a")), notif(org1, "n5", 5))
		inboxCount(t, s, "before", org1, "u1", 5)
		inboxCount(t, s, "before", org1, "u2", 4)
		if _, err := s.DeleteNotifications(ctx, org1, []string{"n1", "n5"}); err != nil {
			t.Fatal(err)
		}
		inboxCount(t, s, "n1 deleted", org1, "u1", 4)
		inboxCount(t, s, "n1 deleted", org1, "u2", 3)
		must(t, s.DeleteDocument(ctx, docOf(org1, "d2", "a")))
		inboxCount(t, s, "d2 deleted", org1, "u1", 3)
		inboxCount(t, s, "d2 deleted", org1, "u2", 2)
		// Deleted again: nothing more.
		if _, err := s.DeleteNotifications(ctx, org1, []string{"n1", "n4"}); err != nil {
			t.Fatal(err)
		}
		inboxCount(t, s, "deleted again", org1, "u1", 3)
		must(t, s.DeleteOrganization(ctx, org1))
		inboxCount(t, s, "organization deleted", org1, "u1", 0)
	})

	t.Run("concurrent takes never pass a limit", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		const takers, limit = 24, 10
		wins := func(take func(i int) (bool, error)) int {
			t.Helper()
			ok := make([]bool, takers)
			errs := make([]error, takers)
			var wg sync.WaitGroup
			for i := range takers {
				wg.Go(func() { ok[i], errs[i] = take(i) })
			}
			wg.Wait()
			n := 0
			for i := range takers {
				must(t, errs[i])
				if ok[i] {
					n++
				}
			}
			return n
		}
		// Recipients: ten takes of 1,000 fit in 10,000, and each taker counts alone, so exactly
		// ten pass.
		if n := wins(func(int) (bool, error) { return s.TakeRecipients(ctx, "w1", 7, 1000, limit*1000) }); n != limit {
			t.Errorf("recipients: %d takes passed, want %d", n, limit)
		}
		// Everyone's inbox: exactly ten.
		if n := wins(func(int) (bool, error) {
			full, err := s.TakeInbox(ctx, org1, true, nil, limit)
			return full == nil, err
		}); n != limit {
			t.Errorf("everyone's inbox: %d takes passed, want %d", n, limit)
		}
		// Named users, the takers naming overlapping pairs: no inbox past the limit, and what
		// stands is exactly what passed.
		g2 := elsewhere[0]
		passed := make([][]string, takers)
		wins(func(i int) (bool, error) {
			users := []string{fmt.Sprint("u", i%3), fmt.Sprint("u", (i+1)%3)}
			full, err := s.TakeInbox(ctx, g2, false, users, limit)
			if full == nil && err == nil {
				passed[i] = users
			}
			return full == nil, err
		})
		want := map[string]int{}
		for _, users := range passed {
			for _, u := range users {
				want[u]++
			}
		}
		for u, n := range want {
			if n > limit {
				t.Errorf("%s: %d notifications passed, limit %d", u, n, limit)
			}
			inboxCount(t, s, "after the race", g2, u, n)
		}
		if len(want) == 0 {
			t.Error("no named take passed")
		}
	})
}

// takeOK takes an inbox count that must pass.
func takeOK(t *testing.T, s Store, org Scope, all bool, users []string) {
	t.Helper()
	if full, err := s.TakeInbox(context.Background(), org, all, users, 0); err != nil || full != nil {
		t.Fatalf("take: %+v %v", full, err)
	}
}

func inboxCount(t *testing.T, s Store, what string, org Scope, user string, want int) {
	t.Helper()
	if got, err := s.InboxCount(context.Background(), org, user); err != nil || got != want {
		t.Fatalf("%s: %s counts %d (%v), want %d", what, user, got, err, want)
	}
}
