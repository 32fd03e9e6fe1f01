package notifications

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/collab/collab/internal/mongodb"
)

// oldInboxCollection held inbox entries before issue 20: one document of every field in full,
// the headline rendered for the recipient among them.
const oldInboxCollection = "inbox"

// oldInboxDoc is an entry of oldInboxCollection; the headline is left behind (it is rendered
// when read now).
type oldInboxDoc struct {
	Key            string `bson:"_id"`
	APIKey         string `bson:"apiKey"`
	OrganizationID string `bson:"organizationId"`
	OrgGen         string `bson:"orgGen"`
	UserID         string `bson:"userId"`
	NotificationID string `bson:"notificationId"`
	DocumentID     string `bson:"documentId"`
	Read           bool   `bson:"read"`
	Timestamp      int64  `bson:"ts"`
}

// migrateInbox moves the entries of oldInboxCollection to entries, in the shape of now, batch by
// batch: each batch is inserted (an entry there already stands) and then removed from the old
// collection, so a run cut short is finished by the next start and several processes starting
// at once do it together. It runs when the store starts; entries a process of the version
// before writes afterwards (during a rolling upgrade) are moved by the next start
// (docs/operations.md, "Upgrading").
func (s *MongoStore) migrateInbox(ctx context.Context) error {
	old := s.db.Collection(oldInboxCollection)
	for {
		var batch []oldInboxDoc
		if err := s.findAll(ctx, old, bson.D{}, &batch, options.Find().SetLimit(batchSize)); err != nil {
			return fmt.Errorf("migrate inbox: %w", err)
		}
		if len(batch) == 0 {
			return nil
		}
		docs := make([]entryDoc, len(batch))
		keys := make([]string, len(batch))
		for i, o := range batch {
			org := Scope{APIKey: o.APIKey, OrganizationID: o.OrganizationID, OrgGen: o.OrgGen}
			docs[i] = entryDoc{Key: entryKey(org, o.UserID, o.NotificationID), Org: orgHash(org), UserID: o.UserID,
				NotificationID: o.NotificationID, Timestamp: o.Timestamp, DocumentID: o.DocumentID, Read: o.Read}
			keys[i] = o.Key
		}
		if err := mongodb.InsertNew(ctx, s.entries, docs, batchSize); err != nil {
			return fmt.Errorf("migrate inbox: %w", err)
		}
		if _, err := old.DeleteMany(ctx, bson.M{"_id": anyOf(keys)}); err != nil {
			return fmt.Errorf("migrate inbox: %w", err)
		}
	}
}
