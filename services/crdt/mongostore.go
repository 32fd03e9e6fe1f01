package crdt

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/collab/collab/internal/ids"
	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/mongodb"
)

// MongoStore keeps the CRDT service's data in MongoDB. Every write is an insert or a delete
// (plus two field updates nothing depends on: the document id after a migration, and dropping a
// base a snapshot replaced), so nothing relies on a conditional update being atomic, which it is
// not on FerretDB:
//
//   - editors: an editor's record; _id = (apiKey, org, orgGen, docKey, editorId), where docKey
//     is the document's generation (docKey in memstore.go). Create is an insert, so the unique
//     _id lets exactly one of concurrent Adds of an editor win. The first update rides in the
//     record (base), so an editor never exists without its content.
//   - updates: the log; _id = (stream, seq as 20 digits). A new entry takes the number after
//     the last one by inserting it: of two appenders that read the same last number, the unique
//     _id refuses the second, which reads again and takes the next.
//   - snapshots: insert-only; _id = (stream, upTo as 20 digits), data = the merge of the base and
//     every entry up to upTo. Readers take the newest and the log after it.
//   - tombstones: a deleted organization or document generation (lifecycle.MongoMarkers, layout
//     ByGeneration: _id = (apiKey, org, kind, gen)).
//
// Queries, each on an index: an editor by _id; a document's editors on editors (apiKey,
// organizationId, orgGen, doc, editorId), sorted by editorId; an organization's on (apiKey,
// organizationId, orgGen); a migrated document's on (apiKey, organizationId, doc); a stream's
// newest entry or snapshot on updates (stream, seq) and snapshots (stream, upTo), read
// backwards with a limit of one; a stream's log after a number on (stream, seq).
type MongoStore struct {
	// The generation markers (Bury, Buried).
	*lifecycle.MongoMarkers

	db        *mongo.Database
	editors   *mongo.Collection
	updates   *mongo.Collection
	snapshots *mongo.Collection
}

// NewMongoStore returns a store on db and creates its indexes.
func NewMongoStore(ctx context.Context, db *mongo.Database) (*MongoStore, error) {
	s := &MongoStore{
		MongoMarkers: lifecycle.NewMongoMarkers(db.Collection("tombstones"), lifecycle.ByGeneration),
		db:           db,
		editors:      db.Collection("editors"),
		updates:      db.Collection("updates"),
		snapshots:    db.Collection("snapshots"),
	}
	index := mongodb.Index
	for _, ix := range []struct {
		coll   *mongo.Collection
		models []mongo.IndexModel
	}{
		{s.editors, []mongo.IndexModel{
			index("document_editors", "apiKey", "organizationId", "orgGen", "doc", "editorId"),
			index("organization", "apiKey", "organizationId", "orgGen"),
			index("document", "apiKey", "organizationId", "doc"),
		}},
		{s.updates, []mongo.IndexModel{index("stream_seq", "stream", "seq")}},
		{s.snapshots, []mongo.IndexModel{index("stream_upto", "stream", "upTo")}},
	} {
		if err := mongodb.EnsureIndexes(ctx, ix.coll, ix.models...); err != nil {
			return nil, fmt.Errorf("crdt store: %w", err)
		}
	}
	return s, nil
}

// editorDoc is an editor's record as stored.
type editorDoc struct {
	Key            string `bson:"_id"`
	APIKey         string `bson:"apiKey"`
	OrganizationID string `bson:"organizationId"`
	OrgGen         string `bson:"orgGen"`
	Doc            string `bson:"doc"` // docKey
	DocumentID     string `bson:"documentId"`
	DocGen         string `bson:"docGen"`
	EditorID       string `bson:"editorId"`
	Stream         string `bson:"stream"`
	Type           string `bson:"type"`
	ContentKey     string `bson:"contentKey"`
	CreatedAt      int64  `bson:"createdAt"`
	// Base is the first update, until a snapshot holds it (absent: empty, or in a snapshot).
	Base []byte `bson:"base,omitempty"`
}

