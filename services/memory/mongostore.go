package memory

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/collab/collab/internal/ids"
	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/mongodb"
)

// MongoStore keeps the memory service's data in MongoDB, one document per fact so that every
// write is a single-document operation and no transaction is needed:
//
//   - judgments: a judgment with its vectors (float32, little-endian, as binary);
//     _id = (apiKey, org, recordId)
//   - executions: an agent execution; _id = (apiKey, id)
//   - finished: the one finish of an execution; _id = (apiKey, id)
//   - tombstones: a buried generation or a migration mark (lifecycle.MongoMarkers, layout
//     ByID)
//
// Search stays exact: ScanJudgments loads the scope's judgments that pass the filters (the
// filters are in the query, on indexed fields) with the one vector the search reads, and the
// server scores them in Go. That reads about 2 KiB per judgment of the scope (512 float32s
// plus the fields), so a search costs a scan of its scope (docs/api.md "Memory and agents").
type MongoStore struct {
	// The generation markers (Bury, Buried, MarkMoved, MovedTo), which readers also consult
	// (deadGenerations).
	*lifecycle.MongoMarkers

	db         *mongo.Database
	judgments  *mongo.Collection
	executions *mongo.Collection
	finished   *mongo.Collection
}

// NewMongoStore returns a store on db and creates its indexes.
func NewMongoStore(ctx context.Context, db *mongo.Database) (*MongoStore, error) {
	s := &MongoStore{
		MongoMarkers: lifecycle.NewMongoMarkers(db.Collection("tombstones"), lifecycle.ByID),
		db:           db,
		judgments:    db.Collection("judgments"),
		executions:   db.Collection("executions"),
		finished:     db.Collection("finished"),
	}
	index := mongodb.Index
	if err := mongodb.EnsureIndexes(ctx, s.judgments,
		index("scope", "apiKey", "organizationId", "documentId"),
		index("annotation", "apiKey", "organizationId", "annotationId"),
		index("embedder", "embedder"),
	); err != nil {
		return nil, fmt.Errorf("memory store: %w", err)
	}
	if err := mongodb.EnsureIndexes(ctx, s.executions,
		index("started", "apiKey", "startedAt", "id"),
		index("agent_started", "apiKey", "agentId", "startedAt", "id"),
		index("org_started", "apiKey", "organizationId", "startedAt", "id"),
	); err != nil {
		return nil, fmt.Errorf("memory store: %w", err)
	}
	return s, nil
}

// judgmentDoc is a judgment as stored.
type judgmentDoc struct {
	Key        string `bson:"_id"`
	Judgment   `bson:",inline"`
	ReviewVec  []byte `bson:"reviewVec,omitempty"`
	ContentVec []byte `bson:"contentVec,omitempty"`
}

