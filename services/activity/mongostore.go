package activity

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/mongodb"
)

// MongoStore keeps the activity service's data in MongoDB, one document per fact so that every
// write is a single-document operation (or a multi-document one whose partial run the next run
// finishes) and no transaction is needed:
//
//   - activities: a record; _id = (apiKey, org, id)
//   - tombstones: a buried generation or a migration mark (lifecycle.MongoMarkers, layout
//     ByID)
//   - configs: a tenant's config; _id = apiKey
//
// The compound _id makes a record unique by id in its tenant and organization on any
// MongoDB-wire server, concurrent inserts included. Listings walk an index on (apiKey,
// organizationId, [documentId | targetEntityId | actionUser.userId,] ts, id) from a keyset
// condition, never skipping, so a deep page costs what the first does.
type MongoStore struct {
	// configMu serialises this process's config updates. On MongoDB each update is one atomic
	// findAndModify; FerretDB's reads, patches and writes the document back without a lock, so
	// two concurrent partial updates could lose a field. The embedded FerretDB serves one
	// process, which the lock covers.
	configMu sync.Mutex

	// The generation markers (Bury, Buried, MarkMoved, MovedTo).
	*lifecycle.MongoMarkers

	db         *mongo.Database
	activities *mongo.Collection
	configs    *mongo.Collection
}

// NewMongoStore returns a store on db and creates its indexes.
func NewMongoStore(ctx context.Context, db *mongo.Database) (*MongoStore, error) {
	s := &MongoStore{
		MongoMarkers: lifecycle.NewMongoMarkers(db.Collection("tombstones"), lifecycle.ByID),
		db:           db,
		activities:   db.Collection("activities"),
		configs:      db.Collection("configs"),
	}
	index := mongodb.Index
	if err := mongodb.EnsureIndexes(ctx, s.activities,
		index("org_ts", "apiKey", "organizationId", "ts", "id"),
		index("document_ts", "apiKey", "organizationId", "documentId", "ts", "id"),
		index("target_ts", "apiKey", "organizationId", "targetEntityId", "ts", "id"),
		index("user_ts", "apiKey", "organizationId", "actionUser.userId", "ts", "id"),
	); err != nil {
		return nil, fmt.Errorf("activity store: %w", err)
	}
	return s, nil
}

// activityDoc is a record as stored: the record's fields and its compound _id.
type activityDoc struct {
	Key    string `bson:"_id"`
	Record `bson:",inline"`
}

func activityKey(apiKey, orgID, id string) string { return mongodb.Key(apiKey, orgID, id) }

func activityKeys(apiKey, orgID string, ids []string) []string {
	keys := make([]string, 0, len(ids))
	for _, id := range ids {
		keys = append(keys, activityKey(apiKey, orgID, id))
	}
	return keys
}

// orgFilter selects the records of one organization.
func orgFilter(apiKey, orgID string) bson.D {
	return bson.D{{Key: "apiKey", Value: apiKey}, {Key: "organizationId", Value: orgID}}
}

// ofGeneration matches the generation gen and the empty one.
func ofGeneration(gen string) bson.M { return bson.M{"$in": bson.A{gen, ""}} }

func (s *MongoStore) Insert(ctx context.Context, recs []*Record) ([]string, error) {
	existing := []string{}
	for _, r := range recs {
		// One at a time, so that a duplicate key names its record without parsing a bulk
		// error, and an error leaves only the records before it written.
		_, err := s.activities.InsertOne(ctx, activityDoc{Key: activityKey(r.APIKey, r.OrganizationID, r.ID), Record: *r})
		if mongodb.IsDuplicateKey(err) {
			existing = append(existing, r.ID)
			continue
		}
		if err != nil {
			return existing, fmt.Errorf("activity store: insert: %w", err)
		}
	}
	return existing, nil
}

func (s *MongoStore) List(ctx context.Context, apiKey, orgID string, f Filter, after *Position, desc bool, limit int) ([]*Record, error) {
	out := []*Record{}
	if f.selectsNothing() {
		return out, nil
	}
	q := orgFilter(apiKey, orgID)
	for _, c := range []struct{ field, v string }{
		{"documentId", f.DocumentID}, {"targetEntityId", f.TargetEntityID}, {"actionUser.userId", f.UserID},
	} {
		if c.v != "" {
			q = append(q, bson.E{Key: c.field, Value: c.v})
		}
	}
	for _, c := range []struct {
		field string
		vs    []string
	}{{"featureType", f.FeatureTypes}, {"actionType", f.ActionTypes}} {
		if c.vs != nil {
			q = append(q, bson.E{Key: c.field, Value: bson.M{"$in": c.vs}})
		}
	}
	if f.IDs != nil {
		q = append(q, bson.E{Key: "_id", Value: bson.M{"$in": activityKeys(apiKey, orgID, f.IDs)}})
	}
	dir, beyond := 1, "$gt"
	if desc {
		dir, beyond = -1, "$lt"
	}
	if after != nil {
		q = append(q, bson.E{Key: "$or", Value: bson.A{
			bson.M{"ts": bson.M{beyond: after.Timestamp}},
			bson.D{{Key: "ts", Value: after.Timestamp}, {Key: "id", Value: bson.M{beyond: after.ID}}},
		}})
	}
	opts := options.Find().SetSort(bson.D{{Key: "ts", Value: dir}, {Key: "id", Value: dir}})
	if limit > 0 {
		opts.SetLimit(int64(limit))
	}
	cur, err := s.activities.Find(ctx, q, opts)
	if err != nil {
		return nil, fmt.Errorf("activity store: list: %w", err)
	}
	if err := cur.All(ctx, &out); err != nil {
		return nil, fmt.Errorf("activity store: list: %w", err)
	}
	return out, nil
}

