package embedmongo

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/FerretDB/wire"
	"github.com/FerretDB/wire/wirebson"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// doc is a BSON document of the pairs, in order.
func doc(t testing.TB, pairs ...any) []byte {
	t.Helper()
	d := bson.D{}
	for i := 0; i+1 < len(pairs); i += 2 {
		d = append(d, bson.E{Key: pairs[i].(string), Value: pairs[i+1]})
	}
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// frame puts a header (length, request id 7, opcode) before body.
func frame(opCode int32, body []byte) []byte {
	msg := binary.LittleEndian.AppendUint32(nil, uint32(headerLen+len(body)))
	msg = binary.LittleEndian.AppendUint32(msg, 7)
	msg = binary.LittleEndian.AppendUint32(msg, 0)
	msg = binary.LittleEndian.AppendUint32(msg, uint32(opCode))
	return append(msg, body...)
}

// buildMsg is an OP_MSG of the flags and sections (each its kind byte and payload).
func buildMsg(flags uint32, sections ...[]byte) []byte {
	body := binary.LittleEndian.AppendUint32(nil, flags)
	for _, s := range sections {
		body = append(body, s...)
	}
	msg := frame(opMsg, body)
	if flags&flagChecksumPresent != 0 {
		msg = append(msg, 0, 0, 0, 0)
		binary.LittleEndian.PutUint32(msg, uint32(len(msg)))
		n := len(msg) - 4
		binary.LittleEndian.PutUint32(msg[n:], crc32.Checksum(msg[:n], castagnoli))
	}
	return msg
}

func bodySection(d []byte) []byte { return append([]byte{0}, d...) }

func sequenceSection(id string, docs ...[]byte) []byte {
	payload := append([]byte(id), 0)
	for _, d := range docs {
		payload = append(payload, d...)
	}
	s := binary.LittleEndian.AppendUint32([]byte{1}, uint32(4+len(payload)))
	return append(s, payload...)
}

// opQueryMsg is an OP_QUERY of ns with the flags and the query document.
func opQueryMsg(flags uint32, ns string, query []byte) []byte {
	body := binary.LittleEndian.AppendUint32(nil, flags)
	body = append(append(body, ns...), 0)
	body = binary.LittleEndian.AppendUint32(body, 0)
	body = binary.LittleEndian.AppendUint32(body, 0xffffffff) // numberToReturn -1
	return frame(opQuery, append(body, query...))
}

type requestCase struct {
	name string
	msg  []byte
	want request // ignored when refused
	// refused is a part of the refusal's message; "" when the message is accepted.
	refused string
}

func requestCases(t testing.TB) []requestCase {
	insert := doc(t, "insert", "c", "ordered", true, "$db", "x")
	find := doc(t, "find", "c", "filter", bson.D{{Key: "a", Value: 1}}, "$db", "x")
	update := doc(t, "update", "c", "$db", "x")
	set := bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}}
	byID := func(id any, more ...any) []byte {
		return doc(t, append([]any{"q", bson.D{{Key: "_id", Value: id}}, "u", set}, more...)...)
	}
	oid := bson.ObjectID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	docs := func(db, coll string, keys ...string) request {
		return request{scope: scopeDocuments, db: db, coll: coll, keys: keys}
	}
	with := func(r request, command string) request { r.command = command; return r }
	return []requestCase{
		{name: "insert with a document sequence", msg: buildMsg(0, bodySection(insert), sequenceSection("documents", doc(t, "_id", 1), doc(t, "_id", 2))),
			want: with(docs("x", "c"), "insert")},
		{name: "update by _id, statements in a sequence", msg: buildMsg(0, bodySection(update), sequenceSection("updates", byID("b"), byID("a"), byID("b", "upsert", true))),
			want: with(docs("x", "c", "sa", "sb"), "update")},
		{name: "update by _id, statements in the command", msg: buildMsg(0, bodySection(doc(t, "update", "c", "updates", bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: oid}, {Key: "n", Value: bson.D{{Key: "$lt", Value: 3}}}}}, {Key: "u", Value: set}}}, "$db", "x"))),
			want: with(docs("x", "c", "o"+string(oid[:])), "update")},
		{name: "update by numeric _ids", msg: buildMsg(0, bodySection(update), sequenceSection("updates", byID(1), byID(int64(2)), byID(3.5))),
			want: with(docs("x", "c", "n"), "update")},
		{name: "update by another filter", msg: buildMsg(0, bodySection(update), sequenceSection("updates", byID("a"), doc(t, "q", bson.D{{Key: "a", Value: 1}}, "u", set, "multi", true))),
			want: request{scope: scopeCollection, db: "x", coll: "c", command: "update"}},
		{name: "update by _id $in", msg: buildMsg(0, bodySection(update), sequenceSection("updates", byID(bson.D{{Key: "$in", Value: bson.A{"a", "b"}}}))),
			want: request{scope: scopeCollection, db: "x", coll: "c", command: "update"}},
		{name: "update by a regular expression", msg: buildMsg(0, bodySection(update), sequenceSection("updates", byID(bson.Regex{Pattern: "a"}))),
			want: request{scope: scopeCollection, db: "x", coll: "c", command: "update"}},
		{name: "update by _id with a collation", msg: buildMsg(0, bodySection(update), sequenceSection("updates", byID("a", "collation", bson.D{{Key: "locale", Value: "en"}, {Key: "strength", Value: 1}}))),
			want: request{scope: scopeCollection, db: "x", coll: "c", command: "update"}},
		{name: "update by _id given twice", msg: buildMsg(0, bodySection(update), sequenceSection("updates", doc(t, "q", bson.D{{Key: "_id", Value: "a"}, {Key: "_id", Value: "b"}}, "u", set))),
			want: request{scope: scopeCollection, db: "x", coll: "c", command: "update"}},
		{name: "update with statements in the command and a sequence", msg: buildMsg(0, bodySection(doc(t, "update", "c", "updates", bson.A{}, "$db", "x")), sequenceSection("updates", byID("a"))),
			want: request{scope: scopeCollection, db: "x", coll: "c", command: "update"}},
		{name: "update with two sequences", msg: buildMsg(0, bodySection(update), sequenceSection("updates", byID("a")), sequenceSection("updates", doc(t, "q", bson.D{}, "u", set))),
			want: request{scope: scopeCollection, db: "x", coll: "c", command: "update"}},
		{name: "update without statements", msg: buildMsg(0, bodySection(update)), want: request{scope: scopeCollection, db: "x", coll: "c", command: "update"}},
		{name: "delete by _id", msg: buildMsg(0, bodySection(doc(t, "delete", "c", "$db", "x")), sequenceSection("deletes", doc(t, "q", bson.D{{Key: "_id", Value: "a"}}, "limit", 1))),
			want: with(docs("x", "c", "sa"), "delete")},
		{name: "findAndModify by _id", msg: buildMsg(0, bodySection(doc(t, "findAndModify", "c", "query", bson.D{{Key: "_id", Value: "k"}, {Key: "workspaceId", Value: "w"}}, "update", set, "$db", "y"))),
			want: with(docs("y", "c", "sk"), "findAndModify")},
		{name: "findAndModify by another filter", msg: buildMsg(0, bodySection(doc(t, "findAndModify", "c", "query", bson.D{}, "update", bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}, "$db", "y"))),
			want: request{scope: scopeCollection, db: "y", coll: "c", command: "findAndModify"}},
		{name: "findAndModify with a collation", msg: buildMsg(0, bodySection(doc(t, "findAndModify", "c", "query", bson.D{{Key: "_id", Value: "k"}}, "collation", bson.D{{Key: "locale", Value: "en"}}, "$db", "y"))),
			want: request{scope: scopeCollection, db: "y", coll: "c", command: "findAndModify"}},
		{name: "find", msg: buildMsg(0, bodySection(find)), want: request{db: "x", command: "find"}},
		{name: "find with exhaustAllowed", msg: buildMsg(1<<16, bodySection(find)), want: request{db: "x", command: "find"}},
		{name: "getMore", msg: buildMsg(0, bodySection(doc(t, "getMore", int64(5), "collection", "c", "$db", "x"))), want: request{db: "x", command: "getMore"}},
		{name: "hello on admin", msg: buildMsg(0, bodySection(doc(t, "hello", 1, "$db", "admin"))), want: request{db: "admin", command: "hello"}},
		{name: "count as an aggregation", msg: buildMsg(0, bodySection(doc(t, "aggregate", "c", "pipeline", bson.A{bson.D{{Key: "$match", Value: bson.D{}}}, bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: 1}}}}}, "cursor", bson.D{}, "$db", "x"))),
			want: request{db: "x", command: "aggregate"}},
		{name: "aggregation with $out", msg: buildMsg(0, bodySection(doc(t, "aggregate", "c", "pipeline", bson.A{bson.D{{Key: "$match", Value: bson.D{}}}, bson.D{{Key: "$out", Value: "d"}}}, "$db", "x"))),
			want: request{scope: scopeDatabase, db: "x", coll: "c", command: "aggregate"}},
		{name: "aggregation with $merge", msg: buildMsg(0, bodySection(doc(t, "aggregate", "c", "pipeline", bson.A{bson.D{{Key: "$merge", Value: "d"}}}, "$db", "x"))),
			want: request{scope: scopeDatabase, db: "x", coll: "c", command: "aggregate"}},
		{name: "aggregation with two pipelines", msg: buildMsg(0, bodySection(doc(t, "aggregate", "c", "pipeline", bson.A{}, "pipeline", bson.A{bson.D{{Key: "$out", Value: "d"}}}, "$db", "x"))),
			want: request{scope: scopeDatabase, db: "x", coll: "c", command: "aggregate"}},
		{name: "aggregation with a pipeline that is not an array", msg: buildMsg(0, bodySection(doc(t, "aggregate", "c", "pipeline", bson.D{}, "$db", "x"))),
			want: request{scope: scopeDatabase, db: "x", coll: "c", command: "aggregate"}},
		{name: "createIndexes", msg: buildMsg(0, bodySection(doc(t, "createIndexes", "c", "indexes", bson.A{}, "$db", "x"))),
			want: request{scope: scopeDatabase, db: "x", coll: "c", command: "createIndexes"}},
		{name: "dropDatabase", msg: buildMsg(0, bodySection(doc(t, "dropDatabase", 1, "$db", "x"))), want: request{scope: scopeDatabase, db: "x", command: "dropDatabase"}},
		{name: "a write on admin takes every database", msg: buildMsg(0, bodySection(doc(t, "renameCollection", "x.a", "to", "y.b", "$db", "admin"))),
			want: request{scope: scopeAll, db: "admin", command: "renameCollection"}},
		{name: "a command not known to read", msg: buildMsg(0, bodySection(doc(t, "Find", "c", "$db", "x"))), want: request{scope: scopeDatabase, db: "x", coll: "c", command: "Find"}},
		{name: "a command without $db", msg: buildMsg(0, bodySection(doc(t, "delete", "c"))), want: request{scope: scopeAll, command: "delete"}},
		{name: "unacknowledged write", msg: buildMsg(flagMoreToCome, bodySection(insert), sequenceSection("documents", doc(t, "_id", 1))),
			want: request{scope: scopeDocuments, db: "x", coll: "c", command: "insert", moreToCome: true}},
		{name: "with a checksum", msg: buildMsg(flagChecksumPresent, bodySection(find)), want: request{db: "x", command: "find"}},
		{name: "unacknowledged with a checksum", msg: buildMsg(flagChecksumPresent|flagMoreToCome, bodySection(insert)),
			want: request{scope: scopeDocuments, db: "x", coll: "c", command: "insert", moreToCome: true}},
		{name: "legacy hello", msg: opQueryMsg(0, "admin.$cmd", doc(t, "isMaster", 1, "helloOk", true)), want: request{db: "admin", command: "isMaster"}},
		{name: "legacy hello with a field selector", msg: func() []byte {
			m := append(opQueryMsg(0, "admin.$cmd", doc(t, "isMaster", 1)), doc(t, "a", 1)...)
			binary.LittleEndian.PutUint32(m, uint32(len(m)))
			return m
		}(), want: request{db: "admin", command: "isMaster"}},
		{name: "a write in OP_QUERY", msg: opQueryMsg(0, "x.$cmd", doc(t, "insert", "c", "documents", bson.A{bson.D{}})), want: request{scope: scopeDocuments, db: "x", coll: "c", command: "insert"}},

		{name: "a length that is not the message's", msg: append(opQueryMsg(0, "admin.$cmd", doc(t, "isMaster", 1)), 0), refused: "header length"},

		{name: "bad checksum", msg: func() []byte { m := buildMsg(flagChecksumPresent, bodySection(find)); m[len(m)-1] ^= 1; return m }(), refused: "checksum mismatch"},
		{name: "unknown required flag", msg: buildMsg(1<<2, bodySection(find)), refused: "unknown required flags"},
		{name: "two body sections", msg: buildMsg(0, bodySection(find), bodySection(insert)), refused: "two body sections"},
		{name: "no body section", msg: buildMsg(0, sequenceSection("documents", doc(t, "_id", 1))), refused: "without a body"},
		{name: "section kind 2", msg: buildMsg(0, bodySection(find), []byte{2, 5, 0, 0, 0, 0}), refused: "section kind 2"},
		{name: "body longer than the message", msg: buildMsg(0, bodySection(find)[:len(find)-2]), refused: "document of length"},
		{name: "sequence with a short document", msg: buildMsg(0, bodySection(insert), func() []byte { s := sequenceSection("documents", doc(t, "_id", 1)); return append(s[:len(s)-3], 0) }()),
			refused: "document"},
		{name: "sequence without its identifier's end", msg: buildMsg(0, bodySection(insert), []byte{1, 7, 0, 0, 0, 'a', 'b', 'c'}), refused: "identifier"},
		{name: "$db twice", msg: buildMsg(0, bodySection(doc(t, "update", "c", "$db", "x", "$db", "y"))), refused: "$db given 2 times"},
		{name: "$db not a string", msg: buildMsg(0, bodySection(doc(t, "find", "c", "$db", 1))), refused: "$db is not a string"},
		{name: "empty command", msg: buildMsg(0, bodySection(doc(t))), refused: "empty command"},
		{name: "element longer than its document", msg: buildMsg(0, bodySection([]byte{12, 0, 0, 0, 2, 'a', 0, 9, 0, 0, 0, 0})), refused: "malformed element"},
		{name: "OP_MSG without flags", msg: frame(opMsg, []byte{0, 0}), refused: "without flags"},
		{name: "OP_COMPRESSED", msg: frame(2012, bytes.Repeat([]byte{1}, 20)), refused: "opcode 2012"},
		{name: "OP_INSERT", msg: frame(2002, bytes.Repeat([]byte{1}, 20)), refused: "opcode 2002"},
		{name: "OP_QUERY on a collection", msg: opQueryMsg(0, "x.c", doc(t, "a", 1)), refused: "not a command"},
		{name: "OP_QUERY with exhaust", msg: opQueryMsg(queryFlagExhaust, "admin.$cmd", doc(t, "isMaster", 1)), refused: "exhaust"},
		{name: "OP_QUERY with bytes after its documents", msg: func() []byte {
			m := append(opQueryMsg(0, "admin.$cmd", doc(t, "isMaster", 1)), doc(t, "a", 1)...)
			m = append(m, 1)
			binary.LittleEndian.PutUint32(m, uint32(len(m)))
			return m
		}(), refused: "after OP_QUERY's documents"},
	}
}

