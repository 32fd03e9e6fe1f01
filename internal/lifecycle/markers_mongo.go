package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/collab/collab/internal/mongodb"
)

// MongoMarkers keeps markers in a collection of the service's database (the services name it
// "tombstones"), one document per marker, so every write is a single-document one:
//
//   - a buried generation: _id = (apiKey, org, kind, id, gen) in the ByID layout, (apiKey,
//     org, kind, gen) in the ByGeneration one; fields apiKey, organizationId, kind, id (ByID
//     only) and gen. Bury is an insert, and a duplicate key means buried already.
//   - a migration mark: _id = (apiKey, org, "moved", docId, gen); the same fields and to.
//     MarkMoved is an upsert of to.
//
// Readers look at _id (and to) only, so markers written by older versions, whose documents
// held only those, read the same.
type MongoMarkers struct {
	coll   *mongo.Collection
	layout Layout
}

// NewMongoMarkers returns markers kept in coll with the layout. The collection needs no index
// but its _id.
func NewMongoMarkers(coll *mongo.Collection, layout Layout) *MongoMarkers {
	return &MongoMarkers{coll: coll, layout: layout}
}

func (m *MongoMarkers) errorf(op string, err error) error {
	return fmt.Errorf("lifecycle markers in %s.%s: %s: %w", m.coll.Database().Name(), m.coll.Name(), op, err)
}

func (m *MongoMarkers) buriedKey(apiKey, orgID, kind, id, gen string) string {
	if m.layout == ByGeneration {
		return mongodb.Key(apiKey, orgID, kind, gen)
	}
	return mongodb.Key(apiKey, orgID, kind, id, gen)
}

func movedKey(apiKey, orgID, docID, gen string) string {
	return mongodb.Key(apiKey, orgID, kindMoved, docID, gen)
}

func (m *MongoMarkers) Bury(ctx context.Context, apiKey, orgID, kind, id, gen string) error {
	if err := buryKind(kind); err != nil {
		return err
	}
	doc := bson.D{
		{Key: "_id", Value: m.buriedKey(apiKey, orgID, kind, id, gen)},
		{Key: "apiKey", Value: apiKey}, {Key: "organizationId", Value: orgID}, {Key: "kind", Value: kind},
	}
	if m.layout == ByID {
		doc = append(doc, bson.E{Key: "id", Value: id})
	}
	doc = append(doc, bson.E{Key: "gen", Value: gen})
	if _, err := m.coll.InsertOne(ctx, doc); err != nil && !mongodb.IsDuplicateKey(err) {
		return m.errorf("bury", err)
	}
	return nil
}

func (m *MongoMarkers) Buried(ctx context.Context, apiKey, orgID, kind, id, gen string) (bool, error) {
	err := m.coll.FindOne(ctx, bson.M{"_id": m.buriedKey(apiKey, orgID, kind, id, gen)},
		options.FindOne().SetProjection(bson.M{"_id": 1})).Err()
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
		return false, nil
	case err != nil:
		return false, m.errorf("buried", err)
	}
	return true, nil
}

// MarkMoved upserts the mark. Two upserts of a mark nobody wrote yet may both insert, and a
// server that does not retry that itself (MongoDB does from 4.2 for a filter on _id; the
// embedded FerretDB's proxy serialises the two) refuses the second with a duplicate key. That
// one then runs again, as an update of the mark the first wrote, so an acknowledged mark is
// written: the services' copies dropped the error, and with it the second's target.
func (m *MongoMarkers) MarkMoved(ctx context.Context, apiKey, orgID, docID, gen, to string) error {
	filter := bson.M{"_id": movedKey(apiKey, orgID, docID, gen)}
	set := bson.M{"$set": bson.M{"apiKey": apiKey, "organizationId": orgID, "kind": kindMoved, "id": docID, "gen": gen, "to": to}}
	var err error
	for range 2 {
		_, err = m.coll.UpdateOne(ctx, filter, set, options.UpdateOne().SetUpsert(true))
		if !mongodb.IsDuplicateKey(err) {
			break
		}
	}
	if err != nil {
		return m.errorf("mark moved", err)
	}
	return nil
}

func (m *MongoMarkers) MovedTo(ctx context.Context, apiKey, orgID, docID, gen string) (string, error) {
	var doc struct {
		To string `bson:"to"`
	}
	err := m.coll.FindOne(ctx, bson.M{"_id": movedKey(apiKey, orgID, docID, gen)}).Decode(&doc)
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
		return "", nil
	case err != nil:
		return "", m.errorf("moved to", err)
	}
	return doc.To, nil
}

// BuriedGenerations returns every buried generation of an API key's organizations and
// documents. Generations are random, so a generation alone names its incarnation: a reader
// skips records under any of them, which a writer that crashed between its write and its
// Settle left behind (docs/architecture.md: records under a dead generation are never read).
// It reads the _id, which every version wrote.
func (m *MongoMarkers) BuriedGenerations(ctx context.Context, apiKey string) (map[string]bool, error) {
	prefix := mongodb.Key(apiKey, "")
	cur, err := m.coll.Find(ctx, bson.M{"_id": bson.M{"$regex": "^" + regexp.QuoteMeta(prefix)}},
		options.Find().SetProjection(bson.M{"_id": 1}))
	if err != nil {
		return nil, m.errorf("buried generations", err)
	}
	var docs []struct {
		Key string `bson:"_id"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, m.errorf("buried generations", err)
	}
	dead := map[string]bool{}
	for _, d := range docs {
		// apiKey, organization, kind, [id,] generation
		parts := strings.Split(d.Key, "\x1f")
		if len(parts) < 4 || parts[0] != apiKey {
			continue
		}
		if kind, gen := parts[2], parts[len(parts)-1]; (kind == KindOrganization || kind == KindDocument) && gen != "" {
			dead[gen] = true
		}
	}
	return dead, nil
}
