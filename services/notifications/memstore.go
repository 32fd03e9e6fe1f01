package notifications

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"
)

// MemoryStore keeps everything in the process. Records are copied in and out, so callers never
// share memory with the store.
//
// Each organization incarnation (API key, organization, generation) keeps its notifications
// sorted by (Timestamp, ID), once whole and once per document, and each user's inbox sorted by
// (Timestamp, NotificationID), so a listing seeks to its position by binary search and walks from
// there: its cost depends on the page, not on how deep it is. Inserts nearly always land at the
// end (timestamps are "now"), where a sorted slice takes them for an append; a fan-out of one
// notification to 10,000 users is 10,000 appends, one per inbox.
//
// An inbox entry is small (issue 20): a pointer to its filing, the notification's id, document
// and timestamp its entries share, a pointer to its inbox, which holds the one copy of the user
// id, and the read flag; 24 bytes, plus a slot in the inbox and one in the filing, which keeps
// its entries sorted by user for the lookups by (user, notification). A notification's content is
// in the notification only.
//
// Deliveries are kept by id, per (API key, notification), and the pending ones once more in a
// set of their own, which is all DueDeliveries walks: sent and failed deliveries cost it nothing.
// Times are kept as MongoDB keeps them (milliseconds, UTC). Where store.go leaves room, it
// behaves as MongoStore's comment says.
type MemoryStore struct {
	mu   sync.RWMutex
	orgs map[orgKey]*orgData

	deliveries map[string]*Delivery
	pending    map[string]*Delivery
	byNotif    map[notifKey][]*Delivery

	// recipients are the quota counts of recipients per workspace and minute.
	recipients map[minuteKey]int
	sweptAt    int64 // the minute recipients were last swept behind
}

type (
	orgKey    struct{ apiKey, orgID, orgGen string }
	docRef    struct{ id, gen string }
	notifKey  struct{ apiKey, notificationID string }
	minuteKey struct {
		workspaceID string
		minute      int64
	}
)

// orgData holds the records of one organization incarnation. The lists hold the same pointers
// as the maps; the store never hands them out.
type orgData struct {
	configs map[docRef]map[string]Config // document incarnation → user → config

	notifs map[string]*Notification
	all    sorted[*Notification]
	byDoc  map[string]sorted[*Notification] // notifications without a document are in none

	inboxes map[string]*userInbox // user → inbox
	// filed are the filings of each notification id (whether or not the notification exists):
	// one, unless entries of a deleted notification's id outlived it and the id was used again.
	filed   map[string][]*filing
	entries int

	// The inbox quota's counts: notifications to everyone, and per user those naming them.
	everyone int
	named    map[string]int
}

// userInbox is one user's entries, sorted by (timestamp, notification id); user is the one copy of
// the user id its entries share.
type userInbox struct {
	user    string
	entries sorted[*entry]
}

// filing is the entries of one notification id that share a document and a timestamp, sorted
// by user id.
type filing struct {
	notificationID, documentID string
	ts                         int64
	entries                    []*entry
}

// entry is one user's copy of a notification.
type entry struct {
	f    *filing
	in   *userInbox
	read bool
}

func newOrgData() *orgData {
	return &orgData{
		configs: map[docRef]map[string]Config{},
		notifs:  map[string]*Notification{}, byDoc: map[string]sorted[*Notification]{},
		inboxes: map[string]*userInbox{}, filed: map[string][]*filing{},
		named: map[string]int{},
	}
}

func (o *orgData) empty() bool {
	return len(o.configs) == 0 && len(o.notifs) == 0 && o.entries == 0 && o.everyone == 0 && len(o.named) == 0
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{
		orgs:       map[orgKey]*orgData{},
		deliveries: map[string]*Delivery{},
		pending:    map[string]*Delivery{},
		byNotif:    map[notifKey][]*Delivery{},
		recipients: map[minuteKey]int{},
	}
}

// keyed is what a sorted list holds: a pointer whose sort key is (timestamp, id).
type keyed interface {
	comparable
	sortKey() (int64, string)
}