func TestParseRequest(t *testing.T) {
	for _, c := range requestCases(t) {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseRequest(c.msg)
			if c.refused != "" {
				if !errors.Is(err, errRefused) || !strings.Contains(err.Error(), c.refused) {
					t.Fatalf("%+v, %v; want a refusal saying %q", got, err, c.refused)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("%+v, %v; want %+v", got, err, c.want)
			}
			checkRequest(t, c.msg, got)
		})
	}
}

// checkRequest holds an accepted request to what the proxy relies on: it names the command,
// database, collection and documents as FerretDB reads them, a read is a command known to
// change nothing, and an unacknowledged request rewritten to be answered is the same request
// but for that.
func checkRequest(t *testing.T, msg []byte, req request) {
	t.Helper()
	if got, ok := ferretRead(msg); ok {
		if got.command != req.command || got.db != req.db {
			t.Fatalf("proxy read %q on %q, FerretDB reads %q on %q", req.command, req.db, got.command, got.db)
		}
		if req.coll != "" && got.coll != req.coll {
			t.Fatalf("proxy read collection %q, FerretDB reads %q", req.coll, got.coll)
		}
		if req.scope == scopeDocuments && req.command != "insert" && !slices.Equal(got.keys, req.keys) {
			t.Fatalf("proxy locks documents %q, FerretDB writes %q", req.keys, got.keys)
		}
	}
	if req.scope == scopeRead && !readOnly[req.command] && req.command != "aggregate" {
		t.Fatalf("%q passes as a read", req.command)
	}
	if req.scope == scopeDocuments && req.command != "insert" && req.command != "update" && req.command != "delete" && req.command != "findAndModify" {
		t.Fatalf("%q locks documents only", req.command)
	}
	if req.moreToCome {
		again, err := parseRequest(withoutMoreToCome(msg))
		want := req
		want.moreToCome = false
		if err != nil || !reflect.DeepEqual(again, want) {
			t.Fatalf("without moreToCome: %+v %v, want %+v", again, err, want)
		}
	}
}

