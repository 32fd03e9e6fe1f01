package embedmongo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/collab/collab/internal/mongodb"
	"github.com/collab/collab/internal/racetest"
)

// logRecorder keeps the messages logged to it.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	line := rec.Message
	rec.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
	r.msgs = append(r.msgs, line)
	return nil
}
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecorder) WithGroup(string) slog.Handler      { return r }

func (r *logRecorder) has(part string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.msgs {
		if strings.Contains(m, part) {
			return true
		}
	}
	return false
}

func startServer(t *testing.T, log *slog.Logger) *Server {
	t.Helper()
	srv, err := Start(t.TempDir(), log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

func connect(t *testing.T, uri string, opts ...mongodb.ConnectOption) *mongo.Client {
	t.Helper()
	conn, err := mongodb.Connect(context.Background(), uri, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn.Client
}

// What the stores rely on from MongoDB holds on the embedded server, between many clients:
// concurrent updates of one document each land, findAndModify and conditional updates see
// each other's writes, and a unique index lets one of concurrent inserts in.
func TestSingleDocumentAtomicity(t *testing.T) {
	srv := startServer(t, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	clients := []*mongo.Client{connect(t, srv.URI()), connect(t, srv.URI())} // as two processes
	coll := func(i int) *mongo.Collection { return clients[i%2].Database("x").Collection("c") }

	// Some select the document by _id (which locks the document), some by another field (which
	// locks the collection).
	const writers = 16
	for round := range 5 {
		id := fmt.Sprint("fields", round)
		if _, err := coll(0).InsertOne(ctx, bson.M{"_id": id, "tag": id}); err != nil {
			t.Fatal(err)
		}
		racetest.N(writers, func(i int) {
			filter := bson.M{"_id": id}
			if i%4 == 3 {
				filter = bson.M{"tag": id}
			}
			if _, err := coll(i).UpdateOne(ctx, filter, bson.M{"$set": bson.M{fmt.Sprint("f", i): i}}); err != nil {
				t.Error(err)
			}
		})
		var got bson.M
		if err := coll(0).FindOne(ctx, bson.M{"_id": id}).Decode(&got); err != nil {
			t.Fatal(err)
		}
		if len(got) != writers+2 {
			t.Fatalf("round %d: %d of %d fields set: %v", round, len(got)-2, writers, got)
		}
	}

	// findAndModify: every increment is counted and each caller sees its own count.
	if _, err := coll(0).InsertOne(ctx, bson.M{"_id": "counter", "n": 0}); err != nil {
		t.Fatal(err)
	}
	seen := make([]bool, 3*writers+1)
	var mu sync.Mutex
	racetest.N(3*writers, func(i int) {
		var d struct{ N int }
		err := coll(i).FindOneAndUpdate(ctx, bson.M{"_id": "counter"}, bson.M{"$inc": bson.M{"n": 1}},
			options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&d)
		if err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if d.N < 1 || d.N > 3*writers || seen[d.N] {
			t.Errorf("count %d returned twice or out of range", d.N)
			return
		}
		seen[d.N] = true
	})

	// A conditional update under a limit: exactly the limit passes (FerretDB alone let 150 of
	// 200 concurrent increments under a limit of 100 pass).
	const limit = 10
	if _, err := coll(0).InsertOne(ctx, bson.M{"_id": "limited", "n": 0}); err != nil {
		t.Fatal(err)
	}
	var passed atomic.Int64
	racetest.N(3*limit, func(i int) {
		res, err := coll(i).UpdateOne(ctx, bson.M{"_id": "limited", "n": bson.M{"$lt": limit}}, bson.M{"$inc": bson.M{"n": 1}})
		if err != nil {
			t.Error(err)
			return
		}
		passed.Add(res.ModifiedCount)
	})
	var lim struct{ N int }
	if err := coll(0).FindOne(ctx, bson.M{"_id": "limited"}).Decode(&lim); err != nil || lim.N != limit || passed.Load() != limit {
		t.Fatalf("limit %d: n = %d, %d updates passed (%v)", limit, lim.N, passed.Load(), err)
	}

	// A unique index under concurrent inserts.
	if _, err := coll(0).Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "email", Value: 1}}, Options: options.Index().SetUnique(true)}); err != nil {
		t.Fatal(err)
	}
	var inserted atomic.Int64
	racetest.N(writers, func(i int) {
		_, err := coll(i).InsertOne(ctx, bson.M{"_id": fmt.Sprint("u", i), "email": "same@example.com"})
		switch {
		case err == nil:
			inserted.Add(1)
		case !mongodb.IsDuplicateKey(err):
			t.Error(err)
		}
	})
	if inserted.Load() != 1 {
		t.Fatalf("%d concurrent inserts of one unique email passed", inserted.Load())
	}
}

