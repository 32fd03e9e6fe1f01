package notifications

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/collab/collab/internal/mongodb"
)

// MongoStore keeps the notifications service's data in MongoDB, one document per fact so that
// every write is a single-document operation or a batch of them whose repeat finishes a partial
// run, and no transaction is needed:
//
//   - configs: one user's config of one document incarnation;
//     _id = (apiKey, org, orgGen, doc, docGen, user)
//   - notifications: a notification; _id = (apiKey, org, orgGen, id)
//   - entries: one recipient's inbox entry of a notification, a small reference (entryDoc);
//     _id = a hash of (apiKey, org, orgGen, user, notification)
//   - deliveries: a message to send; _id = Delivery.ID, fixed by what it delivers
//   - recipients: the recipients a workspace's notifications reached in a minute (the fan-out
//     quota); _id = (workspace, minute)
//   - inbox_counts: the inbox quota's counts of an organization incarnation, one for its
//     notifications to everyone and one per user named; _id = (apiKey, org, orgGen, user or "")
//
// The compound _ids make a notification unique by id in its organization incarnation, an inbox
// entry unique per user and notification and a delivery unique by id, on any MongoDB-wire
// server and under concurrent writers: a repeated batch inserts nothing twice. Listings walk an
// index on (apiKey, organizationId, orgGen, [documentId,] ts, id), or for an inbox (s, u, t, n),
// from a keyset condition, never skipping, so a deep page costs what the first does.
//
// Every organization-scoped query names (apiKey, organizationId, orgGen), or for entries the
// hash of the three (s): records written under another generation are neither read nor
// written, except by the deletes named for them.
//
// Inbox entries of the shape before issue 20 (collection inbox: every field in full, and the
// headline rendered for the recipient) are moved to entries when the store starts
// (migrateInbox); the headline is rendered when read now.
//
// Where store.go leaves room, both stores (and the suite) hold to this:
//   - limit <= 0 lists everything (ListNotifications, Inbox, DueDeliveries); a Listing with a
//     non-nil empty IDs selects nothing; a DocumentID listing covers every incarnation of it.
//   - ReadBy leaves out the notifications nobody has read; the users are sorted.
//   - DueDeliveries orders by (NextAttempt, ID); Deliveries by ID.
//   - DeleteNotifications, DeleteDocument and MoveDocument reach inbox entries through their
//     notification ids (the entries of a deleted id go even when the notification is already
//     gone); DeleteDocument and MoveDocument take the notifications whose (documentId, docGen)
//     are the incarnation's.
//   - RemoveUsers of a document removes the configs of that incarnation (documentId and
//     docGen) and the entries whose documentId is the document's (any docGen).
//   - MoveDocument leaves a config the target incarnation has already as it is.
//   - FinishDelivery refuses a state that is not pending, sent or failed; it sets SentAt (to
//     now) only for sent.
type MongoStore struct {
	// claimMu serialises this process's delivery claims. On MongoDB a claim is one atomic
	// conditional update, so two processes never both win it; FerretDB's conditional updates are
	// not atomic (it reads, tests and writes the document back without a lock), so two concurrent
	// claims could both match. The embedded FerretDB serves one process, which the lock covers.
	claimMu sync.Mutex
	// quotaMu serialises this process's changes of the quota counts, for the same reason: on
	// FerretDB two concurrent $inc of one count can count one.
	quotaMu sync.Mutex
	// sweptMinute is the minute the recipients counts were last swept behind (under quotaMu).
	sweptMinute int64

	db            *mongo.Database
	configs       *mongo.Collection
	notifications *mongo.Collection
	entries       *mongo.Collection
	deliveries    *mongo.Collection
	recipients    *mongo.Collection
	inboxCounts   *mongo.Collection
}

// batchSize is how many documents one insert or one $in carries.
const batchSize = 1000

// NewMongoStore returns a store on db and creates its indexes.
func NewMongoStore(ctx context.Context, db *mongo.Database) (*MongoStore, error) {
	s := &MongoStore{
		db:            db,
		configs:       db.Collection("configs"),
		notifications: db.Collection("notifications"),
		entries:       db.Collection("entries"),
		deliveries:    db.Collection("deliveries"),
		recipients:    db.Collection("recipients"),
		inboxCounts:   db.Collection("inbox_counts"),
	}
	index := mongodb.Index
	for _, c := range []struct {
		coll   *mongo.Collection
		models []mongo.IndexModel
	}{
		{s.configs, []mongo.IndexModel{
			// DeleteDocument, MoveDocument, RemoveUsers of a document.
			index("document", "apiKey", "organizationId", "orgGen", "documentId", "docGen", "userId"),
			// RemoveUsers of the organization.
			index("user", "apiKey", "organizationId", "orgGen", "userId"),
		}},
		{s.notifications, []mongo.IndexModel{
			index("org_ts", "apiKey", "organizationId", "orgGen", "ts", "id"),
			index("document_ts", "apiKey", "organizationId", "orgGen", "documentId", "ts", "id"),
		}},
		{s.entries, []mongo.IndexModel{
			index("inbox", "s", "u", "t", "n"),
			index("notification", "s", "n"),
		}},
		{s.recipients, []mongo.IndexModel{index("minute", "minute")}},
		{s.inboxCounts, []mongo.IndexModel{index("count", "apiKey", "organizationId", "orgGen", "n")}},
		{s.deliveries, []mongo.IndexModel{
			index("due", "state", "next", "_id"),
			index("notification", "apiKey", "notificationId"),
			index("finished", "state", "createdAt"), // PruneDeliveries
		}},
	} {
		if err := mongodb.EnsureIndexes(ctx, c.coll, c.models...); err != nil {
			return nil, fmt.Errorf("notifications store: %w", err)
		}
	}
	if err := s.migrateInbox(ctx); err != nil {
		return nil, fmt.Errorf("notifications store: %w", err)
	}
	return s, nil
}

