package comments

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"golang.org/x/sync/errgroup"

	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/mongodb"
)

// MongoStore keeps the comments service's data in MongoDB without transactions
// (docs/comments.md, "Storage"):
//
//   - annotations: a thread with its comments, reactions and read marks; _id = (apiKey, org,
//     orgGen, id). Every change replaces it on the version it was read at (Swap), atomic on
//     any MongoDB-wire server.
//   - counts: the annotations of a document incarnation; _id = (apiKey, org, orgGen, docGen).
//     A new thread takes one ($inc under the limit in one findAndModify) before it is
//     inserted, and gives it back when the insert is refused or the thread deleted: the
//     per-document limit holds under concurrent inserts, and Count's total is one read.
//     Beside it, _id = (apiKey, org, orgGen, docGen, user): how many of the incarnation's
//     annotations hold the user in readBy (kept by countReads), so Count's unread is a
//     second read.
//   - changes: a document incarnation's feed; _id = (apiKey, org, orgGen, docGen, seq). A
//     change takes the number after the feed's last by inserting it: the unique _id refuses a
//     second taker, who reads again.
//   - tombstones: buried generations and migration marks (lifecycle.MongoMarkers, ByID).
type MongoStore struct {
	*lifecycle.MongoMarkers
	annotations *mongo.Collection
	counts      *mongo.Collection
	changes     *mongo.Collection
}

var _ Store = (*MongoStore)(nil)

// NewMongoStore returns a store on db and creates its indexes.
func NewMongoStore(ctx context.Context, db *mongo.Database) (*MongoStore, error) {
	s := &MongoStore{
		MongoMarkers: lifecycle.NewMongoMarkers(db.Collection("tombstones"), lifecycle.ByID),
		annotations:  db.Collection("annotations"),
		counts:       db.Collection("counts"),
		changes:      db.Collection("changes"),
	}
	index := mongodb.Index
	if err := mongodb.EnsureIndexes(ctx, s.annotations,
		index("document_updated", "apiKey", "organizationId", "orgGen", "documentId", "docGen", "lastUpdated", "id"),
		index("document_read", "apiKey", "organizationId", "orgGen", "docGen", "readBy"),
		index("location", "apiKey", "organizationId", "location.id"),
	); err != nil {
		return nil, fmt.Errorf("comments store: %w", err)
	}
	if err := mongodb.EnsureIndexes(ctx, s.changes, index("feed_seq", "apiKey", "organizationId", "orgGen", "docGen", "seq")); err != nil {
		return nil, fmt.Errorf("comments store: %w", err)
	}
	return s, nil
}

// annotationDoc is an annotation as stored: its fields and its compound _id.
type annotationDoc struct {
	Key         string `bson:"_id"`
	*Annotation `bson:",inline"`
}

func annotationKey(apiKey, org, orgGen, id string) string {
	return mongodb.Key(apiKey, org, orgGen, id)
}

func countKey(r Ref) string { return mongodb.Key(r.APIKey, r.OrganizationID, r.OrgGen, r.DocGen) }

func readCountKey(r Ref, user string) string {
	return mongodb.Key(r.APIKey, r.OrganizationID, r.OrgGen, r.DocGen, user)
}

// docFilter selects a document incarnation's annotations.
func docFilter(r Ref) bson.D {
	return bson.D{{Key: "apiKey", Value: r.APIKey}, {Key: "organizationId", Value: r.OrganizationID}, {Key: "orgGen", Value: r.OrgGen},
		{Key: "documentId", Value: r.DocumentID}, {Key: "docGen", Value: r.DocGen}}
}