// ferretRead reads msg as FerretDB does (its wire package, and its handlers' merge of document
// sequences into the command, the last of an identifier winning): the command name, $db, the
// collection, and the keys (idKey) of the documents an update, delete or findAndModify
// selects by _id, sorted and distinct (nil when one statement selects otherwise). ok is false
// when FerretDB would refuse the message (or panics on it, which its connection recovers from).
func ferretRead(msg []byte) (got request, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	_, body, err := wire.ReadMessage(bufio.NewReader(bytes.NewReader(msg)))
	if err != nil {
		return request{}, false
	}
	var (
		cmd  *wirebson.Document
		seqs = map[string][]wirebson.RawDocument{}
	)
	switch b := body.(type) {
	case *wire.OpMsg:
		raw := b.RawSection0()
		if raw == nil {
			return request{}, false
		}
		if cmd, err = raw.Decode(); err != nil {
			return request{}, false
		}
		got.db, _ = cmd.Get("$db").(string)
		for _, s := range b.Sections() {
			if s.Kind == 1 {
				seqs[s.Identifier] = s.Documents()
			}
		}
	case *wire.OpQuery:
		if cmd = b.Query(); cmd == nil {
			return request{}, false
		}
		got.db = strings.TrimSuffix(b.FullCollectionName, ".$cmd")
	default:
		return request{}, false
	}
	got.command = cmd.Command()
	if cmd.Len() > 0 {
		_, v := cmd.GetByIndex(0)
		got.coll, _ = v.(string)
	}
	var filters []wirebson.RawDocument
	switch got.command {
	case "update", "delete":
		name := map[string]string{"update": "updates", "delete": "deletes"}[got.command]
		stmts, ok := seqs[name]
		if !ok {
			if arr, isArr := cmd.Get(name).(wirebson.RawArray); isArr {
				a, err := arr.Decode()
				if err != nil {
					return got, true
				}
				for i := range a.Len() {
					if d, isDoc := a.Get(i).(wirebson.RawDocument); isDoc {
						stmts = append(stmts, d)
					}
				}
			}
		}
		for _, st := range stmts {
			d, err := st.Decode()
			if err != nil {
				return got, true
			}
			q, _ := d.Get("q").(wirebson.RawDocument)
			filters = append(filters, q)
		}
	case "findAndModify":
		q, _ := cmd.Get("query").(wirebson.RawDocument)
		filters = append(filters, q)
	}
	for _, q := range filters {
		if q == nil {
			return got, true
		}
		d, err := q.Decode()
		if err != nil {
			return got, true
		}
		switch id := d.Get("_id").(type) {
		case string:
			got.keys = append(got.keys, "s"+id)
		case wirebson.ObjectID:
			got.keys = append(got.keys, "o"+string(id[:]))
		case int32, int64, float64, wirebson.Decimal128:
			got.keys = append(got.keys, "n")
		default:
			return got, true
		}
	}
	slices.Sort(got.keys)
	got.keys = slices.Compact(got.keys)
	return got, true
}

