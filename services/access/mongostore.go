package access

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/collab/collab/internal/mongodb"
)

// MongoStore keeps the access service's data in MongoDB, one document per fact so that every
// write is a single-document operation:
//
//   - grants: one grant; _id = (apiKey, organization, resource type, resource id, user)
//   - contexts: a user's access context fields; _id = (apiKey, organization, user)
//   - signing_keys: one signing key; _id = its kid
//
// The compound _id makes a grant write an idempotent upsert and the key of a rotation period
// insert-if-absent; the scope fields are stored too so that reads and deletions use ordinary
// indexes. A permanent grant has no expiresAt field.
type MongoStore struct {
	db       *mongo.Database
	grants   *mongo.Collection
	contexts *mongo.Collection
	keys     *mongo.Collection
}

type grantDoc struct {
	ID             string     `bson:"_id"`
	APIKey         string     `bson:"apiKey"`
	OrganizationID string     `bson:"organizationId"`
	ResourceType   string     `bson:"resourceType"`
	ResourceID     string     `bson:"resourceId"`
	UserID         string     `bson:"userId"`
	AccessRole     string     `bson:"accessRole"`
	ExpiresAt      *time.Time `bson:"expiresAt,omitempty"`
}

type contextDoc struct {
	ID             string   `bson:"_id"`
	APIKey         string   `bson:"apiKey"`
	OrganizationID string   `bson:"organizationId"`
	UserID         string   `bson:"userId"`
	Fields         []string `bson:"fields"`
}

type signingKeyDoc struct {
	ID               string    `bson:"_id"`
	PublicKey        []byte    `bson:"publicKey"`
	SealedPrivateKey []byte    `bson:"sealedPrivateKey"`
	NotBefore        time.Time `bson:"notBefore"`
	NotAfter         time.Time `bson:"notAfter"`
	CreatedAt        time.Time `bson:"createdAt"`
}

// NewMongoStore returns a store on db and creates its indexes.
func NewMongoStore(ctx context.Context, db *mongo.Database) (*MongoStore, error) {
	s := &MongoStore{
		db:       db,
		grants:   db.Collection("grants"),
		contexts: db.Collection("contexts"),
		keys:     db.Collection("signing_keys"),
	}
	index := mongodb.Index
	for coll, models := range map[*mongo.Collection][]mongo.IndexModel{
		s.grants: {
			// Get Permissions, Remove Users: the users' grants in one organization.
			index("org_users", "apiKey", "organizationId", "userId"),
			// Resource deletion and document migration: every grant on a resource.
			index("org_resources", "apiKey", "organizationId", "resourceType", "resourceId"),
		},
		s.contexts: {index("org_users", "apiKey", "organizationId", "userId")},
		s.keys:     {index("not_after", "notAfter")},
	} {
		if err := mongodb.EnsureIndexes(ctx, coll, models...); err != nil {
			return nil, fmt.Errorf("access store: %w", err)
		}
	}
	return s, nil
}

func grantID(apiKey string, r GrantRef) string {
	return mongodb.Key(apiKey, r.OrganizationID, r.ResourceType, r.ResourceID, r.UserID)
}

func toGrantDoc(apiKey string, g Grant) grantDoc {
	d := grantDoc{
		ID: grantID(apiKey, g.Ref()), APIKey: apiKey, OrganizationID: g.OrganizationID,
		ResourceType: g.ResourceType, ResourceID: g.ResourceID, UserID: g.UserID, AccessRole: g.AccessRole,
	}
	if !g.ExpiresAt.IsZero() {
		t := storeTime(g.ExpiresAt)
		d.ExpiresAt = &t
	}
	return d
}

func (d grantDoc) grant() Grant {
	g := Grant{OrganizationID: d.OrganizationID, ResourceType: d.ResourceType, ResourceID: d.ResourceID, UserID: d.UserID, AccessRole: d.AccessRole}
	if d.ExpiresAt != nil {
		g.ExpiresAt = d.ExpiresAt.UTC()
	}
	return g
}

// inEffect is the filter of grants that have not lapsed at now.
func inEffect(now time.Time) bson.M {
	return bson.M{"$or": bson.A{
		bson.M{"expiresAt": bson.M{"$exists": false}},
		bson.M{"expiresAt": bson.M{"$gt": storeTime(now)}},
	}}
}

// retryDuplicate runs op again once when it fails with a duplicate key: two concurrent upserts
// of the same _id can make one of them lose the insert, and the retry then updates.
func retryDuplicate(op func() error) error {
	err := op()
	if err != nil && mongodb.IsDuplicateKey(err) {
		err = op()
	}
	return err
}

func (s *MongoStore) PutGrants(ctx context.Context, apiKey string, grants []Grant) error {
	if len(grants) == 0 {
		return nil
	}
	models := make([]mongo.WriteModel, 0, len(grants))
	for _, g := range grants {
		d := toGrantDoc(apiKey, g)
		models = append(models, mongo.NewReplaceOneModel().SetFilter(bson.M{"_id": d.ID}).SetReplacement(d).SetUpsert(true))
	}
	err := retryDuplicate(func() error {
		_, err := s.grants.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
		return err
	})
	if err != nil {
		return fmt.Errorf("access store: put grants: %w", err)
	}
	return nil
}