func (n *Notification) sortKey() (int64, string) { return n.Timestamp, n.ID }
func (e *InboxEntry) sortKey() (int64, string)   { return e.Timestamp, e.NotificationID }
func (e *entry) sortKey() (int64, string)        { return e.f.ts, e.f.notificationID }

// sorted is ordered by sort key ascending; keys are unique in a list.
type sorted[T keyed] []T

func compareKey[T keyed](x T, ts int64, id string) int {
	xts, xid := x.sortKey()
	if c := cmp.Compare(xts, ts); c != 0 {
		return c
	}
	return cmp.Compare(xid, id)
}

func compareItems[T keyed](a, b T) int {
	ts, id := b.sortKey()
	return compareKey(a, ts, id)
}

// firstAfter returns the index of the first item whose key is greater than (ts, id).
func (l sorted[T]) firstAfter(ts int64, id string) int {
	return sort.Search(len(l), func(i int) bool { return compareKey(l[i], ts, id) > 0 })
}

// firstFrom returns the index of the first item whose key is not less than (ts, id).
func (l sorted[T]) firstFrom(ts int64, id string) int {
	return sort.Search(len(l), func(i int) bool { return compareKey(l[i], ts, id) >= 0 })
}

func (l sorted[T]) insert(x T) sorted[T] {
	ts, id := x.sortKey()
	if n := len(l); n == 0 || compareKey(l[n-1], ts, id) < 0 {
		return append(l, x) // the usual case: the newest
	}
	return slices.Insert(l, l.firstFrom(ts, id), x)
}

func (l sorted[T]) remove(x T) sorted[T] {
	ts, id := x.sortKey()
	if i := l.firstFrom(ts, id); i < len(l) && l[i] == x {
		return slices.Delete(l, i, i+1) // which clears the freed slot at the end
	}
	return l
}

// removeAll returns l without gone, distinct items that l holds: one search and shift each for
// a few, one pass over l for many.
func (l sorted[T]) removeAll(gone []T) sorted[T] {
	switch {
	case len(gone) >= len(l):
		return nil
	case len(gone) <= 16:
		for _, x := range gone {
			l = l.remove(x)
		}
		return l
	}
	set := make(map[T]struct{}, len(gone))
	for _, x := range gone {
		set[x] = struct{}{}
	}
	return slices.DeleteFunc(l, func(x T) bool { _, ok := set[x]; return ok })
}

// merge adds xs, sorted, to l.
func (l sorted[T]) merge(xs sorted[T]) sorted[T] {
	if len(l) == 0 {
		return slices.Clone(xs)
	}
	out := make(sorted[T], 0, len(l)+len(xs))
	i, j := 0, 0
	for i < len(l) && j < len(xs) {
		if compareItems(l[i], xs[j]) < 0 {
			out = append(out, l[i])
			i++
		} else {
			out = append(out, xs[j])
			j++
		}
	}
	out = append(out, l[i:]...)
	return append(out, xs[j:]...)
}

// page returns up to limit items (limit <= 0: all) that match (nil: all), ascending or
// descending, strictly after `after` when it is set.
func (l sorted[T]) page(after *Position, desc bool, limit int, match func(T) bool) []T {
	var found []T
	if limit > 0 {
		found = make([]T, 0, min(limit, len(l)))
	}
	take := func(x T) bool {
		if match == nil || match(x) {
			found = append(found, x)
		}
		return limit <= 0 || len(found) < limit
	}
	if desc {
		i := len(l)
		if after != nil {
			i = l.firstFrom(after.Timestamp, after.ID)
		}
		for i--; i >= 0 && take(l[i]); i-- {
		}
	} else {
		i := 0
		if after != nil {
			i = l.firstAfter(after.Timestamp, after.ID)
		}
		for ; i < len(l) && take(l[i]); i++ {
		}
	}
	return found
}