func (s *MongoStore) Insert(ctx context.Context, a *Annotation, limit int) error {
	ck := countKey(a.Ref)
	// The incarnation's fields beside the count let lifecycle deletions find it.
	fields := bson.M{"apiKey": a.APIKey, "organizationId": a.OrganizationID, "orgGen": a.OrgGen, "docGen": a.DocGen}
	take := func() error {
		return s.counts.FindOneAndUpdate(ctx, bson.M{"_id": ck, "n": bson.M{"$lt": limit}}, bson.M{"$inc": bson.M{"n": 1}, "$setOnInsert": fields},
			options.FindOneAndUpdate().SetUpsert(true)).Err()
	}
	err := take()
	if mongodb.IsDuplicateKey(err) {
		// Either the count is at the limit (the upsert tried to make a second one), or
		// concurrent first threads of the document raced to create the count (MongoDB answers
		// the upsert's loser with a duplicate key): once more, and the count exists now.
		err = take()
	}
	switch {
	case mongodb.IsDuplicateKey(err):
		// The count exists and is at the limit.
		return ErrFull
	case err != nil && !errors.Is(err, mongo.ErrNoDocuments):
		return fmt.Errorf("comments store: take a place: %w", err)
	}
	_, err = s.annotations.InsertOne(ctx, annotationDoc{Key: annotationKey(a.APIKey, a.OrganizationID, a.OrgGen, a.ID), Annotation: a})
	if err == nil {
		s.countReads(ctx, a.Ref, nil, a.ReadBy)
		return nil
	}
	s.giveBack(ctx, a.Ref)
	if mongodb.IsDuplicateKey(err) {
		return ErrExists
	}
	return fmt.Errorf("comments store: insert: %w", err)
}

// giveBack returns a document's place. A failure leaves the count one high (the limit errs
// toward refusing), logged by the caller's error only when it matters: it is not returned.
func (s *MongoStore) giveBack(ctx context.Context, r Ref) {
	_, _ = s.counts.UpdateOne(ctx, bson.M{"_id": countKey(r), "n": bson.M{"$gt": 0}}, bson.M{"$inc": bson.M{"n": -1}})
}

func (s *MongoStore) Get(ctx context.Context, doc Ref, ids []string) (map[string]*Annotation, error) {
	out := map[string]*Annotation{}
	if len(ids) == 0 {
		return out, nil
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = annotationKey(doc.APIKey, doc.OrganizationID, doc.OrgGen, id)
	}
	q := append(docFilter(doc), bson.E{Key: "_id", Value: bson.M{"$in": keys}})
	var as []*Annotation
	if err := s.find(ctx, q, nil, &as); err != nil {
		return nil, fmt.Errorf("comments store: get: %w", err)
	}
	for _, a := range as {
		out[a.ID] = a
	}
	return out, nil
}

func (s *MongoStore) find(ctx context.Context, q any, opts *options.FindOptionsBuilder, out *[]*Annotation) error {
	cur, err := s.annotations.Find(ctx, q, opts)
	if err != nil {
		return err
	}
	return cur.All(ctx, out)
}

func (s *MongoStore) List(ctx context.Context, f Filter, after *Position, desc bool, limit int) ([]*Annotation, error) {
	out := []*Annotation{}
	if len(f.Documents) == 0 {
		return out, nil
	}
	first := f.Documents[0]
	q := bson.D{{Key: "apiKey", Value: first.APIKey}, {Key: "organizationId", Value: first.OrganizationID}, {Key: "orgGen", Value: first.OrgGen}}
	docs := bson.A{}
	for _, d := range f.Documents {
		docs = append(docs, bson.D{{Key: "documentId", Value: d.DocumentID}, {Key: "docGen", Value: d.DocGen}})
	}
	q = append(q, bson.E{Key: "$or", Value: docs})
	for _, c := range []struct {
		field string
		vs    []string
	}{{"id", f.IDs}, {"location.id", f.LocationIDs}, {"authors", f.UserIDs}, {"status.id", f.StatusIDs}} {
		if len(c.vs) > 0 {
			q = append(q, bson.E{Key: c.field, Value: bson.M{"$in": c.vs}})
		}
	}
	bounds := bson.M{}
	if f.UpdatedAfter > 0 {
		bounds["$gt"] = f.UpdatedAfter
	}
	if f.UpdatedBefore > 0 {
		bounds["$lt"] = f.UpdatedBefore
	}
	if len(bounds) > 0 {
		q = append(q, bson.E{Key: "lastUpdated", Value: bounds})
	}
	dir, beyond := 1, "$gt"
	if desc {
		dir, beyond = -1, "$lt"
	}
	if after != nil {
		q = append(q, bson.E{Key: "$and", Value: bson.A{bson.M{"$or": bson.A{
			bson.M{"lastUpdated": bson.M{beyond: after.LastUpdated}},
			bson.D{{Key: "lastUpdated", Value: after.LastUpdated}, {Key: "id", Value: bson.M{beyond: after.ID}}},
		}}}})
	}
	opts := options.Find().SetSort(bson.D{{Key: "lastUpdated", Value: dir}, {Key: "id", Value: dir}})
	if limit > 0 {
		opts.SetLimit(int64(limit))
	}
	if err := s.find(ctx, q, opts, &out); err != nil {
		return nil, fmt.Errorf("comments store: list: %w", err)
	}
	return out, nil
}

