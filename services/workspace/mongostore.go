package workspace

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/collab/collab/internal/mongodb"
)

// MongoStore keeps workspaces and API keys in MongoDB: collections "workspaces" (unique owner
// email) and "api_keys" (the key is the _id). Every write is a single-document operation, so it
// needs no transactions.
type MongoStore struct {
	db         *mongo.Database
	workspaces *mongo.Collection
	keys       *mongo.Collection
	places     *mongo.Collection
}

// NewMongoStore returns a store on db and creates its indexes.
func NewMongoStore(ctx context.Context, db *mongo.Database) (*MongoStore, error) {
	s := &MongoStore{db: db, workspaces: db.Collection("workspaces"), keys: db.Collection("api_keys"), places: db.Collection("key_places")}
	if _, err := s.workspaces.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys:    bson.D{{Key: "ownerEmail", Value: 1}},
		Options: options.Index().SetUnique(true).SetName("owner_email_unique"),
	}); err != nil {
		return nil, fmt.Errorf("workspace store: index workspaces.ownerEmail: %w", err)
	}
	if _, err := s.keys.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys:    bson.D{{Key: "workspaceId", Value: 1}, {Key: "createdAt", Value: 1}, {Key: "_id", Value: 1}},
		Options: options.Index().SetName("workspace_order"),
	}); err != nil {
		return nil, fmt.Errorf("workspace store: index api_keys.workspaceId: %w", err)
	}
	if err := mongodb.EnsureIndexes(ctx, s.places, mongodb.Index("workspace", "workspaceId")); err != nil {
		return nil, fmt.Errorf("workspace store: %w", err)
	}
	return s, nil
}

func (s *MongoStore) CreateWorkspace(ctx context.Context, ws *Workspace, key *APIKey) error {
	// The key goes in first: until the workspace exists it cannot authenticate (authentication
	// reads the workspace) and no listing reaches it, so a crash between the two writes leaves
	// nothing usable behind.
	if _, err := s.keys.InsertOne(ctx, key); err != nil {
		if mongodb.IsDuplicateKey(err) {
			return ErrKeyExists
		}
		return fmt.Errorf("workspace store: insert api key: %w", err)
	}
	if _, err := s.workspaces.InsertOne(ctx, ws); err != nil {
		if _, delErr := s.keys.DeleteOne(context.WithoutCancel(ctx), bson.M{"_id": key.Key}); delErr != nil {
			err = errors.Join(err, fmt.Errorf("remove key of failed workspace: %w", delErr))
		}
		if mongodb.IsDuplicateKey(err) {
			if existing, findErr := s.Workspace(ctx, ws.ID); findErr == nil && existing.OwnerEmail != ws.OwnerEmail {
				return ErrWorkspaceExists
			}
			return ErrOwnerEmailTaken
		}
		return fmt.Errorf("workspace store: insert workspace: %w", err)
	}
	return nil
}

func (s *MongoStore) findWorkspace(ctx context.Context, filter bson.M) (*Workspace, error) {
	var w Workspace
	if err := s.workspaces.FindOne(ctx, filter).Decode(&w); err != nil {
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("workspace store: find workspace: %w", err)
	}
	return &w, nil
}

func (s *MongoStore) Workspace(ctx context.Context, id string) (*Workspace, error) {
	return s.findWorkspace(ctx, bson.M{"_id": id})
}

func (s *MongoStore) WorkspaceByOwnerEmail(ctx context.Context, email string) (*Workspace, error) {
	return s.findWorkspace(ctx, bson.M{"ownerEmail": email})
}

func (s *MongoStore) updateWorkspace(ctx context.Context, filter, update bson.M) (*Workspace, error) {
	var w Workspace
	err := s.workspaces.FindOneAndUpdate(ctx, filter, update, options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&w)
	if err != nil {
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("workspace store: update workspace: %w", err)
	}
	return &w, nil
}