// removeUnsorted returns l without gone, distinct items that l holds.
func removeUnsorted[T comparable](l []T, gone []T) []T {
	if len(gone) >= len(l) {
		return nil
	}
	if len(gone) <= 16 {
		for _, x := range gone {
			if i := slices.Index(l, x); i >= 0 {
				l = slices.Delete(l, i, i+1)
			}
		}
		return l
	}
	set := make(map[T]struct{}, len(gone))
	for _, x := range gone {
		set[x] = struct{}{}
	}
	return slices.DeleteFunc(l, func(x T) bool { _, ok := set[x]; return ok })
}

// distinct returns vs without repeats, in their first order.
func distinct(vs []string) []string {
	seen := make(map[string]struct{}, len(vs))
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		if _, ok := seen[v]; !ok {
			seen[v] = struct{}{}
			out = append(out, v)
		}
	}
	return out
}

func keyOf(s Scope) orgKey { return orgKey{s.APIKey, s.OrganizationID, s.OrgGen} }

// org returns the records of an organization incarnation, nil when it has none.
func (s *MemoryStore) org(sc Scope) *orgData { return s.orgs[keyOf(sc)] }

func (s *MemoryStore) orgFor(k orgKey) *orgData {
	o := s.orgs[k]
	if o == nil {
		o = newOrgData()
		s.orgs[k] = o
	}
	return o
}

// dropIfEmpty forgets an organization without records, so deleted data leaves nothing behind.
func (s *MemoryStore) dropIfEmpty(sc Scope) {
	if o := s.org(sc); o != nil && o.empty() {
		delete(s.orgs, keyOf(sc))
	}
}

func copyNotification(n *Notification) *Notification {
	c := *n
	c.NotifyUsers = slices.Clone(n.NotifyUsers)
	c.Recipients = slices.Clone(n.Recipients)
	return &c
}

// copyEntries copies es of the organization incarnation k out, in one allocation for the values.
func copyEntries(k orgKey, es []*entry) []*InboxEntry {
	vals := make([]InboxEntry, len(es))
	out := make([]*InboxEntry, len(es))
	for i, e := range es {
		vals[i] = e.out(k)
		out[i] = &vals[i]
	}
	return out
}

func (e *entry) out(k orgKey) InboxEntry {
	return InboxEntry{
		APIKey: k.apiKey, OrganizationID: k.orgID, OrgGen: k.orgGen, UserID: e.in.user,
		NotificationID: e.f.notificationID, DocumentID: e.f.documentID, Read: e.read, Timestamp: e.f.ts,
	}
}

// ms is t as MongoDB keeps it: milliseconds, UTC.
func ms(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()).UTC() }

func (s *MemoryStore) SetConfigs(_ context.Context, docs []Scope, userIDs []string, cfg Config) error {
	if len(docs) == 0 || len(userIDs) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.orgFor(keyOf(docs[0]))
	for _, d := range docs {
		ref := docRef{d.DocumentID, d.DocGen}
		m := o.configs[ref]
		if m == nil {
			m = make(map[string]Config, len(userIDs))
			o.configs[ref] = m
		}
		for _, u := range userIDs {
			m[u] = cfg
		}
	}
	return nil
}

func (s *MemoryStore) Configs(_ context.Context, doc Scope, userIDs []string) (map[string]Config, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[string]Config{}
	if o := s.org(doc); o != nil {
		if m := o.configs[docRef{doc.DocumentID, doc.DocGen}]; m != nil {
			for _, u := range userIDs {
				if c, ok := m[u]; ok {
					out[u] = c
				}
			}
		}
	}
	return out, nil
}

func (o *orgData) addNotification(n *Notification) {
	o.notifs[n.ID] = n
	o.all = o.all.insert(n)
	if n.DocumentID != "" {
		o.byDoc[n.DocumentID] = o.byDoc[n.DocumentID].insert(n)
	}
}

func (s *MemoryStore) AddNotification(_ context.Context, n *Notification) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.orgFor(orgKey{n.APIKey, n.OrganizationID, n.OrgGen})
	if _, ok := o.notifs[n.ID]; ok {
		return ErrExists
	}
	o.addNotification(copyNotification(n))
	return nil
}

func (s *MemoryStore) Notification(_ context.Context, org Scope, id string) (*Notification, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if o := s.org(org); o != nil {
		if n, ok := o.notifs[id]; ok {
			return copyNotification(n), nil
		}
	}
	return nil, ErrNotFound
}

