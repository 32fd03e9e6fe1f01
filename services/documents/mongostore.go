package documents

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/mongodb"
)

// MongoStore keeps the documents service's data in MongoDB, one document per record:
//
//   - organizations: _id = (apiKey, organizationId)
//   - folders: _id = (apiKey, organizationId, folderId)
//   - documents: _id = (apiKey, organizationId, documentId)
//
// The compound _id makes creation a plain insert that fails on a duplicate, and lookups by id an
// _id query; the scope fields are stored too, so listings use ordinary indexes. Every write is
// a single-document operation, so no transactions are needed.
type MongoStore struct {
	db        *mongo.Database
	orgs      *mongo.Collection
	folders   *mongo.Collection
	documents *mongo.Collection
}

type orgRecord struct {
	Key          string `bson:"_id"`
	Organization `bson:",inline"`
}

type folderRecord struct {
	Key    string `bson:"_id"`
	Folder `bson:",inline"`
}

type documentRecord struct {
	Key      string `bson:"_id"`
	Document `bson:",inline"`
}

// NewMongoStore returns a store on db and creates its indexes.
func NewMongoStore(ctx context.Context, db *mongo.Database) (*MongoStore, error) {
	s := &MongoStore{db: db, orgs: db.Collection("organizations"), folders: db.Collection("folders"), documents: db.Collection("documents")}
	index := mongodb.Index
	for coll, models := range map[*mongo.Collection][]mongo.IndexModel{
		s.orgs: {index("tenant_order", "apiKey", "createdAt", "organizationId")},
		s.folders: {
			index("org_order", "apiKey", "organizationId", "createdAt", "folderId"),
			index("parent_order", "apiKey", "organizationId", "parentFolderId", "createdAt", "folderId"),
		},
		s.documents: {
			index("org_order", "apiKey", "organizationId", "createdAt", "documentId"),
			index("folder_order", "apiKey", "organizationId", "folderId", "createdAt", "documentId"),
		},
	} {
		if err := mongodb.EnsureIndexes(ctx, coll, models...); err != nil {
			return nil, fmt.Errorf("documents store: %w", err)
		}
	}
	return s, nil
}

// keys returns the _id values of ids within one scope.
func keys(ids []string, scope ...string) bson.A {
	out := make(bson.A, len(ids))
	for i, id := range ids {
		out[i] = mongodb.Key(append(scope[:len(scope):len(scope)], id)...)
	}
	return out
}

// list runs a listing query in (createdAt, idField) order.
func list[R any](ctx context.Context, coll *mongo.Collection, filter bson.M, idField string, after *Position, limit int) ([]R, error) {
	if after != nil {
		filter["$or"] = bson.A{
			bson.M{"createdAt": bson.M{"$gt": after.CreatedAt}},
			bson.M{"createdAt": after.CreatedAt, idField: bson.M{"$gt": after.ID}},
		}
	}
	opts := options.Find().SetSort(bson.D{{Key: "createdAt", Value: 1}, {Key: idField, Value: 1}})
	if limit > 0 {
		opts.SetLimit(int64(limit))
	}
	cur, err := coll.Find(ctx, filter, opts)
	if err != nil {
		return nil, fmt.Errorf("documents store: list %s: %w", coll.Name(), err)
	}
	var out []R
	if err := cur.All(ctx, &out); err != nil {
		return nil, fmt.Errorf("documents store: list %s: %w", coll.Name(), err)
	}
	return out, nil
}

func insert(ctx context.Context, coll *mongo.Collection, doc any) error {
	if _, err := coll.InsertOne(ctx, doc); err != nil {
		if mongodb.IsDuplicateKey(err) {
			return ErrExists
		}
		return fmt.Errorf("documents store: insert into %s: %w", coll.Name(), err)
	}
	return nil
}

