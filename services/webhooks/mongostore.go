package webhooks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/collab/collab/internal/ids"
	"github.com/collab/collab/internal/mongodb"
)

// MongoStore keeps the webhooks service's data in MongoDB, one document per fact so that every
// write is a single-document operation or a batch of them whose repeat finishes a partial run,
// and no transaction is needed:
//
//   - configs: a tenant's advanced config; _id = apiKey
//   - basic_configs: a tenant's basic config; _id = apiKey
//   - endpoints: an endpoint; _id = (apiKey, id)
//   - endpoint_places: one of a tenant's MaxEndpoints places, held by an endpoint;
//     _id = (apiKey, place number)
//   - messages: a message; _id = (apiKey, id)
//   - deliveries: a message to an endpoint; _id = Delivery.ID, fixed by both
//   - attempts: one try of a delivery; _id = (apiKey, id)
//   - rate_slots: the deliveries to an endpoint in one second; _id = (endpointKey, second)
//
// The compound _ids make a record unique by id in its tenant on any MongoDB-wire server, under
// concurrent writers too. Listings walk an index on (apiKey, [messageId | endpointId,] id) from a
// keyset condition, never skipping, so a deep page costs what the first does.
//
// Where store.go leaves room, both stores (and the suite) hold to this:
//   - Times are kept to the millisecond, in UTC.
//   - limit <= 0 lists everything (ListEndpoints, ListMessages, DueDeliveries, ListAttempts);
//     non-nil empty types select no message.
//   - Room (DueDeliveries) names endpoints by id and workspaces by id.
//   - Empty FilterTypes, Channels and Metadata are unset (nil), on create and in a patch.
//   - A patch that sets Disabled (either way) clears DisabledReason: the tenant decided.
//     Every UpdateEndpoint, SetSecrets and DisableEndpoint sets UpdatedAt; SetFailing and
//     ClearFailing do not. UpdateConfig and UpdateBasicConfig set UpdatedAt.
//   - DeleteEndpoint removes the endpoint's pending deliveries even when the endpoint is gone
//     already (a repeat finishes a run cut short); finished ones stay for the history.
//   - ClaimDelivery is false (no error) for an unknown delivery. FinishDelivery refuses a state
//     that is not pending, success or failed, and clears LeaseUntil. ClaimDelivery and
//     FinishDelivery leave UpdatedAt alone and set it, respectively.
//   - Requeue leaves LeaseUntil as it is (a worker holding the lease may be sending it now); it
//     counts the distinct ids that exist.
//   - FailedDeliveries takes a delivery's CreatedAt as its message's creation (the engine
//     queues a message's deliveries with it) and answers ids in (CreatedAt, ID) order.
//   - AddAttempt returns ErrExists for an id the tenant has already.
//   - TakeSlot counts every call, the refused ones too.
//   - Prune removes messages by CreatedAt, attempts by Timestamp, success and failed deliveries
//     by CreatedAt, and the rate slots of seconds before the time.
type MongoStore struct {
	// FerretDB applies an update by reading the document, changing it and writing it back
	// without a lock, so on it a conditional update is not atomic and two concurrent updates of
	// one document can lose one of them; on MongoDB each of these updates is one atomic
	// operation, so two processes never both win. The embedded FerretDB serves one process,
	// which these locks cover.
	//
	// claimMu serialises this process's delivery claims (two could both take a delivery) and
	// requeues (one could drop a concurrent claim's lease).
	claimMu sync.Mutex
	// configMu serialises config updates: two partial updates could each lose the other's field.
	configMu sync.Mutex
	// endpointMu serialises endpoint updates, for the same reason, and SetFailing's "only when
	// none is recorded".
	endpointMu sync.Mutex
	// slotMu serialises rate slot counts: two $inc could count one.
	slotMu sync.Mutex
	// sweptSec is the second rate slots were last swept behind (under slotMu).
	sweptSec int64
	// byIDOnly is set on FerretDB, which evaluates every filter but an _id equality by decoding
	// each document of the collection: there the batch reads go by _id one at a time, each a
	// lookup instead of a scan. (Writes stay conditional: a lease checked apart from its write
	// would not hold against another replica's claim.)
	byIDOnly bool

	db           *mongo.Database
	configs      *mongo.Collection
	basicConfigs *mongo.Collection
	endpoints    *mongo.Collection
	messages     *mongo.Collection
	deliveries   *mongo.Collection
	attempts     *mongo.Collection
	slots        *mongo.Collection
	places       *mongo.Collection
}

// batchSize is how many documents one insert or one $in carries.
const batchSize = 1000

// slotTTL is how long MongoDB keeps a rate slot after its second (a TTL index, where the server
// has them).
const slotTTL = 2 * time.Minute