func (s *MemoryStore) Notifications(_ context.Context, org Scope, ids []string) (map[string]*Notification, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[string]*Notification{}
	if o := s.org(org); o != nil {
		for _, id := range ids {
			if n, ok := o.notifs[id]; ok {
				out[id] = copyNotification(n)
			}
		}
	}
	return out, nil
}

func (s *MemoryStore) ListNotifications(_ context.Context, org Scope, l Listing, after *Position, desc bool, limit int) ([]*Notification, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	o := s.org(org)
	if o == nil || (l.IDs != nil && len(l.IDs) == 0) {
		return []*Notification{}, nil
	}
	var (
		list  sorted[*Notification]
		match func(*Notification) bool
	)
	switch {
	case l.IDs != nil:
		// Looked up one by one: a handful of ids never costs a walk over the organization.
		for _, id := range distinct(l.IDs) {
			if n, ok := o.notifs[id]; ok {
				list = append(list, n)
			}
		}
		slices.SortFunc(list, compareItems)
		if l.DocumentID != "" {
			match = func(n *Notification) bool { return n.DocumentID == l.DocumentID }
		}
	case l.DocumentID != "":
		list = o.byDoc[l.DocumentID]
	default:
		list = o.all
	}
	found := list.page(after, desc, limit, match)
	out := make([]*Notification, len(found))
	for i, n := range found {
		out[i] = copyNotification(n)
	}
	return out, nil
}

func (s *MemoryStore) FinishFanOut(_ context.Context, org Scope, id string, recipients []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.org(org)
	if o == nil || o.notifs[id] == nil {
		return ErrNotFound
	}
	n := o.notifs[id]
	n.Recipients = make([]string, len(recipients))
	for i, u := range recipients {
		// The inbox's copy of the id where there is one: every notification to the organization
		// names its members, and each would otherwise hold its own copies.
		if in := o.inboxes[u]; in != nil {
			u = in.user
		}
		n.Recipients[i] = u
	}
	n.FannedOut = true
	return nil
}

// lookup returns the user's entry of the notification id, nil when there is none.
func (o *orgData) lookup(userID, notificationID string) *entry {
	for _, f := range o.filed[notificationID] {
		if i, ok := f.find(userID); ok {
			return f.entries[i]
		}
	}
	return nil
}

// find returns where the user's entry is in f, or would go, and whether it is there.
func (f *filing) find(userID string) (int, bool) {
	return slices.BinarySearchFunc(f.entries, userID, func(e *entry, u string) int { return cmp.Compare(e.in.user, u) })
}

// filingFor returns the filing of the notification id with the document and timestamp, made
// when there is none.
func (o *orgData) filingFor(notificationID, documentID string, ts int64) *filing {
	for _, f := range o.filed[notificationID] {
		if f.documentID == documentID && f.ts == ts {
			return f
		}
	}
	f := &filing{notificationID: notificationID, documentID: documentID, ts: ts}
	o.filed[notificationID] = append(o.filed[notificationID], f)
	return f
}

// removeEntries removes gone, distinct entries of o, from their inboxes and filings.
func (o *orgData) removeEntries(gone []*entry) {
	if len(gone) == 0 {
		return
	}
	byInbox := map[*userInbox][]*entry{}
	byFiling := map[*filing][]*entry{}
	for _, e := range gone {
		byInbox[e.in] = append(byInbox[e.in], e)
		byFiling[e.f] = append(byFiling[e.f], e)
	}
	for in, es := range byInbox {
		if in.entries = in.entries.removeAll(es); len(in.entries) == 0 {
			delete(o.inboxes, in.user)
		}
	}
	for f, es := range byFiling {
		if f.entries = removeUnsorted(f.entries, es); len(f.entries) == 0 {
			o.dropFiling(f)
		}
	}
	o.entries -= len(gone)
}

// dropFiling forgets an empty filing.
func (o *orgData) dropFiling(f *filing) {
	if l := removeUnsorted(o.filed[f.notificationID], []*filing{f}); len(l) == 0 {
		delete(o.filed, f.notificationID)
	} else {
		o.filed[f.notificationID] = l
	}
}

