package notifications

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/collab/collab/internal/testkit/mongotest"
)

func TestMain(m *testing.M) { os.Exit(mongotest.Run(m)) }

// The conformance suite: every Store implementation must pass it unchanged.
func TestMemoryStore(t *testing.T) {
	runStoreSuite(t, func(t *testing.T) Store {
		s := NewMemoryStore()
		t.Cleanup(func() { checkMemoryStore(t, s) })
		return s
	})
	runReplicaSuite(t, func(t *testing.T) [2]Store {
		s := NewMemoryStore()
		t.Cleanup(func() { checkMemoryStore(t, s) })
		return [2]Store{s, s}
	})
}

// checkMemoryStore asserts the memory store's invariants: every list is sorted and holds
// exactly the records of its map with its value, nothing empty is kept, and the pending set is
// the pending deliveries.
func checkMemoryStore(t *testing.T, s *MemoryStore) {
	t.Helper()
	s.mu.RLock()
	defer s.mu.RUnlock()
	for k, o := range s.orgs {
		if o.empty() {
			t.Errorf("%v: kept without records", k)
		}
		for ref, m := range o.configs {
			if len(m) == 0 {
				t.Errorf("%v: empty configs of %v kept", k, ref)
			}
		}
		checkSorted(t, fmt.Sprint(k, " all"), o.all)
		if len(o.all) != len(o.notifs) {
			t.Errorf("%v: %d listed, %d notifications", k, len(o.all), len(o.notifs))
		}
		for _, n := range o.all {
			if o.notifs[n.ID] != n {
				t.Errorf("%v: %s listed, not a notification", k, n.ID)
			}
		}
		inDocs := 0
		for d, l := range o.byDoc {
			checkSorted(t, fmt.Sprint(k, " document ", d), l)
			if d == "" || len(l) == 0 {
				t.Errorf("%v: document %q kept with %d", k, d, len(l))
			}
			for _, n := range l {
				if o.notifs[n.ID] != n || n.DocumentID != d {
					t.Errorf("%v: document %q lists %s", k, d, n.ID)
				}
			}
			inDocs += len(l)
		}
		want := 0
		for _, n := range o.notifs {
			if n.DocumentID != "" {
				want++
			}
		}
		if inDocs != want {
			t.Errorf("%v: %d notifications in document lists, want %d", k, inDocs, want)
		}
		inInboxes, inFilings := 0, 0
		for u, in := range o.inboxes {
			checkSorted(t, fmt.Sprint(k, " inbox ", u), in.entries)
			if len(in.entries) == 0 || in.user != u {
				t.Errorf("%v: inbox of %s kept as %q with %d entries", k, u, in.user, len(in.entries))
			}
			for _, e := range in.entries {
				if e.in != in || o.lookup(u, e.f.notificationID) != e {
					t.Errorf("%v: inbox of %s lists %s/%s", k, u, e.in.user, e.f.notificationID)
				}
			}
			inInboxes += len(in.entries)
		}
		for id, fs := range o.filed {
			if len(fs) == 0 {
				t.Errorf("%v: no filings of %s kept", k, id)
			}
			for _, f := range fs {
				if len(f.entries) == 0 || f.notificationID != id {
					t.Errorf("%v: filing of %s kept as %s with %d entries", k, id, f.notificationID, len(f.entries))
				}
				for i, e := range f.entries {
					if e.f != f || o.inboxes[e.in.user] != e.in || i > 0 && f.entries[i-1].in.user >= e.in.user {
						t.Errorf("%v: filing of %s lists %s (%d) out of place", k, id, e.in.user, i)
					}
				}
				inFilings += len(f.entries)
			}
		}
		if inInboxes != o.entries || inFilings != o.entries {
			t.Errorf("%v: %d entries, %d in inboxes, %d in filings", k, o.entries, inInboxes, inFilings)
		}
		for u, c := range o.named {
			if c <= 0 {
				t.Errorf("%v: inbox count %d of %s kept", k, c, u)
			}
		}
		if o.everyone < 0 {
			t.Errorf("%v: inbox count %d of everyone", k, o.everyone)
		}
	}
	for id, d := range s.deliveries {
		if _, ok := s.pending[id]; ok != (d.State == StatePending) || (ok && s.pending[id] != d) {
			t.Errorf("delivery %s (%s): pending set %v", id, d.State, ok)
		}
	}
	for id := range s.pending {
		if s.deliveries[id] == nil {
			t.Errorf("pending %s is no delivery", id)
		}
	}
	n := 0
	for k, l := range s.byNotif {
		if len(l) == 0 {
			t.Errorf("deliveries of %v: empty list kept", k)
		}
		for _, d := range l {
			if s.deliveries[d.ID] != d || d.APIKey != k.apiKey || d.NotificationID != k.notificationID {
				t.Errorf("deliveries of %v: list %s", k, d.ID)
			}
		}
		n += len(l)
	}
	if n != len(s.deliveries) {
		t.Errorf("%d deliveries listed per notification, %d stored", n, len(s.deliveries))
	}
}

func checkSorted[T keyed](t *testing.T, what string, l sorted[T]) {
	t.Helper()
	for i := 1; i < len(l); i++ {
		if compareItems(l[i-1], l[i]) >= 0 {
			_, a := l[i-1].sortKey()
			_, b := l[i].sortKey()
			t.Errorf("%s: %s before %s", what, a, b)
		}
	}
}

func TestMongoStore(t *testing.T) {
	runStoreSuite(t, func(t *testing.T) Store { return newMongoStore(t) })
	runReplicaSuite(t, func(t *testing.T) [2]Store {
		db := mongotest.Connect(t).Database("notifications")
		var r [2]Store
		for i := range r {
			s, err := NewMongoStore(context.Background(), db)
			if err != nil {
				t.Fatal(err)
			}
			r[i] = s
		}
		return r
	})
}