// Swap replaces the annotation and moves the read counts from the readBy it replaced (which
// holds the readers Mark Read added since old was read: Mark Read keeps the version) to
// next's.
func (s *MongoStore) Swap(ctx context.Context, old, next *Annotation) error {
	key := annotationKey(old.APIKey, old.OrganizationID, old.OrgGen, old.ID)
	q := append(docFilter(old.Ref), bson.E{Key: "_id", Value: key}, bson.E{Key: "version", Value: old.Version})
	var was readers
	err := s.annotations.FindOneAndReplace(ctx, q, annotationDoc{Key: key, Annotation: next}).Decode(&was)
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
		return s.why(ctx, old)
	case err != nil:
		return fmt.Errorf("comments store: swap: %w", err)
	}
	s.countReads(ctx, old.Ref, was.ReadBy, next.ReadBy)
	return nil
}

// readers is the part of a stored annotation that its read counts follow, decoded from what
// a write replaced or deleted (findAndModify's document before it; FerretDB 1.24 does not
// project findAndModify's answer, so the whole document comes back).
type readers struct {
	ReadBy []string `bson:"readBy"`
}

// countReads moves the document's read counts from one readBy of a thread to another: each
// user only in from is counted out, each only in to counted in. The counts are written after
// the thread, each one $inc (commutative: concurrent writers' moves add up in any order), also
// when the caller's context has ended. A failure is not returned (the thread is written); it
// leaves the user's unread count of the document off by one (docs/comments.md, "Storage").
func (s *MongoStore) countReads(ctx context.Context, r Ref, from, to []string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), countWriteTimeout)
	defer cancel()
	move := func(users, others []string, delta int) {
		for i, u := range users {
			if slices.Contains(others, u) || slices.Contains(users[:i], u) {
				continue
			}
			_, _ = s.counts.UpdateOne(ctx, bson.M{"_id": readCountKey(r, u)}, bson.M{"$inc": bson.M{"n": delta}}, options.UpdateOne().SetUpsert(true))
		}
	}
	move(from, to, -1)
	move(to, from, 1)
}

// countWriteTimeout bounds the count writes that follow a thread's write.
const countWriteTimeout = 10 * time.Second

// why tells why a conditional write of a matched nothing: ErrNotFound when it is gone (or
// moved to another document), else ErrConflict.
func (s *MongoStore) why(ctx context.Context, a *Annotation) error {
	q := append(docFilter(a.Ref), bson.E{Key: "_id", Value: annotationKey(a.APIKey, a.OrganizationID, a.OrgGen, a.ID)})
	n, err := s.annotations.CountDocuments(ctx, q)
	switch {
	case err != nil:
		return fmt.Errorf("comments store: read annotation: %w", err)
	case n == 0:
		return ErrNotFound
	}
	return ErrConflict
}

func (s *MongoStore) Delete(ctx context.Context, a *Annotation) error {
	key := annotationKey(a.APIKey, a.OrganizationID, a.OrgGen, a.ID)
	q := append(docFilter(a.Ref), bson.E{Key: "_id", Value: key}, bson.E{Key: "version", Value: a.Version})
	var was readers
	err := s.annotations.FindOneAndDelete(ctx, q).Decode(&was)
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
		return s.why(ctx, a)
	case err != nil:
		return fmt.Errorf("comments store: delete: %w", err)
	}
	s.giveBack(ctx, a.Ref)
	s.countReads(ctx, a.Ref, was.ReadBy, nil)
	return nil
}