// removeInboxOf removes the inbox entries of the notifications, distinct ids.
func (o *orgData) removeInboxOf(ids []string) {
	var gone []*entry
	for _, id := range ids {
		for _, f := range o.filed[id] {
			gone = append(gone, f.entries...)
		}
	}
	o.removeEntries(gone)
}

// removeNotifications removes ns, distinct notifications of o (not their entries), and takes
// their inbox quota counts back.
func (o *orgData) removeNotifications(ns []*Notification) {
	byDoc := map[string][]*Notification{}
	for _, n := range ns {
		delete(o.notifs, n.ID)
		if n.DocumentID != "" {
			byDoc[n.DocumentID] = append(byDoc[n.DocumentID], n)
		}
		if n.Counted {
			o.count(n.NotifyAll, userIDsOf(n.NotifyUsers), -1)
		}
	}
	o.all = o.all.removeAll(ns)
	for d, gone := range byDoc {
		if l := o.byDoc[d].removeAll(gone); len(l) == 0 {
			delete(o.byDoc, d)
		} else {
			o.byDoc[d] = l
		}
	}
}

func userIDsOf(us []User) []string {
	ids := make([]string, len(us))
	for i, u := range us {
		ids[i] = u.UserID
	}
	return ids
}

func (s *MemoryStore) removeDelivery(d *Delivery) {
	delete(s.deliveries, d.ID)
	delete(s.pending, d.ID)
	k := notifKey{d.APIKey, d.NotificationID}
	if l := removeUnsorted(s.byNotif[k], []*Delivery{d}); len(l) == 0 {
		delete(s.byNotif, k)
	} else {
		s.byNotif[k] = l
	}
}

// removePendingOf removes the pending deliveries of the notifications of an organization
// incarnation.
func (s *MemoryStore) removePendingOf(org Scope, ids []string) {
	for _, id := range ids {
		for _, d := range slices.Clone(s.byNotif[notifKey{org.APIKey, id}]) {
			if d.State == StatePending && d.OrganizationID == org.OrganizationID && d.OrgGen == org.OrgGen {
				s.removeDelivery(d)
			}
		}
	}
}

func (s *MemoryStore) DeleteNotifications(_ context.Context, org Scope, ids []string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	deleted := []string{}
	ids = distinct(ids)
	if o := s.org(org); o != nil {
		var gone []*Notification
		for _, id := range ids {
			if n, ok := o.notifs[id]; ok {
				gone = append(gone, n)
				deleted = append(deleted, id)
			}
		}
		o.removeInboxOf(ids)
		o.removeNotifications(gone)
		s.dropIfEmpty(org)
	}
	s.removePendingOf(org, ids)
	return deleted, nil
}

func (s *MemoryStore) AddInboxEntries(_ context.Context, entries []*InboxEntry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var (
		block []entry // the new entries, one allocation
		k     orgKey
		o     *orgData
		f     *filing
	)
	for i, in := range entries {
		if ik := (orgKey{in.APIKey, in.OrganizationID, in.OrgGen}); o == nil || ik != k {
			k, o, f = ik, s.orgFor(ik), nil
		}
		if o.lookup(in.UserID, in.NotificationID) != nil {
			continue
		}
		if f == nil || f.notificationID != in.NotificationID || f.documentID != in.DocumentID || f.ts != in.Timestamp {
			f = o.filingFor(in.NotificationID, in.DocumentID, in.Timestamp)
		}
		ib := o.inboxes[in.UserID]
		if ib == nil {
			ib = &userInbox{user: in.UserID}
			o.inboxes[in.UserID] = ib
		}
		if len(block) == 0 {
			block = make([]entry, len(entries)-i)
		}
		e := &block[0]
		block = block[1:]
		e.f, e.in = f, ib
		// Members come in user-id order, so this is nearly always an append.
		at, _ := f.find(ib.user)
		f.entries = slices.Insert(f.entries, at, e)
		ib.entries = ib.entries.insert(e)
		o.entries++
	}
	return nil
}