// waits reports whether call is still running after a while (it waits for a lock), and if so
// returns a function that waits for its end.
func waits(t *testing.T, call func() error) (func(), bool) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- call() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
		return nil, false
	case <-time.After(300 * time.Millisecond):
		return func() {
			if err := <-done; err != nil {
				t.Error(err)
			}
		}, true
	}
}

// Each write waits for the writes it could interfere with, and for no other: one holding a
// document holds up that document's writes and its collection's writes by any other filter,
// not the writes of other documents, inserts or reads; one holding a database holds up every
// write of that database only; one on admin holds up every write.
func TestLockScopes(t *testing.T) {
	srv := startServer(t, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	client := connect(t, srv.URI())
	x, y := client.Database("x").Collection("c"), client.Database("y").Collection("c")
	for _, c := range []*mongo.Collection{x, y} {
		if _, err := c.InsertMany(ctx, []any{bson.M{"_id": "a"}, bson.M{"_id": "b"}}); err != nil {
			t.Fatal(err)
		}
	}
	setByID := func(c *mongo.Collection, id string) func() error {
		return func() error {
			_, err := c.UpdateOne(ctx, bson.M{"_id": id}, bson.M{"$inc": bson.M{"n": 1}})
			return err
		}
	}
	setAll := func(c *mongo.Collection) func() error {
		return func() error {
			_, err := c.UpdateMany(ctx, bson.M{}, bson.M{"$inc": bson.M{"m": 1}})
			return err
		}
	}
	insert := func(c *mongo.Collection) func() error {
		return func() error { _, err := c.InsertOne(ctx, bson.M{"n": 0}); return err }
	}
	read := func(c *mongo.Collection) func() error {
		return func() error { return c.FindOne(ctx, bson.M{"_id": "a"}).Err() }
	}
	type call struct {
		name string
		do   func() error
		wait bool
	}
	for _, c := range []struct {
		hold  request
		calls []call
	}{
		{request{scope: scopeDocuments, db: "x", coll: "c", keys: []string{"sa"}}, []call{
			{"read of the document", read(x), false},
			{"write of another document", setByID(x, "b"), false},
			{"insert", insert(x), false},
			{"write of the document", setByID(x, "a"), true},
			{"write by another filter", setAll(x), true},
		}},
		{request{scope: scopeCollection, db: "x", coll: "c"}, []call{
			{"read", read(x), false},
			{"write of another database", setByID(y, "a"), false},
			{"insert", insert(x), true},
		}},
		{request{scope: scopeDatabase, db: "x"}, []call{
			{"read", read(x), false},
			{"write of another database", setAll(y), false},
			{"write of another collection", setByID(client.Database("x").Collection("d"), "a"), true},
		}},
		{request{scope: scopeAll}, []call{
			{"read", read(y), false},
			{"write of any database", setByID(y, "b"), true},
		}},
	} {
		unlock := srv.proxy.locks.lock(c.hold)
		var ends []func()
		for _, call := range c.calls {
			end, waited := waits(t, call.do)
			if waited != call.wait {
				t.Errorf("holding %+v: %s waited %v, want %v", c.hold, call.name, waited, call.wait)
			}
			if end != nil {
				ends = append(ends, end)
			}
		}
		unlock()
		for _, end := range ends {
			end()
		}
	}
	srv.proxy.locks.mu.Lock()
	defer srv.proxy.locks.mu.Unlock()
	if n := len(srv.proxy.locks.named); n != 0 {
		t.Fatalf("%d locks left after every write ended", n)
	}
}

// A client that does not read the reply to its write (a large findAndModify answer) does not
// hold up the database's other writes: the reply is taken from the server before the lock is
// released.
func TestASlowReaderHoldsNoLock(t *testing.T) {
	srv := startServer(t, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	coll := connect(t, srv.URI()).Database("x").Collection("c")
	big := strings.Repeat("x", 4<<20) // far more than a socket's buffers
	if _, err := coll.InsertOne(ctx, bson.M{"_id": 1, "big": big}); err != nil {
		t.Fatal(err)
	}
	sock, _ := url.PathUnescape(strings.TrimSuffix(strings.TrimPrefix(srv.URI(), "mongodb://"), "/"))
	slow, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = slow.Close() }()
	fam := doc(t, "findAndModify", "c", "query", bson.D{{Key: "_id", Value: 1}}, "update", bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: 1}}}}, "new", true, "$db", "x")
	if _, err := slow.Write(buildMsg(0, bodySection(fam))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the slow client's write is answered, and not read
	done := make(chan error, 1)
	go func() {
		_, err := coll.UpdateOne(ctx, bson.M{"_id": 1}, bson.M{"$set": bson.M{"m": 1}})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a write waited for a client that does not read its reply")
	}
}