func (s *MongoStore) DeleteAtLocation(ctx context.Context, apiKey, orgID, docID string, loc Location) ([]*Annotation, error) {
	q := bson.D{{Key: "apiKey", Value: apiKey}}
	if orgID != "" {
		q = append(q, bson.E{Key: "organizationId", Value: orgID})
	}
	if docID != "" {
		q = append(q, bson.E{Key: "documentId", Value: docID})
	}
	if loc.ID != "" {
		q = append(q, bson.E{Key: "location.id", Value: loc.ID})
	} else {
		q = append(q, bson.E{Key: "location.name", Value: loc.Name})
	}
	var as []*Annotation
	if err := s.find(ctx, q, nil, &as); err != nil {
		return nil, fmt.Errorf("comments store: delete at location: %w", err)
	}
	var gone []*Annotation
	for _, a := range as {
		// One by one, each with its place given back; a partial run is finished by the next
		// (the event is delivered again until it succeeds).
		var was readers
		err := s.annotations.FindOneAndDelete(ctx, bson.M{"_id": annotationKey(a.APIKey, a.OrganizationID, a.OrgGen, a.ID)}).Decode(&was)
		switch {
		case errors.Is(err, mongo.ErrNoDocuments):
			continue
		case err != nil:
			return gone, fmt.Errorf("comments store: delete at location: %w", err)
		}
		s.giveBack(ctx, a.Ref)
		s.countReads(ctx, a.Ref, was.ReadBy, nil)
		gone = append(gone, a)
	}
	return gone, nil
}

// Count reads the counts of the documents side by side (countParallel at a time): without
// statuses, a document's total and a user's reads are each one record read by _id, which the
// embedded FerretDB finds by its primary key (the only filter it does not answer by reading
// the whole collection) and MongoDB by the _id index; so a call waits for a few round trips,
// not two per document. In statuses, a document's threads are counted instead.
func (s *MongoStore) Count(ctx context.Context, docs []Ref, statusIDs []string, userID string) ([]int, []int, error) {
	total, read := make([]int, len(docs)), make([]int, len(docs))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(countParallel)
	for i, d := range docs {
		if len(statusIDs) > 0 {
			g.Go(func() (err error) {
				total[i], read[i], err = s.countInStatuses(ctx, d, statusIDs, userID)
				return err
			})
			continue
		}
		g.Go(func() (err error) {
			total[i], err = s.counted(ctx, countKey(d))
			return err
		})
		if userID != "" {
			g.Go(func() (err error) {
				read[i], err = s.counted(ctx, readCountKey(d, userID))
				return err
			})
		}
	}
	if err := g.Wait(); err != nil {
		return nil, nil, fmt.Errorf("comments store: count: %w", err)
	}
	unread := make([]int, len(docs))
	for i := range docs {
		if userID != "" {
			unread[i] = max(0, total[i]-read[i])
		}
	}
	return total, unread, nil
}

// countParallel bounds the reads Count has under way at once.
const countParallel = 8

// countInStatuses counts a document's threads in the statuses, and those the user has read.
func (s *MongoStore) countInStatuses(ctx context.Context, d Ref, statusIDs []string, userID string) (total, read int, err error) {
	q := append(docFilter(d), bson.E{Key: "status.id", Value: bson.M{"$in": statusIDs}})
	n, err := s.annotations.CountDocuments(ctx, q)
	if err != nil || userID == "" {
		return int(n), 0, err
	}
	r, err := s.annotations.CountDocuments(ctx, append(q, bson.E{Key: "readBy", Value: userID}))
	return int(n), int(r), err
}

// counted reads the count record key: 0 when there is none.
func (s *MongoStore) counted(ctx context.Context, key string) (int, error) {
	var c struct {
		N int `bson:"n"`
	}
	err := s.counts.FindOne(ctx, bson.M{"_id": key}).Decode(&c)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return 0, nil
	}
	return c.N, err
}

