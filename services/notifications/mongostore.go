package notifications

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
//   - inbox: one recipient's entry of a notification; _id = (apiKey, org, orgGen, user, notification)
//   - deliveries: a message to send; _id = Delivery.ID, fixed by what it delivers
//
// The compound _ids make a notification unique by id in its organization incarnation, an inbox
// entry unique per user and notification and a delivery unique by id, on any MongoDB-wire
// server and under concurrent writers: a repeated batch inserts nothing twice. Listings walk an
// index on (apiKey, organizationId, orgGen, [documentId | userId,] ts, id) from a keyset
// condition, never skipping, so a deep page costs what the first does.
//
// Every organization-scoped query names (apiKey, organizationId, orgGen): records written under
// another generation are neither read nor written, except by the deletes named for them.
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

	db            *mongo.Database
	configs       *mongo.Collection
	notifications *mongo.Collection
	inbox         *mongo.Collection
	deliveries    *mongo.Collection
}

// batchSize is how many documents one insert or one $in carries.
const batchSize = 1000

// NewMongoStore returns a store on db and creates its indexes.
func NewMongoStore(ctx context.Context, db *mongo.Database) (*MongoStore, error) {
	s := &MongoStore{
		db:            db,
		configs:       db.Collection("configs"),
		notifications: db.Collection("notifications"),
		inbox:         db.Collection("inbox"),
		deliveries:    db.Collection("deliveries"),
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
		{s.inbox, []mongo.IndexModel{
			index("user_ts", "apiKey", "organizationId", "orgGen", "userId", "ts", "notificationId"),
			index("notification", "apiKey", "organizationId", "orgGen", "notificationId"),
		}},
		{s.deliveries, []mongo.IndexModel{
			index("due", "state", "next", "_id"),
			index("notification", "apiKey", "notificationId"),
		}},
	} {
		if err := mongodb.EnsureIndexes(ctx, c.coll, c.models...); err != nil {
			return nil, fmt.Errorf("notifications store: %w", err)
		}
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
	inboxDoc struct {
		Key        string `bson:"_id"`
		InboxEntry `bson:",inline"`
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

func inboxKey(apiKey, orgID, orgGen, userID, notificationID string) string {
	return mongodb.Key(apiKey, orgID, orgGen, userID, notificationID)
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

// keyset adds to q the condition "strictly after `after`" in the order (ts, idField), and
// returns the sort of that order.
func keyset(q bson.D, idField string, after *Position, desc bool) (bson.D, bson.D) {
	dir, beyond := 1, "$gt"
	if desc {
		dir, beyond = -1, "$lt"
	}
	if after != nil {
		q = append(q, bson.E{Key: "$or", Value: bson.A{
			bson.M{"ts": bson.M{beyond: after.Timestamp}},
			bson.D{{Key: "ts", Value: after.Timestamp}, {Key: idField, Value: bson.M{beyond: after.ID}}},
		}})
	}
	return q, bson.D{{Key: "ts", Value: dir}, {Key: idField, Value: dir}}
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
	q, order := keyset(q, "id", after, desc)
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

// deleteOf removes the notifications ids of the organization incarnation with their inbox
// entries and pending deliveries: the notifications last, so that a run cut short leaves them
// to be found, and removed whole, by the next.
func (s *MongoStore) deleteOf(ctx context.Context, org Scope, ids []string) error {
	for _, batch := range chunks(ids) {
		if _, err := s.inbox.DeleteMany(ctx, with(orgFilter(org), bson.E{Key: "notificationId", Value: anyOf(batch)})); err != nil {
			return fmt.Errorf("inbox: %w", err)
		}
		if _, err := s.deliveries.DeleteMany(ctx, with(orgFilter(org),
			bson.E{Key: "notificationId", Value: anyOf(batch)}, bson.E{Key: "state", Value: StatePending})); err != nil {
			return fmt.Errorf("deliveries: %w", err)
		}
		if _, err := s.notifications.DeleteMany(ctx, bson.M{"_id": anyOf(notificationKeys(org, batch))}); err != nil {
			return fmt.Errorf("notifications: %w", err)
		}
	}
	return nil
}

func (s *MongoStore) DeleteNotifications(ctx context.Context, org Scope, ids []string) ([]string, error) {
	ids = distinct(ids)
	found, err := s.notificationsByID(ctx, org, ids, bson.M{"id": 1})
	if err != nil {
		return nil, fmt.Errorf("notifications store: delete notifications: %w", err)
	}
	if err := s.deleteOf(ctx, org, ids); err != nil {
		return nil, fmt.Errorf("notifications store: delete notifications: %w", err)
	}
	deleted := []string{}
	for _, id := range ids {
		if found[id] != nil {
			deleted = append(deleted, id)
		}
	}
	return deleted, nil
}

func (s *MongoStore) AddInboxEntries(ctx context.Context, entries []*InboxEntry) error {
	docs := make([]inboxDoc, len(entries))
	for i, e := range entries {
		docs[i] = inboxDoc{Key: inboxKey(e.APIKey, e.OrganizationID, e.OrgGen, e.UserID, e.NotificationID), InboxEntry: *e}
	}
	if err := mongodb.InsertNew(ctx, s.inbox, docs, batchSize); err != nil {
		return fmt.Errorf("notifications store: add inbox entries: %w", err)
	}
	return nil
}

func (s *MongoStore) Inbox(ctx context.Context, org Scope, userID string, after *Position, desc bool, limit int) ([]*InboxEntry, error) {
	q, order := keyset(with(orgFilter(org), bson.E{Key: "userId", Value: userID}), "notificationId", after, desc)
	opts := options.Find().SetSort(order)
	if limit > 0 {
		opts.SetLimit(int64(limit))
	}
	out := []*InboxEntry{}
	if err := s.findAll(ctx, s.inbox, q, &out, opts); err != nil {
		return nil, fmt.Errorf("notifications store: inbox: %w", err)
	}
	return out, nil
}

func (s *MongoStore) userEntryKeys(org Scope, userID string, notificationIDs []string) []string {
	keys := make([]string, len(notificationIDs))
	for i, id := range notificationIDs {
		keys[i] = inboxKey(org.APIKey, org.OrganizationID, org.OrgGen, userID, id)
	}
	return keys
}

func (s *MongoStore) InboxEntries(ctx context.Context, org Scope, userID string, notificationIDs []string) (map[string]*InboxEntry, error) {
	out := map[string]*InboxEntry{}
	for _, batch := range chunks(distinct(notificationIDs)) {
		var found []*InboxEntry
		if err := s.findAll(ctx, s.inbox, bson.M{"_id": anyOf(s.userEntryKeys(org, userID, batch))}, &found); err != nil {
			return nil, fmt.Errorf("notifications store: inbox entries: %w", err)
		}
		for _, e := range found {
			out[e.NotificationID] = e
		}
	}
	return out, nil
}

func (s *MongoStore) ReadBy(ctx context.Context, org Scope, notificationIDs []string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, batch := range chunks(distinct(notificationIDs)) {
		var found []struct {
			NotificationID string `bson:"notificationId"`
			UserID         string `bson:"userId"`
		}
		q := with(orgFilter(org), bson.E{Key: "notificationId", Value: anyOf(batch)}, bson.E{Key: "read", Value: true})
		if err := s.findAll(ctx, s.inbox, q, &found,
			options.Find().SetProjection(bson.M{"_id": 0, "notificationId": 1, "userId": 1})); err != nil {
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
	n := 0
	for _, batch := range chunks(distinct(userIDs)) {
		keys := make([]string, len(batch))
		for i, u := range batch {
			keys[i] = inboxKey(org.APIKey, org.OrganizationID, org.OrgGen, u, notificationID)
		}
		res, err := s.inbox.UpdateMany(ctx, bson.M{"_id": anyOf(keys)}, bson.M{"$set": bson.M{"read": read}})
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
		{"inbox", s.inbox, orgFilter(org)},
		{"deliveries", s.deliveries, with(orgFilter(org), bson.E{Key: "state", Value: StatePending})},
		{"notifications", s.notifications, orgFilter(org)},
		{"configs", s.configs, orgFilter(org)},
	} {
		if _, err := c.coll.DeleteMany(ctx, c.q); err != nil {
			return fmt.Errorf("notifications store: delete organization: %s: %w", c.name, err)
		}
	}
	return nil
}

// documentIDs returns the ids of the notifications of a document incarnation.
func (s *MongoStore) documentIDs(ctx context.Context, doc Scope) ([]string, error) {
	var found []struct {
		ID string `bson:"id"`
	}
	q := with(orgFilter(doc), bson.E{Key: "documentId", Value: doc.DocumentID}, bson.E{Key: "docGen", Value: doc.DocGen})
	if err := s.findAll(ctx, s.notifications, q, &found, options.Find().SetProjection(bson.M{"_id": 0, "id": 1})); err != nil {
		return nil, err
	}
	ids := make([]string, len(found))
	for i, f := range found {
		ids[i] = f.ID
	}
	return ids, nil
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
	ids, err := s.documentIDs(ctx, doc)
	if err != nil {
		return fmt.Errorf("notifications store: delete document: %w", err)
	}
	if err := s.deleteOf(ctx, doc, ids); err != nil {
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
	ids, err := s.documentIDs(ctx, doc)
	if err != nil {
		return fmt.Errorf("notifications store: move document: %w", err)
	}
	set := bson.M{"$set": bson.M{"documentId": to}}
	for _, batch := range chunks(ids) {
		if _, err := s.inbox.UpdateMany(ctx, with(orgFilter(doc), bson.E{Key: "notificationId", Value: anyOf(batch)}), set); err != nil {
			return fmt.Errorf("notifications store: move document: inbox: %w", err)
		}
		if _, err := s.notifications.UpdateMany(ctx, bson.M{"_id": anyOf(notificationKeys(doc, batch))}, set); err != nil {
			return fmt.Errorf("notifications store: move document: notifications: %w", err)
		}
	}
	return nil
}

func (s *MongoStore) RemoveUsers(ctx context.Context, scope Scope, userIDs []string) error {
	userIDs = distinct(userIDs)
	for _, batch := range chunks(userIDs) {
		configs := with(orgFilter(scope), bson.E{Key: "userId", Value: anyOf(batch)})
		entries := slices.Clone(configs)
		if scope.DocumentID != "" {
			configs = append(configs, bson.E{Key: "documentId", Value: scope.DocumentID}, bson.E{Key: "docGen", Value: scope.DocGen})
			entries = append(entries, bson.E{Key: "documentId", Value: scope.DocumentID})
		}
		if _, err := s.configs.DeleteMany(ctx, configs); err != nil {
			return fmt.Errorf("notifications store: remove users: configs: %w", err)
		}
		if _, err := s.inbox.DeleteMany(ctx, entries); err != nil {
			return fmt.Errorf("notifications store: remove users: inbox: %w", err)
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

func (s *MongoStore) Ping(ctx context.Context) error {
	if err := s.db.Client().Ping(ctx, nil); err != nil {
		return fmt.Errorf("notifications store: ping: %w", err)
	}
	return nil
}

var _ Store = (*MongoStore)(nil)