// NewMongoStore returns a store on db and creates its indexes.
func NewMongoStore(ctx context.Context, db *mongo.Database) (*MongoStore, error) {
	s := &MongoStore{
		db:           db,
		configs:      db.Collection("configs"),
		basicConfigs: db.Collection("basic_configs"),
		endpoints:    db.Collection("endpoints"),
		messages:     db.Collection("messages"),
		deliveries:   db.Collection("deliveries"),
		attempts:     db.Collection("attempts"),
		slots:        db.Collection("rate_slots"),
		places:       db.Collection("endpoint_places"),
	}
	var build bson.M
	if err := db.RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&build); err != nil {
		return nil, fmt.Errorf("webhooks store: build info: %w", err)
	}
	_, s.byIDOnly = build["ferretdbVersion"]
	index := mongodb.Index
	for _, c := range []struct {
		coll   *mongo.Collection
		models []mongo.IndexModel
	}{
		{s.endpoints, []mongo.IndexModel{index("tenant_id", "apiKey", "id")}},
		{s.places, []mongo.IndexModel{index("tenant_endpoint", "apiKey", "endpointId")}},
		{s.messages, []mongo.IndexModel{
			index("tenant_id", "apiKey", "id"),
			index("created", "createdAt"), // Prune
		}},
		{s.deliveries, []mongo.IndexModel{
			index("due", "state", "next", "_id"),
			index("endpoint_state", "apiKey", "endpointId", "state", "createdAt"),
			index("message", "apiKey", "messageId"),
			// ListMessages of an endpoint walks its message ids newest first.
			index("endpoint_message", "apiKey", "endpointId", "messageId"),
			index("created", "createdAt"), // Prune
		}},
		{s.attempts, []mongo.IndexModel{
			index("tenant_id", "apiKey", "id"),
			index("message_id", "apiKey", "messageId", "id"),
			index("endpoint_id", "apiKey", "endpointId", "id"),
			index("ts", "ts"), // Prune
		}},
	} {
		if err := mongodb.EnsureIndexes(ctx, c.coll, c.models...); err != nil {
			return nil, fmt.Errorf("webhooks store: %w", err)
		}
	}
	// Rate slots expire by a TTL index on MongoDB. FerretDB has no TTL indexes (it refuses the
	// option as not implemented): there a plain index serves the deletes of TakeSlot's sweep and
	// of Prune, which run on every server.
	ttl := mongo.IndexModel{
		Keys:    bson.D{{Key: "at", Value: 1}},
		Options: options.Index().SetName("expire").SetExpireAfterSeconds(int32(slotTTL / time.Second)),
	}
	if err := mongodb.EnsureIndexes(ctx, s.slots, ttl); err != nil {
		if !notImplemented(err) {
			return nil, fmt.Errorf("webhooks store: %w", err)
		}
		if err := mongodb.EnsureIndexes(ctx, s.slots, index("at", "at")); err != nil {
			return nil, fmt.Errorf("webhooks store: %w", err)
		}
	}
	return s, nil
}

// notImplemented reports whether the server refused a command as not implemented (FerretDB).
func notImplemented(err error) bool {
	var ce mongo.CommandError
	if errors.As(err, &ce) && (ce.Code == 238 || ce.Name == "NotImplemented") {
		return true
	}
	return err != nil && strings.Contains(err.Error(), "not implemented")
}

// Stored forms: the record's fields and its compound _id.
type (
	endpointDoc struct {
		Key      string `bson:"_id"`
		Endpoint `bson:",inline"`
	}
	messageDoc struct {
		Key     string `bson:"_id"`
		Message `bson:",inline"`
	}
	attemptDoc struct {
		Key     string `bson:"_id"`
		Attempt `bson:",inline"`
	}
)

func tenantKey(apiKey, id string) string { return mongodb.Key(apiKey, id) }

func tenantKeys(apiKey string, ids []string) []string {
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = tenantKey(apiKey, id)
	}
	return keys
}

// anyOf matches any of vs.
func anyOf[T any](vs []T) bson.M { return bson.M{"$in": vs} }

// chunks cuts vs into slices of at most batchSize.
func chunks[T any](vs []T) [][]T { return slices.Collect(slices.Chunk(vs, batchSize)) }

func findAll(ctx context.Context, coll *mongo.Collection, q any, out any, opts ...options.Lister[options.FindOptions]) error {
	cur, err := coll.Find(ctx, q, opts...)
	if err != nil {
		return err
	}
	return cur.All(ctx, out)
}

// limited sets limit on opts when it is positive.
func limited(opts *options.FindOptionsBuilder, limit int) *options.FindOptionsBuilder {
	if limit > 0 {
		opts.SetLimit(int64(limit))
	}
	return opts
}

// newestFirst are the find options of a listing by id, descending.
func newestFirst(limit int) *options.FindOptionsBuilder {
	return limited(options.Find().SetSort(bson.D{{Key: "id", Value: -1}}), limit)
}

// upsert runs a FindOneAndUpdate that may create the document and decodes the result into out.
// Two processes creating one document at once: the loser gets a duplicate key, once, and
// updates the winner's.
func upsert(ctx context.Context, coll *mongo.Collection, id string, update bson.M, out any) error {
	opts := options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)
	var err error
	for range 2 {
		if err = coll.FindOneAndUpdate(ctx, bson.M{"_id": id}, update, opts).Decode(out); err == nil || !mongodb.IsDuplicateKey(err) {
			break
		}
	}
	return err
}

// configUpdate is the update of a partial config patch: $set of the given fields and of
// updatedAt, and $setOnInsert of the zero value of the others, so that a new config is whole.
// (The server refuses a path in both.)
func configUpdate(fields map[string]any, given map[string]bool, now time.Time) bson.M {
	set, onInsert := bson.M{"updatedAt": now}, bson.M{}
	for k, v := range fields {
		if given[k] {
			set[k] = v
		} else {
			onInsert[k] = v
		}
	}
	update := bson.M{"$set": set}
	if len(onInsert) > 0 {
		update["$setOnInsert"] = onInsert
	}
	return update
}

// patchField records a patch field: its value when set, else the zero value.
func patchField[T any](fields map[string]any, given map[string]bool, name string, p *T) {
	var v T
	if p != nil {
		v, given[name] = *p, true
	}
	fields[name] = v
}

func (s *MongoStore) Config(ctx context.Context, apiKey string) (*Config, error) {
	var c Config
	err := s.configs.FindOne(ctx, bson.M{"_id": apiKey}).Decode(&c)
	if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		return nil, fmt.Errorf("webhooks store: config: %w", err)
	}
	return &c, nil
}

