package outbox

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

// MongoStore keeps events in the "outbox" collection of the producer's database. Subscriber
// names are service names (letters only), so they are safe as field names under "lanes".
type MongoStore struct {
	coll *mongo.Collection
}

// NewMongoStore returns a store on db and creates its indexes: pending events per subscriber
// in age order (the lanes' polls), and finished ones by age (pruning).
func NewMongoStore(ctx context.Context, db *mongo.Database) (*MongoStore, error) {
	coll := db.Collection("outbox")
	if err := mongodb.EnsureIndexes(ctx, coll,
		mongodb.Index("pending", "pending", "createdAt"),
		mongo.IndexModel{Keys: bson.D{{Key: "doneAt", Value: 1}}, Options: options.Index().SetName("done").SetSparse(true)},
	); err != nil {
		return nil, fmt.Errorf("outbox store: %w", err)
	}
	return &MongoStore{coll: coll}, nil
}

func (s *MongoStore) Add(ctx context.Context, r *Record) error {
	c := *r
	for _, l := range []*[]string{&c.Pending, &c.Delivered, &c.Refused, &c.Subscribers} {
		if *l == nil {
			*l = []string{}
		}
	}
	if c.Lanes == nil {
		c.Lanes = map[string]Lane{}
	}
	if _, err := s.coll.InsertOne(ctx, &c); err != nil {
		if mongodb.IsDuplicateKey(err) {
			return ErrDuplicate
		}
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
	if r.Lanes == nil {
		r.Lanes = map[string]Lane{}
	}
	return &r, nil
}

func (s *MongoStore) Due(ctx context.Context, subscriber string, now time.Time, limit int) ([]*Record, error) {
	cur, err := s.coll.Find(ctx, bson.M{"pending": subscriber, "lanes." + subscriber + ".next": bson.M{"$lte": now}},
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

// updatePending applies update to the event if subscriber is pending on it; an event that
// exists with the subscriber no longer pending is left alone (a concurrent delivery got there
// first).
func (s *MongoStore) updatePending(ctx context.Context, id, subscriber string, update bson.M) error {
	res, err := s.coll.UpdateOne(ctx, bson.M{"_id": id, "pending": subscriber}, update)
	if err != nil {
		return fmt.Errorf("outbox store: update: %w", err)
	}
	if res.MatchedCount == 0 {
		if _, err := s.Get(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// settle stamps doneAt on an event nothing is pending for any more. It is a second write, so a
// crash between the two leaves a finished event without doneAt: it is never due again, only
// never pruned.
func (s *MongoStore) settle(ctx context.Context, id string, now time.Time) error {
	_, err := s.coll.UpdateOne(ctx, bson.M{"_id": id, "pending": bson.M{"$size": 0}, "doneAt": bson.M{"$exists": false}},
		bson.M{"$set": bson.M{"doneAt": now}})
	if err != nil {
		return fmt.Errorf("outbox store: settle: %w", err)
	}
	return nil
}

func (s *MongoStore) Delivered(ctx context.Context, id, subscriber string, release []string, now time.Time) error {
	update := bson.M{"$push": bson.M{"delivered": subscriber}}
	if len(release) > 0 {
		// Only the gate releases, and while it is pending it is the only one pending, so the
		// others become the whole pending list.
		set := bson.M{"pending": release}
		for _, n := range release {
			set["lanes."+n] = Lane{NextAttempt: now}
		}
		update["$set"] = set
	} else {
		update["$pull"] = bson.M{"pending": subscriber}
	}
	if err := s.updatePending(ctx, id, subscriber, update); err != nil {
		return err
	}
	return s.settle(ctx, id, now)
}

func (s *MongoStore) Retry(ctx context.Context, id, subscriber string, lane Lane) error {
	return s.updatePending(ctx, id, subscriber, bson.M{"$set": bson.M{"lanes." + subscriber: lane}})
}

func (s *MongoStore) Refuse(ctx context.Context, id, subscriber, reason string, now time.Time) error {
	if err := s.updatePending(ctx, id, subscriber, bson.M{
		"$pull": bson.M{"pending": subscriber},
		"$push": bson.M{"refused": subscriber},
		"$set":  bson.M{"lanes." + subscriber + ".lastError": reason},
	}); err != nil {
		return err
	}
	return s.settle(ctx, id, now)
}

func (s *MongoStore) Prune(ctx context.Context, before time.Time) (int, error) {
	res, err := s.coll.DeleteMany(ctx, bson.M{"doneAt": bson.M{"$lt": before}})
	if err != nil {
		return 0, fmt.Errorf("outbox store: prune: %w", err)
	}
	return int(res.DeletedCount), nil
}

func (s *MongoStore) Ping(ctx context.Context) error {
	if err := s.coll.Database().Client().Ping(ctx, nil); err != nil {
		return fmt.Errorf("outbox store: ping: %w", err)
	}
	return nil
}
