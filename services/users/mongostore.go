package users

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/collab/collab/internal/mongodb"
)

// MongoStore keeps the users service's data in MongoDB, one document per fact so that every
// write is a single-document operation and no list grows without bound:
//
//   - users: an identity; _id = (apiKey, userId)
//   - members: a user on an organization's contact list; _id = (apiKey, org, userId)
//   - document_contacts: a user on a document's contact list; _id = (apiKey, org, document, userId)
//   - groups: a user group; _id = (apiKey, org, groupId)
//   - group_members: a user in a group; _id = (apiKey, org, groupId, userId)
//
// The compound _id makes adding a fact an idempotent upsert; the scope fields are stored too so
// that listings and deletions use ordinary indexes.
type MongoStore struct {
	db           *mongo.Database
	users        *mongo.Collection
	members      *mongo.Collection
	contacts     *mongo.Collection
	groups       *mongo.Collection
	groupMembers *mongo.Collection
}

// NewMongoStore returns a store on db and creates its indexes.
func NewMongoStore(ctx context.Context, db *mongo.Database) (*MongoStore, error) {
	s := &MongoStore{
		db:           db,
		users:        db.Collection("users"),
		members:      db.Collection("members"),
		contacts:     db.Collection("document_contacts"),
		groups:       db.Collection("groups"),
		groupMembers: db.Collection("group_members"),
	}
	index := mongodb.Index
	for coll, models := range map[*mongo.Collection][]mongo.IndexModel{
		s.members: {index("org_users", "apiKey", "organizationId", "userId")},
		s.contacts: {
			index("document_users", "apiKey", "organizationId", "documentId", "userId"),
			index("org_users", "apiKey", "organizationId", "userId"),
		},
		s.groups: {index("org_groups", "apiKey", "organizationId", "groupId")},
		s.groupMembers: {
			index("group_users", "apiKey", "organizationId", "groupId", "userId"),
			index("org_users", "apiKey", "organizationId", "userId"),
		},
	} {
		if err := mongodb.EnsureIndexes(ctx, coll, models...); err != nil {
			return nil, fmt.Errorf("users store: %w", err)
		}
	}
	return s, nil
}

// insertMissing inserts the documents whose _id is not there yet and leaves the others as they
// are. A duplicate key can only come from a concurrent insert of the same fact, which is the
// result wanted, so it is retried once to make sure the rest of the batch went in.
func insertMissing(ctx context.Context, coll *mongo.Collection, docs []bson.M) error {
	if len(docs) == 0 {
		return nil
	}
	models := make([]mongo.WriteModel, 0, len(docs))
	for _, d := range docs {
		// The upsert takes _id from the filter; the other fields are written only on insert.
		fields := bson.M{}
		for k, v := range d {
			if k != "_id" {
				fields[k] = v
			}
		}
		models = append(models, mongo.NewUpdateOneModel().
			SetFilter(bson.M{"_id": d["_id"]}).
			SetUpdate(bson.M{"$setOnInsert": fields}).
			SetUpsert(true))
	}
	var err error
	for range 2 {
		if _, err = coll.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false)); err == nil || !mongodb.IsDuplicateKey(err) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("users store: insert into %s: %w", coll.Name(), err)
	}
	return nil
}

// userIDs returns the distinct userId values of the documents matching filter, sorted.
func userIDs(ctx context.Context, coll *mongo.Collection, filter bson.M, limit int) ([]string, error) {
	opts := options.Find().SetProjection(bson.M{"userId": 1}).SetSort(bson.D{{Key: "userId", Value: 1}})
	if limit > 0 {
		// Each (organization, user) is one record here, so the first limit rows are the first
		// limit users.
		opts.SetLimit(int64(limit))
	}
	cur, err := coll.Find(ctx, filter, opts)
	if err != nil {
		return nil, fmt.Errorf("users store: list %s: %w", coll.Name(), err)
	}
	var rows []struct {
		UserID string `bson:"userId"`
	}
	if err := cur.All(ctx, &rows); err != nil {
		return nil, fmt.Errorf("users store: list %s: %w", coll.Name(), err)
	}
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.UserID)
	}
	// Sorted in Go as well: the order must not depend on the server's collation.
	slices.Sort(out)
	return slices.Compact(out), nil
}

// scoped returns the filter of one organization, narrowed to only when it is not nil.
func scoped(apiKey, orgID string, only []string) bson.M {
	f := bson.M{"apiKey": apiKey, "organizationId": orgID}
	if only != nil {
		f["userId"] = bson.M{"$in": only}
	}
	return f
}