func (s *MongoStore) UpdateConfig(ctx context.Context, apiKey string, p ConfigPatch, now time.Time) (*Config, error) {
	fields, given := map[string]any{}, map[string]bool{}
	patchField(fields, given, "isEnabled", p.Enabled)
	patchField(fields, given, "encryptData", p.EncryptData)
	patchField(fields, given, "encodeData", p.EncodeData)
	patchField(fields, given, "publicKey", p.PublicKey)
	patchField(fields, given, "enableDataProtection", p.DataProtection)
	s.configMu.Lock()
	defer s.configMu.Unlock()
	var c Config
	if err := upsert(ctx, s.configs, apiKey, configUpdate(fields, given, now), &c); err != nil {
		return nil, fmt.Errorf("webhooks store: update config: %w", err)
	}
	return &c, nil
}

func (s *MongoStore) BasicConfig(ctx context.Context, apiKey string) (*BasicConfig, error) {
	var c BasicConfig
	err := s.basicConfigs.FindOne(ctx, bson.M{"_id": apiKey}).Decode(&c)
	if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		return nil, fmt.Errorf("webhooks store: basic config: %w", err)
	}
	return &c, nil
}

func (s *MongoStore) UpdateBasicConfig(ctx context.Context, apiKey string, p BasicConfigPatch, now time.Time) (*BasicConfig, error) {
	fields, given := map[string]any{}, map[string]bool{}
	patchField(fields, given, "useWebhookService", p.UseWebhookService)
	patchField(fields, given, "authToken", p.AuthToken)
	patchField(fields, given, "rawNotificationUrl", p.RawURL)
	patchField(fields, given, "processedNotificationUrl", p.ProcessedURL)
	patchField(fields, given, "triggers", p.Triggers)
	s.configMu.Lock()
	defer s.configMu.Unlock()
	var c BasicConfig
	if err := upsert(ctx, s.basicConfigs, apiKey, configUpdate(fields, given, now), &c); err != nil {
		return nil, fmt.Errorf("webhooks store: update basic config: %w", err)
	}
	return &c, nil
}

// CreateEndpoint first takes one of the tenant's MaxEndpoints places: a record in
// endpoint_places whose _id is (apiKey, place number). Taking a place is an insert, which the
// unique _id refuses to a second taker, so the limit holds under concurrent creations on any
// MongoDB-wire server (FerretDB's conditional updates are not atomic; its inserts are) without
// a transaction. Deleting the endpoint gives its place back.
func (s *MongoStore) CreateEndpoint(ctx context.Context, e *Endpoint) error {
	place, err := s.takePlace(ctx, e.APIKey, e.ID)
	if err != nil {
		return err
	}
	doc := endpointDoc{Key: tenantKey(e.APIKey, e.ID), Endpoint: *e}
	// Empty filters and metadata are unset; the encoder omits them.
	_, err = s.endpoints.InsertOne(ctx, doc)
	if err != nil {
		// Give the place back; should that fail too, the tenant holds one place fewer until the
		// endpoint id is deleted (which frees its places).
		_, _ = s.places.DeleteOne(context.WithoutCancel(ctx), bson.M{"_id": place})
	}
	switch {
	case mongodb.IsDuplicateKey(err):
		return ErrExists
	case err != nil:
		return fmt.Errorf("webhooks store: create endpoint: %w", err)
	}
	return nil
}

// takePlace inserts a free place of the tenant for the endpoint and returns its _id, or
// ErrLimit when all are taken.
func (s *MongoStore) takePlace(ctx context.Context, apiKey, endpointID string) (string, error) {
	var taken []struct {
		N int `bson:"n"`
	}
	if err := findAll(ctx, s.places, bson.M{"apiKey": apiKey}, &taken, options.Find().SetProjection(bson.M{"n": 1})); err != nil {
		return "", fmt.Errorf("webhooks store: endpoint places: %w", err)
	}
	used := make(map[int]bool, len(taken))
	for _, t := range taken {
		used[t.N] = true
	}
	for n := range MaxEndpoints {
		if used[n] {
			continue
		}
		id := mongodb.Key(apiKey, strconv.Itoa(n))
		_, err := s.places.InsertOne(ctx, bson.M{"_id": id, "apiKey": apiKey, "n": n, "endpointId": endpointID})
		if err == nil {
			return id, nil
		}
		if !mongodb.IsDuplicateKey(err) {
			return "", fmt.Errorf("webhooks store: take an endpoint place: %w", err)
		}
		// Taken meanwhile by a concurrent creation: try the next.
	}
	return "", ErrLimit
}

func (s *MongoStore) Endpoint(ctx context.Context, apiKey, id string) (*Endpoint, error) {
	var e Endpoint
	if err := s.endpoints.FindOne(ctx, bson.M{"_id": tenantKey(apiKey, id)}).Decode(&e); err != nil {
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("webhooks store: endpoint: %w", err)
	}
	return &e, nil
}