func (s *MongoStore) MarkRead(ctx context.Context, doc Ref, userID string, ids []string) ([]string, error) {
	var found []string
	for _, id := range ids {
		q := append(docFilter(doc), bson.E{Key: "_id", Value: annotationKey(doc.APIKey, doc.OrganizationID, doc.OrgGen, id)})
		// Added only when not there yet, so that the user's read count moves only then, and at
		// most maxReaders marks: the condition holds the array under it.
		unread := append(slices.Clip(q), bson.E{Key: "readBy", Value: bson.M{"$ne": userID}},
			bson.E{Key: fmt.Sprintf("readBy.%d", maxReaders-1), Value: bson.M{"$exists": false}})
		res, err := s.annotations.UpdateOne(ctx, unread, bson.M{"$addToSet": bson.M{"readBy": userID}})
		if err != nil {
			return found, fmt.Errorf("comments store: mark read: %w", err)
		}
		if res.MatchedCount > 0 {
			s.countReads(ctx, doc, nil, []string{userID})
			found = append(found, id)
			continue
		}
		n, err := s.annotations.CountDocuments(ctx, q) // read already, full, or not there
		if err != nil {
			return found, fmt.Errorf("comments store: mark read: %w", err)
		}
		if n == 0 {
			continue
		}
		found = append(found, id)
	}
	return found, nil
}

// ofGeneration matches the generation gen and the empty one.
func ofGeneration(gen string) bson.M { return bson.M{"$in": bson.A{gen, ""}} }

func (s *MongoStore) DeleteOrganization(ctx context.Context, apiKey, orgID, gen string) error {
	q := bson.D{{Key: "apiKey", Value: apiKey}, {Key: "organizationId", Value: orgID}, {Key: "orgGen", Value: ofGeneration(gen)}}
	if _, err := s.annotations.DeleteMany(ctx, q); err != nil {
		return fmt.Errorf("comments store: delete organization: %w", err)
	}
	// The counts go after the threads: a run cut short between them leaves counts of threads
	// no longer there, which the next run (the event is delivered again) removes.
	// By key: the read counts beside the counts carry no fields but their _id.
	for _, g := range []string{gen, ""} {
		prefix := "^" + regexp.QuoteMeta(mongodb.Key(apiKey, orgID, g)+"\x1f")
		if _, err := s.counts.DeleteMany(ctx, bson.M{"_id": bson.M{"$regex": prefix}}); err != nil {
			return fmt.Errorf("comments store: delete organization counts: %w", err)
		}
	}
	if _, err := s.changes.DeleteMany(ctx, bson.D{{Key: "apiKey", Value: apiKey}, {Key: "organizationId", Value: orgID}, {Key: "orgGen", Value: ofGeneration(gen)}}); err != nil {
		return fmt.Errorf("comments store: delete organization feeds: %w", err)
	}
	return nil
}

func (s *MongoStore) DeleteDocument(ctx context.Context, apiKey, orgID, docID, gen string) error {
	q := bson.D{{Key: "apiKey", Value: apiKey}, {Key: "organizationId", Value: orgID}, {Key: "documentId", Value: docID}, {Key: "docGen", Value: ofGeneration(gen)}}
	if _, err := s.annotations.DeleteMany(ctx, q); err != nil {
		return fmt.Errorf("comments store: delete document: %w", err)
	}
	// The counts go after the threads, as for an organization. They are those of the
	// document's incarnation under any organization generation (a document belongs to one,
	// but the call does not say which): matched by their keys, so a run that stopped after
	// deleting the threads still finds them. (distinct, which found the generations from
	// the threads, is refused by the embedded FerretDB when the client has a timeout.)
	if _, err := s.counts.DeleteMany(ctx, bson.M{"_id": bson.M{"$regex": generationKeys(apiKey, orgID, gen)}}); err != nil {
		return fmt.Errorf("comments store: delete document counts: %w", err)
	}
	if gen != "" {
		if _, err := s.changes.DeleteMany(ctx, bson.D{{Key: "apiKey", Value: apiKey}, {Key: "organizationId", Value: orgID}, {Key: "docGen", Value: gen}}); err != nil {
			return fmt.Errorf("comments store: delete document feed: %w", err)
		}
	}
	return nil
}

// generationKeys is a regular expression of the count keys of document generation gen of an
// organization, under any organization generation: its count and its read counts.
func generationKeys(apiKey, orgID, gen string) string {
	return "^" + regexp.QuoteMeta(mongodb.Key(apiKey, orgID, "")) + "[^\x1f]*" + regexp.QuoteMeta("\x1f"+gen) + "(\x1f[^\x1f]*)?$"
}