func (d *editorDoc) meta() *Meta {
	return &Meta{
		Editor: Editor{APIKey: d.APIKey, OrganizationID: d.OrganizationID, OrgGen: d.OrgGen, DocumentID: d.DocumentID, DocGen: d.DocGen, EditorID: d.EditorID},
		Stream: d.Stream, Type: d.Type, ContentKey: d.ContentKey, CreatedAt: d.CreatedAt,
	}
}

type updateDoc struct {
	Key    string `bson:"_id"`
	Stream string `bson:"stream"`
	Seq    int64  `bson:"seq"`
	Data   []byte `bson:"data"`
	At     int64  `bson:"at"`
	Origin string `bson:"origin"`
}

type snapshotDoc struct {
	Key    string `bson:"_id"`
	Stream string `bson:"stream"`
	UpTo   int64  `bson:"upTo"`
	At     int64  `bson:"at"`
	Data   []byte `bson:"data"`
}

func editorKeyOf(e Editor) string {
	return mongodb.Key(e.APIKey, e.OrganizationID, e.OrgGen, e.docKey(), e.EditorID)
}

// seqKey is the _id of a stream's entry or snapshot at n: 20 digits, so _ids sort like numbers.
func seqKey(stream string, n int64) string { return mongodb.Key(stream, fmt.Sprintf("%020d", n)) }

func (s *MongoStore) Create(ctx context.Context, m *Meta, first []byte) error {
	if m.Stream == "" {
		m.Stream = ids.Random(24)
	}
	d := editorDoc{
		Key: editorKeyOf(m.Editor), APIKey: m.APIKey, OrganizationID: m.OrganizationID, OrgGen: m.OrgGen, Doc: m.docKey(),
		DocumentID: m.DocumentID, DocGen: m.DocGen, EditorID: m.EditorID, Stream: m.Stream, Type: m.Type,
		ContentKey: m.ContentKey, CreatedAt: m.CreatedAt, Base: first,
	}
	_, err := s.editors.InsertOne(ctx, d)
	if mongodb.IsDuplicateKey(err) {
		return ErrExists
	}
	if err != nil {
		return fmt.Errorf("crdt store: create: %w", err)
	}
	return nil
}

func (s *MongoStore) editor(ctx context.Context, e Editor) (*editorDoc, error) {
	var d editorDoc
	err := s.editors.FindOne(ctx, bson.M{"_id": editorKeyOf(e)}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("crdt store: editor: %w", err)
	}
	return &d, nil
}

func (s *MongoStore) Meta(ctx context.Context, e Editor) (*Meta, error) {
	d, err := s.editor(ctx, e)
	if err != nil {
		return nil, err
	}
	return d.meta(), nil
}

// newestSnapshot returns the stream's newest snapshot, nil when it has none; withData false
// reads its number only.
func (s *MongoStore) newestSnapshot(ctx context.Context, stream string, withData bool) (*snapshotDoc, error) {
	opts := options.FindOne().SetSort(bson.D{{Key: "upTo", Value: -1}})
	if !withData {
		opts.SetProjection(bson.M{"upTo": 1})
	}
	var d snapshotDoc
	err := s.snapshots.FindOne(ctx, bson.M{"stream": stream}, opts).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("crdt store: snapshot: %w", err)
	}
	return &d, nil
}

func upToOf(d *snapshotDoc) int64 {
	if d == nil {
		return 0
	}
	return d.UpTo
}

// log returns the stream's entries after `after`, ascending, at most limit (0: all).
func (s *MongoStore) log(ctx context.Context, stream string, after int64, limit int) ([]Update, error) {
	opts := options.Find().SetSort(bson.D{{Key: "seq", Value: 1}})
	if limit > 0 {
		opts.SetLimit(int64(limit))
	}
	cur, err := s.updates.Find(ctx, bson.M{"stream": stream, "seq": bson.M{"$gt": after}}, opts)
	if err != nil {
		return nil, fmt.Errorf("crdt store: log: %w", err)
	}
	var docs []updateDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("crdt store: log: %w", err)
	}
	out := make([]Update, len(docs))
	for i, d := range docs {
		out[i] = Update{Seq: d.Seq, Data: d.Data, At: d.At, Origin: d.Origin}
	}
	return out, nil
}