func (s *MongoStore) UpdateEndpoint(ctx context.Context, apiKey, id string, p EndpointPatch, now time.Time) (*Endpoint, error) {
	set, unset := bson.M{"updatedAt": now}, bson.M{}
	if p.URL != nil {
		set["url"] = *p.URL
	}
	if p.Description != nil {
		set["description"] = *p.Description
	}
	for field, v := range map[string][]string{"filterTypes": p.FilterTypes, "channels": p.Channels} {
		switch {
		case v == nil:
		case len(v) == 0:
			unset[field] = ""
		default:
			set[field] = v
		}
	}
	if p.Disabled != nil {
		set["disabled"], set["disabledReason"] = *p.Disabled, ""
		if !*p.Disabled {
			set["failingSince"] = time.Time{}
		}
	}
	if p.RateLimit != nil {
		set["rateLimit"] = *p.RateLimit
	}
	if p.UID != nil {
		set["uid"] = *p.UID
	}
	switch {
	case p.Metadata == nil:
	case len(p.Metadata) == 0:
		unset["metadata"] = ""
	default:
		set["metadata"] = p.Metadata
	}
	for field, cleared := range map[string]bool{"description": p.Clear.Description, "filterTypes": p.Clear.FilterTypes,
		"channels": p.Clear.Channels, "rateLimit": p.Clear.RateLimit, "uid": p.Clear.UID, "metadata": p.Clear.Metadata} {
		if cleared {
			// One operator per field: MongoDB refuses an update that both sets and unsets it.
			delete(set, field)
			unset[field] = ""
		}
	}
	update := bson.M{"$set": set}
	if len(unset) > 0 {
		update["$unset"] = unset
	}
	s.endpointMu.Lock()
	defer s.endpointMu.Unlock()
	var e Endpoint
	err := s.endpoints.FindOneAndUpdate(ctx, bson.M{"_id": tenantKey(apiKey, id)}, update,
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&e)
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
		return nil, ErrNotFound
	case err != nil:
		return nil, fmt.Errorf("webhooks store: update endpoint: %w", err)
	}
	return &e, nil
}

func (s *MongoStore) DeleteEndpoint(ctx context.Context, apiKey, id string) error {
	res, err := s.endpoints.DeleteOne(ctx, bson.M{"_id": tenantKey(apiKey, id)})
	if err != nil {
		return fmt.Errorf("webhooks store: delete endpoint: %w", err)
	}
	// Its place goes back (also on a repeat: a run cut short is finished by it).
	if _, err := s.places.DeleteMany(ctx, bson.M{"apiKey": apiKey, "endpointId": id}); err != nil {
		return fmt.Errorf("webhooks store: delete endpoint: place: %w", err)
	}
	// Then its pending deliveries, also when the endpoint was gone already: a run cut short
	// between the two is finished by its repeat.
	if _, err := s.deliveries.DeleteMany(ctx, bson.D{
		{Key: "apiKey", Value: apiKey}, {Key: "endpointId", Value: id}, {Key: "state", Value: StatePending},
	}); err != nil {
		return fmt.Errorf("webhooks store: delete endpoint: deliveries: %w", err)
	}
	if res.DeletedCount == 0 {
		return ErrNotFound
	}
	return nil
}

func (s *MongoStore) ListEndpoints(ctx context.Context, apiKey, after string, limit int) ([]*Endpoint, error) {
	q := bson.D{{Key: "apiKey", Value: apiKey}}
	if after != "" {
		q = append(q, bson.E{Key: "id", Value: bson.M{"$gt": after}})
	}
	out := []*Endpoint{}
	if err := findAll(ctx, s.endpoints, q, &out, limited(options.Find().SetSort(bson.D{{Key: "id", Value: 1}}), limit)); err != nil {
		return nil, fmt.Errorf("webhooks store: list endpoints: %w", err)
	}
	return out, nil
}

func (s *MongoStore) Endpoints(ctx context.Context, apiKey string) ([]*Endpoint, error) {
	return s.ListEndpoints(ctx, apiKey, "", 0)
}

func (s *MongoStore) EndpointsByRef(ctx context.Context, refs []Ref) (map[Ref]*Endpoint, error) {
	out := make(map[Ref]*Endpoint, len(refs))
	if s.byIDOnly {
		return out, eachByID(refs, out, func(r Ref) (*Endpoint, error) { return s.Endpoint(ctx, r.APIKey, r.ID) })
	}
	for _, batch := range chunks(refs) {
		keys := make([]string, len(batch))
		for i, r := range batch {
			keys[i] = tenantKey(r.APIKey, r.ID)
		}
		var found []*Endpoint
		if err := findAll(ctx, s.endpoints, bson.M{"_id": anyOf(keys)}, &found); err != nil {
			return nil, fmt.Errorf("webhooks store: endpoints: %w", err)
		}
		for _, e := range found {
			out[Ref{e.APIKey, e.ID}] = e
		}
	}
	return out, nil
}

// eachByID reads each distinct reference with read into out, leaving out those not found (the
// byIDOnly way of a batch read).
func eachByID[T any](refs []Ref, out map[Ref]*T, read func(Ref) (*T, error)) error {
	for _, r := range refs {
		if _, done := out[r]; done {
			continue
		}
		v, err := read(r)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return err
		default:
			out[r] = v
		}
	}
	return nil
}

// updateEndpoint applies update to the endpoint, or returns ErrNotFound.
func (s *MongoStore) updateEndpoint(ctx context.Context, what, apiKey, id string, update bson.M) error {
	s.endpointMu.Lock()
	defer s.endpointMu.Unlock()
	res, err := s.endpoints.UpdateOne(ctx, bson.M{"_id": tenantKey(apiKey, id)}, update)
	if err != nil {
		return fmt.Errorf("webhooks store: %s: %w", what, err)
	}
	if res.MatchedCount == 0 {
		return ErrNotFound
	}
	return nil
}

func (s *MongoStore) SetSecrets(ctx context.Context, apiKey, id string, secrets []Secret, now time.Time) error {
	return s.updateEndpoint(ctx, "set secrets", apiKey, id, bson.M{"$set": bson.M{"secrets": secrets, "updatedAt": now}})
}