func (s *MongoStore) PutGrantsIfAbsent(ctx context.Context, apiKey string, grants []Grant, now time.Time) error {
	for _, g := range grants {
		d := toGrantDoc(apiKey, g)
		set := bson.M{
			"apiKey": d.APIKey, "organizationId": d.OrganizationID, "resourceType": d.ResourceType,
			"resourceId": d.ResourceID, "userId": d.UserID, "accessRole": d.AccessRole,
		}
		update := bson.M{"$set": set}
		if d.ExpiresAt != nil {
			set["expiresAt"] = *d.ExpiresAt
		} else {
			update["$unset"] = bson.M{"expiresAt": ""}
		}
		// The filter matches only a lapsed grant, which is replaced. When there is none the
		// upsert inserts; when a grant in effect holds the _id, that insert fails with a
		// duplicate key, which is exactly "leave it untouched".
		filter := bson.M{"_id": d.ID, "expiresAt": bson.M{"$lte": storeTime(now)}}
		_, err := s.grants.UpdateOne(ctx, filter, update, options.UpdateOne().SetUpsert(true))
		if err != nil && !mongodb.IsDuplicateKey(err) {
			return fmt.Errorf("access store: put grant if absent: %w", err)
		}
	}
	return nil
}

func (s *MongoStore) DeleteGrants(ctx context.Context, apiKey string, refs []GrantRef) error {
	if len(refs) == 0 {
		return nil
	}
	ids := make([]string, 0, len(refs))
	for _, r := range refs {
		ids = append(ids, grantID(apiKey, r))
	}
	return s.deleteMany(ctx, s.grants, bson.M{"_id": bson.M{"$in": ids}, "apiKey": apiKey})
}

func (s *MongoStore) Grants(ctx context.Context, apiKey, orgID string, userIDs []string, now time.Time) ([]Grant, error) {
	out := []Grant{}
	if len(userIDs) == 0 {
		return out, nil
	}
	filter := inEffect(now)
	filter["apiKey"], filter["organizationId"], filter["userId"] = apiKey, orgID, bson.M{"$in": userIDs}
	docs, err := s.findGrants(ctx, filter)
	if err != nil {
		return nil, err
	}
	for _, d := range docs {
		out = append(out, d.grant())
	}
	return out, nil
}

func (s *MongoStore) GrantsOn(ctx context.Context, apiKey, orgID string, userIDs []string, on []Resource, now time.Time) ([]Grant, error) {
	out := []Grant{}
	if len(userIDs) == 0 || len(on) == 0 {
		return out, nil
	}
	// The users' grants in the organization (the org_users index), narrowed to the resources:
	// one clause per resource type.
	byType := map[string][]string{}
	var types []string
	for _, r := range on {
		if _, ok := byType[r.Type]; !ok {
			types = append(types, r.Type)
		}
		byType[r.Type] = append(byType[r.Type], r.ID)
	}
	resources := make(bson.A, 0, len(types))
	for _, typ := range types {
		resources = append(resources, bson.M{"resourceType": typ, "resourceId": bson.M{"$in": byType[typ]}})
	}
	filter := bson.M{
		"apiKey": apiKey, "organizationId": orgID, "userId": bson.M{"$in": userIDs},
		"$and": bson.A{inEffect(now), bson.M{"$or": resources}},
	}
	docs, err := s.findGrants(ctx, filter)
	if err != nil {
		return nil, err
	}
	for _, d := range docs {
		out = append(out, d.grant())
	}
	return out, nil
}

func (s *MongoStore) findGrants(ctx context.Context, filter bson.M) ([]grantDoc, error) {
	cur, err := s.grants.Find(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("access store: find grants: %w", err)
	}
	var docs []grantDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("access store: find grants: %w", err)
	}
	return docs, nil
}

func (s *MongoStore) deleteMany(ctx context.Context, coll *mongo.Collection, filter bson.M) error {
	if _, err := coll.DeleteMany(ctx, filter); err != nil {
		return fmt.Errorf("access store: delete from %s: %w", coll.Name(), err)
	}
	return nil
}

func (s *MongoStore) DeleteResourceGrants(ctx context.Context, apiKey, orgID, resourceType string, resourceIDs []string) error {
	if len(resourceIDs) == 0 {
		return nil
	}
	return s.deleteMany(ctx, s.grants, bson.M{
		"apiKey": apiKey, "organizationId": orgID, "resourceType": resourceType, "resourceId": bson.M{"$in": resourceIDs},
	})
}