func newMongoStore(t *testing.T) *MongoStore {
	t.Helper()
	s, err := NewMongoStore(context.Background(), mongotest.Connect(t).Database("notifications"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Creating the store again on the same database finds its indexes there and succeeds.
func TestMongoStoreStartsTwice(t *testing.T) {
	db := mongotest.Connect(t).Database("notifications")
	for range 2 {
		if _, err := NewMongoStore(context.Background(), db); err != nil {
			t.Fatal(err)
		}
	}
}

// What MongoStore writes: every record under its compound _id, with its fields.
func TestMongoStoreDocuments(t *testing.T) {
	s := newMongoStore(t)
	ctx := context.Background()
	must(t, s.SetConfigs(ctx, []Scope{docOf(org1, "d1", "dg1")}, []string{"u1"}, Config{All, Mine, None}))
	n := notif(org1, "n1", 5)
	must(t, s.AddNotification(ctx, n))
	must(t, s.AddInboxEntries(ctx, entriesOf(n, "u1")))
	must(t, s.QueueDeliveries(ctx, []*Delivery{delivery("dl1", org1, "n1", t0)}))
	for _, c := range []struct {
		coll   string
		id     any
		fields bson.M
	}{
		{"configs", "k1\x1fo1\x1fg1\x1fd1\x1fdg1\x1fu1", bson.M{
			"apiKey": "k1", "organizationId": "o1", "orgGen": "g1", "documentId": "d1", "docGen": "dg1", "userId": "u1",
			"inbox": All, "email": Mine, "slack": None,
		}},
		{"notifications", "k1\x1fo1\x1fg1\x1fn1", bson.M{"id": "n1", "orgGen": "g1", "documentId": "d1", "ts": int64(5)}},
		// An inbox entry is a small reference: hashes for its _id and organization, its user,
		// notification, timestamp and document, and no read flag while unread.
		{"entries", entryKey(org1, "u1", "n1"), bson.M{
			"s": bson.Binary{Data: orgHash(org1)}, "u": "u1", "n": "n1", "t": int64(5), "d": "d1", "r": nil,
		}},
		{"deliveries", "dl1", bson.M{"state": StatePending, "notificationId": "n1", "next": bson.NewDateTimeFromTime(t0)}},
	} {
		var raw bson.M
		if err := s.db.Collection(c.coll).FindOne(ctx, bson.M{"_id": c.id}).Decode(&raw); err != nil {
			t.Fatalf("%s %q: %v", c.coll, c.id, err)
		}
		if c.coll == "entries" && len(raw) != 6 {
			t.Errorf("entries: %d fields, want 6: %v", len(raw), raw)
		}
		for k, v := range c.fields {
			if !reflect.DeepEqual(raw[k], v) {
				t.Errorf("%s: %s = %#v, want %#v", c.coll, k, raw[k], v)
			}
		}
	}
}

var (
	t0 = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	// org1 is the scope most assertions read.
	org1 = Scope{APIKey: "k1", OrganizationID: "o1", OrgGen: "g1"}
	// elsewhere are the scopes whose records org1 must never see or touch: another generation
	// of the organization, another organization, another tenant.
	elsewhere = []Scope{
		{APIKey: "k1", OrganizationID: "o1", OrgGen: "g2"},
		{APIKey: "k1", OrganizationID: "o2", OrgGen: "g1"},
		{APIKey: "k2", OrganizationID: "o1", OrgGen: "g1"},
	}
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func docOf(org Scope, id, gen string) Scope {
	org.DocumentID, org.DocGen = id, gen
	return org
}

// notif is a notification of scope sc in document d1 (generation dg1) with every field set,
// changed by opts.
func notif(sc Scope, id string, ts int64, opts ...func(*Notification)) *Notification {
	n := &Notification{
		APIKey: sc.APIKey, OrganizationID: sc.OrganizationID, OrgGen: sc.OrgGen, ID: id,
		DocumentID: "d1", DocGen: "dg1", WorkspaceID: "w1",
		ActionUser:       User{UserID: "u9", Name: "Ann", Email: "ann@example.com"},
		HeadlineTemplate: "{{actionUser}} mentioned you", HeadlineData: `{"actionUser":{"name":"Ann"}}`,
		Body: "hello", Source: "comments", SourceData: `{"thread":"t1"}`, ContextAccess: `{"documentId":"d1"}`,
		ResolverUsed: true, NotifyUsers: []User{{UserID: "u1", Name: "Bo", Email: "bo@example.com"}, {UserID: "u2"}},
		VerifyAccess: true, Timestamp: ts,
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

func inDoc(id, gen string) func(*Notification) {
	return func(n *Notification) { n.DocumentID, n.DocGen = id, gen }
}

func body(b string) func(*Notification) { return func(n *Notification) { n.Body = b } }

// entriesOf are the inbox entries of n for the users, unread.
func entriesOf(n *Notification, users ...string) []*InboxEntry {
	var out []*InboxEntry
	for _, u := range users {
		out = append(out, &InboxEntry{
			APIKey: n.APIKey, OrganizationID: n.OrganizationID, OrgGen: n.OrgGen, UserID: u,
			NotificationID: n.ID, DocumentID: n.DocumentID, Timestamp: n.Timestamp,
		})
	}
	return out
}

func delivery(id string, org Scope, notificationID string, next time.Time, opts ...func(*Delivery)) *Delivery {
	d := &Delivery{
		ID: id, APIKey: org.APIKey, WorkspaceID: "w1", OrganizationID: org.OrganizationID, OrgGen: org.OrgGen,
		NotificationID: notificationID, UserID: "u1", Channel: ChannelEmail,
		To: "bo@example.com", Subject: "Ann mentioned you", Text: "hello", HTML: "<p>hello</p>",
		State: StatePending, NextAttempt: next, CreatedAt: t0.Add(-time.Hour),
	}
	for _, o := range opts {
		o(d)
	}
	return d
}

func state(st string) func(*Delivery) { return func(d *Delivery) { d.State = st } }

// add stores notifications.
func add(t *testing.T, s Store, ns ...*Notification) {
	t.Helper()
	for _, n := range ns {
		if err := s.AddNotification(context.Background(), n); err != nil {
			t.Fatalf("add %s: %v", n.ID, err)
		}
	}
}

// addWith stores notifications, each with an inbox entry for every user.
func addWith(t *testing.T, s Store, users []string, ns ...*Notification) {
	t.Helper()
	add(t, s, ns...)
	var es []*InboxEntry
	for _, n := range ns {
		es = append(es, entriesOf(n, users...)...)
	}
	must(t, s.AddInboxEntries(context.Background(), es))
}

func notificationIDs(ns []*Notification) []string {
	out := []string{}
	for _, n := range ns {
		out = append(out, n.ID)
	}
	return out
}

func entryIDs(es []*InboxEntry) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.NotificationID)
	}
	return out
}

// list asserts a listing's ids, in order.
func list(t *testing.T, s Store, what string, org Scope, l Listing, after *Position, desc bool, limit int, want ...string) []*Notification {
	t.Helper()
	got, err := s.ListNotifications(context.Background(), org, l, after, desc, limit)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got == nil {
		t.Fatalf("%s: nil result", what)
	}
	if want == nil {
		want = []string{}
	}
	if ids := notificationIDs(got); !slices.Equal(ids, want) {
		t.Fatalf("%s: %v, want %v", what, ids, want)
	}
	return got
}

// inbox asserts a user's inbox, in order (notification ids).
func inbox(t *testing.T, s Store, what string, org Scope, user string, after *Position, desc bool, limit int, want ...string) []*InboxEntry {
	t.Helper()
	got, err := s.Inbox(context.Background(), org, user, after, desc, limit)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got == nil {
		t.Fatalf("%s: nil result", what)
	}
	if want == nil {
		want = []string{}
	}
	if ids := entryIDs(got); !slices.Equal(ids, want) {
		t.Fatalf("%s: %v, want %v", what, ids, want)
	}
	return got
}

// get asserts a notification, nil when it must not exist.
func get(t *testing.T, s Store, what string, org Scope, id string, want *Notification) {
	t.Helper()
	got, err := s.Notification(context.Background(), org, id)
	switch {
	case want == nil && !errors.Is(err, ErrNotFound):
		t.Fatalf("%s: %+v %v, want ErrNotFound", what, got, err)
	case want == nil:
	case err != nil:
		t.Fatalf("%s: %v", what, err)
	case !reflect.DeepEqual(got, want):
		t.Fatalf("%s: %+v, want %+v", what, got, want)
	}
}

// configs asserts the configs of users in a document incarnation.
func configs(t *testing.T, s Store, what string, doc Scope, users []string, want map[string]Config) {
	t.Helper()
	got, err := s.Configs(context.Background(), doc, users)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got == nil || !maps.Equal(got, want) {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
}

// deliveryIDs asserts a notification's deliveries (ids, ascending).
func deliveryIDs(t *testing.T, s Store, what, apiKey, notificationID string, want ...string) {
	t.Helper()
	got, err := s.Deliveries(context.Background(), apiKey, notificationID)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	ids := []string{}
	for _, d := range got {
		ids = append(ids, d.ID)
	}
	if want == nil {
		want = []string{}
	}
	if got == nil || !slices.Equal(ids, want) {
		t.Fatalf("%s: %v, want %v", what, ids, want)
	}
}

// due asserts the due deliveries at now, in order.
func dueIDs(t *testing.T, s Store, what string, now time.Time, limit int, want ...string) {
	t.Helper()
	got, err := s.DueDeliveries(context.Background(), now, limit)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	ids := []string{}
	for _, d := range got {
		ids = append(ids, d.ID)
	}
	if want == nil {
		want = []string{}
	}
	if got == nil || !slices.Equal(ids, want) {
		t.Fatalf("%s: %v, want %v", what, ids, want)
	}
}

// sameDelivery reports whether a and b are equal, their times by instant.
func sameDelivery(a, b *Delivery) bool {
	x, y := *a, *b
	times := func(d *Delivery) []time.Time { return []time.Time{d.NextAttempt, d.LeaseUntil, d.CreatedAt, d.SentAt} }
	if !slices.EqualFunc(times(&x), times(&y), time.Time.Equal) {
		return false
	}
	x.NextAttempt, x.LeaseUntil, x.CreatedAt, x.SentAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	y.NextAttempt, y.LeaseUntil, y.CreatedAt, y.SentAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return x == y
}

func getDelivery(t *testing.T, s Store, id string, want *Delivery) {
	t.Helper()
	got, err := s.Delivery(context.Background(), id)
	switch {
	case want == nil && !errors.Is(err, ErrNotFound):
		t.Fatalf("delivery %s: %+v %v, want ErrNotFound", id, got, err)
	case want == nil:
	case err != nil:
		t.Fatalf("delivery %s: %v", id, err)
	case !sameDelivery(got, want):
		t.Fatalf("delivery %s:\n %+v,\nwant %+v", id, got, want)
	}
}

type keyedItem interface {
	*Notification | *InboxEntry
	sortKey() (int64, string)
}

// sortedKeys returns the ids of xs in (Timestamp, id) order, descending when desc.
func sortedKeys[T keyedItem](xs []T, desc bool) []string {
	xs = slices.Clone(xs)
	slices.SortFunc(xs, func(a, b T) int {
		ats, aid := a.sortKey()
		bts, bid := b.sortKey()
		c := cmp.Or(cmp.Compare(ats, bts), cmp.Compare(aid, bid))
		if desc {
			return -c
		}
		return c
	})
	out := []string{}
	for _, x := range xs {
		_, id := x.sortKey()
		out = append(out, id)
	}
	return out
}

// pageAll reads every page of size items from read and returns the ids in the order seen,
// calling between after each full page.
func pageAll(t *testing.T, size int, read func(after *Position) ([]Position, error), between func()) []string {
	t.Helper()
	var (
		after *Position
		out   []string
	)
	for range 1000 {
		page, err := read(after)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > size {
			t.Fatalf("page of %d, limit %d", len(page), size)
		}
		for _, p := range page {
			out = append(out, p.ID)
		}
		if len(page) < size {
			return out
		}
		after = &page[len(page)-1]
		if between != nil {
			between()
		}
	}
	t.Fatal("paging does not end")
	return nil
}

func notificationPages(s Store, l Listing, desc bool, size int) func(*Position) ([]Position, error) {
	return func(after *Position) ([]Position, error) {
		ns, err := s.ListNotifications(context.Background(), org1, l, after, desc, size)
		out := make([]Position, len(ns))
		for i, n := range ns {
			out[i] = Position{n.Timestamp, n.ID}
		}
		return out, err
	}
}

func inboxPages(s Store, user string, desc bool, size int) func(*Position) ([]Position, error) {
	return func(after *Position) ([]Position, error) {
		es, err := s.Inbox(context.Background(), org1, user, after, desc, size)
		out := make([]Position, len(es))
		for i, e := range es {
			out[i] = Position{e.Timestamp, e.NotificationID}
		}
		return out, err
	}
}

func runStoreSuite(t *testing.T, newStore func(t *testing.T) Store) {
	ctx := context.Background()

	t.Run("configs per document incarnation", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		all, mine, quiet := Config{All, All, All}, Config{Mine, Mine, None}, Config{None, None, None}
		d1, d1b, d2 := docOf(org1, "d1", "a"), docOf(org1, "d1", "b"), docOf(org1, "d2", "a")
		users := []string{"u1", "u2", "u3", "u4"}
		configs(t, s, "none yet", d1, users, map[string]Config{})

		must(t, s.SetConfigs(ctx, []Scope{d1, d2}, []string{"u1", "u2"}, all))
		// Overwrites u2's in d1 only.
		must(t, s.SetConfigs(ctx, []Scope{d1}, []string{"u2", "u3"}, mine))
		configs(t, s, "d1", d1, users, map[string]Config{"u1": all, "u2": mine, "u3": mine})
		configs(t, s, "d2", d2, users, map[string]Config{"u1": all, "u2": all})
		configs(t, s, "d1, two users", d1, []string{"u3", "u9", "u1"}, map[string]Config{"u1": all, "u3": mine})
		configs(t, s, "another incarnation of d1", d1b, users, map[string]Config{})
		configs(t, s, "no users", d1, nil, map[string]Config{})
		// The same document and users elsewhere are others'.
		for _, sc := range elsewhere {
			configs(t, s, fmt.Sprint("elsewhere ", sc), docOf(sc, "d1", "a"), users, map[string]Config{})
			must(t, s.SetConfigs(ctx, []Scope{docOf(sc, "d1", "a")}, []string{"u1"}, quiet))
			configs(t, s, fmt.Sprint("set elsewhere ", sc), docOf(sc, "d1", "a"), users, map[string]Config{"u1": quiet})
		}
		configs(t, s, "d1 after the others", d1, users, map[string]Config{"u1": all, "u2": mine, "u3": mine})
		must(t, s.SetConfigs(ctx, []Scope{d1b}, []string{"u1"}, quiet))
		configs(t, s, "d1b", d1b, users, map[string]Config{"u1": quiet})
		configs(t, s, "d1 after d1b", d1, users, map[string]Config{"u1": all, "u2": mine, "u3": mine})

		// The organization of the first scope applies to every document.
		must(t, s.SetConfigs(ctx, []Scope{docOf(org1, "d3", "a"), docOf(elsewhere[2], "d4", "a")}, []string{"u1"}, mine))
		configs(t, s, "d4 of org1", docOf(org1, "d4", "a"), users, map[string]Config{"u1": mine})
		configs(t, s, "d4 of k2", docOf(elsewhere[2], "d4", "a"), users, map[string]Config{})
		// Nothing to set.
		must(t, s.SetConfigs(ctx, nil, []string{"u1"}, quiet))
		must(t, s.SetConfigs(ctx, []Scope{d1}, nil, quiet))
		configs(t, s, "d1 at the end", d1, users, map[string]Config{"u1": all, "u2": mine, "u3": mine})
	})

	t.Run("add and read notifications", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		n1 := notif(org1, "n1", 100)
		must(t, s.AddNotification(ctx, n1))
		// Copied in: the caller's changes reach nothing stored.
		n1.Body, n1.NotifyUsers[0].Name = "changed", "changed"
		get(t, s, "n1", org1, "n1", notif(org1, "n1", 100))
		got, err := s.Notification(ctx, org1, "n1")
		must(t, err)
		got.NotifyUsers[0].Name, got.HeadlineData = "mine", "mine"
		get(t, s, "n1 after changing a read copy", org1, "n1", notif(org1, "n1", 100))

		if err := s.AddNotification(ctx, notif(org1, "n1", 200, body("second"))); !errors.Is(err, ErrExists) {
			t.Fatalf("second n1: %v, want ErrExists", err)
		}
		get(t, s, "n1 after a second add", org1, "n1", notif(org1, "n1", 100))
		// The same id elsewhere is another notification.
		for i, sc := range elsewhere {
			must(t, s.AddNotification(ctx, notif(sc, "n1", int64(300+i), body(fmt.Sprint(sc)))))
			get(t, s, fmt.Sprint("n1 of ", sc), sc, "n1", notif(sc, "n1", int64(300+i), body(fmt.Sprint(sc))))
		}
		get(t, s, "n1 after the others", org1, "n1", notif(org1, "n1", 100))
		get(t, s, "unknown id", org1, "nope", nil)
		get(t, s, "unknown generation", Scope{APIKey: "k1", OrganizationID: "o1", OrgGen: "g3"}, "n1", nil)

		n2 := notif(org1, "n2", 50, inDoc("", ""), func(n *Notification) { n.NotifyUsers, n.NotifyAll = nil, true })
		add(t, s, n2)
		m, err := s.Notifications(ctx, org1, []string{"n2", "nope", "n1", "n2"})
		must(t, err)
		if len(m) != 2 || !reflect.DeepEqual(m["n1"], notif(org1, "n1", 100)) || !reflect.DeepEqual(m["n2"], n2) {
			t.Fatalf("Notifications: %+v", m)
		}
		for _, ids := range [][]string{nil, {}, {"nope"}} {
			m, err := s.Notifications(ctx, org1, ids)
			if err != nil || m == nil || len(m) != 0 {
				t.Fatalf("Notifications %v: %v %v", ids, m, err)
			}
		}
		m, err = s.Notifications(ctx, elsewhere[0], []string{"n1", "n2"})
		must(t, err)
		if len(m) != 1 || m["n1"].Timestamp != 300 {
			t.Fatalf("Notifications of g2: %+v", m)
		}

		// The fan-out's end.
		must(t, s.FinishFanOut(ctx, org1, "n1", []string{"u2", "u1"}))
		want := notif(org1, "n1", 100, func(n *Notification) { n.Recipients, n.FannedOut = []string{"u2", "u1"}, true })
		get(t, s, "n1 fanned out", org1, "n1", want)
		must(t, s.FinishFanOut(ctx, org1, "n2", []string{}))
		if got, err := s.Notification(ctx, org1, "n2"); err != nil || !got.FannedOut || len(got.Recipients) != 0 {
			t.Fatalf("n2 fanned out to nobody: %+v %v", got, err)
		}
		for i, sc := range elsewhere {
			get(t, s, fmt.Sprint("n1 of ", sc, " not fanned out"), sc, "n1", notif(sc, "n1", int64(300+i), body(fmt.Sprint(sc))))
		}
		if err := s.FinishFanOut(ctx, org1, "nope", nil); !errors.Is(err, ErrNotFound) {
			t.Fatalf("fan-out of an unknown id: %v", err)
		}
		if err := s.FinishFanOut(ctx, Scope{APIKey: "k1", OrganizationID: "o1", OrgGen: "g3"}, "n1", nil); !errors.Is(err, ErrNotFound) {
			t.Fatalf("fan-out under an unknown generation: %v", err)
		}
		get(t, s, "n1 at the end", org1, "n1", want)
	})

	t.Run("concurrent adds of one id store one notification", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		const n = 20
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { errs[i] = s.AddNotification(ctx, notif(org1, "same", int64(i))) })
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner < 0:
				winner = i
			case err == nil:
				t.Fatalf("adds %d and %d both succeeded", winner, i)
			case !errors.Is(err, ErrExists):
				t.Fatalf("add %d: %v", i, err)
			}
		}
		if winner < 0 {
			t.Fatal("no add succeeded")
		}
		get(t, s, "stored", org1, "same", notif(org1, "same", int64(winner)))
	})

	t.Run("list notifications", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		// Added out of order; n02 and n03 share a timestamp, which their ids order.
		add(t, s,
			notif(org1, "n04", 300, inDoc("d2", "a")),
			notif(org1, "n03", 200, inDoc("d2", "a")),
			notif(org1, "n06", 400, inDoc("d1", "b")),
			notif(org1, "n01", 100, inDoc("d1", "a")),
			notif(org1, "n05", 150, inDoc("", "")),
			notif(org1, "n02", 200, inDoc("d1", "a")),
		)
		// The same ids and documents elsewhere, never listed with org1.
		for _, sc := range elsewhere {
			add(t, s, notif(sc, "n01", 250, inDoc("d1", "a")), notif(sc, "x01", 250, inDoc("d1", "a")))
		}
		none := Listing{}
		list(t, s, "asc", org1, none, nil, false, 0, "n01", "n05", "n02", "n03", "n04", "n06")
		list(t, s, "desc", org1, none, nil, true, 0, "n06", "n04", "n03", "n02", "n05", "n01")
		list(t, s, "limit", org1, none, nil, false, 2, "n01", "n05")
		list(t, s, "limit desc", org1, none, nil, true, 3, "n06", "n04", "n03")
		list(t, s, "limit beyond", org1, none, nil, true, 50, "n06", "n04", "n03", "n02", "n05", "n01")
		list(t, s, "limit -1", org1, none, nil, false, -1, "n01", "n05", "n02", "n03", "n04", "n06")

		// A document's, of every incarnation of it.
		list(t, s, "document", org1, Listing{DocumentID: "d1"}, nil, false, 0, "n01", "n02", "n06")
		list(t, s, "document desc", org1, Listing{DocumentID: "d2"}, nil, true, 0, "n04", "n03")
		list(t, s, "unknown document", org1, Listing{DocumentID: "d9"}, nil, false, 0)
		// By id.
		list(t, s, "ids", org1, Listing{IDs: []string{"n06", "n01", "nope", "n01", "x01"}}, nil, false, 0, "n01", "n06")
		list(t, s, "ids desc", org1, Listing{IDs: []string{"n02", "n06", "n03"}}, nil, true, 0, "n06", "n03", "n02")
		list(t, s, "ids limit", org1, Listing{IDs: []string{"n02", "n06", "n03"}}, nil, true, 2, "n06", "n03")
		list(t, s, "ids and document", org1, Listing{IDs: []string{"n01", "n03", "n04", "n06"}, DocumentID: "d2"}, nil, false, 0, "n03", "n04")
		list(t, s, "no ids", org1, Listing{IDs: []string{}}, nil, false, 0)

		// Strictly after a position, the id breaking a timestamp's tie.
		list(t, s, "after asc", org1, none, &Position{200, "n02"}, false, 0, "n03", "n04", "n06")
		list(t, s, "after desc", org1, none, &Position{200, "n03"}, true, 0, "n02", "n05", "n01")
		list(t, s, "after asc, limit", org1, none, &Position{150, "n05"}, false, 2, "n02", "n03")
		list(t, s, "after the last", org1, none, &Position{400, "n06"}, false, 0)
		list(t, s, "after the first, desc", org1, none, &Position{100, "n01"}, true, 0)
		// A position need not be a notification's.
		list(t, s, "after a gap", org1, none, &Position{250, ""}, false, 0, "n04", "n06")
		list(t, s, "after a gap desc", org1, none, &Position{200, "n025"}, true, 0, "n02", "n05", "n01")
		list(t, s, "after, before everything", org1, none, &Position{0, ""}, false, 1, "n01")
		list(t, s, "after, beyond everything desc", org1, none, &Position{1000, ""}, true, 1, "n06")
		list(t, s, "after with a document", org1, Listing{DocumentID: "d1"}, &Position{200, "n02"}, true, 0, "n01")
		list(t, s, "after with ids", org1, Listing{IDs: []string{"n01", "n03", "n04", "n06"}}, &Position{200, "n03"}, false, 1, "n04")
		list(t, s, "after with ids desc", org1, Listing{IDs: []string{"n01", "n03", "n04", "n06"}}, &Position{200, "n03"}, true, 0, "n01")

		// Every field comes back; results are copies.
		got := list(t, s, "d2 first", org1, Listing{DocumentID: "d2"}, nil, false, 1, "n03")
		if want := notif(org1, "n03", 200, inDoc("d2", "a")); !reflect.DeepEqual(got[0], want) {
			t.Fatalf("n03: %+v, want %+v", got[0], want)
		}
		got[0].NotifyUsers[0].UserID, got[0].Body = "mine", "mine"
		get(t, s, "n03 after changing a listed copy", org1, "n03", notif(org1, "n03", 200, inDoc("d2", "a")))

		for _, sc := range elsewhere {
			list(t, s, fmt.Sprint("elsewhere ", sc), sc, Listing{DocumentID: "d1"}, nil, false, 0, "n01", "x01")
		}
		list(t, s, "unknown generation", Scope{APIKey: "k1", OrganizationID: "o1", OrgGen: "g3"}, none, nil, false, 0)
	})

	t.Run("paging returns every item once", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		// 24 notifications, four to a timestamp, their ids out of order, in two documents; u1
		// has every one in the inbox, u2 every third.
		var ns, ofD2 []*Notification
		var u1, u2 []*InboxEntry
		for i := range 24 {
			d := []string{"d1", "d2"}[i%2]
			n := notif(org1, fmt.Sprintf("p%02d", (i*7)%24), int64(1000+i/4), inDoc(d, "a"))
			ns = append(ns, n)
			if d == "d2" {
				ofD2 = append(ofD2, n)
			}
			u1 = append(u1, entriesOf(n, "u1")...)
			if i%3 == 0 {
				u2 = append(u2, entriesOf(n, "u2")...)
			}
		}
		add(t, s, ns...)
		must(t, s.AddInboxEntries(ctx, append(slices.Clone(u1), u2...)))
		for _, desc := range []bool{false, true} {
			for _, size := range []int{1, 5, 8} {
				for _, c := range []struct {
					name string
					read func(*Position) ([]Position, error)
					want []string
				}{
					{"all", notificationPages(s, Listing{}, desc, size), sortedKeys(ns, desc)},
					{"document", notificationPages(s, Listing{DocumentID: "d2"}, desc, size), sortedKeys(ofD2, desc)},
					{"inbox u1", inboxPages(s, "u1", desc, size), sortedKeys(u1, desc)},
					{"inbox u2", inboxPages(s, "u2", desc, size), sortedKeys(u2, desc)},
				} {
					if got := pageAll(t, size, c.read, nil); !slices.Equal(got, c.want) {
						t.Fatalf("%s desc=%v by %d: %v, want %v", c.name, desc, size, got, c.want)
					}
				}
			}
		}
	})

	t.Run("paging is stable while items are added", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		var start []*Notification
		for i := range 12 {
			start = append(start, notif(org1, fmt.Sprintf("s%02d", (i*5)%12), int64(1000+i/3)))
		}
		addWith(t, s, []string{"u1"}, start...)
		for _, inboxes := range []bool{false, true} {
			for _, desc := range []bool{true, false} {
				n := 0
				read := notificationPages(s, Listing{}, desc, 4)
				if inboxes {
					read = inboxPages(s, "u1", desc, 4)
				}
				got := pageAll(t, 4, read, func() {
					// New ones: one now, one backdated into the range already listed or still to
					// come, one on a timestamp the start ones have.
					n++
					tag := fmt.Sprintf("%v%v%d", inboxes, desc, n)
					addWith(t, s, []string{"u1"},
						notif(org1, "n"+tag, int64(5000+n)), notif(org1, "b"+tag, int64(1000+n)), notif(org1, "e"+tag, 1002))
				})
				seen := map[string]bool{}
				var old []string
				for _, id := range got {
					if seen[id] {
						t.Fatalf("inbox=%v desc=%v: %s listed twice: %v", inboxes, desc, id, got)
					}
					seen[id] = true
					if id[0] == 's' {
						old = append(old, id)
					}
				}
				if want := sortedKeys(start, desc); !slices.Equal(old, want) {
					t.Fatalf("inbox=%v desc=%v: start ones listed %v, want %v (all: %v)", inboxes, desc, old, want, got)
				}
			}
		}
	})

	t.Run("inbox entries", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		n1, n2, n3 := notif(org1, "n1", 10), notif(org1, "n2", 20), notif(org1, "n3", 20)
		es := append(entriesOf(n1, "u1", "u2"), entriesOf(n2, "u1")...)
		must(t, s.AddInboxEntries(ctx, es))
		// Copied in.
		es[0].Read = true
		// Again, with changes, a new entry, and a new entry twice: existing entries stand, the
		// first of the new one is stored.
		again := append(entriesOf(n1, "u1", "u2"), entriesOf(n3, "u1")...)
		again[0].Read, again[1].Read = true, true
		dup := entriesOf(n3, "u2")
		dup2 := entriesOf(n3, "u2")
		dup2[0].Read = true
		must(t, s.AddInboxEntries(ctx, append(append(again, dup...), dup2...)))
		must(t, s.AddInboxEntries(ctx, nil))

		inbox(t, s, "u1", org1, "u1", nil, false, 0, "n1", "n2", "n3")
		got := inbox(t, s, "u1 desc", org1, "u1", nil, true, 0, "n3", "n2", "n1")
		if *got[2] != *entriesOf(n1, "u1")[0] || *got[0] != *entriesOf(n3, "u1")[0] {
			t.Fatalf("u1's entries: %+v %+v", got[2], got[0])
		}
		got[2].Read = true
		inbox(t, s, "u1 limit", org1, "u1", nil, true, 2, "n3", "n2")
		inbox(t, s, "u1 after", org1, "u1", &Position{20, "n2"}, false, 0, "n3")
		inbox(t, s, "u1 after desc", org1, "u1", &Position{20, "n3"}, true, 1, "n2")
		got = inbox(t, s, "u2", org1, "u2", nil, false, 0, "n1", "n3")
		if *got[0] != *entriesOf(n1, "u2")[0] || *got[1] != *entriesOf(n3, "u2")[0] {
			t.Fatalf("u2's entries: %+v %+v", got[0], got[1])
		}
		inbox(t, s, "unknown user", org1, "u9", nil, false, 0)

		m, err := s.InboxEntries(ctx, org1, "u1", []string{"n3", "nope", "n1", "n1"})
		must(t, err)
		if len(m) != 2 || *m["n1"] != *entriesOf(n1, "u1")[0] || *m["n3"] != *entriesOf(n3, "u1")[0] {
			t.Fatalf("InboxEntries: %+v", m)
		}
		m["n1"].Read = true // a copy
		for _, c := range []struct {
			org  Scope
			user string
			ids  []string
		}{{org1, "u1", nil}, {org1, "u1", []string{}}, {org1, "u9", []string{"n1"}}, {org1, "u2", []string{"n2"}}} {
			m, err := s.InboxEntries(ctx, c.org, c.user, c.ids)
			if err != nil || m == nil || len(m) != 0 {
				t.Fatalf("InboxEntries %v: %v %v", c, m, err)
			}
		}

		// The same users and notifications elsewhere are others'.
		for _, sc := range elsewhere {
			inbox(t, s, fmt.Sprint("nothing yet in ", sc), sc, "u1", nil, false, 0)
			must(t, s.AddInboxEntries(ctx, entriesOf(notif(sc, "n1", 5), "u1")))
			must(t, s.AddInboxEntries(ctx, entriesOf(notif(sc, "n4", 30), "u1")))
			inbox(t, s, fmt.Sprint("u1 in ", sc), sc, "u1", nil, false, 0, "n1", "n4")
			if m, err := s.InboxEntries(ctx, sc, "u1", []string{"n1", "n2"}); err != nil || len(m) != 1 || m["n1"].Timestamp != 5 {
				t.Fatalf("InboxEntries in %v: %v %v", sc, m, err)
			}
		}
		got = inbox(t, s, "u1 at the end", org1, "u1", nil, false, 0, "n1", "n2", "n3")
		if *got[0] != *entriesOf(n1, "u1")[0] {
			t.Fatalf("u1's n1 at the end: %+v", got[0])
		}
	})

	t.Run("read state", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		n1, n2, n3 := notif(org1, "n1", 10), notif(org1, "n2", 20), notif(org1, "n3", 30)
		addWith(t, s, []string{"u1", "u2", "u3"}, n1, n2)
		add(t, s, n3) // no entries
		g2 := elsewhere[0]
		addWith(t, s, []string{"u1", "u2"}, notif(g2, "n1", 10))
		setRead := func(what string, org Scope, id string, users []string, read bool, want int) {
			t.Helper()
			n, err := s.SetRead(ctx, org, id, users, read)
			if err != nil || n != want {
				t.Fatalf("%s: %d %v, want %d", what, n, err, want)
			}
		}
		readBy := func(what string, org Scope, ids []string, want map[string][]string) {
			t.Helper()
			got, err := s.ReadBy(ctx, org, ids)
			if err != nil || got == nil || !maps.EqualFunc(got, want, slices.Equal) {
				t.Fatalf("%s: %v %v, want %v", what, got, err, want)
			}
		}
		readBy("nobody yet", org1, []string{"n1", "n2", "n3"}, map[string][]string{})
		// Users without an entry are skipped; a repeated user counts once.
		setRead("u3, u1 read n1", org1, "n1", []string{"u3", "u9", "u1", "u3"}, true, 2)
		setRead("u2 reads n2", org1, "n2", []string{"u2"}, true, 1)
		readBy("after reading", org1, []string{"n1", "n2", "n3", "nope"}, map[string][]string{"n1": {"u1", "u3"}, "n2": {"u2"}})
		readBy("one", org1, []string{"n2"}, map[string][]string{"n2": {"u2"}})
		readBy("none asked", org1, nil, map[string][]string{})
		// Already so counts.
		setRead("u1, u2 read n1", org1, "n1", []string{"u1", "u2"}, true, 2)
		readBy("u2 too", org1, []string{"n1"}, map[string][]string{"n1": {"u1", "u2", "u3"}})
		setRead("u1 unreads n1", org1, "n1", []string{"u1"}, false, 1)
		setRead("u1 unreads n1 again", org1, "n1", []string{"u1"}, false, 1)
		setRead("nobody has n3", org1, "n3", []string{"u1", "u2"}, true, 0)
		setRead("unknown notification", org1, "nope", []string{"u1"}, true, 0)
		setRead("no users", org1, "n1", nil, true, 0)
		readBy("after unreading", org1, []string{"n1", "n2"}, map[string][]string{"n1": {"u2", "u3"}, "n2": {"u2"}})
		m, err := s.InboxEntries(ctx, org1, "u2", []string{"n1", "n2"})
		must(t, err)
		if !m["n1"].Read || !m["n2"].Read {
			t.Fatalf("u2's entries: %+v %+v", m["n1"], m["n2"])
		}
		got := inbox(t, s, "u1", org1, "u1", nil, false, 0, "n1", "n2")
		if got[0].Read || got[1].Read {
			t.Fatalf("u1's entries read: %+v", got)
		}
		// Another generation's entries are its own.
		readBy("g2", g2, []string{"n1"}, map[string][]string{})
		setRead("g2: u2 reads n1", g2, "n1", []string{"u2", "u3"}, true, 1)
		readBy("g2 after", g2, []string{"n1"}, map[string][]string{"n1": {"u2"}})
		readBy("org1 after g2", org1, []string{"n1", "n2"}, map[string][]string{"n1": {"u2", "u3"}, "n2": {"u2"}})
		setRead("unknown generation", Scope{APIKey: "k1", OrganizationID: "o1", OrgGen: "g3"}, "n1", []string{"u1"}, true, 0)
	})

	t.Run("delete notifications", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		n1, n2, n3 := notif(org1, "n1", 10), notif(org1, "n2", 20), notif(org1, "n3", 30)
		addWith(t, s, []string{"u1", "u2"}, n1, n3)
		addWith(t, s, []string{"u1"}, n2)
		g2 := elsewhere[0]
		addWith(t, s, []string{"u1", "u2"}, notif(g2, "n1", 10))
		must(t, s.QueueDeliveries(ctx, []*Delivery{
			delivery("n1-u1", org1, "n1", t0), delivery("n1-u2", org1, "n1", t0, state(StateSent)),
			delivery("n1-slack", org1, "n1", t0, state(StateFailed)), delivery("n1-u3", org1, "n1", t0.Add(time.Hour)),
			delivery("n2-u1", org1, "n2", t0), delivery("n3-u1", org1, "n3", t0),
			delivery("g2-n1-u1", g2, "n1", t0),
		}))
		deleted, err := s.DeleteNotifications(ctx, org1, []string{"n1", "nope", "n3", "n1"})
		must(t, err)
		if !slices.Equal(deleted, []string{"n1", "n3"}) {
			t.Fatalf("deleted %v, want [n1 n3]", deleted)
		}
		get(t, s, "n1", org1, "n1", nil)
		get(t, s, "n3", org1, "n3", nil)
		get(t, s, "n2", org1, "n2", n2)
		list(t, s, "left", org1, Listing{}, nil, false, 0, "n2")
		list(t, s, "left in d1", org1, Listing{DocumentID: "d1"}, nil, true, 0, "n2")
		inbox(t, s, "u1", org1, "u1", nil, false, 0, "n2")
		inbox(t, s, "u2", org1, "u2", nil, false, 0)
		// Pending deliveries go; sent and failed ones stay, as do other notifications'.
		deliveryIDs(t, s, "of n1", "k1", "n1", "g2-n1-u1", "n1-slack", "n1-u2")
		deliveryIDs(t, s, "of n2", "k1", "n2", "n2-u1")
		deliveryIDs(t, s, "of n3", "k1", "n3")
		dueIDs(t, s, "due", t0, 0, "g2-n1-u1", "n2-u1")
		// Another generation's n1 is untouched.
		get(t, s, "n1 of g2", g2, "n1", notif(g2, "n1", 10))
		inbox(t, s, "u2 in g2", g2, "u2", nil, false, 0, "n1")

		deleted, err = s.DeleteNotifications(ctx, org1, []string{"n1", "n3"})
		if err != nil || deleted == nil || len(deleted) != 0 {
			t.Fatalf("deleted again: %v %v", deleted, err)
		}
		// Entries whose notification is gone (a fan-out racing a delete) go with its id.
		must(t, s.AddInboxEntries(ctx, entriesOf(n1, "u3")))
		inbox(t, s, "u3's orphan", org1, "u3", nil, false, 0, "n1")
		deleted, err = s.DeleteNotifications(ctx, org1, []string{"n1"})
		if err != nil || len(deleted) != 0 {
			t.Fatalf("deleted an orphan's notification: %v %v", deleted, err)
		}
		inbox(t, s, "u3's orphan deleted", org1, "u3", nil, false, 0)
		// A deleted id can be added again.
		add(t, s, notif(org1, "n1", 40, body("again")))
		list(t, s, "n1 again", org1, Listing{}, nil, false, 0, "n2", "n1")
		deleted, err = s.DeleteNotifications(ctx, org1, []string{"n1", "n2"})
		if err != nil || !slices.Equal(deleted, []string{"n1", "n2"}) {
			t.Fatalf("deleted the rest: %v %v", deleted, err)
		}
		list(t, s, "none left", org1, Listing{}, nil, false, 0)
		list(t, s, "none left in d1", org1, Listing{DocumentID: "d1"}, nil, false, 0)
		inbox(t, s, "u1 empty", org1, "u1", nil, false, 0)
		deleted, err = s.DeleteNotifications(ctx, Scope{APIKey: "k9", OrganizationID: "o9"}, []string{"n1"})
		if err != nil || len(deleted) != 0 {
			t.Fatalf("deleted in an unknown organization: %v %v", deleted, err)
		}
	})

	// seed stores the same records in org1 and every scope elsewhere: configs of d1/a and d2/a;
	// n1, n2 in d1/a, n3 in d1/b, n4 in d2/a, n5 in no document, with entries for u1 and u2
	// (n5 only u1); a pending, a sent and a failed delivery of n1 and a pending one of n4.
	// Delivery ids are prefixed with the scope's index (0: org1, 1...: elsewhere).
	seed := func(t *testing.T, s Store) {
		t.Helper()
		for i, sc := range append([]Scope{org1}, elsewhere...) {
			must(t, s.SetConfigs(ctx, []Scope{docOf(sc, "d1", "a"), docOf(sc, "d2", "a")}, []string{"u1", "u2"}, Config{All, All, All}))
			addWith(t, s, []string{"u1", "u2"},
				notif(sc, "n1", 10, inDoc("d1", "a")), notif(sc, "n2", 20, inDoc("d1", "a")),
				notif(sc, "n3", 30, inDoc("d1", "b")), notif(sc, "n4", 40, inDoc("d2", "a")))
			addWith(t, s, []string{"u1"}, notif(sc, "n5", 50, inDoc("", "")))
			p := fmt.Sprint(i)
			must(t, s.QueueDeliveries(ctx, []*Delivery{
				delivery(p+"n1-pending", sc, "n1", t0), delivery(p+"n1-sent", sc, "n1", t0, state(StateSent)),
				delivery(p+"n1-failed", sc, "n1", t0, state(StateFailed)), delivery(p+"n4-pending", sc, "n4", t0),
			}))
		}
	}
	// untouched asserts that seed's records elsewhere are all there.
	untouched := func(t *testing.T, s Store) {
		t.Helper()
		for i, sc := range elsewhere {
			what := fmt.Sprint(sc)
			configs(t, s, what, docOf(sc, "d1", "a"), []string{"u1", "u2"}, map[string]Config{"u1": {All, All, All}, "u2": {All, All, All}})
			configs(t, s, what, docOf(sc, "d2", "a"), []string{"u1", "u2"}, map[string]Config{"u1": {All, All, All}, "u2": {All, All, All}})
			list(t, s, what, sc, Listing{}, nil, false, 0, "n1", "n2", "n3", "n4", "n5")
			list(t, s, what, sc, Listing{DocumentID: "d1"}, nil, false, 0, "n1", "n2", "n3")
			inbox(t, s, what, sc, "u1", nil, false, 0, "n1", "n2", "n3", "n4", "n5")
			inbox(t, s, what, sc, "u2", nil, false, 0, "n1", "n2", "n3", "n4")
			p := fmt.Sprint(i + 1)
			for _, id := range []string{"n1-pending", "n1-sent", "n1-failed", "n4-pending"} {
				if _, err := s.Delivery(ctx, p+id); err != nil {
					t.Fatalf("%s: delivery %s: %v", what, p+id, err)
				}
			}
		}
	}
	var allConfig = Config{All, All, All}

	t.Run("delete organization", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		seed(t, s)
		for range 2 {
			must(t, s.DeleteOrganization(ctx, org1))
			configs(t, s, "d1", docOf(org1, "d1", "a"), []string{"u1", "u2"}, map[string]Config{})
			configs(t, s, "d2", docOf(org1, "d2", "a"), []string{"u1", "u2"}, map[string]Config{})
			list(t, s, "notifications", org1, Listing{}, nil, false, 0)
			list(t, s, "d1", org1, Listing{DocumentID: "d1"}, nil, false, 0)
			get(t, s, "n1", org1, "n1", nil)
			inbox(t, s, "u1", org1, "u1", nil, false, 0)
			inbox(t, s, "u2", org1, "u2", nil, false, 0)
			if m, err := s.ReadBy(ctx, org1, []string{"n1"}); err != nil || len(m) != 0 {
				t.Fatalf("ReadBy: %v %v", m, err)
			}
			// Pending deliveries go, sent and failed ones stay.
			deliveryIDs(t, s, "n1", "k1", "n1", "0n1-failed", "0n1-sent", "1n1-failed", "1n1-pending", "1n1-sent", "2n1-failed", "2n1-pending", "2n1-sent")
			getDelivery(t, s, "0n4-pending", nil)
			dueIDs(t, s, "due", t0, 0, "1n1-pending", "1n4-pending", "2n1-pending", "2n4-pending", "3n1-pending", "3n4-pending")
			untouched(t, s)
		}
		// The organization's ids are free again.
		addWith(t, s, []string{"u1"}, notif(org1, "n1", 60))
		inbox(t, s, "u1 again", org1, "u1", nil, false, 0, "n1")
		must(t, s.DeleteOrganization(ctx, Scope{APIKey: "k9", OrganizationID: "o9", OrgGen: "g9"}))
		untouched(t, s)
	})

	t.Run("delete document", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		seed(t, s)
		d1 := docOf(org1, "d1", "a")
		for range 2 {
			must(t, s.DeleteDocument(ctx, d1))
			configs(t, s, "d1", d1, []string{"u1", "u2"}, map[string]Config{})
			configs(t, s, "d2", docOf(org1, "d2", "a"), []string{"u1", "u2"}, map[string]Config{"u1": allConfig, "u2": allConfig})
			list(t, s, "left", org1, Listing{}, nil, false, 0, "n3", "n4", "n5")
			list(t, s, "left in d1", org1, Listing{DocumentID: "d1"}, nil, false, 0, "n3")
			inbox(t, s, "u1", org1, "u1", nil, false, 0, "n3", "n4", "n5")
			inbox(t, s, "u2", org1, "u2", nil, true, 0, "n4", "n3")
			deliveryIDs(t, s, "n1", "k1", "n1", "0n1-failed", "0n1-sent", "1n1-failed", "1n1-pending", "1n1-sent", "2n1-failed", "2n1-pending", "2n1-sent")
			deliveryIDs(t, s, "n4", "k1", "n4", "0n4-pending", "1n4-pending", "2n4-pending")
			untouched(t, s)
		}
		// Another incarnation of the document, then the other document.
		must(t, s.DeleteDocument(ctx, docOf(org1, "d1", "b")))
		list(t, s, "after d1/b", org1, Listing{}, nil, false, 0, "n4", "n5")
		must(t, s.DeleteDocument(ctx, docOf(org1, "d2", "b")))
		list(t, s, "after d2/b", org1, Listing{}, nil, false, 0, "n4", "n5")
		configs(t, s, "d2 after d2/b", docOf(org1, "d2", "a"), []string{"u1", "u2"}, map[string]Config{"u1": allConfig, "u2": allConfig})
		// Notifications of no document belong to none.
		must(t, s.DeleteDocument(ctx, docOf(org1, "", "")))
		list(t, s, "no document is not a document", org1, Listing{}, nil, false, 0, "n4", "n5")
		must(t, s.DeleteDocument(ctx, docOf(org1, "d2", "a")))
		list(t, s, "after d2", org1, Listing{}, nil, false, 0, "n5")
		inbox(t, s, "u1 at the end", org1, "u1", nil, false, 0, "n5")
		inbox(t, s, "u2 at the end", org1, "u2", nil, false, 0)
		configs(t, s, "d2 at the end", docOf(org1, "d2", "a"), []string{"u1", "u2"}, map[string]Config{})
		dueIDs(t, s, "due", t0, 0, "1n1-pending", "1n4-pending", "2n1-pending", "2n4-pending", "3n1-pending", "3n4-pending")
		must(t, s.DeleteDocument(ctx, docOf(Scope{APIKey: "k9", OrganizationID: "o9"}, "d1", "a")))
		untouched(t, s)
	})

	t.Run("move document", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		seed(t, s)
		mine := Config{Mine, None, None}
		// The target has notifications and a config of its own: u2's stands.
		addWith(t, s, []string{"u1"}, notif(org1, "n0", 5, inDoc("d3", "a")), notif(org1, "n6", 15, inDoc("d3", "a")))
		must(t, s.SetConfigs(ctx, []Scope{docOf(org1, "d3", "a")}, []string{"u2"}, mine))
		d1 := docOf(org1, "d1", "a")
		for range 2 { // a second run changes nothing
			must(t, s.MoveDocument(ctx, d1, "d3"))
			configs(t, s, "d3", docOf(org1, "d3", "a"), []string{"u1", "u2"}, map[string]Config{"u1": allConfig, "u2": mine})
			configs(t, s, "d1", d1, []string{"u1", "u2"}, map[string]Config{})
			list(t, s, "moved into d3", org1, Listing{DocumentID: "d3"}, nil, false, 0, "n0", "n1", "n6", "n2")
			list(t, s, "moved into d3, desc", org1, Listing{DocumentID: "d3"}, nil, true, 0, "n2", "n6", "n1", "n0")
			list(t, s, "left in d1", org1, Listing{DocumentID: "d1"}, nil, false, 0, "n3")
			list(t, s, "all", org1, Listing{}, nil, false, 0, "n0", "n1", "n6", "n2", "n3", "n4", "n5")
			get(t, s, "n1", org1, "n1", notif(org1, "n1", 10, inDoc("d3", "a")))
			m, err := s.InboxEntries(ctx, org1, "u2", []string{"n1", "n2", "n3"})
			must(t, err)
			if m["n1"].DocumentID != "d3" || m["n2"].DocumentID != "d3" || m["n3"].DocumentID != "d1" {
				t.Fatalf("u2's entries: %+v %+v %+v", m["n1"], m["n2"], m["n3"])
			}
			deliveryIDs(t, s, "n1", "k1", "n1", "0n1-failed", "0n1-pending", "0n1-sent", "1n1-failed", "1n1-pending", "1n1-sent", "2n1-failed", "2n1-pending", "2n1-sent")
			untouched(t, s)
		}
		// A notification written under the old id after a move is moved by the next run.
		addWith(t, s, []string{"u1"}, notif(org1, "n7", 70, inDoc("d1", "a")))
		must(t, s.SetConfigs(ctx, []Scope{d1}, []string{"u3"}, mine))
		must(t, s.MoveDocument(ctx, d1, "d3"))
		list(t, s, "finished", org1, Listing{DocumentID: "d3"}, nil, false, 0, "n0", "n1", "n6", "n2", "n7")
		list(t, s, "finished, d1", org1, Listing{DocumentID: "d1"}, nil, false, 0, "n3")
		configs(t, s, "d3 finished", docOf(org1, "d3", "a"), []string{"u1", "u2", "u3"}, map[string]Config{"u1": allConfig, "u2": mine, "u3": mine})
		configs(t, s, "d1 finished", d1, []string{"u1", "u2", "u3"}, map[string]Config{})
		// The moved entries are the document's: removing u1 from d3 takes them.
		must(t, s.RemoveUsers(ctx, docOf(org1, "d3", "a"), []string{"u1"}))
		inbox(t, s, "u1 after leaving d3", org1, "u1", nil, false, 0, "n3", "n4", "n5")
		// Onto itself, of no document, in an unknown organization: nothing.
		must(t, s.MoveDocument(ctx, docOf(org1, "d3", "a"), "d3"))
		must(t, s.MoveDocument(ctx, docOf(org1, "", ""), "d9"))
		must(t, s.MoveDocument(ctx, docOf(Scope{APIKey: "k9", OrganizationID: "o9"}, "d3", "a"), "d4"))
		list(t, s, "at the end", org1, Listing{}, nil, false, 0, "n0", "n1", "n6", "n2", "n3", "n4", "n5", "n7")
		list(t, s, "d9", org1, Listing{DocumentID: "d9"}, nil, false, 0)
		// Moving every notification of a document leaves it empty.
		must(t, s.MoveDocument(ctx, docOf(org1, "d1", "b"), "d4"))
		list(t, s, "d1 empty", org1, Listing{DocumentID: "d1"}, nil, false, 0)
		list(t, s, "d4", org1, Listing{DocumentID: "d4"}, nil, false, 0, "n3")
		untouched(t, s)
	})

	t.Run("remove users", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		seed(t, s)
		must(t, s.SetConfigs(ctx, []Scope{docOf(org1, "d1", "b")}, []string{"u1", "u2", "u3"}, Config{None, None, None}))
		must(t, s.AddInboxEntries(ctx, entriesOf(notif(org1, "n1", 10, inDoc("d1", "a")), "u3")))
		// From one document: the configs of that incarnation, the entries of the document.
		for range 2 {
			must(t, s.RemoveUsers(ctx, docOf(org1, "d1", "a"), []string{"u2", "u3", "u2"}))
			configs(t, s, "d1/a", docOf(org1, "d1", "a"), []string{"u1", "u2", "u3"}, map[string]Config{"u1": allConfig})
			configs(t, s, "d1/b", docOf(org1, "d1", "b"), []string{"u1", "u2", "u3"}, map[string]Config{"u1": {None, None, None}, "u2": {None, None, None}, "u3": {None, None, None}})
			configs(t, s, "d2", docOf(org1, "d2", "a"), []string{"u1", "u2"}, map[string]Config{"u1": allConfig, "u2": allConfig})
			inbox(t, s, "u1", org1, "u1", nil, false, 0, "n1", "n2", "n3", "n4", "n5")
			inbox(t, s, "u2", org1, "u2", nil, false, 0, "n4")
			inbox(t, s, "u3", org1, "u3", nil, false, 0)
			untouched(t, s)
		}
		must(t, s.SetConfigs(ctx, []Scope{docOf(org1, "d1", "a")}, []string{"u2"}, allConfig))
		// From the organization: every document's.
		for range 2 {
			must(t, s.RemoveUsers(ctx, org1, []string{"u1", "u3"}))
			configs(t, s, "d1/a", docOf(org1, "d1", "a"), []string{"u1", "u2", "u3"}, map[string]Config{"u2": allConfig})
			configs(t, s, "d1/b", docOf(org1, "d1", "b"), []string{"u1", "u2", "u3"}, map[string]Config{"u2": {None, None, None}})
			configs(t, s, "d2", docOf(org1, "d2", "a"), []string{"u1", "u2"}, map[string]Config{"u2": allConfig})
			inbox(t, s, "u1", org1, "u1", nil, false, 0)
			inbox(t, s, "u2", org1, "u2", nil, false, 0, "n4")
			untouched(t, s)
		}
		list(t, s, "notifications stay", org1, Listing{}, nil, false, 0, "n1", "n2", "n3", "n4", "n5")
		must(t, s.RemoveUsers(ctx, org1, nil))
		must(t, s.RemoveUsers(ctx, Scope{APIKey: "k9", OrganizationID: "o9"}, []string{"u2"}))
		inbox(t, s, "u2 at the end", org1, "u2", nil, false, 0, "n4")
	})

	t.Run("prune deliveries", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		created := func(d time.Duration) func(*Delivery) { return func(x *Delivery) { x.CreatedAt = t0.Add(d) } }
		must(t, s.QueueDeliveries(ctx, []*Delivery{
			delivery("old-sent", org1, "n1", t0, state(StateSent), created(-2*time.Hour)),
			delivery("old-failed", org1, "n1", t0, state(StateFailed), created(-2*time.Hour)),
			delivery("old-pending", org1, "n1", t0, created(-2*time.Hour)),
			delivery("at-cutoff", org1, "n1", t0, state(StateSent), created(-time.Hour)),
			delivery("new-sent", org1, "n1", t0, state(StateSent), created(0)),
			delivery("other-tenant", elsewhere[2], "n1", t0, state(StateFailed), created(-2*time.Hour)),
		}))
		n, err := s.PruneDeliveries(ctx, t0.Add(-time.Hour))
		must(t, err)
		if n != 3 {
			t.Errorf("pruned %d, want 3", n)
		}
		deliveryIDs(t, s, "after pruning", "k1", "n1", "at-cutoff", "new-sent", "old-pending")
		deliveryIDs(t, s, "the other tenant's", "k2", "n1")
		getDelivery(t, s, "old-sent", nil)
		if n, err := s.PruneDeliveries(ctx, t0.Add(-time.Hour)); err != nil || n != 0 {
			t.Errorf("pruning again: %d %v", n, err)
		}
		dueIDs(t, s, "the pending one is still due", t0, 0, "old-pending")
	})

	t.Run("delivery queue", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		at := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }
		slack := func(d *Delivery) { d.Channel, d.UserID, d.To, d.Subject, d.HTML = ChannelSlack, "", "", "", "" }
		queued := []*Delivery{
			delivery("a", org1, "n1", t0),
			delivery("b", org1, "n1", at(1), slack),
			delivery("c", org1, "n2", at(-1)),
			delivery("d", org1, "n2", at(60)),
			delivery("e", org1, "n2", t0, state(StateSent)),
			delivery("f", org1, "n2", t0, state(StateFailed)),
			delivery("g", org1, "n3", t0, func(d *Delivery) { d.LeaseUntil = at(5) }),
			delivery("h", elsewhere[2], "n1", t0),
			// Kept to the millisecond.
			delivery("i", org1, "n3", t0.Add(999*time.Microsecond), func(d *Delivery) { d.CreatedAt = t0.Add(1500 * time.Microsecond) }),
		}
		must(t, s.QueueDeliveries(ctx, queued))
		// Copied in; queued again (changed, and with a new one): only the new one is stored.
		queued[0].Subject = "changed"
		again := []*Delivery{delivery("a", org1, "n1", at(-10), func(d *Delivery) { d.Subject = "second" }), delivery("j", org1, "n3", at(2))}
		must(t, s.QueueDeliveries(ctx, again))
		must(t, s.QueueDeliveries(ctx, nil))
		getDelivery(t, s, "a", delivery("a", org1, "n1", t0))
		// Copied out.
		read, err := s.Delivery(ctx, "a")
		must(t, err)
		read.Subject, read.NextAttempt = "mine", at(-100)
		listed, err := s.DueDeliveries(ctx, t0, 0)
		must(t, err)
		listed[0].State = StateFailed
		getDelivery(t, s, "a", delivery("a", org1, "n1", t0))
		getDelivery(t, s, "c", delivery("c", org1, "n2", at(-1)))
		getDelivery(t, s, "b", delivery("b", org1, "n1", at(1), slack))
		getDelivery(t, s, "i", delivery("i", org1, "n3", t0, func(d *Delivery) { d.CreatedAt = t0.Add(time.Millisecond) }))
		getDelivery(t, s, "nope", nil)
		deliveryIDs(t, s, "n1", "k1", "n1", "a", "b")
		deliveryIDs(t, s, "n1 of k2", "k2", "n1", "h")
		deliveryIDs(t, s, "n3", "k1", "n3", "g", "i", "j")
		deliveryIDs(t, s, "unknown", "k1", "nope")

		// Due: pending, next attempt and lease not after now; by next attempt, then id.
		dueIDs(t, s, "before any", at(-2), 0)
		dueIDs(t, s, "at t0", t0, 0, "c", "a", "h", "i")
		dueIDs(t, s, "at +2", at(2), 0, "c", "a", "h", "i", "b", "j")
		dueIDs(t, s, "at +2, limit", at(2), 3, "c", "a", "h")
		dueIDs(t, s, "at +5", at(5), 0, "c", "a", "g", "h", "i", "b", "j")

		// Claims: one at a time; a lease runs until it ends.
		claim := func(what, id string, now, until time.Time, want bool) {
			t.Helper()
			ok, err := s.ClaimDelivery(ctx, id, now, until)
			if err != nil || ok != want {
				t.Fatalf("%s: claim %s: %v %v, want %v", what, id, ok, err, want)
			}
		}
		claim("first", "a", at(2), at(7), true)
		claim("leased", "a", at(2), at(7), false)
		claim("leased, later", "a", at(6), at(20), false)
		dueIDs(t, s, "a leased", at(6), 0, "c", "g", "h", "i", "b", "j")
		a := delivery("a", org1, "n1", t0, func(d *Delivery) { d.LeaseUntil = at(7) })
		getDelivery(t, s, "a", a)
		claim("not due", "d", at(2), at(7), false)
		claim("sent", "e", at(2), at(7), false)
		claim("failed", "f", at(2), at(7), false)
		claim("unknown", "nope", at(2), at(7), false)
		claim("leased when queued", "g", at(4), at(9), false)
		claim("lease of g over", "g", at(5), at(9), true)
		// An ended lease lets another claim it.
		dueIDs(t, s, "a's lease over", at(7), 0, "c", "a", "h", "i", "b", "j")
		claim("lease of a over", "a", at(7), at(12), true)

		// Outcomes release the lease.
		must(t, s.FinishDelivery(ctx, "a", StateSent, 1, t0, "", at(8)))
		a = delivery("a", org1, "n1", t0, state(StateSent), func(d *Delivery) { d.Attempts, d.SentAt = 1, at(8) })
		getDelivery(t, s, "a", a)
		claim("sent a", "a", at(20), at(30), false)
		claim("b", "b", at(2), at(7), true)
		must(t, s.FinishDelivery(ctx, "b", StatePending, 1, at(30), "timeout", at(3)))
		getDelivery(t, s, "b", delivery("b", org1, "n1", at(30), slack, func(d *Delivery) { d.Attempts, d.LastError = 1, "timeout" }))
		dueIDs(t, s, "b retried later", at(29), 0, "c", "g", "h", "i", "j")
		dueIDs(t, s, "b due again", at(30), 0, "c", "g", "h", "i", "j", "b")
		claim("b again", "b", at(30), at(31), true)
		must(t, s.FinishDelivery(ctx, "c", StateFailed, 5, at(-1), "gave up", at(3)))
		getDelivery(t, s, "c", delivery("c", org1, "n2", at(-1), state(StateFailed), func(d *Delivery) { d.Attempts, d.LastError = 5, "gave up" }))
		claim("failed c", "c", at(3), at(4), false)
		dueIDs(t, s, "c failed", at(30), 0, "g", "h", "i", "j")
		// Back to pending: due again.
		must(t, s.FinishDelivery(ctx, "e", StatePending, 2, at(40), "retry", at(3)))
		dueIDs(t, s, "e pending", at(40), 0, "g", "h", "i", "j", "b", "e")

		if err := s.FinishDelivery(ctx, "nope", StateSent, 1, t0, "", t0); !errors.Is(err, ErrNotFound) {
			t.Fatalf("finish unknown: %v", err)
		}
		if err := s.FinishDelivery(ctx, "d", "bogus", 1, t0, "", t0); err == nil || errors.Is(err, ErrNotFound) {
			t.Fatalf("finish with an unknown state: %v", err)
		}
		getDelivery(t, s, "d", delivery("d", org1, "n2", at(60)))
	})

	t.Run("concurrent claims of one delivery: one wins", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		must(t, s.QueueDeliveries(ctx, []*Delivery{delivery("x", org1, "n1", t0)}))
		for round, now := range []time.Time{t0, t0.Add(time.Minute)} {
			const n = 20
			wins := make([]bool, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() { wins[i], errs[i] = s.ClaimDelivery(ctx, "x", now, now.Add(time.Minute)) })
			}
			wg.Wait()
			won := 0
			for i := range n {
				must(t, errs[i])
				if wins[i] {
					won++
				}
			}
			if won != 1 {
				t.Fatalf("round %d: %d claims won, want 1", round, won)
			}
		}
	})

	t.Run("ping", func(t *testing.T) {
		t.Parallel()
		must(t, newStore(t).Ping(ctx))
	})

	runQuotaSuite(t, newStore)
	runConcurrencySuite(t, newStore)
}