// loadAttempts bounds Load's rereads while compactions keep replacing what it read.
const loadAttempts = 20

// Load reads the record, the newest snapshot and the log after it. A compaction in another
// process may, between those reads, write a newer snapshot and delete the entries it covers;
// it writes the snapshot first, so Load reads the newest snapshot's number again after the log
// and reads everything again when it moved or the log does not follow on from the snapshot.
func (s *MongoStore) Load(ctx context.Context, e Editor) (*State, error) {
	for range loadAttempts {
		d, err := s.editor(ctx, e)
		if err != nil {
			return nil, err
		}
		st := &State{Meta: *d.meta(), Base: d.Base, BaseAt: d.CreatedAt}
		snap, err := s.newestSnapshot(ctx, d.Stream, true)
		if err != nil {
			return nil, err
		}
		if snap != nil {
			st.Base, st.BaseSeq, st.BaseAt = snap.Data, snap.UpTo, snap.At
		}
		if st.Updates, err = s.log(ctx, d.Stream, st.BaseSeq, 0); err != nil {
			return nil, err
		}
		if !contiguous(st.Updates, st.BaseSeq) {
			continue
		}
		again, err := s.newestSnapshot(ctx, d.Stream, false)
		if err != nil {
			return nil, err
		}
		if upToOf(again) == st.BaseSeq {
			return st, nil
		}
	}
	return nil, fmt.Errorf("crdt store: load %s: compactions kept replacing the state", e.EditorID)
}

// contiguous reports whether the entries number on from `after` without a gap.
func contiguous(us []Update, after int64) bool {
	for i, u := range us {
		if u.Seq != after+int64(i)+1 {
			return false
		}
	}
	return true
}

func (s *MongoStore) List(ctx context.Context, doc Editor, limit int) ([]*Meta, error) {
	opts := options.Find().SetSort(bson.D{{Key: "editorId", Value: 1}}).SetProjection(bson.M{"base": 0})
	if limit > 0 {
		opts.SetLimit(int64(limit))
	}
	cur, err := s.editors.Find(ctx, bson.D{
		{Key: "apiKey", Value: doc.APIKey}, {Key: "organizationId", Value: doc.OrganizationID},
		{Key: "orgGen", Value: doc.OrgGen}, {Key: "doc", Value: doc.docKey()},
	}, opts)
	if err != nil {
		return nil, fmt.Errorf("crdt store: list: %w", err)
	}
	var docs []editorDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("crdt store: list: %w", err)
	}
	out := make([]*Meta, len(docs))
	for i := range docs {
		out[i] = docs[i].meta()
	}
	return out, nil
}

// appendAttempts bounds Append's retries when other appenders take the numbers it tried.
const appendAttempts = 1000