// An unacknowledged write (moreToCome: no reply wanted) is applied, and the connection stays in
// step: FerretDB answers it anyway, and the proxy drops that answer rather than let the
// client take it for its next request's.
func TestUnacknowledgedWritesKeepTheConnectionInStep(t *testing.T) {
	srv := startServer(t, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	client := connect(t, srv.URI(), func(o *options.ClientOptions) { o.SetMaxPoolSize(1) }) // one connection
	w0 := client.Database("x").Collection("c", options.Collection().SetWriteConcern(writeconcern.Unacknowledged()))
	acked := client.Database("x").Collection("c")
	for i := range 20 {
		if _, err := w0.InsertOne(ctx, bson.M{"_id": i}); err != nil {
			t.Fatal(err)
		}
		var got struct {
			ID int `bson:"_id"`
		}
		if err := acked.FindOne(ctx, bson.M{"_id": i}).Decode(&got); err != nil || got.ID != i {
			t.Fatalf("read after unacknowledged insert %d: %+v %v", i, got, err)
		}
	}
}

// Messages the proxy cannot read exactly are refused: the connection is closed (and the
// refusal logged), nothing is forwarded, and other clients are served on.
func TestRefusedMessagesCloseTheConnection(t *testing.T) {
	rec := &logRecorder{}
	srv := startServer(t, slog.New(rec))
	sock, err := url.PathUnescape(strings.TrimSuffix(strings.TrimPrefix(srv.URI(), "mongodb://"), "/"))
	if err != nil {
		t.Fatal(err)
	}
	huge := frame(opMsg, nil)
	huge[0], huge[1], huge[2], huge[3] = 0x01, 0x6c, 0xdc, 0x02 // 48,000,001 bytes, never sent
	for _, c := range []struct {
		name string
		msg  []byte
	}{
		{"OP_COMPRESSED", frame(2012, make([]byte, 20))},
		{"a length past the wire's maximum", huge},
		{"a length below the header's", []byte{4, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}},
		{"two body sections", buildMsg(0, bodySection(doc(t, "find", "c", "$db", "x")), bodySection(doc(t, "delete", "c", "$db", "x")))},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = conn.Close() }()
			if _, err := conn.Write(c.msg); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			if n, err := conn.Read(make([]byte, 64)); !errors.Is(err, io.EOF) {
				t.Fatalf("read %d bytes, %v; want the connection closed", n, err)
			}
		})
	}
	if !rec.has("proxy closed a connection") || !rec.has("opcode 2012") {
		t.Fatalf("refusals not logged: %v", rec.msgs)
	}
	if err := connect(t, srv.URI()).Ping(context.Background(), nil); err != nil {
		t.Fatalf("after the refusals: %v", err)
	}
}

// Stop ends the proxy's connections, idle or not, and waits for their goroutines.
func TestStopEndsConnections(t *testing.T) {
	srv, err := Start(t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	sock, _ := url.PathUnescape(strings.TrimSuffix(strings.TrimPrefix(srv.URI(), "mongodb://"), "/"))
	idle, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = idle.Close() }()
	client := connect(t, srv.URI())
	if err := client.Ping(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() { srv.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("Stop did not return")
	}
	_ = idle.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := idle.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection after Stop: %v", err)
	}
	srv.proxy.mu.Lock()
	defer srv.proxy.mu.Unlock()
	if len(srv.proxy.conns) != 0 || srv.proxy.clients != 0 {
		t.Fatalf("%d connections (%d clients) left", len(srv.proxy.conns), srv.proxy.clients)
	}
}