// Stored forms: the record's fields and its compound _id.
type (
	configDoc struct {
		Key            string `bson:"_id"`
		APIKey         string `bson:"apiKey"`
		OrganizationID string `bson:"organizationId"`
		OrgGen         string `bson:"orgGen"`
		DocumentID     string `bson:"documentId"`
		DocGen         string `bson:"docGen"`
		UserID         string `bson:"userId"`
		Config         `bson:",inline"`
	}
	notificationDoc struct {
		Key          string `bson:"_id"`
		Notification `bson:",inline"`
	}
	// entryDoc is an inbox entry as stored: hashes for its _id and its organization incarnation,
	// short field names, and the read flag only when set, so that an entry costs about 90 bytes
	// and its ids.
	entryDoc struct {
		Key            []byte `bson:"_id"` // entryKey
		Org            []byte `bson:"s"`   // orgHash
		UserID         string `bson:"u"`
		NotificationID string `bson:"n"`
		Timestamp      int64  `bson:"t"`
		DocumentID     string `bson:"d"`
		Read           bool   `bson:"r,omitempty"`
	}
)

func configKey(org Scope, docID, docGen, userID string) string {
	return mongodb.Key(org.APIKey, org.OrganizationID, org.OrgGen, docID, docGen, userID)
}

func notificationKey(org Scope, id string) string {
	return mongodb.Key(org.APIKey, org.OrganizationID, org.OrgGen, id)
}

func notificationKeys(org Scope, ids []string) []string {
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = notificationKey(org, id)
	}
	return keys
}

// hashLen is the length of the hashes entries are keyed by: 128 bits, so that no two
// organizations or entries ever share one.
const hashLen = 16

func hashOf(parts ...string) []byte {
	sum := sha256.Sum256([]byte(mongodb.Key(parts...)))
	return sum[:hashLen]
}

// orgHash names an organization incarnation in its entries (s).
func orgHash(org Scope) []byte {
	return hashOf("org", org.APIKey, org.OrganizationID, org.OrgGen)
}

// entryKey is the _id of a user's entry of a notification.
func entryKey(org Scope, userID, notificationID string) []byte {
	return hashOf("entry", org.APIKey, org.OrganizationID, org.OrgGen, userID, notificationID)
}

func entryKeys(org Scope, userID string, notificationIDs []string) [][]byte {
	keys := make([][]byte, len(notificationIDs))
	for i, id := range notificationIDs {
		keys[i] = entryKey(org, userID, id)
	}
	return keys
}

// entriesIn selects the entries of an organization incarnation.
func entriesIn(org Scope) bson.D { return bson.D{{Key: "s", Value: orgHash(org)}} }

func (d *entryDoc) entry(org Scope) *InboxEntry {
	return &InboxEntry{
		APIKey: org.APIKey, OrganizationID: org.OrganizationID, OrgGen: org.OrgGen, UserID: d.UserID,
		NotificationID: d.NotificationID, DocumentID: d.DocumentID, Read: d.Read, Timestamp: d.Timestamp,
	}
}

// orgFilter selects the records of an organization incarnation.
func orgFilter(org Scope) bson.D {
	return bson.D{{Key: "apiKey", Value: org.APIKey}, {Key: "organizationId", Value: org.OrganizationID}, {Key: "orgGen", Value: org.OrgGen}}
}

func with(q bson.D, kvs ...bson.E) bson.D { return append(slices.Clone(q), kvs...) }

// anyOf matches any of vs.
func anyOf[T any](vs []T) bson.M { return bson.M{"$in": vs} }

// chunks cuts vs into slices of at most batchSize.
func chunks[T any](vs []T) [][]T { return slices.Collect(slices.Chunk(vs, batchSize)) }