func (s *MongoStore) deleteMany(ctx context.Context, coll *mongo.Collection, filter bson.M) error {
	if _, err := coll.DeleteMany(ctx, filter); err != nil {
		return fmt.Errorf("users store: delete from %s: %w", coll.Name(), err)
	}
	return nil
}

func (s *MongoStore) UpsertUser(ctx context.Context, apiKey string, p UserPatch) error {
	set, onInsert := bson.M{}, bson.M{"apiKey": apiKey, "userId": p.UserID}
	for field, v := range map[string]*string{"name": p.Name, "email": p.Email, "photoUrl": p.PhotoURL} {
		if v != nil {
			set[field] = *v
		} else {
			onInsert[field] = "" // every stored identity has the same fields
		}
	}
	update := bson.M{"$setOnInsert": onInsert}
	if len(set) > 0 {
		update["$set"] = set
	}
	filter := bson.M{"_id": mongodb.Key(apiKey, p.UserID)}
	var err error
	for range 2 { // a concurrent first upsert of the same user loses with a duplicate key once
		if _, err = s.users.UpdateOne(ctx, filter, update, options.UpdateOne().SetUpsert(true)); err == nil || !mongodb.IsDuplicateKey(err) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("users store: upsert user: %w", err)
	}
	return nil
}