// SwapSecrets writes only over the very secrets read: the filter holds them whole (the stored
// array of {value, expiresAt}, as the driver wrote it from the same struct).
func (s *MongoStore) SwapSecrets(ctx context.Context, apiKey, id string, old, secrets []Secret, now time.Time) error {
	s.endpointMu.Lock()
	defer s.endpointMu.Unlock()
	key := tenantKey(apiKey, id)
	filter := bson.M{"_id": key, "secrets": old}
	if len(old) == 0 {
		filter["secrets"] = bson.M{"$in": bson.A{nil, bson.A{}}}
	}
	return s.updateIfStill(ctx, "swap secrets", filter, bson.M{"$set": bson.M{"secrets": secrets, "updatedAt": now}}, ErrChanged)
}

// updateIfStill applies update to the endpoint filter names (by _id and a condition) and
// returns nil; when the condition no longer holds it returns otherwise, or ErrNotFound when
// there is no such endpoint.
func (s *MongoStore) updateIfStill(ctx context.Context, what string, filter, update bson.M, otherwise error) error {
	res, err := s.endpoints.UpdateOne(ctx, filter, update)
	if err != nil {
		return fmt.Errorf("webhooks store: %s: %w", what, err)
	}
	if res.MatchedCount > 0 {
		return nil
	}
	err = s.endpoints.FindOne(ctx, bson.M{"_id": filter["_id"]}, options.FindOne().SetProjection(bson.M{"_id": 1})).Err()
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
		return ErrNotFound
	case err != nil:
		return fmt.Errorf("webhooks store: %s: %w", what, err)
	}
	return otherwise
}

func (s *MongoStore) SetFailing(ctx context.Context, apiKey, id string, since time.Time) error {
	s.endpointMu.Lock()
	defer s.endpointMu.Unlock()
	// Only when no run of failures is recorded yet; one that is stays (nil).
	return s.updateIfStill(ctx, "set failing", bson.M{"_id": tenantKey(apiKey, id), "failingSince": time.Time{}},
		bson.M{"$set": bson.M{"failingSince": since}}, nil)
}

func (s *MongoStore) ClearFailing(ctx context.Context, apiKey, id string) error {
	return s.updateEndpoint(ctx, "clear failing", apiKey, id, bson.M{"$set": bson.M{"failingSince": time.Time{}}})
}

func (s *MongoStore) DisableEndpoint(ctx context.Context, apiKey, id, reason string, now time.Time) error {
	return s.updateEndpoint(ctx, "disable endpoint", apiKey, id,
		bson.M{"$set": bson.M{"disabled": true, "disabledReason": reason, "updatedAt": now}})
}

func (s *MongoStore) AddMessage(ctx context.Context, m *Message) error {
	_, err := s.messages.InsertOne(ctx, messageDoc{Key: tenantKey(m.APIKey, m.ID), Message: *m})
	switch {
	case mongodb.IsDuplicateKey(err):
		return ErrExists
	case err != nil:
		return fmt.Errorf("webhooks store: add message: %w", err)
	}
	return nil
}

func (s *MongoStore) Message(ctx context.Context, apiKey, id string) (*Message, error) {
	var m Message
	if err := s.messages.FindOne(ctx, bson.M{"_id": tenantKey(apiKey, id)}).Decode(&m); err != nil {
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("webhooks store: message: %w", err)
	}
	return &m, nil
}

func (s *MongoStore) Messages(ctx context.Context, refs []Ref) (map[Ref]*Message, error) {
	out := make(map[Ref]*Message, len(refs))
	if s.byIDOnly {
		return out, eachByID(refs, out, func(r Ref) (*Message, error) { return s.Message(ctx, r.APIKey, r.ID) })
	}
	for _, batch := range chunks(refs) {
		keys := make([]string, len(batch))
		for i, r := range batch {
			keys[i] = tenantKey(r.APIKey, r.ID)
		}
		var found []*Message
		if err := findAll(ctx, s.messages, bson.M{"_id": anyOf(keys)}, &found); err != nil {
			return nil, fmt.Errorf("webhooks store: messages: %w", err)
		}
		for _, m := range found {
			out[Ref{m.APIKey, m.ID}] = m
		}
	}
	return out, nil
}