func (s *MongoStore) MoveDocumentGrants(ctx context.Context, apiKey, orgID, from, to string, now time.Time) error {
	if from == to {
		return nil
	}
	source := bson.M{"apiKey": apiKey, "organizationId": orgID, "resourceType": ResourceDocument, "resourceId": from}
	filter := inEffect(now)
	for k, v := range source {
		filter[k] = v
	}
	docs, err := s.findGrants(ctx, filter)
	if err != nil {
		return err
	}
	moved := make([]Grant, 0, len(docs))
	for _, d := range docs {
		g := d.grant()
		g.ResourceID = to
		moved = append(moved, g)
	}
	// Copy, then delete: a crash in between leaves both, and the next delivery of the event
	// copies nothing new (the copies are in effect on to) and deletes the source.
	if err := s.PutGrantsIfAbsent(ctx, apiKey, moved, now); err != nil {
		return err
	}
	return s.deleteMany(ctx, s.grants, source)
}

func (s *MongoStore) SetContextFields(ctx context.Context, apiKey, orgID, userID string, fields []string) error {
	id := mongodb.Key(apiKey, orgID, userID)
	if len(fields) == 0 {
		if _, err := s.contexts.DeleteOne(ctx, bson.M{"_id": id}); err != nil {
			return fmt.Errorf("access store: delete context: %w", err)
		}
		return nil
	}
	d := contextDoc{ID: id, APIKey: apiKey, OrganizationID: orgID, UserID: userID, Fields: fields}
	err := retryDuplicate(func() error {
		_, err := s.contexts.ReplaceOne(ctx, bson.M{"_id": id}, d, options.Replace().SetUpsert(true))
		return err
	})
	if err != nil {
		return fmt.Errorf("access store: set context: %w", err)
	}
	return nil
}

func (s *MongoStore) ContextFields(ctx context.Context, apiKey, orgID string, userIDs []string) (map[string][]string, error) {
	out := map[string][]string{}
	if len(userIDs) == 0 {
		return out, nil
	}
	cur, err := s.contexts.Find(ctx, bson.M{"apiKey": apiKey, "organizationId": orgID, "userId": bson.M{"$in": userIDs}})
	if err != nil {
		return nil, fmt.Errorf("access store: find contexts: %w", err)
	}
	var docs []contextDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("access store: find contexts: %w", err)
	}
	for _, d := range docs {
		out[d.UserID] = d.Fields
	}
	return out, nil
}

func (s *MongoStore) RemoveUsers(ctx context.Context, apiKey, orgID string, userIDs []string) error {
	if len(userIDs) == 0 {
		return nil
	}
	filter := bson.M{"apiKey": apiKey, "organizationId": orgID, "userId": bson.M{"$in": userIDs}}
	for _, coll := range []*mongo.Collection{s.contexts, s.grants} {
		if err := s.deleteMany(ctx, coll, filter); err != nil {
			return err
		}
	}
	return nil
}

func (s *MongoStore) DeleteOrganization(ctx context.Context, apiKey, orgID string) error {
	filter := bson.M{"apiKey": apiKey, "organizationId": orgID}
	for _, coll := range []*mongo.Collection{s.contexts, s.grants} {
		if err := s.deleteMany(ctx, coll, filter); err != nil {
			return err
		}
	}
	return nil
}

func (s *MongoStore) InsertSigningKey(ctx context.Context, k *SigningKey) error {
	d := signingKeyDoc{
		ID: k.ID, PublicKey: k.PublicKey, SealedPrivateKey: k.SealedPrivateKey,
		NotBefore: storeTime(k.NotBefore), NotAfter: storeTime(k.NotAfter), CreatedAt: storeTime(k.CreatedAt),
	}
	if _, err := s.keys.InsertOne(ctx, d); err != nil {
		if mongodb.IsDuplicateKey(err) {
			return ErrKeyExists
		}
		return fmt.Errorf("access store: insert signing key: %w", err)
	}
	return nil
}

func (d signingKeyDoc) key() *SigningKey {
	return &SigningKey{
		ID: d.ID, PublicKey: d.PublicKey, SealedPrivateKey: d.SealedPrivateKey,
		NotBefore: d.NotBefore.UTC(), NotAfter: d.NotAfter.UTC(), CreatedAt: d.CreatedAt.UTC(),
	}
}

func (s *MongoStore) SigningKey(ctx context.Context, id string) (*SigningKey, error) {
	var d signingKeyDoc
	if err := s.keys.FindOne(ctx, bson.M{"_id": id}).Decode(&d); err != nil {
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("access store: find signing key: %w", err)
	}
	return d.key(), nil
}

func (s *MongoStore) SigningKeys(ctx context.Context, notAfterAfter time.Time) ([]*SigningKey, error) {
	cur, err := s.keys.Find(ctx, bson.M{"notAfter": bson.M{"$gt": storeTime(notAfterAfter)}})
	if err != nil {
		return nil, fmt.Errorf("access store: list signing keys: %w", err)
	}
	var docs []signingKeyDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("access store: list signing keys: %w", err)
	}
	out := make([]*SigningKey, 0, len(docs))
	for _, d := range docs {
		out = append(out, d.key())
	}
	// Sorted in Go: the order must not depend on the server.
	sortSigningKeys(out)
	return out, nil
}

func (s *MongoStore) Ping(ctx context.Context) error {
	if err := s.db.Client().Ping(ctx, nil); err != nil {
		return fmt.Errorf("access store: ping: %w", err)
	}
	return nil
}