func vectorBytes(v []float32) []byte {
	if v == nil {
		return nil
	}
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

func bytesVector(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

func (d *judgmentDoc) judgment() *Judgment {
	j := d.Judgment
	j.ReviewVector, j.ContentVector = bytesVector(d.ReviewVec), bytesVector(d.ContentVec)
	return &j
}

func judgmentKey(apiKey, orgID, id string) string { return mongodb.Key(apiKey, orgID, id) }

func (s *MongoStore) PutJudgment(ctx context.Context, j *Judgment) (bool, error) {
	key := judgmentKey(j.APIKey, j.OrganizationID, j.RecordID)
	doc := judgmentDoc{Key: key, Judgment: *j, ReviewVec: vectorBytes(j.ReviewVector), ContentVec: vectorBytes(j.ContentVector)}
	opts := options.Replace().SetUpsert(true)
	for attempt := 0; ; attempt++ {
		res, err := s.judgments.ReplaceOne(ctx, bson.M{"_id": key}, doc, opts)
		// Two first puts of one key both find nothing and both insert: the unique _id refuses
		// the second, whose replace then finds the first's judgment.
		if mongodb.IsDuplicateKey(err) && attempt < 3 {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("memory store: put judgment: %w", err)
		}
		return res.UpsertedCount > 0, nil
	}
}

func (s *MongoStore) DeleteJudgments(ctx context.Context, apiKey, orgID string, idList []string) ([]string, error) {
	deleted := []string{}
	for _, id := range idList {
		res, err := s.judgments.DeleteOne(ctx, bson.M{"_id": judgmentKey(apiKey, orgID, id)})
		if err != nil {
			return deleted, fmt.Errorf("memory store: delete judgments: %w", err)
		}
		if res.DeletedCount > 0 {
			deleted = append(deleted, id)
		}
	}
	return deleted, nil
}

func (s *MongoStore) ScanJudgments(ctx context.Context, sc Scope, f Filter, withVector string, fn func(*Judgment) bool) error {
	q := bson.D{{Key: "apiKey", Value: sc.APIKey}}
	if sc.OrganizationID != "" {
		q = append(q, bson.E{Key: "organizationId", Value: sc.OrganizationID})
		if sc.DocumentID != "" {
			q = append(q, bson.E{Key: "documentId", Value: sc.DocumentID})
		}
	}
	for _, c := range []struct{ field, v string }{
		{"decision", f.Decision}, {"judgeType", f.JudgeType}, {"contentType", f.ContentType},
		{"reviewerId", f.ReviewerID}, {"annotationId", f.AnnotationID},
	} {
		if c.v != "" {
			q = append(q, bson.E{Key: c.field, Value: c.v})
		}
	}
	if f.Since != nil || f.Until != nil {
		r := bson.M{}
		if f.Since != nil {
			r["$gte"] = *f.Since
		}
		if f.Until != nil {
			r["$lte"] = *f.Until
		}
		q = append(q, bson.E{Key: "createdAt", Value: r})
	}
	// Leave out what the caller does not read: the texts it does not show, and the vectors.
	proj := bson.M{"content": 0}
	if withVector != EmbedReview {
		proj["reviewVec"] = 0
	}
	if withVector != EmbedContent {
		proj["contentVec"] = 0
	}
	dead, err := s.deadGenerations(ctx, sc.APIKey)
	if err != nil {
		return err
	}
	cur, err := s.judgments.Find(ctx, q, options.Find().SetProjection(proj))
	if err != nil {
		return fmt.Errorf("memory store: scan judgments: %w", err)
	}
	defer cur.Close(ctx)
	for cur.Next(ctx) {
		var d judgmentDoc
		if err := cur.Decode(&d); err != nil {
			return fmt.Errorf("memory store: scan judgments: %w", err)
		}
		j := d.judgment()
		if dead.has(j.OrganizationGeneration, j.DocumentGeneration) {
			continue
		}
		if !fn(j) {
			return nil
		}
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("memory store: scan judgments: %w", err)
	}
	return nil
}

// staleQuery matches judgments whose vectors are not the embedder's (see stale).
func staleQuery(embedder string, dim int) bson.M {
	if dim <= 0 {
		return bson.M{"embedder": bson.M{"$ne": embedder}}
	}
	return bson.M{"$or": bson.A{bson.M{"embedder": bson.M{"$ne": embedder}}, bson.M{"dim": bson.M{"$ne": dim}}}}
}

func (s *MongoStore) StaleJudgments(ctx context.Context, embedder string, dim, limit int, skip []JudgmentRef) ([]*Judgment, error) {
	q := staleQuery(embedder, dim)
	if len(skip) > 0 {
		keys := make(bson.A, len(skip))
		for i, r := range skip {
			keys[i] = judgmentKey(r.APIKey, r.OrganizationID, r.RecordID)
		}
		q["_id"] = bson.M{"$nin": keys}
	}
	cur, err := s.judgments.Find(ctx, q,
		options.Find().SetLimit(int64(limit)).SetProjection(bson.M{"reviewVec": 0, "contentVec": 0}))
	if err != nil {
		return nil, fmt.Errorf("memory store: stale judgments: %w", err)
	}
	var docs []judgmentDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("memory store: stale judgments: %w", err)
	}
	out := make([]*Judgment, len(docs))
	for i := range docs {
		out[i] = docs[i].judgment()
	}
	return out, nil
}

func (s *MongoStore) CountStale(ctx context.Context, embedder string, dim int) (int64, error) {
	n, err := s.judgments.CountDocuments(ctx, staleQuery(embedder, dim))
	if err != nil {
		return 0, fmt.Errorf("memory store: count stale: %w", err)
	}
	return n, nil
}

func (s *MongoStore) SetVectors(ctx context.Context, j *Judgment, embedder string, review, content []float32) error {
	set := bson.M{"embedder": embedder, "dim": len(review), "reviewVec": vectorBytes(review), "rev": ids.Random(12)}
	update := bson.M{"$set": set}
	if content != nil {
		set["contentVec"] = vectorBytes(content)
	} else {
		update["$unset"] = bson.M{"contentVec": ""}
	}
	res, err := s.judgments.UpdateOne(ctx, bson.M{"_id": judgmentKey(j.APIKey, j.OrganizationID, j.RecordID), "rev": j.Rev}, update)
	if err != nil {
		return fmt.Errorf("memory store: set vectors: %w", err)
	}
	if res.MatchedCount == 0 {
		return ErrChanged
	}
	return nil
}

// executionDoc is an execution as stored.
type executionDoc struct {
	Key       string `bson:"_id"`
	Execution `bson:",inline"`
}

func executionKey(apiKey, id string) string { return mongodb.Key(apiKey, id) }

func (s *MongoStore) InsertExecution(ctx context.Context, e *Execution) error {
	if _, err := s.executions.InsertOne(ctx, executionDoc{Key: executionKey(e.APIKey, e.ID), Execution: *e}); err != nil {
		return fmt.Errorf("memory store: insert execution: %w", err)
	}
	return nil
}

// finishDoc is the marker that an execution was finished, with the outcome: inserting it is
// the atomic step (the unique _id admits one finish), the update of the execution follows.
type finishDoc struct {
	Key         string `bson:"_id"`
	Status      string `bson:"status"`
	Message     string `bson:"message"`
	CompletedAt int64  `bson:"completedAt"`
	// Where the execution lives, so the marker (it holds the caller's message) goes with its
	// organization's or document's deletion and follows a migration.
	APIKey                 string `bson:"apiKey"`
	OrganizationID         string `bson:"organizationId"`
	OrganizationGeneration string `bson:"orgGen"`
	DocumentID             string `bson:"documentId"`
	DocumentGeneration     string `bson:"docGen"`
}

func (s *MongoStore) execution(ctx context.Context, key string) (*Execution, error) {
	var d executionDoc
	err := s.executions.FindOne(ctx, bson.M{"_id": key}).Decode(&d)
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
		return nil, ErrNotFound
	case err != nil:
		return nil, fmt.Errorf("memory store: execution: %w", err)
	}
	return &d.Execution, nil
}