func (s *MemoryStore) Inbox(_ context.Context, org Scope, userID string, after *Position, desc bool, limit int) ([]*InboxEntry, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	o := s.org(org)
	if o == nil || o.inboxes[userID] == nil {
		return []*InboxEntry{}, nil
	}
	return copyEntries(keyOf(org), o.inboxes[userID].entries.page(after, desc, limit, nil)), nil
}

func (s *MemoryStore) InboxEntries(_ context.Context, org Scope, userID string, notificationIDs []string) (map[string]*InboxEntry, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[string]*InboxEntry{}
	if o := s.org(org); o != nil {
		for _, id := range notificationIDs {
			if e := o.lookup(userID, id); e != nil {
				c := e.out(keyOf(org))
				out[id] = &c
			}
		}
	}
	return out, nil
}

func (s *MemoryStore) ReadBy(_ context.Context, org Scope, notificationIDs []string) (map[string][]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[string][]string{}
	if o := s.org(org); o != nil {
		for _, id := range notificationIDs {
			var users []string
			for _, f := range o.filed[id] {
				for _, e := range f.entries {
					if e.read {
						users = append(users, e.in.user)
					}
				}
			}
			if len(users) > 0 {
				slices.Sort(users)
				out[id] = users
			}
		}
	}
	return out, nil
}

func (s *MemoryStore) SetRead(_ context.Context, org Scope, notificationID string, userIDs []string, read bool) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.org(org)
	if o == nil {
		return 0, nil
	}
	n := 0
	for _, u := range distinct(userIDs) {
		if e := o.lookup(u, notificationID); e != nil {
			e.read = read
			n++
		}
	}
	return n, nil
}

func (s *MemoryStore) DeleteOrganization(_ context.Context, org Scope) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.orgs, keyOf(org))
	for _, d := range s.pending {
		if d.APIKey == org.APIKey && d.OrganizationID == org.OrganizationID && d.OrgGen == org.OrgGen {
			s.removeDelivery(d) // deleting while ranging over a map is allowed
		}
	}
	return nil
}

// ofDocument returns the notifications of a document incarnation, sorted.
func (o *orgData) ofDocument(doc Scope) sorted[*Notification] {
	var out sorted[*Notification]
	for _, n := range o.byDoc[doc.DocumentID] {
		if n.DocGen == doc.DocGen {
			out = append(out, n)
		}
	}
	return out
}

func idsOfNotifications(ns []*Notification) []string {
	ids := make([]string, len(ns))
	for i, n := range ns {
		ids[i] = n.ID
	}
	return ids
}

func (s *MemoryStore) DeleteDocument(_ context.Context, doc Scope) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.org(doc)
	if o == nil || doc.DocumentID == "" {
		return nil
	}
	delete(o.configs, docRef{doc.DocumentID, doc.DocGen})
	gone := o.ofDocument(doc)
	ids := idsOfNotifications(gone)
	o.removeInboxOf(ids)
	o.removeNotifications(gone)
	s.removePendingOf(doc, ids)
	s.dropIfEmpty(doc)
	return nil
}

func (s *MemoryStore) MoveDocument(_ context.Context, doc Scope, to string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.org(doc)
	from := doc.DocumentID
	if o == nil || from == "" || from == to {
		return nil
	}
	// Configs: those the target already has (set since a partial move) stand.
	if m := o.configs[docRef{from, doc.DocGen}]; m != nil {
		ref := docRef{to, doc.DocGen}
		if o.configs[ref] == nil {
			o.configs[ref] = make(map[string]Config, len(m))
		}
		for u, c := range m {
			if _, ok := o.configs[ref][u]; !ok {
				o.configs[ref][u] = c
			}
		}
		delete(o.configs, docRef{from, doc.DocGen})
	}
	moving := o.ofDocument(doc)
	if len(moving) == 0 {
		return nil
	}
	if l := o.byDoc[from].removeAll(moving); len(l) == 0 {
		delete(o.byDoc, from)
	} else {
		o.byDoc[from] = l
	}
	for _, n := range moving {
		n.DocumentID = to
		for _, f := range o.filed[n.ID] {
			f.documentID = to
		}
	}
	if to != "" {
		o.byDoc[to] = o.byDoc[to].merge(moving)
	}
	return nil
}