func (s *MongoStore) UpdateSettings(ctx context.Context, id string, p SettingsPatch) (*Workspace, error) {
	set := bson.M{}
	if p.AdvancedQueries != nil {
		set["settings.advancedQueries"] = *p.AdvancedQueries
	}
	if p.Notifications != nil {
		set["settings.notifications"] = *p.Notifications
	}
	if p.AdvancedWebhooks != nil {
		set["settings.advancedWebhooks"] = *p.AdvancedWebhooks
	}
	if p.SlackWebhookURL != nil {
		set["slackWebhookUrl"] = *p.SlackWebhookURL
	}
	if len(set) == 0 {
		return s.Workspace(ctx, id)
	}
	return s.updateWorkspace(ctx, bson.M{"_id": id}, bson.M{"$set": set})
}

func (s *MongoStore) SetWorkspaceToken(ctx context.Context, id, hash, last4 string) error {
	_, err := s.updateWorkspace(ctx, bson.M{"_id": id}, bson.M{"$set": bson.M{"tokenHash": hash, "tokenLast4": last4}})
	return err
}

func (s *MongoStore) VerifyEmail(ctx context.Context, id, tokenHash string, activateKeys bool) (*Workspace, error) {
	if tokenHash == "" {
		return nil, ErrNotFound
	}
	set := bson.M{"emailVerified": true, "verifyTokenHash": ""}
	if activateKeys {
		set["keysActive"] = true
	}
	return s.updateWorkspace(ctx, bson.M{"_id": id, "verifyTokenHash": tokenHash}, bson.M{"$set": set})
}

func (s *MongoStore) ActivateKeys(ctx context.Context, id string) error {
	_, err := s.updateWorkspace(ctx, bson.M{"_id": id}, bson.M{"$set": bson.M{"keysActive": true}})
	return err
}

// keyRecord is an API key as stored: the key and the place it holds among its workspace's
// key places (key_places). Keys stored before places existed have none.
type keyRecord struct {
	APIKey `bson:",inline"`
	Place  *int `bson:"place,omitempty"`
}

func (s *MongoStore) CreateAPIKey(ctx context.Context, key *APIKey, limit int) error {
	place, err := s.takePlace(ctx, key, limit)
	if err != nil {
		return err
	}
	if _, err := s.keys.InsertOne(ctx, keyRecord{APIKey: *key, Place: &place}); err != nil {
		// Give the place back; should that fail too, the workspace may hold one key fewer than
		// the limit, never one more.
		_, _ = s.places.DeleteOne(context.WithoutCancel(ctx), bson.M{"_id": mongodb.Key(key.WorkspaceID, strconv.Itoa(place))})
		if mongodb.IsDuplicateKey(err) {
			return ErrKeyExists
		}
		return fmt.Errorf("workspace store: insert api key: %w", err)
	}
	return nil
}

// takePlace gives a new key of the workspace one of its limit places (limit <= 0: any place): a
// record in key_places whose _id is (workspace, place number). Two creations can never take the
// same place, because taking it is an insert that the unique _id refuses to the second; that
// holds on any MongoDB-wire server, even one whose conditional updates are not atomic
// (FerretDB's are not), and needs no transaction. The keys without a place (a workspace's first
// key, stored with the workspace, and keys from before places) hold the lowest numbers: they
// are a fixed number, as every key added to an existing workspace takes a place.
func (s *MongoStore) takePlace(ctx context.Context, key *APIKey, limit int) (int, error) {
	if err := s.workspaces.FindOne(ctx, bson.M{"_id": key.WorkspaceID}, options.FindOne().SetProjection(bson.M{"_id": 1})).Err(); err != nil {
		if errors.Is(err, mongo.ErrNoDocuments) {
			return 0, ErrNotFound
		}
		return 0, fmt.Errorf("workspace store: read workspace: %w", err)
	}
	older, err := s.keys.CountDocuments(ctx, bson.M{"workspaceId": key.WorkspaceID, "place": bson.M{"$exists": false}})
	if err != nil {
		return 0, fmt.Errorf("workspace store: count api keys: %w", err)
	}
	cur, err := s.places.Find(ctx, bson.M{"workspaceId": key.WorkspaceID}, options.Find().SetProjection(bson.M{"place": 1}))
	if err != nil {
		return 0, fmt.Errorf("workspace store: read key places: %w", err)
	}
	var taken []struct {
		Place int `bson:"place"`
	}
	if err := cur.All(ctx, &taken); err != nil {
		return 0, fmt.Errorf("workspace store: read key places: %w", err)
	}
	used := make(map[int]bool, len(taken))
	for _, t := range taken {
		used[t.Place] = true
	}
	for place := int(older); limit <= 0 || place < limit; place++ {
		if used[place] {
			continue
		}
		_, err := s.places.InsertOne(ctx, bson.M{"_id": mongodb.Key(key.WorkspaceID, strconv.Itoa(place)), "workspaceId": key.WorkspaceID, "place": place, "apiKey": key.Key})
		if err == nil {
			return place, nil
		}
		if !mongodb.IsDuplicateKey(err) {
			return 0, fmt.Errorf("workspace store: take a key place: %w", err)
		}
		// Another creation took it since the read: try the next.
	}
	return 0, ErrKeyLimit
}

