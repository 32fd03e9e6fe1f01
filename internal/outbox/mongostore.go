package outbox

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
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
	// events serialises this process's updates of one event. MongoDB applies each update
	// atomically, so lanes of several processes never lose each other's writes; FerretDB reads,
	// patches and writes a document back, so two lanes updating one event at once could. The
	// embedded FerretDB serves one process, which the locks cover.
	events [64]sync.Mutex
}

// NewMongoStore returns a store on db and creates its indexes: pending events per subscriber
// in age order (the lanes' polls; IndexLanes adds one per lane on its next attempt), and
// finished ones by age (pruning). Events written by the outbox before lanes (without
// "pending") are converted first.
func NewMongoStore(ctx context.Context, db *mongo.Database) (*MongoStore, error) {
	coll := db.Collection("outbox")
	if err := mongodb.EnsureIndexes(ctx, coll,
		mongodb.Index("pending", "pending", "createdAt"),
		mongo.IndexModel{Keys: bson.D{{Key: "doneAt", Value: 1}}, Options: options.Index().SetName("done").SetSparse(true)},
	); err != nil {
		return nil, fmt.Errorf("outbox store: %w", err)
	}
	s := &MongoStore{coll: coll}
	if err := s.convertLegacy(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// IndexLanes creates, for each subscriber, the index its lane's poll uses: pending for it, by
// its next attempt. Without it a lane whose consumer is down would read its whole backlog on
// every poll to find the few that are due.
func (s *MongoStore) IndexLanes(ctx context.Context, subscribers []string) error {
	for _, sub := range subscribers {
		if err := mongodb.EnsureIndexes(ctx, s.coll, mongodb.Index("lane_"+sub, "pending", "lanes."+sub+".next")); err != nil {
			return fmt.Errorf("outbox store: %w", err)
		}
	}
	return nil
}

// legacyRecord is an event as the outbox stored it before lanes: one delivery state for all
// subscribers, delivered in order.
type legacyRecord struct {
	ID          string    `bson:"_id"`
	Subscribers []string  `bson:"subscribers"`
	Delivered   []string  `bson:"delivered"`
	Attempts    int       `bson:"attempts"`
	NextAttempt time.Time `bson:"nextAttempt"`
	LastError   string    `bson:"lastError"`
	Finished    bool      `bson:"finished"`
	Failed      bool      `bson:"failed"`
}

// convertLegacy gives events of the old format their lanes: a finished one is done (refused by
// its first undelivered subscriber when it failed); an unfinished one is pending for every
// subscriber it did not reach, due when it was, with no gate (its producer's part, the first,
// was delivered before the others in the old order, or is pending with them).
func (s *MongoStore) convertLegacy(ctx context.Context) error {
	cur, err := s.coll.Find(ctx, bson.M{"pending": bson.M{"$exists": false}})
	if err != nil {
		return fmt.Errorf("outbox store: read old events: %w", err)
	}
	var old []legacyRecord
	if err := cur.All(ctx, &old); err != nil {
		return fmt.Errorf("outbox store: read old events: %w", err)
	}
	now := time.Now().UTC()
	for _, r := range old {
		var waiting []string
		for _, sub := range r.Subscribers {
			if !slices.Contains(r.Delivered, sub) {
				waiting = append(waiting, sub)
			}
		}
		set := bson.M{"gate": "", "refused": []string{}, "lanes": map[string]Lane{}, "pending": []string{}}
		switch {
		case r.Finished && r.Failed && len(waiting) > 0:
			set["refused"] = waiting[:1]
			set["lanes"] = map[string]Lane{waiting[0]: {Attempts: r.Attempts, LastError: r.LastError}}
			set["doneAt"] = now
		case r.Finished:
			set["doneAt"] = now
		default:
			lanes := map[string]Lane{}
			for _, sub := range waiting {
				lanes[sub] = Lane{Attempts: r.Attempts, NextAttempt: r.NextAttempt, LastError: r.LastError}
			}
			set["pending"], set["lanes"] = append([]string{}, waiting...), lanes
			if len(waiting) == 0 {
				set["doneAt"] = now
			}
		}
		if _, err := s.coll.UpdateOne(ctx, bson.M{"_id": r.ID, "pending": bson.M{"$exists": false}}, bson.M{"$set": set}); err != nil {
			return fmt.Errorf("outbox store: convert old event %s: %w", r.ID, err)
		}
	}
	return nil
}

// lock holds the process's lock of one event until the returned func runs.
func (s *MongoStore) lock(id string) func() {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	m := &s.events[h.Sum32()%uint32(len(s.events))]
	m.Lock()
	return m.Unlock
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
	defer s.lock(id)()
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
	defer s.lock(id)()
	_, err := s.coll.UpdateOne(ctx, bson.M{"_id": id, "pending": bson.M{"$size": 0}, "doneAt": bson.M{"$exists": false}},
		bson.M{"$set": bson.M{"doneAt": now}})
	if err != nil {
		return fmt.Errorf("outbox store: settle: %w", err)
	}
	return nil
}

func (s *MongoStore) Delivered(ctx context.Context, id, subscriber string, release []string, now time.Time) error {
	// The lane keeps its attempts; its last error is gone with the delivery.
	set := bson.M{"lanes." + subscriber + ".lastError": ""}
	update := bson.M{"$push": bson.M{"delivered": subscriber}, "$set": set}
	if len(release) > 0 {
		// Only the gate releases, and while it is pending it is the only one pending, so the
		// others become the whole pending list.
		set["pending"] = release
		for _, n := range release {
			set["lanes."+n] = Lane{NextAttempt: now}
		}
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

func (s *MongoStore) Prune(ctx context.Context, before, now time.Time) (int, error) {
	if _, err := s.coll.UpdateMany(ctx, bson.M{"pending": bson.M{"$size": 0}, "doneAt": bson.M{"$exists": false}}, bson.M{"$set": bson.M{"doneAt": now}}); err != nil {
		return 0, fmt.Errorf("outbox store: prune: %w", err)
	}
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

// Backlog counts the events pending for subscriber and returns the creation time of the
// oldest (zero when none): both read the "pending" index (pending, createdAt), the count in
// time proportional to the backlog.
func (s *MongoStore) Backlog(ctx context.Context, subscriber string) (int, time.Time, error) {
	filter := bson.M{"pending": subscriber}
	n, err := s.coll.CountDocuments(ctx, filter)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("outbox store: backlog: %w", err)
	}
	if n == 0 {
		return 0, time.Time{}, nil
	}
	var first struct {
		CreatedAt time.Time `bson:"createdAt"`
	}
	err = s.coll.FindOne(ctx, filter, options.FindOne().SetSort(bson.D{{Key: "createdAt", Value: 1}}).
		SetProjection(bson.M{"createdAt": 1})).Decode(&first)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return 0, time.Time{}, nil
	}
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("outbox store: backlog: %w", err)
	}
	return int(n), first.CreatedAt, nil
}

// UnmarshalBSONValue reads a stored traceparent; a value that is not a string reads as none, so
// the record it is in still decodes and its event is delivered.
func (c *TraceContext) UnmarshalBSONValue(typ byte, data []byte) error {
	s, ok := bson.RawValue{Type: bson.Type(typ), Value: data}.StringValueOK()
	if !ok {
		s = ""
	}
	*c = TraceContext(s)
	return nil
}