func (s *MemoryStore) RemoveUsers(_ context.Context, scope Scope, userIDs []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.org(scope)
	if o == nil {
		return nil
	}
	userIDs = distinct(userIDs)
	refs := slices.Collect(maps.Keys(o.configs))
	if scope.DocumentID != "" {
		refs = []docRef{{scope.DocumentID, scope.DocGen}}
	}
	for _, ref := range refs {
		if m := o.configs[ref]; m != nil {
			for _, u := range userIDs {
				delete(m, u)
			}
			if len(m) == 0 {
				delete(o.configs, ref)
			}
		}
	}
	var gone []*entry
	for _, u := range userIDs {
		if in := o.inboxes[u]; in != nil {
			for _, e := range in.entries {
				if scope.DocumentID == "" || e.f.documentID == scope.DocumentID {
					gone = append(gone, e)
				}
			}
		}
	}
	o.removeEntries(gone)
	// Their unsent mail goes too: a removed user is sent nothing more.
	removed := map[string]bool{}
	for _, u := range userIDs {
		removed[u] = true
	}
	for _, d := range s.pending {
		if d.APIKey == scope.APIKey && d.OrganizationID == scope.OrganizationID && d.OrgGen == scope.OrgGen && removed[d.UserID] &&
			(scope.DocumentID == "" || d.DocumentID == scope.DocumentID) {
			s.removeDelivery(d) // deleting while ranging over a map is allowed
		}
	}
	s.dropIfEmpty(scope)
	return nil
}

func (s *MemoryStore) QueueDeliveries(_ context.Context, ds []*Delivery) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range ds {
		if _, ok := s.deliveries[in.ID]; ok {
			continue
		}
		d := *in
		d.NextAttempt, d.LeaseUntil, d.CreatedAt, d.SentAt = ms(d.NextAttempt), ms(d.LeaseUntil), ms(d.CreatedAt), ms(d.SentAt)
		s.deliveries[d.ID] = &d
		if d.State == StatePending {
			s.pending[d.ID] = &d
		}
		k := notifKey{d.APIKey, d.NotificationID}
		s.byNotif[k] = append(s.byNotif[k], &d)
	}
	return nil
}

func due(d *Delivery, now time.Time) bool {
	return d.State == StatePending && !d.NextAttempt.After(now) && !d.LeaseUntil.After(now)
}

func compareDeliveries(a, b *Delivery) int {
	return cmp.Or(a.NextAttempt.Compare(b.NextAttempt), cmp.Compare(a.ID, b.ID))
}

func (s *MemoryStore) DueDeliveries(_ context.Context, now time.Time, limit int) ([]*Delivery, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	now = ms(now)
	var found []*Delivery
	for _, d := range s.pending {
		if due(d, now) {
			found = append(found, d)
		}
	}
	slices.SortFunc(found, compareDeliveries)
	if limit > 0 && len(found) > limit {
		found = found[:limit]
	}
	out := make([]*Delivery, len(found))
	for i, d := range found {
		c := *d
		out[i] = &c
	}
	return out, nil
}

func (s *MemoryStore) ClaimDelivery(_ context.Context, id string, now, until time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.pending[id]
	if !ok || !due(d, ms(now)) {
		return false, nil
	}
	d.LeaseUntil = ms(until)
	return true, nil
}

func checkState(state string) error {
	switch state {
	case StatePending, StateSent, StateFailed:
		return nil
	}
	return fmt.Errorf("notifications store: finish delivery: unknown state %q", state)
}

func (s *MemoryStore) FinishDelivery(_ context.Context, id, state string, attempts int, next time.Time, lastErr string, now time.Time) error {
	if err := checkState(state); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.deliveries[id]
	if !ok {
		return ErrNotFound
	}
	d.State, d.Attempts, d.NextAttempt, d.LastError, d.LeaseUntil = state, attempts, ms(next), lastErr, time.Time{}
	if state == StateSent {
		d.SentAt = ms(now)
	}
	if state == StatePending {
		s.pending[id] = d
	} else {
		delete(s.pending, id)
	}
	return nil
}

