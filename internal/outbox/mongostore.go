package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// MongoStore keeps events in the "outbox" collection of the producer's database.
type MongoStore struct {
	coll *mongo.Collection
}

// NewMongoStore returns a store on db and creates its index.
func NewMongoStore(ctx context.Context, db *mongo.Database) (*MongoStore, error) {
	coll := db.Collection("outbox")
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys:    bson.D{{Key: "finished", Value: 1}, {Key: "nextAttempt", Value: 1}},
		Options: options.Index().SetName("due"),
	}); err != nil {
		return nil, fmt.Errorf("outbox store: index: %w", err)
	}
	return &MongoStore{coll: coll}, nil
}

func (s *MongoStore) Add(ctx context.Context, r *Record) error {
	if r.Delivered == nil {
		r.Delivered = []string{}
	}
	if _, err := s.coll.InsertOne(ctx, r); err != nil {
		return fmt.Errorf("outbox store: add: %w", err)
	}
	return nil
}

func (s *MongoStore) Get(ctx context.Context, id string) (*Record, error) {
	var r Record
	if err := s.coll.FindOne(ctx, bson.M{"_id": id}).Decode(&r); err != nil {
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("outbox store: get: %w", err)
	}
	return &r, nil
}

func (s *MongoStore) Due(ctx context.Context, now time.Time, limit int) ([]*Record, error) {
	cur, err := s.coll.Find(ctx, bson.M{"finished": false, "nextAttempt": bson.M{"$lte": now}},
		options.Find().SetSort(bson.D{{Key: "createdAt", Value: 1}, {Key: "_id", Value: 1}}).SetLimit(int64(limit)))
	if err != nil {
		return nil, fmt.Errorf("outbox store: due: %w", err)
	}
	var out []*Record
	if err := cur.All(ctx, &out); err != nil {
		return nil, fmt.Errorf("outbox store: due: %w", err)
	}
	return out, nil
}

func (s *MongoStore) update(ctx context.Context, id string, update bson.M) error {
	res, err := s.coll.UpdateOne(ctx, bson.M{"_id": id}, update)
	if err != nil {
		return fmt.Errorf("outbox store: update: %w", err)
	}
	if res.MatchedCount == 0 {
		return ErrNotFound
	}
	return nil
}

func (s *MongoStore) MarkDelivered(ctx context.Context, id, subscriber string) error {
	return s.update(ctx, id, bson.M{"$addToSet": bson.M{"delivered": subscriber}})
}

func (s *MongoStore) Retry(ctx context.Context, id string, attempts int, next time.Time, lastErr string) error {
	return s.update(ctx, id, bson.M{"$set": bson.M{"attempts": attempts, "nextAttempt": next, "lastError": lastErr}})
}

func (s *MongoStore) Finish(ctx context.Context, id string, failed bool, lastErr string) error {
	set := bson.M{"finished": true, "failed": failed}
	if lastErr != "" {
		set["lastError"] = lastErr
	}
	return s.update(ctx, id, bson.M{"$set": set})
}