func (s *MongoStore) Users(ctx context.Context, apiKey string, ids []string) ([]*User, error) {
	out := []*User{}
	if len(ids) == 0 {
		return out, nil
	}
	keys := make([]string, 0, len(ids))
	for _, id := range ids {
		keys = append(keys, mongodb.Key(apiKey, id))
	}
	cur, err := s.users.Find(ctx, bson.M{"_id": bson.M{"$in": keys}, "apiKey": apiKey},
		options.Find().SetSort(bson.D{{Key: "userId", Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("users store: find users: %w", err)
	}
	if err := cur.All(ctx, &out); err != nil {
		return nil, fmt.Errorf("users store: find users: %w", err)
	}
	// Sorted in Go as well: the order must not depend on the server's collation.
	slices.SortFunc(out, func(a, b *User) int { return cmp.Compare(a.UserID, b.UserID) })
	return out, nil
}

func (s *MongoStore) AddMembers(ctx context.Context, apiKey, orgID string, ids []string) error {
	docs := make([]bson.M, 0, len(ids))
	for _, u := range ids {
		docs = append(docs, bson.M{"_id": mongodb.Key(apiKey, orgID, u), "apiKey": apiKey, "organizationId": orgID, "userId": u})
	}
	return insertMissing(ctx, s.members, docs)
}

func (s *MongoStore) Members(ctx context.Context, apiKey, orgID string, only []string, limit int) ([]string, error) {
	if only != nil && len(only) == 0 {
		return []string{}, nil
	}
	return userIDs(ctx, s.members, scoped(apiKey, orgID, only), limit)
}

func (s *MongoStore) MembersAfter(ctx context.Context, apiKey, orgID, after string, limit int) ([]string, error) {
	if limit <= 0 {
		return []string{}, nil
	}
	// The org_users index (apiKey, organizationId, userId) serves the range and the order.
	filter := bson.M{"apiKey": apiKey, "organizationId": orgID}
	if after != "" {
		filter["userId"] = bson.M{"$gt": after}
	}
	return userIDs(ctx, s.members, filter, limit)
}

func (s *MongoStore) CountMembers(ctx context.Context, apiKey, orgID string) (int, error) {
	// The org_users index (apiKey, organizationId, userId) serves the count.
	n, err := s.members.CountDocuments(ctx, bson.M{"apiKey": apiKey, "organizationId": orgID})
	if err != nil {
		return 0, fmt.Errorf("users store: count members: %w", err)
	}
	return int(n), nil
}

func (s *MongoStore) RemoveUsers(ctx context.Context, apiKey, orgID string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	// Membership goes last: if a step fails, the users still show as members and the event that
	// asked for this is delivered again.
	for _, coll := range []*mongo.Collection{s.contacts, s.groupMembers, s.members} {
		if err := s.deleteMany(ctx, coll, scoped(apiKey, orgID, ids)); err != nil {
			return err
		}
	}
	return nil
}

func (s *MongoStore) AddDocumentContacts(ctx context.Context, apiKey, orgID, documentID string, ids []string) error {
	docs := make([]bson.M, 0, len(ids))
	for _, u := range ids {
		docs = append(docs, bson.M{"_id": mongodb.Key(apiKey, orgID, documentID, u), "apiKey": apiKey, "organizationId": orgID, "documentId": documentID, "userId": u})
	}
	return insertMissing(ctx, s.contacts, docs)
}

func (s *MongoStore) DocumentContacts(ctx context.Context, apiKey, orgID, documentID string, only []string) ([]string, error) {
	if only != nil && len(only) == 0 {
		return []string{}, nil
	}
	f := scoped(apiKey, orgID, only)
	f["documentId"] = documentID
	return userIDs(ctx, s.contacts, f, 0)
}

func (s *MongoStore) RemoveDocumentContacts(ctx context.Context, apiKey, orgID, documentID string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	f := scoped(apiKey, orgID, ids)
	f["documentId"] = documentID
	return s.deleteMany(ctx, s.contacts, f)
}

func (s *MongoStore) DeleteDocuments(ctx context.Context, apiKey, orgID string, documentIDs []string) error {
	if len(documentIDs) == 0 {
		return nil
	}
	f := scoped(apiKey, orgID, nil)
	f["documentId"] = bson.M{"$in": documentIDs}
	return s.deleteMany(ctx, s.contacts, f)
}

func (s *MongoStore) MoveDocument(ctx context.Context, apiKey, orgID, from, to string) error {
	if from == to {
		return nil
	}
	// Copy, then delete: a crash in between leaves both lists, and the next delivery of the
	// event copies nothing new and deletes the source.
	moving, err := s.DocumentContacts(ctx, apiKey, orgID, from, nil)
	if err != nil {
		return err
	}
	if err := s.AddDocumentContacts(ctx, apiKey, orgID, to, moving); err != nil {
		return err
	}
	f := scoped(apiKey, orgID, nil)
	f["documentId"] = from
	return s.deleteMany(ctx, s.contacts, f)
}

func (s *MongoStore) UpsertGroup(ctx context.Context, apiKey, orgID string, g Group) (bool, error) {
	onInsert := bson.M{"apiKey": apiKey, "organizationId": orgID, "groupId": g.GroupID}
	update := bson.M{"$setOnInsert": onInsert}
	if g.Name != "" {
		update["$set"] = bson.M{"groupName": g.Name}
	} else {
		onInsert["groupName"] = ""
	}
	filter := bson.M{"_id": mongodb.Key(apiKey, orgID, g.GroupID)}
	var (
		res *mongo.UpdateResult
		err error
	)
	for range 2 { // a concurrent creation of the same group loses with a duplicate key once
		if res, err = s.groups.UpdateOne(ctx, filter, update, options.UpdateOne().SetUpsert(true)); err == nil || !mongodb.IsDuplicateKey(err) {
			break
		}
	}
	if err != nil {
		return false, fmt.Errorf("users store: upsert group: %w", err)
	}
	return res.UpsertedCount > 0, nil
}

func (s *MongoStore) Group(ctx context.Context, apiKey, orgID, groupID string) (*Group, error) {
	var g Group
	if err := s.groups.FindOne(ctx, bson.M{"_id": mongodb.Key(apiKey, orgID, groupID)}).Decode(&g); err != nil {
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("users store: find group: %w", err)
	}
	return &g, nil
}

func (s *MongoStore) AddGroupMembers(ctx context.Context, apiKey, orgID, groupID string, ids []string) error {
	docs := make([]bson.M, 0, len(ids))
	for _, u := range ids {
		docs = append(docs, bson.M{"_id": mongodb.Key(apiKey, orgID, groupID, u), "apiKey": apiKey, "organizationId": orgID, "groupId": groupID, "userId": u})
	}
	return insertMissing(ctx, s.groupMembers, docs)
}

func (s *MongoStore) RemoveGroupMembers(ctx context.Context, apiKey, orgID, groupID string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	f := scoped(apiKey, orgID, ids)
	f["groupId"] = groupID
	return s.deleteMany(ctx, s.groupMembers, f)
}

func (s *MongoStore) GroupMembers(ctx context.Context, apiKey, orgID string, groupIDs, only []string) ([]string, error) {
	if len(groupIDs) == 0 || (only != nil && len(only) == 0) {
		return []string{}, nil
	}
	f := scoped(apiKey, orgID, only)
	f["groupId"] = bson.M{"$in": groupIDs}
	return userIDs(ctx, s.groupMembers, f, 0)
}

func (s *MongoStore) DeleteOrganization(ctx context.Context, apiKey, orgID string) error {
	// Membership goes last, as in RemoveUsers: a partial run is finished by the next delivery.
	for _, coll := range []*mongo.Collection{s.contacts, s.groupMembers, s.groups, s.members} {
		if err := s.deleteMany(ctx, coll, scoped(apiKey, orgID, nil)); err != nil {
			return err
		}
	}
	return nil
}

func (s *MongoStore) Ping(ctx context.Context) error {
	if err := s.db.Client().Ping(ctx, nil); err != nil {
		return fmt.Errorf("users store: ping: %w", err)
	}
	return nil
}