// update applies set to the record with key and decodes the record after it into out; with
// nothing to set it only reads.
func update(ctx context.Context, coll *mongo.Collection, key string, set bson.M, out any) error {
	var res *mongo.SingleResult
	if len(set) == 0 {
		res = coll.FindOne(ctx, bson.M{"_id": key})
	} else {
		res = coll.FindOneAndUpdate(ctx, bson.M{"_id": key}, bson.M{"$set": set}, options.FindOneAndUpdate().SetReturnDocument(options.After))
	}
	if err := res.Decode(out); err != nil {
		if errors.Is(err, mongo.ErrNoDocuments) {
			return ErrNotFound
		}
		return fmt.Errorf("documents store: update %s: %w", coll.Name(), err)
	}
	return nil
}

func (s *MongoStore) CreateOrganization(ctx context.Context, o *Organization) error {
	return insert(ctx, s.orgs, orgRecord{Key: mongodb.Key(o.APIKey, o.ID), Organization: *o})
}

func (s *MongoStore) Organization(ctx context.Context, apiKey, id string) (*Organization, error) {
	var r orgRecord
	if err := s.orgs.FindOne(ctx, bson.M{"_id": mongodb.Key(apiKey, id)}).Decode(&r); err != nil {
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("documents store: find organization: %w", err)
	}
	return &r.Organization, nil
}

func (s *MongoStore) ListOrganizations(ctx context.Context, apiKey string, ids []string, after *Position, limit int) ([]*Organization, error) {
	filter := bson.M{"apiKey": apiKey}
	if len(ids) > 0 {
		filter["_id"] = bson.M{"$in": keys(ids, apiKey)}
	}
	rows, err := list[orgRecord](ctx, s.orgs, filter, "organizationId", after, limit)
	if err != nil {
		return nil, err
	}
	out := make([]*Organization, len(rows))
	for i := range rows {
		out[i] = &rows[i].Organization
	}
	return out, nil
}

func (s *MongoStore) RenameOrganization(ctx context.Context, apiKey, id, name string) error {
	var r orgRecord
	return update(ctx, s.orgs, mongodb.Key(apiKey, id), bson.M{"name": name}, &r)
}

// generation matches the given generation of a record; the empty one also matches records
// written before generations, which have no such field.
func generation(field, gen string) bson.M {
	if gen == "" {
		return bson.M{field: bson.M{"$in": bson.A{"", nil}}}
	}
	return bson.M{field: gen}
}

// with returns filter with the conditions of more added.
func with(filter bson.M, more bson.M) bson.M {
	for k, v := range more {
		filter[k] = v
	}
	return filter
}

func (s *MongoStore) DeleteOrganization(ctx context.Context, apiKey, id, gen string) error {
	// The organization goes first, so new folders and documents are refused at once; its
	// contents follow. A failure part-way leaves an error, and the event's redelivery removes
	// the rest.
	if _, err := s.orgs.DeleteOne(ctx, with(bson.M{"_id": mongodb.Key(apiKey, id)}, generation("generation", gen))); err != nil {
		return fmt.Errorf("documents store: delete organization: %w", err)
	}
	scope := with(bson.M{"apiKey": apiKey, "organizationId": id}, generation("orgGeneration", gen))
	if _, err := s.folders.DeleteMany(ctx, scope); err != nil {
		return fmt.Errorf("documents store: delete folders of organization: %w", err)
	}
	if _, err := s.documents.DeleteMany(ctx, scope); err != nil {
		return fmt.Errorf("documents store: delete documents of organization: %w", err)
	}
	return nil
}

func (s *MongoStore) CreateFolder(ctx context.Context, f *Folder) error {
	return insert(ctx, s.folders, folderRecord{Key: mongodb.Key(f.APIKey, f.OrganizationID, f.ID), Folder: *f})
}