func (s *MongoStore) SetConfigs(ctx context.Context, docs []Scope, userIDs []string, cfg Config) error {
	if len(docs) == 0 || len(userIDs) == 0 {
		return nil
	}
	org := docs[0]
	var models []mongo.WriteModel
	for _, d := range docs {
		for _, u := range userIDs {
			doc := configDoc{
				Key:    configKey(org, d.DocumentID, d.DocGen, u),
				APIKey: org.APIKey, OrganizationID: org.OrganizationID, OrgGen: org.OrgGen,
				DocumentID: d.DocumentID, DocGen: d.DocGen, UserID: u, Config: cfg,
			}
			models = append(models, mongo.NewReplaceOneModel().SetFilter(bson.M{"_id": doc.Key}).SetReplacement(doc).SetUpsert(true))
		}
	}
	for _, batch := range chunks(models) {
		var err error
		for range 2 { // a concurrent creation of the same config loses with a duplicate key once
			if _, err = s.configs.BulkWrite(ctx, batch, options.BulkWrite().SetOrdered(false)); err == nil || !mongodb.IsDuplicateKey(err) {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("notifications store: set configs: %w", err)
		}
	}
	return nil
}

func (s *MongoStore) Configs(ctx context.Context, doc Scope, userIDs []string) (map[string]Config, error) {
	out := map[string]Config{}
	for _, batch := range chunks(userIDs) {
		keys := make([]string, len(batch))
		for i, u := range batch {
			keys[i] = configKey(doc, doc.DocumentID, doc.DocGen, u)
		}
		var found []configDoc
		if err := s.findAll(ctx, s.configs, bson.M{"_id": anyOf(keys)}, &found); err != nil {
			return nil, fmt.Errorf("notifications store: configs: %w", err)
		}
		for _, c := range found {
			out[c.UserID] = c.Config
		}
	}
	return out, nil
}

func (s *MongoStore) findAll(ctx context.Context, coll *mongo.Collection, q any, out any, opts ...options.Lister[options.FindOptions]) error {
	cur, err := coll.Find(ctx, q, opts...)
	if err != nil {
		return err
	}
	return cur.All(ctx, out)
}

func (s *MongoStore) AddNotification(ctx context.Context, n *Notification) error {
	org := Scope{APIKey: n.APIKey, OrganizationID: n.OrganizationID, OrgGen: n.OrgGen}
	_, err := s.notifications.InsertOne(ctx, notificationDoc{Key: notificationKey(org, n.ID), Notification: *n})
	switch {
	case mongodb.IsDuplicateKey(err):
		return ErrExists
	case err != nil:
		return fmt.Errorf("notifications store: add notification: %w", err)
	}
	return nil
}

func (s *MongoStore) Notification(ctx context.Context, org Scope, id string) (*Notification, error) {
	var n Notification
	if err := s.notifications.FindOne(ctx, bson.M{"_id": notificationKey(org, id)}).Decode(&n); err != nil {
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("notifications store: notification: %w", err)
	}
	return &n, nil
}

func (s *MongoStore) Notifications(ctx context.Context, org Scope, ids []string) (map[string]*Notification, error) {
	out, err := s.notificationsByID(ctx, org, ids, nil)
	if err != nil {
		return nil, fmt.Errorf("notifications store: notifications: %w", err)
	}
	return out, nil
}

// notificationsByID returns the notifications among ids that exist, keyed by id, with the
// fields of projection (nil: all).
func (s *MongoStore) notificationsByID(ctx context.Context, org Scope, ids []string, projection any) (map[string]*Notification, error) {
	out := map[string]*Notification{}
	opts := options.Find()
	if projection != nil {
		opts.SetProjection(projection)
	}
	for _, batch := range chunks(distinct(ids)) {
		var found []*Notification
		if err := s.findAll(ctx, s.notifications, bson.M{"_id": anyOf(notificationKeys(org, batch))}, &found, opts); err != nil {
			return nil, err
		}
		for _, n := range found {
			out[n.ID] = n
		}
	}
	return out, nil
}

// keyset adds to q the condition "strictly after `after`" in the order (tsField, idField), and
// returns the sort of that order.
func keyset(q bson.D, tsField, idField string, after *Position, desc bool) (bson.D, bson.D) {
	dir, beyond := 1, "$gt"
	if desc {
		dir, beyond = -1, "$lt"
	}
	if after != nil {
		q = append(q, bson.E{Key: "$or", Value: bson.A{
			bson.M{tsField: bson.M{beyond: after.Timestamp}},
			bson.D{{Key: tsField, Value: after.Timestamp}, {Key: idField, Value: bson.M{beyond: after.ID}}},
		}})
	}
	return q, bson.D{{Key: tsField, Value: dir}, {Key: idField, Value: dir}}
}

func (s *MongoStore) ListNotifications(ctx context.Context, org Scope, l Listing, after *Position, desc bool, limit int) ([]*Notification, error) {
	out := []*Notification{}
	if l.IDs != nil && len(l.IDs) == 0 {
		return out, nil
	}
	q := orgFilter(org)
	if l.DocumentID != "" {
		q = append(q, bson.E{Key: "documentId", Value: l.DocumentID})
	}
	if l.IDs != nil {
		q = append(q, bson.E{Key: "_id", Value: anyOf(notificationKeys(org, distinct(l.IDs)))})
	}
	q, order := keyset(q, "ts", "id", after, desc)
	opts := options.Find().SetSort(order)
	if limit > 0 {
		opts.SetLimit(int64(limit))
	}
	if err := s.findAll(ctx, s.notifications, q, &out, opts); err != nil {
		return nil, fmt.Errorf("notifications store: list notifications: %w", err)
	}
	return out, nil
}

func (s *MongoStore) FinishFanOut(ctx context.Context, org Scope, id string, recipients []string) error {
	res, err := s.notifications.UpdateOne(ctx, bson.M{"_id": notificationKey(org, id)},
		bson.M{"$set": bson.M{"recipients": recipients, "fannedOut": true}})
	if err != nil {
		return fmt.Errorf("notifications store: finish fan-out: %w", err)
	}
	if res.MatchedCount == 0 {
		return ErrNotFound
	}
	return nil
}

// deletion is what deleting a notification needs to know of it: its id, and what it counts in
// the inbox quota.
type deletion struct {
	ID          string `bson:"id"`
	NotifyAll   bool   `bson:"notifyAll"`
	NotifyUsers []struct {
		UserID string `bson:"userId"`
	} `bson:"notifyUsers"`
	Counted bool `bson:"counted"`
}

var deletionFields = bson.M{"_id": 0, "id": 1, "notifyAll": 1, "notifyUsers.userId": 1, "counted": 1}

// deleteOf removes the notifications ids of the organization incarnation with their inbox
// entries and pending deliveries: the notifications last, so that a run cut short leaves them
// to be found, and removed whole, by the next. counted are those of them found counted in the
// inbox quota: each is deleted alone, and the run that deletes it takes its count back (a run
// cut short between the two leaves the count higher than it is, never lower).
func (s *MongoStore) deleteOf(ctx context.Context, org Scope, ids []string, counted []deletion) error {
	for _, batch := range chunks(ids) {
		if _, err := s.entries.DeleteMany(ctx, with(entriesIn(org), bson.E{Key: "n", Value: anyOf(batch)})); err != nil {
			return fmt.Errorf("entries: %w", err)
		}
		if _, err := s.deliveries.DeleteMany(ctx, with(orgFilter(org),
			bson.E{Key: "notificationId", Value: anyOf(batch)}, bson.E{Key: "state", Value: StatePending})); err != nil {
			return fmt.Errorf("deliveries: %w", err)
		}
	}
	for _, d := range counted {
		res, err := s.notifications.DeleteOne(ctx, bson.M{"_id": notificationKey(org, d.ID), "counted": true})
		if err != nil {
			return fmt.Errorf("notifications: %w", err)
		}
		if res.DeletedCount == 1 {
			users := make([]string, len(d.NotifyUsers))
			for i, u := range d.NotifyUsers {
				users[i] = u.UserID
			}
			if err := s.count(ctx, org, d.NotifyAll, users, -1); err != nil {
				return err
			}
		}
	}
	for _, batch := range chunks(ids) {
		if _, err := s.notifications.DeleteMany(ctx, bson.M{"_id": anyOf(notificationKeys(org, batch))}); err != nil {
			return fmt.Errorf("notifications: %w", err)
		}
	}
	return nil
}

// deletions reads what deleting notifications matching q needs: their ids, and those counted
// in the inbox quota.
func (s *MongoStore) deletions(ctx context.Context, q any) (ids []string, counted []deletion, err error) {
	var found []deletion
	if err := s.findAll(ctx, s.notifications, q, &found, options.Find().SetProjection(deletionFields)); err != nil {
		return nil, nil, err
	}
	ids = make([]string, len(found))
	for i, d := range found {
		ids[i] = d.ID
		if d.Counted {
			counted = append(counted, d)
		}
	}
	return ids, counted, nil
}

func (s *MongoStore) DeleteNotifications(ctx context.Context, org Scope, ids []string) ([]string, error) {
	ids = distinct(ids)
	existed := map[string]bool{}
	var counted []deletion
	for _, batch := range chunks(ids) {
		found, c, err := s.deletions(ctx, bson.M{"_id": anyOf(notificationKeys(org, batch))})
		if err != nil {
			return nil, fmt.Errorf("notifications store: delete notifications: %w", err)
		}
		for _, id := range found {
			existed[id] = true
		}
		counted = append(counted, c...)
	}
	if err := s.deleteOf(ctx, org, ids, counted); err != nil {
		return nil, fmt.Errorf("notifications store: delete notifications: %w", err)
	}
	deleted := []string{}
	for _, id := range ids {
		if existed[id] {
			deleted = append(deleted, id)
		}
	}
	return deleted, nil
}

func (s *MongoStore) AddInboxEntries(ctx context.Context, entries []*InboxEntry) error {
	docs := make([]entryDoc, len(entries))
	var (
		org  Scope
		hash []byte
	)
	for i, e := range entries {
		if sc := (Scope{APIKey: e.APIKey, OrganizationID: e.OrganizationID, OrgGen: e.OrgGen}); hash == nil || sc != org {
			org, hash = sc, orgHash(sc)
		}
		docs[i] = entryDoc{Key: entryKey(org, e.UserID, e.NotificationID), Org: hash, UserID: e.UserID,
			NotificationID: e.NotificationID, Timestamp: e.Timestamp, DocumentID: e.DocumentID, Read: e.Read}
	}
	if err := mongodb.InsertNew(ctx, s.entries, docs, batchSize); err != nil {
		return fmt.Errorf("notifications store: add inbox entries: %w", err)
	}
	return nil
}

func (s *MongoStore) Inbox(ctx context.Context, org Scope, userID string, after *Position, desc bool, limit int) ([]*InboxEntry, error) {
	q, order := keyset(with(entriesIn(org), bson.E{Key: "u", Value: userID}), "t", "n", after, desc)
	opts := options.Find().SetSort(order)
	if limit > 0 {
		opts.SetLimit(int64(limit))
	}
	var found []entryDoc
	if err := s.findAll(ctx, s.entries, q, &found, opts); err != nil {
		return nil, fmt.Errorf("notifications store: inbox: %w", err)
	}
	out := make([]*InboxEntry, len(found))
	for i := range found {
		out[i] = found[i].entry(org)
	}
	return out, nil
}

func (s *MongoStore) InboxEntries(ctx context.Context, org Scope, userID string, notificationIDs []string) (map[string]*InboxEntry, error) {
	out := map[string]*InboxEntry{}
	for _, batch := range chunks(distinct(notificationIDs)) {
		var found []entryDoc
		if err := s.findAll(ctx, s.entries, bson.M{"_id": anyOf(entryKeys(org, userID, batch))}, &found); err != nil {
			return nil, fmt.Errorf("notifications store: inbox entries: %w", err)
		}
		for i := range found {
			out[found[i].NotificationID] = found[i].entry(org)
		}
	}
	return out, nil
}

func (s *MongoStore) ReadBy(ctx context.Context, org Scope, notificationIDs []string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, batch := range chunks(distinct(notificationIDs)) {
		var found []entryDoc
		q := with(entriesIn(org), bson.E{Key: "n", Value: anyOf(batch)}, bson.E{Key: "r", Value: true})
		if err := s.findAll(ctx, s.entries, q, &found, options.Find().SetProjection(bson.M{"_id": 0, "n": 1, "u": 1})); err != nil {
			return nil, fmt.Errorf("notifications store: read by: %w", err)
		}
		for _, e := range found {
			out[e.NotificationID] = append(out[e.NotificationID], e.UserID)
		}
	}
	for _, users := range out {
		slices.Sort(users)
	}
	return out, nil
}

func (s *MongoStore) SetRead(ctx context.Context, org Scope, notificationID string, userIDs []string, read bool) (int, error) {
	// Unread is the field's absence, as AddInboxEntries writes it.
	update := bson.M{"$set": bson.M{"r": true}}
	if !read {
		update = bson.M{"$unset": bson.M{"r": ""}}
	}
	n := 0
	for _, batch := range chunks(distinct(userIDs)) {
		keys := make([][]byte, len(batch))
		for i, u := range batch {
			keys[i] = entryKey(org, u, notificationID)
		}
		res, err := s.entries.UpdateMany(ctx, bson.M{"_id": anyOf(keys)}, update)
		if err != nil {
			return n, fmt.Errorf("notifications store: set read: %w", err)
		}
		n += int(res.MatchedCount)
	}
	return n, nil
}

func (s *MongoStore) DeleteOrganization(ctx context.Context, org Scope) error {
	for _, c := range []struct {
		name string
		coll *mongo.Collection
		q    bson.D
	}{
		{"entries", s.entries, entriesIn(org)},
		{"deliveries", s.deliveries, with(orgFilter(org), bson.E{Key: "state", Value: StatePending})},
		{"notifications", s.notifications, orgFilter(org)},
		{"configs", s.configs, orgFilter(org)},
		{"inbox counts", s.inboxCounts, orgFilter(org)},
	} {
		if _, err := c.coll.DeleteMany(ctx, c.q); err != nil {
			return fmt.Errorf("notifications store: delete organization: %s: %w", c.name, err)
		}
	}
	return nil
}

// ofDocument selects the notifications of a document incarnation.
func ofDocument(doc Scope) bson.D {
	return with(orgFilter(doc), bson.E{Key: "documentId", Value: doc.DocumentID}, bson.E{Key: "docGen", Value: doc.DocGen})
}

// documentConfigs selects the configs of a document incarnation.
func documentConfigs(doc Scope) bson.D {
	return with(orgFilter(doc), bson.E{Key: "documentId", Value: doc.DocumentID}, bson.E{Key: "docGen", Value: doc.DocGen})
}

func (s *MongoStore) DeleteDocument(ctx context.Context, doc Scope) error {
	if doc.DocumentID == "" { // records of no document belong to none
		return nil
	}
	if _, err := s.configs.DeleteMany(ctx, documentConfigs(doc)); err != nil {
		return fmt.Errorf("notifications store: delete document: configs: %w", err)
	}
	ids, counted, err := s.deletions(ctx, ofDocument(doc))
	if err != nil {
		return fmt.Errorf("notifications store: delete document: %w", err)
	}
	if err := s.deleteOf(ctx, doc, ids, counted); err != nil {
		return fmt.Errorf("notifications store: delete document: %w", err)
	}
	return nil
}

func (s *MongoStore) MoveDocument(ctx context.Context, doc Scope, to string) error {
	if doc.DocumentID == "" || doc.DocumentID == to {
		return nil
	}
	// Configs: their _id names the document, so each moves as an insert under the new _id,
	// then a delete of the old. A config the target has already (set since a partial move, or
	// inserted by it) stands.
	var configs []configDoc
	if err := s.findAll(ctx, s.configs, documentConfigs(doc), &configs); err != nil {
		return fmt.Errorf("notifications store: move document: configs: %w", err)
	}
	if len(configs) > 0 {
		old := make([]string, len(configs))
		for i := range configs {
			c := &configs[i]
			old[i] = c.Key
			c.DocumentID, c.Key = to, configKey(doc, to, c.DocGen, c.UserID)
		}
		if err := mongodb.InsertNew(ctx, s.configs, configs, batchSize); err != nil {
			return fmt.Errorf("notifications store: move document: configs: %w", err)
		}
		for _, batch := range chunks(old) {
			if _, err := s.configs.DeleteMany(ctx, bson.M{"_id": anyOf(batch)}); err != nil {
				return fmt.Errorf("notifications store: move document: configs: %w", err)
			}
		}
	}
	// Notifications with their inbox entries, the entries first: a run cut short leaves the
	// notifications under the old id, where the next run finds them.
	ids, _, err := s.deletions(ctx, ofDocument(doc))
	if err != nil {
		return fmt.Errorf("notifications store: move document: %w", err)
	}
	for _, batch := range chunks(ids) {
		if _, err := s.entries.UpdateMany(ctx, with(entriesIn(doc), bson.E{Key: "n", Value: anyOf(batch)}), bson.M{"$set": bson.M{"d": to}}); err != nil {
			return fmt.Errorf("notifications store: move document: entries: %w", err)
		}
		if _, err := s.notifications.UpdateMany(ctx, bson.M{"_id": anyOf(notificationKeys(doc, batch))}, bson.M{"$set": bson.M{"documentId": to}}); err != nil {
			return fmt.Errorf("notifications store: move document: notifications: %w", err)
		}
	}
	return nil
}

func (s *MongoStore) RemoveUsers(ctx context.Context, scope Scope, userIDs []string) error {
	userIDs = distinct(userIDs)
	for _, batch := range chunks(userIDs) {
		configs := with(orgFilter(scope), bson.E{Key: "userId", Value: anyOf(batch)})
		entries := with(entriesIn(scope), bson.E{Key: "u", Value: anyOf(batch)})
		if scope.DocumentID != "" {
			configs = append(configs, bson.E{Key: "documentId", Value: scope.DocumentID}, bson.E{Key: "docGen", Value: scope.DocGen})
			entries = append(entries, bson.E{Key: "d", Value: scope.DocumentID})
		}
		if _, err := s.configs.DeleteMany(ctx, configs); err != nil {
			return fmt.Errorf("notifications store: remove users: configs: %w", err)
		}
		if _, err := s.entries.DeleteMany(ctx, entries); err != nil {
			return fmt.Errorf("notifications store: remove users: entries: %w", err)
		}
		// Their unsent mail goes too: a removed user is sent nothing more.
		pending := bson.D{{Key: "apiKey", Value: scope.APIKey}, {Key: "organizationId", Value: scope.OrganizationID}, {Key: "orgGen", Value: scope.OrgGen},
			{Key: "userId", Value: anyOf(batch)}, {Key: "state", Value: StatePending}}
		if scope.DocumentID != "" {
			pending = append(pending, bson.E{Key: "documentId", Value: scope.DocumentID})
		}
		if _, err := s.deliveries.DeleteMany(ctx, pending); err != nil {
			return fmt.Errorf("notifications store: remove users: deliveries: %w", err)
		}
	}
	return nil
}

func (s *MongoStore) QueueDeliveries(ctx context.Context, ds []*Delivery) error {
	if err := mongodb.InsertNew(ctx, s.deliveries, ds, batchSize); err != nil {
		return fmt.Errorf("notifications store: queue deliveries: %w", err)
	}
	return nil
}

// dueFilter selects the pending deliveries whose next attempt and lease are not after now.
func dueFilter(now time.Time) bson.D {
	return bson.D{
		{Key: "state", Value: StatePending},
		{Key: "next", Value: bson.M{"$lte": now}},
		{Key: "leaseUntil", Value: bson.M{"$lte": now}},
	}
}

func (s *MongoStore) DueDeliveries(ctx context.Context, now time.Time, limit int) ([]*Delivery, error) {
	opts := options.Find().SetSort(bson.D{{Key: "next", Value: 1}, {Key: "_id", Value: 1}})
	if limit > 0 {
		opts.SetLimit(int64(limit))
	}
	out := []*Delivery{}
	if err := s.findAll(ctx, s.deliveries, dueFilter(now), &out, opts); err != nil {
		return nil, fmt.Errorf("notifications store: due deliveries: %w", err)
	}
	return out, nil
}

func (s *MongoStore) ClaimDelivery(ctx context.Context, id string, now, until time.Time) (bool, error) {
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	res, err := s.deliveries.UpdateOne(ctx, append(bson.D{{Key: "_id", Value: id}}, dueFilter(now)...),
		bson.M{"$set": bson.M{"leaseUntil": until}})
	if err != nil {
		return false, fmt.Errorf("notifications store: claim delivery: %w", err)
	}
	return res.MatchedCount > 0, nil
}

func (s *MongoStore) FinishDelivery(ctx context.Context, id, state string, attempts int, next time.Time, lastErr string, now time.Time) error {
	if err := checkState(state); err != nil {
		return err
	}
	set := bson.M{"state": state, "attempts": attempts, "next": next, "lastError": lastErr, "leaseUntil": time.Time{}}
	if state == StateSent {
		set["sentAt"] = now
	}
	res, err := s.deliveries.UpdateOne(ctx, bson.M{"_id": id}, bson.M{"$set": set})
	if err != nil {
		return fmt.Errorf("notifications store: finish delivery: %w", err)
	}
	if res.MatchedCount == 0 {
		return ErrNotFound
	}
	return nil
}

func (s *MongoStore) Delivery(ctx context.Context, id string) (*Delivery, error) {
	var d Delivery
	if err := s.deliveries.FindOne(ctx, bson.M{"_id": id}).Decode(&d); err != nil {
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("notifications store: delivery: %w", err)
	}
	return &d, nil
}

func (s *MongoStore) Deliveries(ctx context.Context, apiKey, notificationID string) ([]*Delivery, error) {
	out := []*Delivery{}
	q := bson.D{{Key: "apiKey", Value: apiKey}, {Key: "notificationId", Value: notificationID}}
	if err := s.findAll(ctx, s.deliveries, q, &out, options.Find().SetSort(bson.M{"_id": 1})); err != nil {
		return nil, fmt.Errorf("notifications store: deliveries: %w", err)
	}
	return out, nil
}

func (s *MongoStore) PruneDeliveries(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.deliveries.DeleteMany(ctx, bson.D{
		{Key: "state", Value: bson.M{"$in": bson.A{StateSent, StateFailed}}},
		{Key: "createdAt", Value: bson.M{"$lt": before}},
	})
	if err != nil {
		return 0, fmt.Errorf("notifications store: prune deliveries: %w", err)
	}
	return res.DeletedCount, nil
}

func (s *MongoStore) Ping(ctx context.Context) error {
	if err := s.db.Client().Ping(ctx, nil); err != nil {
		return fmt.Errorf("notifications store: ping: %w", err)
	}
	return nil
}

var _ Store = (*MongoStore)(nil)

// recipientsTTL is how long a minute's recipients count is kept after its minute: the minute
// before the current one may still be given back to.
const recipientsTTL = 2 * time.Minute

func (s *MongoStore) TakeRecipients(ctx context.Context, workspaceID string, minute int64, n, limit int) (bool, error) {
	s.quotaMu.Lock()
	defer s.quotaMu.Unlock()
	// The counts of minutes long gone are swept here, at most once a minute per process.
	if minute > s.sweptMinute {
		if _, err := s.recipients.DeleteMany(ctx, bson.M{"minute": bson.M{"$lt": minute - int64(recipientsTTL/time.Minute)}}); err != nil {
			return false, fmt.Errorf("notifications store: take recipients: sweep: %w", err)
		}
		s.sweptMinute = minute
	}
	id := mongodb.Key(workspaceID, strconv.FormatInt(minute, 10))
	total, err := s.add(ctx, s.recipients, id, n, bson.M{"workspaceId": workspaceID, "minute": minute})
	if err != nil {
		return false, fmt.Errorf("notifications store: take recipients: %w", err)
	}
	if limit <= 0 || total <= limit {
		return true, nil
	}
	// Over: given back at once. A count read meanwhile was higher than what stands, which
	// refuses more, never less.
	if _, err := s.add(ctx, s.recipients, id, -n, nil); err != nil {
		return false, fmt.Errorf("notifications store: take recipients: give back: %w", err)
	}
	return false, nil
}

func (s *MongoStore) ReturnRecipients(ctx context.Context, workspaceID string, minute int64, n int) error {
	s.quotaMu.Lock()
	defer s.quotaMu.Unlock()
	if _, err := s.add(ctx, s.recipients, mongodb.Key(workspaceID, strconv.FormatInt(minute, 10)), -n, nil); err != nil {
		return fmt.Errorf("notifications store: return recipients: %w", err)
	}
	return nil
}

// add adds d to the count n of the document id (made with the fields onInsert when there is
// none; without onInsert, a missing document is left missing) and returns the count after.
// One atomic findAndModify on MongoDB; callers hold quotaMu for FerretDB.
func (s *MongoStore) add(ctx context.Context, coll *mongo.Collection, id string, d int, onInsert bson.M) (int, error) {
	update := bson.M{"$inc": bson.M{"n": d}}
	opts := options.FindOneAndUpdate().SetReturnDocument(options.After)
	if onInsert != nil {
		update["$setOnInsert"] = onInsert
		opts.SetUpsert(true)
	}
	var doc struct {
		N int `bson:"n"`
	}
	var err error
	for range 2 { // a concurrent creation of the same count loses with a duplicate key once
		if err = coll.FindOneAndUpdate(ctx, countFilter(id, d), update, opts).Decode(&doc); err == nil || !mongodb.IsDuplicateKey(err) {
			break
		}
	}
	if errors.Is(err, mongo.ErrNoDocuments) {
		return 0, nil
	}
	return doc.N, err
}

// countFilter selects the count id unless taking d off would put it below zero.
func countFilter(id string, d int) bson.M {
	if d < 0 {
		return bson.M{"_id": id, "n": bson.M{"$gte": -d}}
	}
	return bson.M{"_id": id}
}

// countKey is the _id of an inbox count: the organization's notifications to everyone (user
// ""), or those naming the user.
func countKey(org Scope, userID string) string {
	return mongodb.Key(org.APIKey, org.OrganizationID, org.OrgGen, userID)
}

func countFields(org Scope, userID string) bson.M {
	return bson.M{"apiKey": org.APIKey, "organizationId": org.OrganizationID, "orgGen": org.OrgGen, "userId": userID}
}

// count adds d to the inbox counts of a notification: everyone's when all, else the users'.
func (s *MongoStore) count(ctx context.Context, org Scope, all bool, userIDs []string, d int) error {
	s.quotaMu.Lock()
	defer s.quotaMu.Unlock()
	return s.countLocked(ctx, org, all, userIDs, d)
}

func (s *MongoStore) countLocked(ctx context.Context, org Scope, all bool, userIDs []string, d int) error {
	if all {
		fields := countFields(org, "")
		if d < 0 {
			fields = nil
		}
		if _, err := s.add(ctx, s.inboxCounts, countKey(org, ""), d, fields); err != nil {
			return fmt.Errorf("inbox count: %w", err)
		}
		return nil
	}
	var models []mongo.WriteModel
	for _, u := range distinct(userIDs) {
		m := mongo.NewUpdateOneModel().SetFilter(countFilter(countKey(org, u), d))
		if d < 0 {
			m.SetUpdate(bson.M{"$inc": bson.M{"n": d}})
		} else {
			m.SetUpdate(bson.M{"$inc": bson.M{"n": d}, "$setOnInsert": countFields(org, u)}).SetUpsert(true)
		}
		models = append(models, m)
	}
	for _, batch := range chunks(models) {
		var err error
		for range 2 { // a concurrent creation of the same count loses with a duplicate key once
			if _, err = s.inboxCounts.BulkWrite(ctx, batch, options.BulkWrite().SetOrdered(false)); err == nil || !mongodb.IsDuplicateKey(err) {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("inbox counts: %w", err)
		}
	}
	return nil
}

// counts returns the inbox counts of the users (missing: 0) and the organization's count of
// notifications to everyone.
func (s *MongoStore) counts(ctx context.Context, org Scope, userIDs []string) (map[string]int, int, error) {
	keys := []string{countKey(org, "")}
	for _, u := range userIDs {
		keys = append(keys, countKey(org, u))
	}
	out := map[string]int{}
	for _, batch := range chunks(keys) {
		var found []struct {
			UserID string `bson:"userId"`
			N      int    `bson:"n"`
		}
		if err := s.findAll(ctx, s.inboxCounts, bson.M{"_id": anyOf(batch)}, &found); err != nil {
			return nil, 0, fmt.Errorf("inbox counts: %w", err)
		}
		for _, c := range found {
			out[c.UserID] = c.N
		}
	}
	everyone := out[""]
	delete(out, "")
	return out, everyone, nil
}

// TakeInbox counts first and checks after: a count read meanwhile by another taker is higher
// than what stands, which refuses more, never less. Two takers whose counts together pass the
// limit cannot both pass: the second to count reads the first's.
func (s *MongoStore) TakeInbox(ctx context.Context, org Scope, all bool, userIDs []string, limit int) (*InboxFull, error) {
	s.quotaMu.Lock()
	defer s.quotaMu.Unlock()
	userIDs = distinct(userIDs)
	if err := s.countLocked(ctx, org, all, userIDs, 1); err != nil {
		return nil, fmt.Errorf("notifications store: take inbox: %w", err)
	}
	if limit <= 0 {
		return nil, nil
	}
	full, err := s.full(ctx, org, all, userIDs, limit)
	if err != nil || full == nil {
		return nil, err
	}
	if err := s.countLocked(ctx, org, all, userIDs, -1); err != nil {
		return nil, fmt.Errorf("notifications store: take inbox: give back: %w", err)
	}
	return full, nil
}

// full returns the inbox that the notification just counted put past limit, with what it held
// before, or nil.
func (s *MongoStore) full(ctx context.Context, org Scope, all bool, userIDs []string, limit int) (*InboxFull, error) {
	named, everyone, err := s.counts(ctx, org, userIDs)
	if err != nil {
		return nil, fmt.Errorf("notifications store: take inbox: %w", err)
	}
	if !all {
		for _, u := range userIDs {
			if c := everyone + named[u]; c > limit {
				return &InboxFull{UserID: u, Count: c - 1}, nil
			}
		}
		return nil, nil
	}
	// The user named most often, when with everyone's that passes the limit.
	var top []struct {
		UserID string `bson:"userId"`
		N      int    `bson:"n"`
	}
	q := with(orgFilter(org), bson.E{Key: "userId", Value: bson.M{"$ne": ""}}, bson.E{Key: "n", Value: bson.M{"$gt": limit - everyone}})
	opts := options.Find().SetSort(bson.D{{Key: "n", Value: -1}, {Key: "userId", Value: 1}}).SetLimit(1)
	if err := s.findAll(ctx, s.inboxCounts, q, &top, opts); err != nil {
		return nil, fmt.Errorf("notifications store: take inbox: %w", err)
	}
	switch {
	case len(top) > 0:
		return &InboxFull{UserID: top[0].UserID, Count: everyone - 1 + top[0].N}, nil
	case everyone > limit:
		return &InboxFull{Count: everyone - 1}, nil
	}
	return nil, nil
}

func (s *MongoStore) ReturnInbox(ctx context.Context, org Scope, all bool, userIDs []string) error {
	if err := s.count(ctx, org, all, userIDs, -1); err != nil {
		return fmt.Errorf("notifications store: return inbox: %w", err)
	}
	return nil
}

func (s *MongoStore) InboxCount(ctx context.Context, org Scope, userID string) (int, error) {
	named, everyone, err := s.counts(ctx, org, []string{userID})
	if err != nil {
		return 0, fmt.Errorf("notifications store: inbox count: %w", err)
	}
	return everyone + named[userID], nil
}