func (s *MongoStore) FinishExecution(ctx context.Context, apiKey, id, status, message string, completedAt int64) (*Execution, error) {
	key := executionKey(apiKey, id)
	e, err := s.execution(ctx, key)
	if err != nil {
		return nil, err
	}
	if e.Status != StatusRunning {
		return nil, ErrFinished
	}
	f := finishDoc{Key: key, Status: status, Message: message, CompletedAt: completedAt,
		APIKey: e.APIKey, OrganizationID: e.OrganizationID, OrganizationGeneration: e.OrganizationGeneration,
		DocumentID: e.DocumentID, DocumentGeneration: e.DocumentGeneration}
	if _, err := s.finished.InsertOne(ctx, f); mongodb.IsDuplicateKey(err) {
		// Another finish won. If it died before updating the execution, finish its work, so
		// the execution shows the outcome that won.
		var won finishDoc
		if err := s.finished.FindOne(ctx, bson.M{"_id": key}).Decode(&won); err == nil {
			_ = s.apply(ctx, e, won)
		}
		return nil, ErrFinished
	} else if err != nil {
		return nil, fmt.Errorf("memory store: finish execution: %w", err)
	}
	if err := s.apply(ctx, e, f); err != nil {
		return nil, err
	}
	d := max(completedAt-e.StartedAt, 0)
	e.Status, e.Message, e.CompletedAt, e.DurationMs = status, message, &completedAt, &d
	return e, nil
}

// apply writes a finish onto the execution.
func (s *MongoStore) apply(ctx context.Context, e *Execution, f finishDoc) error {
	d := max(f.CompletedAt-e.StartedAt, 0)
	_, err := s.executions.UpdateOne(ctx, bson.M{"_id": f.Key}, bson.M{"$set": bson.M{
		"status": f.Status, "message": f.Message, "completedAt": f.CompletedAt, "durationMs": d,
	}})
	if err != nil {
		return fmt.Errorf("memory store: finish execution: %w", err)
	}
	return nil
}