func (s *MongoStore) ListFolders(ctx context.Context, apiKey, orgID string, filter FolderFilter, after *Position, limit int) ([]*Folder, error) {
	q := bson.M{"apiKey": apiKey, "organizationId": orgID}
	if len(filter.IDs) > 0 {
		q["_id"] = bson.M{"$in": keys(filter.IDs, apiKey, orgID)}
	}
	if len(filter.ParentIDs) > 0 {
		q["parentFolderId"] = bson.M{"$in": filter.ParentIDs}
	}
	rows, err := list[folderRecord](ctx, s.folders, q, "folderId", after, limit)
	if err != nil {
		return nil, err
	}
	out := make([]*Folder, len(rows))
	for i := range rows {
		out[i] = &rows[i].Folder
	}
	return out, nil
}

func (s *MongoStore) UpdateFolder(ctx context.Context, apiKey, orgID, id string, p FolderPatch) (*Folder, error) {
	set := bson.M{}
	if p.Name != nil {
		set["name"] = *p.Name
	}
	if p.ParentID != nil {
		set["parentFolderId"] = *p.ParentID
	}
	if p.AccessType != nil {
		set["accessType"] = *p.AccessType
	}
	var r folderRecord
	if err := update(ctx, s.folders, mongodb.Key(apiKey, orgID, id), set, &r); err != nil {
		return nil, err
	}
	return &r.Folder, nil
}

func (s *MongoStore) DeleteFolder(ctx context.Context, apiKey, orgID, id, gen string) error {
	if _, err := s.folders.DeleteOne(ctx, with(bson.M{"_id": mongodb.Key(apiKey, orgID, id)}, generation("generation", gen))); err != nil {
		return fmt.Errorf("documents store: delete folder: %w", err)
	}
	return nil
}

func (s *MongoStore) CreateDocument(ctx context.Context, d *Document) error {
	return insert(ctx, s.documents, documentRecord{Key: mongodb.Key(d.APIKey, d.OrganizationID, d.ID), Document: *d})
}

func (s *MongoStore) ListDocuments(ctx context.Context, apiKey, orgID string, filter DocumentFilter, after *Position, limit int) ([]*Document, error) {
	q := bson.M{"apiKey": apiKey, "organizationId": orgID}
	if len(filter.IDs) > 0 {
		q["_id"] = bson.M{"$in": keys(filter.IDs, apiKey, orgID)}
	}
	if filter.FolderID != "" {
		q["folderId"] = filter.FolderID
	}
	rows, err := list[documentRecord](ctx, s.documents, q, "documentId", after, limit)
	if err != nil {
		return nil, err
	}
	out := make([]*Document, len(rows))
	for i := range rows {
		out[i] = &rows[i].Document
	}
	return out, nil
}

func (s *MongoStore) UpdateDocument(ctx context.Context, apiKey, orgID, id string, p DocumentPatch) (*Document, error) {
	set := bson.M{}
	if p.Name != nil {
		set["name"] = *p.Name
	}
	if p.FolderID != nil {
		set["folderId"] = *p.FolderID
	}
	if p.Disabled != nil {
		set["disabled"] = *p.Disabled
	}
	if p.AccessType != nil {
		set["accessType"] = *p.AccessType
	}
	var r documentRecord
	if err := update(ctx, s.documents, mongodb.Key(apiKey, orgID, id), set, &r); err != nil {
		return nil, err
	}
	return &r.Document, nil
}

func (s *MongoStore) DeleteDocuments(ctx context.Context, apiKey, orgID string, docs []lifecycle.Incarnation) error {
	for _, r := range docs {
		if _, err := s.documents.DeleteOne(ctx, with(bson.M{"_id": mongodb.Key(apiKey, orgID, r.ID)}, generation("generation", r.Generation))); err != nil {
			return fmt.Errorf("documents store: delete documents: %w", err)
		}
	}
	return nil
}

func (s *MongoStore) Ping(ctx context.Context) error {
	if err := s.db.Client().Ping(ctx, nil); err != nil {
		return fmt.Errorf("documents store: ping: %w", err)
	}
	return nil
}