func (s *MongoStore) CountAPIKeys(ctx context.Context, workspaceID string) (int, error) {
	n, err := s.keys.CountDocuments(ctx, bson.M{"workspaceId": workspaceID})
	if err != nil {
		return 0, fmt.Errorf("workspace store: count api keys: %w", err)
	}
	return int(n), nil
}

func (s *MongoStore) findKey(ctx context.Context, filter bson.M) (*APIKey, error) {
	var k APIKey
	if err := s.keys.FindOne(ctx, filter).Decode(&k); err != nil {
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("workspace store: find api key: %w", err)
	}
	return &k, nil
}

func (s *MongoStore) APIKey(ctx context.Context, key string) (*APIKey, error) {
	return s.findKey(ctx, bson.M{"_id": key})
}

func (s *MongoStore) WorkspaceAPIKey(ctx context.Context, workspaceID, key string) (*APIKey, error) {
	return s.findKey(ctx, bson.M{"_id": key, "workspaceId": workspaceID})
}

func (s *MongoStore) ListAPIKeys(ctx context.Context, workspaceID string, after *KeyPosition, limit int) ([]*APIKey, error) {
	filter := bson.M{"workspaceId": workspaceID}
	if after != nil {
		filter["$or"] = bson.A{
			bson.M{"createdAt": bson.M{"$gt": after.CreatedAt}},
			bson.M{"createdAt": after.CreatedAt, "_id": bson.M{"$gt": after.Key}},
		}
	}
	cur, err := s.keys.Find(ctx, filter, options.Find().
		SetSort(bson.D{{Key: "createdAt", Value: 1}, {Key: "_id", Value: 1}}).
		SetLimit(int64(limit)))
	if err != nil {
		return nil, fmt.Errorf("workspace store: list api keys: %w", err)
	}
	var out []*APIKey
	if err := cur.All(ctx, &out); err != nil {
		return nil, fmt.Errorf("workspace store: list api keys: %w", err)
	}
	return out, nil
}

func (s *MongoStore) updateKey(ctx context.Context, filter, update bson.M) (*APIKey, error) {
	var k APIKey
	err := s.keys.FindOneAndUpdate(ctx, filter, update, options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&k)
	if err != nil {
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("workspace store: update api key: %w", err)
	}
	return &k, nil
}

func (s *MongoStore) SetAuthTokens(ctx context.Context, workspaceID, key string, tokens []AuthToken) (*APIKey, error) {
	if tokens == nil {
		tokens = []AuthToken{}
	}
	return s.updateKey(ctx, bson.M{"_id": key, "workspaceId": workspaceID},
		bson.M{"$set": bson.M{"tokens": tokens}, "$inc": bson.M{"tokenGeneration": int64(1)}})
}

func (s *MongoStore) SetAllowedDomains(ctx context.Context, key string, domains []string) (*APIKey, error) {
	if domains == nil {
		domains = []string{}
	}
	return s.updateKey(ctx, bson.M{"_id": key}, bson.M{"$set": bson.M{"allowedDomains": domains}})
}

func (s *MongoStore) Ping(ctx context.Context) error {
	if err := s.db.Client().Ping(ctx, nil); err != nil {
		return fmt.Errorf("workspace store: ping: %w", err)
	}
	return nil
}