// FuzzParseRequest holds the frame parser to checkRequest on any bytes (the header's length
// set to the input's, so that the bodies get explored): it never panics, and what it accepts
// it reads as FerretDB does.
func FuzzParseRequest(f *testing.F) {
	for _, c := range requestCases(f) {
		f.Add(c.msg)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		if len(msg) >= 4 {
			binary.LittleEndian.PutUint32(msg, uint32(len(msg)))
		}
		req, err := parseRequest(msg)
		if err != nil {
			if !errors.Is(err, errRefused) {
				t.Fatalf("an error that is no refusal: %v", err)
			}
			return
		}
		checkRequest(t, msg, req)
	})
}

func TestReadHeaderBounds(t *testing.T) {
	for _, n := range []uint32{0, 15, maxMessageLen + 1, 1 << 31} {
		b := binary.LittleEndian.AppendUint32(nil, n)
		b = append(b, make([]byte, 12)...)
		if _, err := readMessage(bytes.NewReader(b), nil); !errors.Is(err, errRefused) {
			t.Errorf("length %d: %v, want a refusal", n, err)
		}
	}
	// A message longer than the buffer gets its own; one that fits reuses it.
	buf := make([]byte, 0, 64)
	small, large := frame(opMsg, make([]byte, 10)), frame(opMsg, make([]byte, 100))
	got, err := readMessage(bytes.NewReader(small), buf)
	if err != nil || !bytes.Equal(got, small) || &got[0] != &buf[:1][0] {
		t.Fatalf("small: %v", err)
	}
	got, err = readMessage(bytes.NewReader(large), buf)
	if err != nil || !bytes.Equal(got, large) || cap(buf) != 64 {
		t.Fatalf("large: %v", err)
	}
	if _, err := readMessage(bytes.NewReader(large[:50]), buf); err == nil {
		t.Fatal("a truncated message was read")
	}
}