// Append takes the number after the stream's last entry (or its newest snapshot's, when a
// compaction emptied the log) by inserting it. One more race: between reading the last number
// and inserting, a compaction may snapshot and delete entries up to and past that number, so
// the insert succeeds behind the snapshot, where readers never look. Append checks for that
// after inserting and then takes its entry back and tries again: any compaction that deleted
// the number wrote its snapshot before, so the check sees it.
func (s *MongoStore) Append(ctx context.Context, stream string, u Update) (int64, error) {
	for attempt := range appendAttempts {
		if attempt > 2 {
			// Many appenders on one stream: spread them out a little.
			time.Sleep(time.Duration(rand.IntN(attempt*100)) * time.Microsecond) //nolint:gosec // G404: jitter spreading retries needs no unpredictability
		}
		var last updateDoc
		err := s.updates.FindOne(ctx, bson.M{"stream": stream},
			options.FindOne().SetSort(bson.D{{Key: "seq", Value: -1}}).SetProjection(bson.M{"seq": 1})).Decode(&last)
		if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
			return 0, fmt.Errorf("crdt store: append: %w", err)
		}
		snap, err := s.newestSnapshot(ctx, stream, false)
		if err != nil {
			return 0, err
		}
		n := max(last.Seq, upToOf(snap)) + 1
		key := seqKey(stream, n)
		_, err = s.updates.InsertOne(ctx, updateDoc{Key: key, Stream: stream, Seq: n, Data: u.Data, At: u.At, Origin: u.Origin})
		if mongodb.IsDuplicateKey(err) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("crdt store: append: %w", err)
		}
		if snap, err = s.newestSnapshot(ctx, stream, false); err != nil {
			return 0, err
		}
		if upToOf(snap) < n {
			return n, nil
		}
		if _, err := s.updates.DeleteOne(ctx, bson.M{"_id": key}); err != nil {
			return 0, fmt.Errorf("crdt store: append: %w", err)
		}
	}
	return 0, fmt.Errorf("crdt store: append to %s: too many concurrent appends", stream)
}

func (s *MongoStore) Tail(ctx context.Context, stream string, after int64, limit int) ([]Update, bool, error) {
	// The snapshot first: a compaction deletes entries only after writing the snapshot that
	// covers them, so entries missing from the log read next are always flagged.
	snap, err := s.newestSnapshot(ctx, stream, false)
	if err != nil {
		return nil, false, err
	}
	us, err := s.log(ctx, stream, after, limit)
	if err != nil {
		return nil, false, err
	}
	reload := upToOf(snap) > after
	if !reload && !contiguous(us, after) {
		reload = true // compacted between the two reads
	}
	if !reload && len(us) > 0 {
		// And the snapshot again: an appender that lost its number to a compaction (its
		// entry landed behind a snapshot that covers it) takes the entry back and appends
		// again, but a read between the two could see it under the old number. Such an entry
		// always lies behind a snapshot, which this read then shows.
		again, err := s.newestSnapshot(ctx, stream, false)
		if err != nil {
			return nil, false, err
		}
		reload = upToOf(again) > after
	}
	if us == nil {
		us = []Update{}
	}
	return us, reload, nil
}

// Compact writes the snapshot, then deletes older snapshots and the entries it covers. A
// second compaction of the same state writes the same _id and is refused, which is as good; one
// of an older state writes an older snapshot, which is never the newest and goes with the next
// compaction. Either deletes only what its own complete snapshot holds.
func (s *MongoStore) Compact(ctx context.Context, e Editor, c Compaction, merge MergeFunc) (bool, error) {
	st, err := s.Load(ctx, e)
	if err != nil {
		return false, err
	}
	if !c.due(st) {
		return false, nil
	}
	merged, err := merge(st.Parts()...)
	if err != nil {
		return false, err
	}
	stream, upTo := st.Meta.Stream, st.LastSeq()
	_, err = s.snapshots.InsertOne(ctx, snapshotDoc{Key: seqKey(stream, upTo), Stream: stream, UpTo: upTo, At: st.LastUpdate(), Data: merged})
	if mongodb.IsDuplicateKey(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("crdt store: compact: %w", err)
	}
	if _, err := s.snapshots.DeleteMany(ctx, bson.M{"stream": stream, "upTo": bson.M{"$lt": upTo}}); err != nil {
		return true, fmt.Errorf("crdt store: compact: %w", err)
	}
	if _, err := s.updates.DeleteMany(ctx, bson.M{"stream": stream, "seq": bson.M{"$lte": upTo}}); err != nil {
		return true, fmt.Errorf("crdt store: compact: %w", err)
	}
	// The base is in the snapshot now. Only from the record that names this stream.
	if _, err := s.editors.UpdateOne(ctx, bson.M{"_id": editorKeyOf(e), "stream": stream}, bson.M{"$unset": bson.M{"base": ""}}); err != nil {
		return true, fmt.Errorf("crdt store: compact: %w", err)
	}
	return true, nil
}