func (s *MemoryStore) Delivery(_ context.Context, id string) (*Delivery, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d, ok := s.deliveries[id]
	if !ok {
		return nil, ErrNotFound
	}
	c := *d
	return &c, nil
}

func (s *MemoryStore) Deliveries(_ context.Context, apiKey, notificationID string) ([]*Delivery, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	l := s.byNotif[notifKey{apiKey, notificationID}]
	out := make([]*Delivery, len(l))
	for i, d := range l {
		c := *d
		out[i] = &c
	}
	slices.SortFunc(out, func(a, b *Delivery) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

func (s *MemoryStore) PruneDeliveries(_ context.Context, before time.Time) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	before = ms(before)
	var n int64
	for _, d := range s.deliveries {
		if d.State != StatePending && d.CreatedAt.Before(before) {
			s.removeDelivery(d) // deleting while ranging over a map is allowed
			n++
		}
	}
	return n, nil
}

func (s *MemoryStore) Ping(context.Context) error { return nil }

var _ Store = (*MemoryStore)(nil)

// count adds d to the inbox quota counts of a notification: everyone's when all, else the
// users'. A count never goes below zero.
func (o *orgData) count(all bool, userIDs []string, d int) {
	if all {
		o.everyone = max(0, o.everyone+d)
		return
	}
	for _, u := range distinct(userIDs) {
		if c := o.named[u] + d; c > 0 {
			o.named[u] = c
		} else {
			delete(o.named, u)
		}
	}
}

func (s *MemoryStore) TakeRecipients(_ context.Context, workspaceID string, minute int64, n, limit int) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if minute > s.sweptAt { // the minutes before the last are over
		for k := range s.recipients {
			if k.minute < minute-1 {
				delete(s.recipients, k)
			}
		}
		s.sweptAt = minute
	}
	k := minuteKey{workspaceID, minute}
	if limit > 0 && s.recipients[k]+n > limit {
		return false, nil
	}
	s.recipients[k] += n
	return true, nil
}

func (s *MemoryStore) ReturnRecipients(_ context.Context, workspaceID string, minute int64, n int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := minuteKey{workspaceID, minute}
	if c := s.recipients[k] - n; c > 0 {
		s.recipients[k] = c
	} else {
		delete(s.recipients, k)
	}
	return nil
}

func (s *MemoryStore) TakeInbox(_ context.Context, org Scope, all bool, userIDs []string, limit int) (*InboxFull, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.orgFor(keyOf(org))
	if limit > 0 {
		if full := o.full(all, userIDs, limit); full != nil {
			s.dropIfEmpty(org)
			return full, nil
		}
	}
	o.count(all, userIDs, 1)
	return nil, nil
}

// full returns the inbox one more notification would put past limit, nil when there is none.
func (o *orgData) full(all bool, userIDs []string, limit int) *InboxFull {
	if !all {
		for _, u := range distinct(userIDs) {
			if c := o.everyone + o.named[u]; c >= limit {
				return &InboxFull{UserID: u, Count: c}
			}
		}
		return nil
	}
	worst := &InboxFull{Count: o.everyone}
	for u, c := range o.named {
		if c := o.everyone + c; c > worst.Count || c == worst.Count && worst.UserID != "" && u < worst.UserID {
			worst = &InboxFull{UserID: u, Count: c}
		}
	}
	if worst.Count >= limit {
		return worst
	}
	return nil
}

func (s *MemoryStore) ReturnInbox(_ context.Context, org Scope, all bool, userIDs []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.org(org); o != nil {
		o.count(all, userIDs, -1)
		s.dropIfEmpty(org)
	}
	return nil
}

func (s *MemoryStore) InboxCount(_ context.Context, org Scope, userID string) (int, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if o := s.org(org); o != nil {
		return o.everyone + o.named[userID], nil
	}
	return 0, nil
}