func (s *MongoStore) ListMessages(ctx context.Context, apiKey, endpointID string, types []string, after string, limit int) ([]*Message, error) {
	out := []*Message{}
	if types != nil && len(types) == 0 {
		return out, nil
	}
	var err error
	if endpointID == "" {
		q := bson.D{{Key: "apiKey", Value: apiKey}}
		if after != "" {
			q = append(q, bson.E{Key: "id", Value: bson.M{"$lt": after}})
		}
		if types != nil {
			q = append(q, bson.E{Key: "eventType", Value: anyOf(types)})
		}
		err = findAll(ctx, s.messages, q, &out, newestFirst(limit))
	} else {
		out, err = s.endpointMessages(ctx, apiKey, endpointID, types, after, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("webhooks store: list messages: %w", err)
	}
	return out, nil
}

// endpointMessages lists the messages queued to an endpoint: it walks the message ids of the
// endpoint's deliveries newest first, a batch at a time, and reads the messages of each batch
// (those of the types, and not pruned) until it has limit of them.
func (s *MongoStore) endpointMessages(ctx context.Context, apiKey, endpointID string, types []string, after string, limit int) ([]*Message, error) {
	batch := batchSize
	if limit > 0 {
		batch = min(max(2*limit, 32), batchSize)
	}
	out := []*Message{}
	for {
		q := bson.D{{Key: "apiKey", Value: apiKey}, {Key: "endpointId", Value: endpointID}}
		if after != "" {
			q = append(q, bson.E{Key: "messageId", Value: bson.M{"$lt": after}})
		}
		var ds []struct {
			MessageID string `bson:"messageId"`
		}
		if err := findAll(ctx, s.deliveries, q, &ds, options.Find().
			SetSort(bson.D{{Key: "messageId", Value: -1}}).SetLimit(int64(batch)).
			SetProjection(bson.M{"_id": 0, "messageId": 1})); err != nil {
			return nil, fmt.Errorf("deliveries: %w", err)
		}
		if len(ds) == 0 {
			return out, nil
		}
		ids := make([]string, len(ds))
		for i, d := range ds {
			ids[i] = d.MessageID
		}
		mq := bson.D{{Key: "_id", Value: anyOf(tenantKeys(apiKey, ids))}}
		if types != nil {
			mq = append(mq, bson.E{Key: "eventType", Value: anyOf(types)})
		}
		var found []*Message
		if err := findAll(ctx, s.messages, mq, &found, newestFirst(0)); err != nil {
			return nil, fmt.Errorf("messages: %w", err)
		}
		for _, m := range found {
			if limit > 0 && len(out) == limit {
				return out, nil
			}
			out = append(out, m)
		}
		if len(ds) < batch {
			return out, nil
		}
		after = ids[len(ids)-1]
	}
}

func (s *MongoStore) QueueDeliveries(ctx context.Context, ds []*Delivery) error {
	if err := mongodb.InsertNew(ctx, s.deliveries, ds, batchSize); err != nil {
		return fmt.Errorf("webhooks store: queue deliveries: %w", err)
	}
	return nil
}

func (s *MongoStore) Delivery(ctx context.Context, id string) (*Delivery, error) {
	var d Delivery
	if err := s.deliveries.FindOne(ctx, bson.M{"_id": id}).Decode(&d); err != nil {
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("webhooks store: delivery: %w", err)
	}
	return &d, nil
}

// dueFilter selects the pending deliveries whose next attempt and lease are not after now.
func dueFilter(now time.Time) bson.D {
	return bson.D{
		{Key: "state", Value: StatePending},
		{Key: "next", Value: bson.M{"$lte": now}},
		{Key: "leaseUntil", Value: bson.M{"$lte": now}},
	}
}

func (s *MongoStore) DueDeliveries(ctx context.Context, now time.Time, limit int, room Room) ([]*Delivery, error) {
	q := dueFilter(now)
	if ids := fullOnes(room.Endpoints); len(ids) > 0 {
		q = append(q, bson.E{Key: "endpointId", Value: bson.M{"$nin": ids}})
	}
	if ids := fullOnes(room.Workspaces); len(ids) > 0 {
		// Deliveries queued before workspaces were kept have none: "" stands for them.
		vals := make([]any, 0, len(ids)+1)
		for _, id := range ids {
			vals = append(vals, id)
			if id == "" {
				vals = append(vals, nil)
			}
		}
		q = append(q, bson.E{Key: "workspaceId", Value: bson.M{"$nin": vals}})
	}
	opts := limited(options.Find().SetSort(bson.D{{Key: "next", Value: 1}, {Key: "_id", Value: 1}}), limit)
	out := []*Delivery{}
	if err := findAll(ctx, s.deliveries, q, &out, opts); err != nil {
		return nil, fmt.Errorf("webhooks store: due deliveries: %w", err)
	}
	takenEp, takenWs := map[string]int{}, map[string]int{}
	return slices.DeleteFunc(out, func(d *Delivery) bool {
		if takenEp[d.EndpointID] >= room.endpoint(d.EndpointID) || takenWs[d.WorkspaceID] >= room.workspace(d.WorkspaceID) {
			return true
		}
		takenEp[d.EndpointID]++
		takenWs[d.WorkspaceID]++
		return false
	}), nil
}

// fullOnes returns the ids without room.
func fullOnes(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k, n := range m {
		if n <= 0 {
			out = append(out, k)
		}
	}
	return out
}

func (s *MongoStore) ClaimDelivery(ctx context.Context, id string, now, until time.Time) (bool, error) {
	won, err := s.ClaimDeliveries(ctx, []string{id}, now, until)
	return len(won) == 1, err
}

// ClaimDeliveries leases with one update of every delivery named that is still due, marking
// them with a token of its own, and reads back the ones that carry it when the update did not
// take them all. Each document's update is atomic on MongoDB, so two claims never both take a
// delivery; on FerretDB claimMu serialises this process's claims (see MongoStore).
func (s *MongoStore) ClaimDeliveries(ctx context.Context, want []string, now, until time.Time) ([]string, error) {
	if len(want) == 0 {
		return nil, nil
	}
	token := ids.Random(16)
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	var won []string
	for _, batch := range chunks(want) {
		q := append(bson.D{{Key: "_id", Value: anyOf(batch)}}, dueFilter(now)...)
		res, err := s.deliveries.UpdateMany(ctx, q, bson.M{"$set": bson.M{"leaseUntil": until, "claim": token}})
		if err != nil {
			return won, fmt.Errorf("webhooks store: claim deliveries: %w", err)
		}
		if int(res.ModifiedCount) == len(batch) {
			won = append(won, batch...)
			continue
		}
		if res.ModifiedCount == 0 {
			continue
		}
		var got []struct {
			ID string `bson:"_id"`
		}
		if err := findAll(ctx, s.deliveries, bson.M{"_id": anyOf(batch), "claim": token}, &got, options.Find().SetProjection(bson.M{"_id": 1})); err != nil {
			return won, fmt.Errorf("webhooks store: claim deliveries: %w", err)
		}
		for _, g := range got {
			won = append(won, g.ID)
		}
	}
	return won, nil
}

// FinishDelivery is not under claimMu: only the lease holder finishes a delivery, and a claim
// can touch it only once that lease has run out, when the same race exists on MongoDB too.
func (s *MongoStore) FinishDelivery(ctx context.Context, id, state string, attempts int, next, now time.Time) error {
	if err := checkState(state); err != nil {
		return err
	}
	res, err := s.deliveries.UpdateOne(ctx, bson.M{"_id": id}, outcome(state, attempts, next, now))
	if err != nil {
		return fmt.Errorf("webhooks store: finish delivery: %w", err)
	}
	if res.MatchedCount == 0 {
		return ErrNotFound
	}
	return nil
}

// outcome is the update that records an attempt's outcome and releases the lease.
func outcome(state string, attempts int, next, now time.Time) bson.M {
	return bson.M{"$set": bson.M{"state": state, "attempts": attempts, "next": next, "leaseUntil": time.Time{}, "updatedAt": now}}
}

func (s *MongoStore) FinishLeased(ctx context.Context, id string, leaseUntil time.Time, state string, attempts int, next, now time.Time) error {
	if err := checkState(state); err != nil {
		return err
	}
	// Under claimMu: FerretDB's conditional update is not atomic, and a claim or requeue of the
	// same delivery must not fall between its check and its write.
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	res, err := s.deliveries.UpdateOne(ctx, bson.M{"_id": id, "leaseUntil": leaseUntil.UTC().Truncate(time.Millisecond)}, outcome(state, attempts, next, now))
	if err != nil {
		return fmt.Errorf("webhooks store: finish delivery: %w", err)
	}
	if res.MatchedCount == 0 {
		if _, err := s.Delivery(ctx, id); err != nil {
			return err
		}
		return ErrLeaseLost
	}
	return nil
}

func (s *MongoStore) Requeue(ctx context.Context, ids []string, now time.Time) (int, error) {
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	n := 0
	for _, batch := range chunks(ids) {
		// Leased ones first: their lease moves on by a millisecond, so the worker sending one
		// cannot finish it over the requeue.
		var leased []struct {
			ID    string    `bson:"_id"`
			Lease time.Time `bson:"leaseUntil"`
		}
		if err := findAll(ctx, s.deliveries, bson.M{"_id": anyOf(batch), "leaseUntil": bson.M{"$gt": now}}, &leased,
			options.Find().SetProjection(bson.M{"leaseUntil": 1})); err != nil {
			return n, fmt.Errorf("webhooks store: requeue: %w", err)
		}
		for _, l := range leased {
			if _, err := s.deliveries.UpdateOne(ctx, bson.M{"_id": l.ID}, bson.M{"$set": bson.M{"leaseUntil": l.Lease.Add(time.Millisecond)}}); err != nil {
				return n, fmt.Errorf("webhooks store: requeue: %w", err)
			}
		}
		res, err := s.deliveries.UpdateMany(ctx, bson.M{"_id": anyOf(batch)}, bson.M{"$set": bson.M{
			"state": StatePending, "attempts": 0, "next": now, "updatedAt": now,
		}})
		if err != nil {
			return n, fmt.Errorf("webhooks store: requeue: %w", err)
		}
		n += int(res.MatchedCount)
	}
	return n, nil
}

// RecordOutcomes inserts the attempts in one unordered batch (a repeat's duplicates left as
// they are), then writes the finishes in one unordered bulk write of conditional updates, each
// on the delivery and the lease its worker took. Under claimMu, as FinishLeased.
func (s *MongoStore) RecordOutcomes(ctx context.Context, outs []Outcome, now time.Time) (int, error) {
	var (
		docs   []attemptDoc
		models []mongo.WriteModel
	)
	for _, o := range outs {
		if o.Attempt != nil {
			docs = append(docs, attemptDoc{Key: tenantKey(o.Attempt.APIKey, o.Attempt.ID), Attempt: *o.Attempt})
		}
		if !o.Finish {
			continue
		}
		if err := checkState(o.State); err != nil {
			return 0, err
		}
		models = append(models, mongo.NewUpdateOneModel().
			SetFilter(bson.M{"_id": o.DeliveryID, "leaseUntil": o.LeaseUntil.UTC().Truncate(time.Millisecond)}).
			SetUpdate(outcome(o.State, o.Attempts, o.Next, now)))
	}
	if len(docs) > 0 {
		if err := mongodb.InsertNew(ctx, s.attempts, docs, batchSize); err != nil {
			return 0, fmt.Errorf("webhooks store: record attempts: %w", err)
		}
	}
	if len(models) == 0 {
		return 0, nil
	}
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	res, err := s.deliveries.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
	if err != nil {
		return 0, fmt.Errorf("webhooks store: record outcomes: %w", err)
	}
	return len(models) - int(res.MatchedCount), nil
}

func (s *MongoStore) FailedDeliveries(ctx context.Context, apiKey, endpointID string, since, until time.Time) ([]string, error) {
	q := bson.D{
		{Key: "apiKey", Value: apiKey}, {Key: "endpointId", Value: endpointID}, {Key: "state", Value: StateFailed},
		{Key: "createdAt", Value: bson.M{"$gte": since, "$lt": until}},
	}
	var found []struct {
		ID string `bson:"_id"`
	}
	if err := findAll(ctx, s.deliveries, q, &found, options.Find().
		SetSort(bson.D{{Key: "createdAt", Value: 1}, {Key: "_id", Value: 1}}).SetProjection(bson.M{"_id": 1})); err != nil {
		return nil, fmt.Errorf("webhooks store: failed deliveries: %w", err)
	}
	out := make([]string, len(found))
	for i, f := range found {
		out[i] = f.ID
	}
	return out, nil
}

func (s *MongoStore) AddAttempt(ctx context.Context, a *Attempt) error {
	_, err := s.attempts.InsertOne(ctx, attemptDoc{Key: tenantKey(a.APIKey, a.ID), Attempt: *a})
	switch {
	case mongodb.IsDuplicateKey(err):
		return ErrExists
	case err != nil:
		return fmt.Errorf("webhooks store: add attempt: %w", err)
	}
	return nil
}

func (s *MongoStore) ListAttempts(ctx context.Context, apiKey string, f AttemptFilter, after string, limit int) ([]*Attempt, error) {
	q := bson.D{{Key: "apiKey", Value: apiKey}}
	for _, c := range []struct{ field, v string }{
		{"messageId", f.MessageID}, {"endpointId", f.EndpointID}, {"status", f.Status},
	} {
		if c.v != "" {
			q = append(q, bson.E{Key: c.field, Value: c.v})
		}
	}
	if after != "" {
		q = append(q, bson.E{Key: "id", Value: bson.M{"$lt": after}})
	}
	out := []*Attempt{}
	if err := findAll(ctx, s.attempts, q, &out, newestFirst(limit)); err != nil {
		return nil, fmt.Errorf("webhooks store: list attempts: %w", err)
	}
	return out, nil
}

func (s *MongoStore) TakeSlot(ctx context.Context, endpointKey string, second int64, limit int) (bool, error) {
	at := time.Unix(second, 0)
	s.slotMu.Lock()
	defer s.slotMu.Unlock()
	// Where there is no TTL index, the slots of seconds long gone are swept here, at most once
	// a minute per process; Prune sweeps after processes that stopped.
	if second >= s.sweptSec+slotWindow {
		if _, err := s.slots.DeleteMany(ctx, bson.M{"at": bson.M{"$lt": at.Add(-slotWindow * time.Second)}}); err != nil {
			return false, fmt.Errorf("webhooks store: take slot: sweep: %w", err)
		}
		s.sweptSec = second
	}
	var slot struct {
		N int `bson:"n"`
	}
	update := bson.M{
		"$inc":         bson.M{"n": 1},
		"$setOnInsert": bson.M{"endpointKey": endpointKey, "second": second, "at": at},
	}
	if err := upsert(ctx, s.slots, mongodb.Key(endpointKey, fmt.Sprint(second)), update, &slot); err != nil {
		return false, fmt.Errorf("webhooks store: take slot: %w", err)
	}
	return slot.N <= limit, nil
}

func (s *MongoStore) Prune(ctx context.Context, before time.Time) error {
	for _, c := range []struct {
		name string
		coll *mongo.Collection
		q    bson.D
	}{
		{"attempts", s.attempts, bson.D{{Key: "ts", Value: bson.M{"$lt": before}}}},
		{"deliveries", s.deliveries, bson.D{
			{Key: "createdAt", Value: bson.M{"$lt": before}}, {Key: "state", Value: bson.M{"$ne": StatePending}},
		}},
		{"messages", s.messages, bson.D{{Key: "createdAt", Value: bson.M{"$lt": before}}}},
		{"rate slots", s.slots, bson.D{{Key: "at", Value: bson.M{"$lt": time.Unix(before.Unix(), 0)}}}},
	} {
		if _, err := c.coll.DeleteMany(ctx, c.q); err != nil {
			return fmt.Errorf("webhooks store: prune %s: %w", c.name, err)
		}
	}
	return nil
}

func (s *MongoStore) Ping(ctx context.Context) error {
	if err := s.db.Client().Ping(ctx, nil); err != nil {
		return fmt.Errorf("webhooks store: ping: %w", err)
	}
	return nil
}

var _ Store = (*MongoStore)(nil)

// BusiestEndpoints returns the endpoints with the most pending deliveries, most first: one
// aggregation over the pending deliveries (the "due" index's state), at scrape time only.
func (s *MongoStore) BusiestEndpoints(ctx context.Context, limit int) ([]EndpointBacklog, error) {
	if limit <= 0 {
		return nil, nil
	}
	cur, err := s.deliveries.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: "state", Value: StatePending}}}},
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$endpointId"}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}},
		{{Key: "$sort", Value: bson.D{{Key: "n", Value: -1}, {Key: "_id", Value: 1}}}},
		{{Key: "$limit", Value: limit}},
	})
	if err != nil {
		return nil, fmt.Errorf("webhooks store: busiest endpoints: %w", err)
	}
	var rows []struct {
		ID string `bson:"_id"`
		N  int    `bson:"n"`
	}
	if err := cur.All(ctx, &rows); err != nil {
		return nil, fmt.Errorf("webhooks store: busiest endpoints: %w", err)
	}
	out := make([]EndpointBacklog, len(rows))
	for i, r := range rows {
		out[i] = EndpointBacklog{EndpointID: r.ID, Pending: r.N}
	}
	return out, nil
}

// Backlog counts the pending deliveries and returns the earliest next attempt among those due
// at now (zero when none is due), both on the "due" index (state, next).
func (s *MongoStore) Backlog(ctx context.Context, now time.Time) (int, time.Time, error) {
	n, err := s.deliveries.CountDocuments(ctx, bson.D{{Key: "state", Value: StatePending}})
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("webhooks store: backlog: %w", err)
	}
	if n == 0 {
		return 0, time.Time{}, nil
	}
	var first struct {
		Next time.Time `bson:"next"`
	}
	err = s.deliveries.FindOne(ctx, dueFilter(now), options.FindOne().SetSort(bson.D{{Key: "next", Value: 1}}).SetProjection(bson.M{"next": 1})).Decode(&first)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return int(n), time.Time{}, nil
	}
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("webhooks store: backlog: %w", err)
	}
	return int(n), first.Next, nil
}
