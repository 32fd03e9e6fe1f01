// Package mongodb holds what every service's MongoDB store shares: connecting, naming each
// service's database, recognising duplicate keys, and the process-wide master secret.
package mongodb

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"
)

// DefaultDatabase is the database name prefix when the URI names none.
const DefaultDatabase = "collab"

// Conn is a connected client and the prefix of the databases the services use.
type Conn struct {
	Client *mongo.Client
	Prefix string
}

// Connect opens a client to uri and checks that the server answers.
func Connect(ctx context.Context, uri string, opts ...ConnectOption) (*Conn, error) {
	cs, err := connstring.ParseAndValidate(uri)
	if err != nil {
		return nil, fmt.Errorf("mongodb: parse uri: %w", err)
	}
	co := options.Client().ApplyURI(uri).SetTimeout(30 * time.Second)
	for _, o := range opts {
		o(co)
	}
	client, err := mongo.Connect(co)
	if err != nil {
		return nil, fmt.Errorf("mongodb: connect: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := client.Ping(pingCtx, nil); err != nil {
		_ = client.Disconnect(context.Background())
		return nil, fmt.Errorf("mongodb: ping: %w", err)
	}
	prefix := cs.Database
	if prefix == "" {
		prefix = DefaultDatabase
	}
	return &Conn{Client: client, Prefix: prefix}, nil
}

// ConnectOption adjusts the client Connect makes.
type ConnectOption func(*options.ClientOptions)

// WithCommandMonitor has the driver report every command to m (internal/metrics times them).
func WithCommandMonitor(m *event.CommandMonitor) ConnectOption {
	return func(o *options.ClientOptions) { o.SetMonitor(m) }
}

// Database returns the database of one service. Each service keeps its data in its own
// database, so no service can reach another's collections by accident.
func (c *Conn) Database(service string) *mongo.Database {
	return c.Client.Database(c.Prefix + "_" + service)
}

// Close disconnects.
func (c *Conn) Close(ctx context.Context) error { return c.Client.Disconnect(ctx) }

// IsDuplicateKey reports whether err is a unique-index violation.
func IsDuplicateKey(err error) bool {
	if mongo.IsDuplicateKeyError(err) {
		return true
	}
	// Some MongoDB-compatible servers report the code only in the message.
	return err != nil && strings.Contains(err.Error(), "E11000")
}

// MasterSecret returns the secret that keys sealed page tokens and signatures of this
// deployment, creating it on first use. Every replica reads the same one, so a token sealed by
// one is opened by another, and tokens survive restarts as long as the data does.
func (c *Conn) MasterSecret(ctx context.Context) ([]byte, error) {
	coll := c.Database("system").Collection("secrets")
	fresh := make([]byte, 32)
	_, _ = rand.Read(fresh)
	_, err := coll.InsertOne(ctx, bson.M{"_id": "master", "value": bson.Binary{Data: fresh}})
	if err != nil && !IsDuplicateKey(err) {
		return nil, fmt.Errorf("mongodb: store master secret: %w", err)
	}
	var doc struct {
		Value []byte `bson:"value"`
	}
	if err := coll.FindOne(ctx, bson.M{"_id": "master"}).Decode(&doc); err != nil {
		return nil, fmt.Errorf("mongodb: read master secret: %w", err)
	}
	if len(doc.Value) != 32 {
		return nil, errors.New("mongodb: stored master secret is not 32 bytes")
	}
	return doc.Value, nil
}

// Key joins the parts of a compound id (API key, organization, document...) into one _id
// string. Parts are validated ids, which hold no control characters, so the unit separator
// cannot be forged.
func Key(parts ...string) string { return strings.Join(parts, "\x1f") }

// Index is an ascending index on keys, in that order, named name.
func Index(name string, keys ...string) mongo.IndexModel {
	d := bson.D{}
	for _, k := range keys {
		d = append(d, bson.E{Key: k, Value: 1})
	}
	return mongo.IndexModel{Keys: d, Options: options.Index().SetName(name)}
}

// EnsureIndexes creates the indexes of a collection at start-up, one call each: the embedded
// FerretDB fails a createIndexes that names several indexes which all exist already, which is
// every start after the first.
func EnsureIndexes(ctx context.Context, coll *mongo.Collection, models ...mongo.IndexModel) error {
	for _, m := range models {
		if _, err := coll.Indexes().CreateOne(ctx, m); err != nil {
			return fmt.Errorf("index %v of %s: %w", m.Keys, coll.Name(), err)
		}
	}
	return nil
}

// InsertNew inserts docs unordered in batches of at most batch, leaving any whose _id exists as
// it is: a duplicate key is the repeat of an earlier write, not an error. Any other failure is
// returned (with the batches before it written).
func InsertNew[T any](ctx context.Context, coll *mongo.Collection, docs []T, batch int) error {
	for part := range slices.Chunk(docs, max(batch, 1)) {
		_, err := coll.InsertMany(ctx, part, options.InsertMany().SetOrdered(false))
		if err == nil {
			continue
		}
		var bwe mongo.BulkWriteException
		if !errors.As(err, &bwe) || bwe.WriteConcernError != nil || len(bwe.WriteErrors) == 0 {
			return err
		}
		for _, we := range bwe.WriteErrors {
			if !IsDuplicateKey(we.WriteError) {
				return err
			}
		}
	}
	return nil
}