func (s *MongoStore) ListExecutions(ctx context.Context, apiKey string, f ExecutionFilter, after *ExecutionPosition, desc bool, limit int) ([]*Execution, error) {
	q := bson.D{{Key: "apiKey", Value: apiKey}}
	for _, c := range []struct{ field, v string }{
		{"agentId", f.AgentID}, {"organizationId", f.OrganizationID}, {"documentId", f.DocumentID}, {"status", f.Status},
	} {
		if c.v != "" {
			q = append(q, bson.E{Key: c.field, Value: c.v})
		}
	}
	dir, beyond := 1, "$gt"
	if desc {
		dir, beyond = -1, "$lt"
	}
	if after != nil {
		q = append(q, bson.E{Key: "$or", Value: bson.A{
			bson.M{"startedAt": bson.M{beyond: after.StartedAt}},
			bson.D{{Key: "startedAt", Value: after.StartedAt}, {Key: "id", Value: bson.M{beyond: after.ID}}},
		}})
	}
	dead, err := s.deadGenerations(ctx, apiKey)
	if err != nil {
		return nil, err
	}
	opts := options.Find().SetSort(bson.D{{Key: "startedAt", Value: dir}, {Key: "id", Value: dir}})
	if limit > 0 && len(dead) == 0 {
		opts.SetLimit(int64(limit))
	}
	cur, err := s.executions.Find(ctx, q, opts)
	if err != nil {
		return nil, fmt.Errorf("memory store: list executions: %w", err)
	}
	defer cur.Close(ctx)
	out := []*Execution{}
	for (limit <= 0 || len(out) < limit) && cur.Next(ctx) {
		var d executionDoc
		if err := cur.Decode(&d); err != nil {
			return nil, fmt.Errorf("memory store: list executions: %w", err)
		}
		if dead.has(d.Execution.OrganizationGeneration, d.Execution.DocumentGeneration) {
			continue
		}
		e := d.Execution
		out = append(out, &e)
	}
	if err := cur.Err(); err != nil {
		return nil, fmt.Errorf("memory store: list executions: %w", err)
	}
	return out, nil
}

// ofGeneration matches the generation gen and the empty one.
func ofGeneration(gen string) bson.M { return bson.M{"$in": bson.A{gen, ""}} }

func (s *MongoStore) deleteMany(ctx context.Context, what string, q bson.D) error {
	for _, c := range []*mongo.Collection{s.judgments, s.executions, s.finished} {
		if _, err := c.DeleteMany(ctx, q); err != nil {
			return fmt.Errorf("memory store: %s: %w", what, err)
		}
	}
	return nil
}

func (s *MongoStore) DeleteOrganization(ctx context.Context, apiKey, orgID, gen string) error {
	return s.deleteMany(ctx, "delete organization", bson.D{
		{Key: "apiKey", Value: apiKey}, {Key: "organizationId", Value: orgID}, {Key: "orgGen", Value: ofGeneration(gen)},
	})
}

func documentFilter(apiKey, orgID, docID, gen string) bson.D {
	return bson.D{
		{Key: "apiKey", Value: apiKey}, {Key: "organizationId", Value: orgID},
		{Key: "documentId", Value: docID}, {Key: "docGen", Value: ofGeneration(gen)},
	}
}

func (s *MongoStore) DeleteDocument(ctx context.Context, apiKey, orgID, docID, gen string) error {
	if docID == "" {
		return nil
	}
	return s.deleteMany(ctx, "delete document", documentFilter(apiKey, orgID, docID, gen))
}

func (s *MongoStore) MoveDocument(ctx context.Context, apiKey, orgID, from, to, gen string) error {
	if from == "" || from == to {
		return nil
	}
	for _, c := range []*mongo.Collection{s.judgments, s.executions, s.finished} {
		if _, err := c.UpdateMany(ctx, documentFilter(apiKey, orgID, from, gen), bson.M{"$set": bson.M{"documentId": to}}); err != nil {
			return fmt.Errorf("memory store: move document: %w", err)
		}
	}
	return nil
}

func (s *MongoStore) Ping(ctx context.Context) error {
	if err := s.db.Client().Ping(ctx, nil); err != nil {
		return fmt.Errorf("memory store: ping: %w", err)
	}
	return nil
}

// deadSet holds buried generations (organizations' and documents'); generations are random,
// so a generation alone names its incarnation.
type deadSet map[string]bool

// has reports whether either generation is buried ("" never is).
func (d deadSet) has(orgGen, docGen string) bool {
	return len(d) > 0 && ((orgGen != "" && d[orgGen]) || (docGen != "" && d[docGen]))
}

// deadGenerations lists an API key's buried generations. A writer settles after writing (and
// sweeps what it wrote under a generation buried meanwhile), but a crash, or a store error,
// between its write and its settle leaves the record under the dead generation: readers skip
// such records (docs/architecture.md: records under a dead generation are never read). The
// memory store needs none of this: its records die with the process.
func (s *MongoStore) deadGenerations(ctx context.Context, apiKey string) (deadSet, error) {
	dead, err := s.BuriedGenerations(ctx, apiKey)
	if err != nil {
		return nil, fmt.Errorf("memory store: %w", err)
	}
	return dead, nil
}