func (s *MongoStore) DeleteStream(ctx context.Context, stream string) error {
	if _, err := s.updates.DeleteMany(ctx, bson.M{"stream": stream}); err != nil {
		return fmt.Errorf("crdt store: delete stream: %w", err)
	}
	if _, err := s.snapshots.DeleteMany(ctx, bson.M{"stream": stream}); err != nil {
		return fmt.Errorf("crdt store: delete stream: %w", err)
	}
	return nil
}

// DeleteEditor deletes the stream first, the record last: a run stopped in between leaves a
// record the next run finds again.
func (s *MongoStore) DeleteEditor(ctx context.Context, e Editor) (bool, error) {
	d, err := s.editor(ctx, e)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := s.DeleteStream(ctx, d.Stream); err != nil {
		return false, err
	}
	res, err := s.editors.DeleteOne(ctx, bson.M{"_id": d.Key, "stream": d.Stream})
	if err != nil {
		return false, fmt.Errorf("crdt store: delete editor: %w", err)
	}
	return res.DeletedCount > 0, nil
}

// deleteBatch is how many editors deleteWhere removes per round.
const deleteBatch = 500

// deleteWhere removes every editor the filter selects, a batch at a time: streams first, then
// the records, so a stopped run leaves records that name what is left.
func (s *MongoStore) deleteWhere(ctx context.Context, filter bson.D) error {
	for {
		cur, err := s.editors.Find(ctx, filter, options.Find().SetProjection(bson.M{"stream": 1}).SetLimit(deleteBatch))
		if err != nil {
			return fmt.Errorf("crdt store: delete: %w", err)
		}
		var docs []editorDoc
		if err := cur.All(ctx, &docs); err != nil {
			return fmt.Errorf("crdt store: delete: %w", err)
		}
		if len(docs) == 0 {
			return nil
		}
		keys, streams := make(bson.A, len(docs)), make(bson.A, len(docs))
		for i, d := range docs {
			keys[i], streams[i] = d.Key, d.Stream
		}
		for _, c := range []*mongo.Collection{s.updates, s.snapshots} {
			if _, err := c.DeleteMany(ctx, bson.M{"stream": bson.M{"$in": streams}}); err != nil {
				return fmt.Errorf("crdt store: delete: %w", err)
			}
		}
		if _, err := s.editors.DeleteMany(ctx, bson.M{"_id": bson.M{"$in": keys}}); err != nil {
			return fmt.Errorf("crdt store: delete: %w", err)
		}
	}
}

func (s *MongoStore) DeleteDocument(ctx context.Context, doc Editor) error {
	return s.deleteWhere(ctx, bson.D{{Key: "apiKey", Value: doc.APIKey}, {Key: "organizationId", Value: doc.OrganizationID}, {Key: "doc", Value: doc.docKey()}})
}

func (s *MongoStore) DeleteOrganization(ctx context.Context, apiKey, orgID, gen string) error {
	return s.deleteWhere(ctx, bson.D{{Key: "apiKey", Value: apiKey}, {Key: "organizationId", Value: orgID}, {Key: "orgGen", Value: gen}})
}

func (s *MongoStore) MoveDocument(ctx context.Context, apiKey, orgID, from, to, gen string) error {
	if gen == "" {
		return nil // keyed by id: a document without a generation does not follow a migration
	}
	_, err := s.editors.UpdateMany(ctx, bson.D{
		{Key: "apiKey", Value: apiKey}, {Key: "organizationId", Value: orgID}, {Key: "doc", Value: gen}, {Key: "documentId", Value: from},
	}, bson.M{"$set": bson.M{"documentId": to}})
	if err != nil {
		return fmt.Errorf("crdt store: move document: %w", err)
	}
	return nil
}

func (s *MongoStore) Ping(ctx context.Context) error {
	if err := s.db.Client().Ping(ctx, nil); err != nil {
		return fmt.Errorf("crdt store: ping: %w", err)
	}
	return nil
}