func (s *MongoStore) Get(ctx context.Context, apiKey, orgID string, ids []string) (map[string]*Record, error) {
	out := map[string]*Record{}
	if len(ids) == 0 {
		return out, nil
	}
	cur, err := s.activities.Find(ctx, bson.M{"_id": bson.M{"$in": activityKeys(apiKey, orgID, ids)}})
	if err != nil {
		return nil, fmt.Errorf("activity store: get: %w", err)
	}
	var recs []*Record
	if err := cur.All(ctx, &recs); err != nil {
		return nil, fmt.Errorf("activity store: get: %w", err)
	}
	for _, r := range recs {
		out[r.ID] = r
	}
	return out, nil
}

func (s *MongoStore) Update(ctx context.Context, apiKey, orgID, id string, p Patch) error {
	key := activityKey(apiKey, orgID, id)
	set := bson.M{}
	for field, v := range map[string]*string{
		"changes":          p.Changes,
		"entityData":       p.EntityData,
		"entityTargetData": p.EntityTargetData,
		"template":         p.DisplayMessageTemplate,
		"templateData":     p.DisplayMessageTemplateData,
		"actionIcon":       p.ActionIcon,
	} {
		if v != nil {
			set[field] = *v
		}
	}
	for attempt := 0; ; attempt++ {
		if len(set) > 0 {
			// Immutability is fixed when the record is written, so no change of it can come
			// between the condition and the write, even on a server whose conditional updates
			// are not atomic.
			res, err := s.activities.UpdateOne(ctx, bson.M{"_id": key, "immutable": false}, bson.M{"$set": set})
			if err != nil {
				return fmt.Errorf("activity store: update: %w", err)
			}
			if res.MatchedCount > 0 {
				return nil
			}
		}
		// Nothing matched (or there is nothing to write): say what stood in the way.
		var found struct {
			Immutable bool `bson:"immutable"`
		}
		err := s.activities.FindOne(ctx, bson.M{"_id": key}, options.FindOne().SetProjection(bson.M{"immutable": 1})).Decode(&found)
		switch {
		case errors.Is(err, mongo.ErrNoDocuments):
			return ErrNotFound
		case err != nil:
			return fmt.Errorf("activity store: update: %w", err)
		case found.Immutable:
			return ErrImmutable
		case len(set) == 0:
			return nil
		case attempt > 0:
			return fmt.Errorf("activity store: update: record %s keeps changing", id)
		}
		// Written (mutable) between the update and the read: update again.
	}
}

func (s *MongoStore) DeleteOrganization(ctx context.Context, apiKey, orgID, gen string) error {
	q := append(orgFilter(apiKey, orgID), bson.E{Key: "orgGen", Value: ofGeneration(gen)})
	if _, err := s.activities.DeleteMany(ctx, q); err != nil {
		return fmt.Errorf("activity store: delete organization: %w", err)
	}
	return nil
}

// documentFilter selects the records of a document written under generation gen or the empty
// one.
func documentFilter(apiKey, orgID, docID, gen string) bson.D {
	return append(orgFilter(apiKey, orgID),
		bson.E{Key: "documentId", Value: docID}, bson.E{Key: "docGen", Value: ofGeneration(gen)})
}

func (s *MongoStore) DeleteDocument(ctx context.Context, apiKey, orgID, docID, gen string) error {
	if docID == "" { // records of no document belong to none
		return nil
	}
	if _, err := s.activities.DeleteMany(ctx, documentFilter(apiKey, orgID, docID, gen)); err != nil {
		return fmt.Errorf("activity store: delete document: %w", err)
	}
	return nil
}

func (s *MongoStore) MoveDocument(ctx context.Context, apiKey, orgID, from, to, gen string) error {
	if from == "" || from == to {
		return nil
	}
	// Each record moves on its own: a partial run leaves some behind, which the next run moves.
	if _, err := s.activities.UpdateMany(ctx, documentFilter(apiKey, orgID, from, gen), bson.M{"$set": bson.M{"documentId": to}}); err != nil {
		return fmt.Errorf("activity store: move document: %w", err)
	}
	return nil
}

func (s *MongoStore) Config(ctx context.Context, apiKey string) (*Config, error) {
	var c Config
	if err := s.configs.FindOne(ctx, bson.M{"_id": apiKey}).Decode(&c); err != nil {
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("activity store: config: %w", err)
	}
	return &c, nil
}

func (s *MongoStore) UpdateConfig(ctx context.Context, apiKey string, p ConfigPatch, now time.Time) (*Config, error) {
	set := bson.M{"updatedAt": now}
	if p.Enabled != nil {
		set["isEnabled"] = *p.Enabled
	}
	if p.Immutable != nil {
		set["immutable"] = *p.Immutable
	}
	if p.Triggers != nil {
		set["triggers"] = p.Triggers
	}
	update := bson.M{"$set": set}
	if p.Enabled == nil {
		// A new config starts disabled. Only when the patch leaves isEnabled alone: the server
		// refuses a path in both $set and $setOnInsert.
		update["$setOnInsert"] = bson.M{"isEnabled": false}
	}
	opts := options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)
	s.configMu.Lock()
	defer s.configMu.Unlock()
	var (
		c   Config
		err error
	)
	for range 2 { // a concurrent creation of the same config loses with a duplicate key once
		if err = s.configs.FindOneAndUpdate(ctx, bson.M{"_id": apiKey}, update, opts).Decode(&c); err == nil || !mongodb.IsDuplicateKey(err) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("activity store: update config: %w", err)
	}
	return &c, nil
}

func (s *MongoStore) Ping(ctx context.Context) error {
	if err := s.db.Client().Ping(ctx, nil); err != nil {
		return fmt.Errorf("activity store: ping: %w", err)
	}
	return nil
}
