package notifications

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
)

const (
	benchEntries = 1_000_000
	// benchUserEntries are u00's: every notification but each 20th, which goes to one of
	// u01...u19 instead.
	benchUserEntries = benchEntries / 20 * 19
	benchPage        = 50
	benchRecipients  = 10_000
)

var (
	benchOnce  sync.Once
	benchStore *MemoryStore
	benchOrg   = Scope{APIKey: "k1", OrganizationID: "o1", OrgGen: "g1"}
)

// benchTimestamp is notification i's: 1 ms after the one before, except that every thousandth
// shares the timestamp of the one before it, its id breaking the tie.
func benchTimestamp(i int) int64 {
	ts := int64(1_700_000_000_000 + i)
	if i%1000 == 999 {
		ts--
	}
	return ts
}

func benchID(i int) string { return fmt.Sprintf("n%07d", i) }

// benchUserNotification is the notification of u00's entry of rank r (ascending).
func benchUserNotification(r int) int { return r/19*20 + r%19 + 1 }

// benchData is one organization with a million inbox entries, one for each of a million
// notifications in (Timestamp, ID) order of i, 950,000 of them u00's. Only the entries are
// stored: an inbox read touches nothing else.
func benchData(b *testing.B) *MemoryStore {
	benchOnce.Do(func() {
		s := NewMemoryStore()
		batch := make([]*InboxEntry, 0, 10_000)
		for i := range benchEntries {
			user := "u00"
			if i%20 == 0 {
				user = fmt.Sprintf("u%02d", i/20%19+1)
			}
			batch = append(batch, &InboxEntry{
				APIKey: benchOrg.APIKey, OrganizationID: benchOrg.OrganizationID, OrgGen: benchOrg.OrgGen,
				UserID: user, NotificationID: benchID(i), DocumentID: fmt.Sprintf("d%02d", i%100), Timestamp: benchTimestamp(i),
			})
			if len(batch) == cap(batch) {
				if err := s.AddInboxEntries(context.Background(), batch); err != nil {
					panic(err)
				}
				batch = batch[:0]
			}
		}
		benchStore = s
		runtime.GC() // the building's garbage is not the first read's to collect
	})
	return benchStore
}

// BenchmarkInbox reads a page of 50 of u00's inbox, newest first: the first page, and the page
// 900,000 entries deep.
func BenchmarkInbox(b *testing.B) {
	s := benchData(b)
	// Descending rank k is ascending rank benchUserEntries-1-k.
	deep := benchUserNotification(benchUserEntries - 1 - (900_000 - 1))
	for _, c := range []struct {
		name  string
		after *Position
		first string // the notification the page must start with
	}{
		{"first page", nil, benchID(benchEntries - 1)},
		{"deep page", &Position{Timestamp: benchTimestamp(deep), ID: benchID(deep)}, benchID(benchUserNotification(benchUserEntries - 1 - 900_000))},
	} {
		got, err := s.Inbox(context.Background(), benchOrg, "u00", c.after, true, benchPage)
		if err != nil || len(got) != benchPage || got[0].NotificationID != c.first || got[0].UserID != "u00" {
			b.Fatalf("%s: %d entries from %v (%v), want %d from %s", c.name, len(got), entryIDs(got[:min(1, len(got))]), err, benchPage, c.first)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Inbox(context.Background(), benchOrg, "u00", c.after, true, benchPage); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAddInboxEntries adds one new notification's entries for 10,000 users, in a fresh
// organization of the same store (so the inbox benchmark's stays as it is) where each of them
// has 10 entries already: the newest notification, whose entries go at the end of every inbox,
// and a backdated one, whose entries go before all of them.
func BenchmarkAddInboxEntries(b *testing.B) {
	s := benchData(b)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		ts   func(i int) int64
	}{
		{"newest", func(i int) int64 { return benchTimestamp(benchEntries + i) }},
		{"backdated", func(i int) int64 { return benchTimestamp(0) - 1 - int64(i) }},
	} {
		org := Scope{APIKey: "k1", OrganizationID: "insert-" + c.name, OrgGen: "g1"}
		in := make([]*InboxEntry, benchRecipients)
		for u := range in {
			in[u] = &InboxEntry{
				APIKey: org.APIKey, OrganizationID: org.OrganizationID, OrgGen: org.OrgGen,
				UserID: fmt.Sprintf("u%05d", u), DocumentID: "d1",
			}
		}
		add := func(id string, ts int64) {
			for _, e := range in { // the store copies them in, so one slice serves every call
				e.NotificationID, e.Timestamp = id, ts
			}
			if err := s.AddInboxEntries(ctx, in); err != nil {
				b.Fatal(err)
			}
		}
		// fresh empties the organization and gives every user 10 entries.
		fresh := func() {
			if err := s.DeleteOrganization(ctx, org); err != nil {
				b.Fatal(err)
			}
			for j := range 10 {
				add(fmt.Sprintf("old%02d", j), benchTimestamp(benchEntries/2+j))
			}
			runtime.GC()
		}
		fresh()
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i > 0 && i%100 == 0 { // bounded: no more than 100 new notifications at a time
					b.StopTimer()
					fresh()
					b.StartTimer()
				}
				add(fmt.Sprintf("new%07d", i), c.ts(i))
				i++
			}
			b.StopTimer()
			// Each iteration added a notification to every inbox, where the timestamps put it.
			got, err := s.Inbox(ctx, org, "u09999", nil, c.name == "newest", 1)
			if err != nil || len(got) != 1 || got[0].NotificationID != fmt.Sprintf("new%07d", i-1) {
				b.Fatalf("u09999's %s entry: %v %v, want new%07d", c.name, entryIDs(got), err, i-1)
			}
		})
		fresh()
	}
}
