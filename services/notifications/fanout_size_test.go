package notifications

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	notificationsv1 "github.com/collab/collab/proto/collab/notifications/v1"

	"github.com/collab/collab/internal/mongodb"
	"github.com/collab/collab/internal/testkit/mongotest"
)

// The scenario of issue 20, finding 4: Add Notifications with notifyAll to an organization of
// 10,000 members, 30 times, each request about 11 KB (a headline template of 1,000 characters
// and a body of 10,000). The store may grow by less than 50 MB in all.
const (
	scenarioMembers  = 10_000
	scenarioRequests = 30
	scenarioLimit    = 50 << 20
)

// bigAdd is one of the scenario's requests: about 11 KB, to everyone.
func bigAdd(i int) *notificationsv1.AddNotificationsRequest {
	head := "{{actionUser}} wrote to {{recipientUser}}: "
	return &notificationsv1.AddNotificationsRequest{
		NotificationId:                 fmt.Sprintf("big%02d", i),
		DisplayHeadlineMessageTemplate: head + strings.Repeat("h", 1000-len(head)),
		DisplayBodyMessage:             strings.Repeat("b", 10_000),
	}
}

// heapAfterGC is the live heap, after collecting twice (the second takes what finalizers of the
// first left).
func heapAfterGC() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// On the memory store the scenario grows the heap by less than 50 MB, and each member's inbox
// still answers every notification with the headline rendered for them.
func TestFanOutToEveryoneStoresContentOnce(t *testing.T) {
	h := newHarness(t, scenarioMembers+1) // the acting user m00000 is no recipient
	before := heapAfterGC()
	for i := range scenarioRequests {
		h.add(t, bigAdd(i))
		h.clock.Advance(time.Minute) // within the fan-out quota (TestFanOutQuotas)
	}
	growth := heapAfterGC() - before
	t.Logf("%d notifications to %d members: the heap grew by %.1f MB (%.0f bytes per inbox entry, all included)",
		scenarioRequests, scenarioMembers, float64(growth)/(1<<20), float64(growth)/(scenarioRequests*scenarioMembers))
	if growth >= scenarioLimit {
		t.Errorf("the heap grew by %.1f MB, want less than %d MB", float64(growth)/(1<<20), scenarioLimit>>20)
	}
	for _, user := range []string{"m00001", "m10000"} {
		got := h.inbox(t, user)
		if len(got) != scenarioRequests {
			t.Fatalf("%s: %d notifications, want %d", user, len(got), scenarioRequests)
		}
		want := bigAdd(0).GetDisplayHeadlineMessageTemplate()
		want = strings.Replace(strings.Replace(want, "{{actionUser}}", "Ada", 1), "{{recipientUser}}", "Member "+user, 1)
		if got[0].GetDisplayHeadlineMessage() != want || got[0].GetDisplayBodyMessage() != bigAdd(0).GetDisplayBodyMessage() {
			t.Fatalf("%s: headline %.60q..., want %.60q...", user, got[0].GetDisplayHeadlineMessage(), want)
		}
	}
	runtime.KeepAlive(h)
}

// storedBytes is the size of every document in the store's database: what MongoDB keeps,
// without its indexes.
func storedBytes(t *testing.T, s *MongoStore) int64 {
	t.Helper()
	ctx := context.Background()
	names, err := s.db.ListCollectionNames(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, name := range names {
		cur, err := s.db.Collection(name).Find(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		for cur.Next(ctx) {
			n += int64(len(cur.Current))
		}
		if err := cur.Err(); err != nil {
			t.Fatal(err)
		}
		_ = cur.Close(ctx)
	}
	return n
}

// On MongoDB the scenario is run at a fifth of the members and a tenth of the requests (the
// embedded server is slow to fill), and its stored bytes scaled up by 50: an upper bound, as the
// content of a notification does not grow with its recipients.
func TestMongoFanOutToEveryoneStoresContentOnce(t *testing.T) {
	const members, requests = scenarioMembers / 5, scenarioRequests / 10
	s := newMongoStore(t)
	h := newHarnessOn(t, members+1, s)
	before := storedBytes(t, s)
	for i := range requests {
		h.add(t, bigAdd(i))
		h.clock.Advance(time.Minute)
	}
	growth := storedBytes(t, s) - before
	scaled := growth * (scenarioMembers / members) * (scenarioRequests / requests)
	t.Logf("%d notifications to %d members stored %.2f MB (%.0f bytes per inbox entry, all included); scaled to the scenario: %.1f MB",
		requests, members, float64(growth)/(1<<20), float64(growth)/(requests*members), float64(scaled)/(1<<20))
	if scaled >= scenarioLimit {
		t.Errorf("the scenario would store %.1f MB, want less than %d MB", float64(scaled)/(1<<20), scenarioLimit>>20)
	}
	if got := h.inbox(t, "m00001"); len(got) != requests || !strings.HasPrefix(got[0].GetDisplayHeadlineMessage(), "Ada wrote to Member m00001: hhh") {
		t.Fatalf("m00001's inbox: %d notifications", len(got))
	}
}

// Inbox entries stored in the shape before issue 20 (collection inbox, every field in full,
// the rendered headline) are moved to the shape of now when the store starts, read flags kept,
// and answer the inbox as before; a second start finds nothing to move.
func TestMongoStoreMigratesOldInboxEntries(t *testing.T) {
	ctx := context.Background()
	db := mongotest.Connect(t).Database("notifications")
	var old []any
	for i := range 1500 { // more than one batch
		user := fmt.Sprintf("u%04d", i)
		old = append(old, bson.M{
			"_id": mongodb.Key("k1", "o1", "g1", user, "n1"), "apiKey": "k1", "organizationId": "o1", "orgGen": "g1",
			"userId": user, "notificationId": "n1", "documentId": "d1", "docGen": "dg1",
			"headline": "Ann mentioned " + user, "read": i%2 == 1, "ts": int64(10),
		})
	}
	old = append(old, bson.M{
		"_id": mongodb.Key("k1", "o1", "g1", "u0001", "n0"), "apiKey": "k1", "organizationId": "o1", "orgGen": "g1",
		"userId": "u0001", "notificationId": "n0", "documentId": "", "docGen": "", "headline": "", "read": false, "ts": int64(5),
	})
	if _, err := db.Collection("inbox").InsertMany(ctx, old); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		s, err := NewMongoStore(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := db.Collection("inbox").CountDocuments(ctx, bson.D{}); err != nil || n != 0 {
			t.Fatalf("%d old entries left (%v)", n, err)
		}
		got := inbox(t, s, "u0001", org1, "u0001", nil, true, 0, "n1", "n0")
		if !got[0].Read || got[1].Read || got[0].DocumentID != "d1" || got[1].Timestamp != 5 {
			t.Fatalf("u0001's entries: %+v %+v", got[0], got[1])
		}
		readers, err := s.ReadBy(ctx, org1, []string{"n1"})
		if err != nil || len(readers["n1"]) != 750 {
			t.Fatalf("n1 read by %d (%v), want 750", len(readers["n1"]), err)
		}
	}
}