func (s *MongoStore) MoveDocument(ctx context.Context, apiKey, orgID, from, to, gen string) error {
	if from == "" || from == to {
		return nil
	}
	// Counts are keyed by the document's generation, which a migration keeps.
	q := bson.D{{Key: "apiKey", Value: apiKey}, {Key: "organizationId", Value: orgID}, {Key: "documentId", Value: from}, {Key: "docGen", Value: ofGeneration(gen)}}
	if _, err := s.annotations.UpdateMany(ctx, q, bson.M{"$set": bson.M{"documentId": to}}); err != nil {
		return fmt.Errorf("comments store: move document: %w", err)
	}
	return nil
}

func (s *MongoStore) Ping(ctx context.Context) error {
	return s.annotations.Database().Client().Ping(ctx, nil)
}

// changeDoc is a change as stored: its feed and number in the _id and beside it.
type changeDoc struct {
	Key            string `bson:"_id"`
	APIKey         string `bson:"apiKey"`
	OrganizationID string `bson:"organizationId"`
	OrgGen         string `bson:"orgGen"`
	DocGen         string `bson:"docGen"`
	Change         `bson:",inline"`
}

func feedFilter(r Ref) bson.D {
	return bson.D{{Key: "apiKey", Value: r.APIKey}, {Key: "organizationId", Value: r.OrganizationID}, {Key: "orgGen", Value: r.OrgGen}, {Key: "docGen", Value: r.DocGen}}
}

// maxAppends bounds the retries of an append racing other appends of the same feed.
const maxAppends = 64

// pruneEvery is how often (in appended changes) an append drops what the window no longer holds.
const pruneEvery = 64

func (s *MongoStore) AppendChange(ctx context.Context, doc Ref, c Change) (int64, error) {
	for range maxAppends {
		last, err := s.feedEnd(ctx, doc, -1)
		if err != nil {
			return 0, err
		}
		c.Seq = last + 1
		key := mongodb.Key(doc.APIKey, doc.OrganizationID, doc.OrgGen, doc.DocGen, fmt.Sprintf("%016x", c.Seq))
		_, err = s.changes.InsertOne(ctx, changeDoc{Key: key, APIKey: doc.APIKey, OrganizationID: doc.OrganizationID, OrgGen: doc.OrgGen, DocGen: doc.DocGen, Change: c})
		if mongodb.IsDuplicateKey(err) {
			continue // another writer took the number
		}
		if err != nil {
			return 0, fmt.Errorf("comments store: append change: %w", err)
		}
		if c.Seq%pruneEvery == 0 && c.Seq > FeedWindow {
			// Best effort: a failed prune leaves older changes a while longer.
			_, _ = s.changes.DeleteMany(ctx, append(feedFilter(doc), bson.E{Key: "seq", Value: bson.M{"$lte": c.Seq - FeedWindow}}))
		}
		return c.Seq, nil
	}
	return 0, errors.New("comments store: append change: the feed keeps changing")
}

// feedEnd reads the Seq at one end of a feed (dir 1: the oldest, -1: the newest); 0 when empty.
func (s *MongoStore) feedEnd(ctx context.Context, doc Ref, dir int) (int64, error) {
	var end struct {
		Seq int64 `bson:"seq"`
	}
	err := s.changes.FindOne(ctx, feedFilter(doc), options.FindOne().SetSort(bson.D{{Key: "seq", Value: dir}}).SetProjection(bson.M{"seq": 1})).Decode(&end)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("comments store: read feed: %w", err)
	}
	return end.Seq, nil
}

func (s *MongoStore) Changes(ctx context.Context, doc Ref, after int64, limit int) ([]Change, int64, int64, error) {
	oldest, err := s.feedEnd(ctx, doc, 1)
	if err != nil || oldest == 0 {
		return nil, 0, 0, err
	}
	newest, err := s.feedEnd(ctx, doc, -1)
	if err != nil {
		return nil, 0, 0, err
	}
	opts := options.Find().SetSort(bson.D{{Key: "seq", Value: 1}})
	if limit > 0 {
		opts.SetLimit(int64(limit))
	}
	cur, err := s.changes.Find(ctx, append(feedFilter(doc), bson.E{Key: "seq", Value: bson.M{"$gt": after}}), opts)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("comments store: read feed: %w", err)
	}
	var out []Change
	if err := cur.All(ctx, &out); err != nil {
		return nil, 0, 0, fmt.Errorf("comments store: read feed: %w", err)
	}
	return out, oldest, newest, nil
}
