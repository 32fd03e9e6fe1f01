package embedmongo

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/FerretDB/wire"
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
	return []requestCase{
		{name: "insert with a document sequence", msg: buildMsg(0, bodySection(insert), sequenceSection("documents", doc(t, "_id", 1), doc(t, "_id", 2))),
			want: request{write: true, db: "x", command: "insert"}},
		{name: "update", msg: buildMsg(0, bodySection(doc(t, "update", "c", "$db", "x")), sequenceSection("updates", doc(t, "q", bson.D{}, "u", bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}}))),
			want: request{write: true, db: "x", command: "update"}},
		{name: "findAndModify", msg: buildMsg(0, bodySection(doc(t, "findAndModify", "c", "query", bson.D{}, "update", bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}, "$db", "y"))),
			want: request{write: true, db: "y", command: "findAndModify"}},
		{name: "find", msg: buildMsg(0, bodySection(find)), want: request{db: "x", command: "find"}},
		{name: "find with exhaustAllowed", msg: buildMsg(1<<16, bodySection(find)), want: request{db: "x", command: "find"}},
		{name: "getMore", msg: buildMsg(0, bodySection(doc(t, "getMore", int64(5), "collection", "c", "$db", "x"))), want: request{db: "x", command: "getMore"}},
		{name: "hello on admin", msg: buildMsg(0, bodySection(doc(t, "hello", 1, "$db", "admin"))), want: request{command: "hello"}},
		{name: "count as an aggregation", msg: buildMsg(0, bodySection(doc(t, "aggregate", "c", "pipeline", bson.A{bson.D{{Key: "$match", Value: bson.D{}}}, bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: 1}}}}}, "cursor", bson.D{}, "$db", "x"))),
			want: request{db: "x", command: "aggregate"}},
		{name: "aggregation with $out", msg: buildMsg(0, bodySection(doc(t, "aggregate", "c", "pipeline", bson.A{bson.D{{Key: "$match", Value: bson.D{}}}, bson.D{{Key: "$out", Value: "d"}}}, "$db", "x"))),
			want: request{write: true, db: "x", command: "aggregate"}},
		{name: "aggregation with $merge", msg: buildMsg(0, bodySection(doc(t, "aggregate", "c", "pipeline", bson.A{bson.D{{Key: "$merge", Value: "d"}}}, "$db", "x"))),
			want: request{write: true, db: "x", command: "aggregate"}},
		{name: "aggregation with two pipelines", msg: buildMsg(0, bodySection(doc(t, "aggregate", "c", "pipeline", bson.A{}, "pipeline", bson.A{bson.D{{Key: "$out", Value: "d"}}}, "$db", "x"))),
			want: request{write: true, db: "x", command: "aggregate"}},
		{name: "aggregation with a pipeline that is not an array", msg: buildMsg(0, bodySection(doc(t, "aggregate", "c", "pipeline", bson.D{}, "$db", "x"))),
			want: request{write: true, db: "x", command: "aggregate"}},
		{name: "dropDatabase", msg: buildMsg(0, bodySection(doc(t, "dropDatabase", 1, "$db", "x"))), want: request{write: true, db: "x", command: "dropDatabase"}},
		{name: "a write on admin takes every database", msg: buildMsg(0, bodySection(doc(t, "renameCollection", "x.a", "to", "y.b", "$db", "admin"))),
			want: request{write: true, command: "renameCollection"}},
		{name: "a command not known to read", msg: buildMsg(0, bodySection(doc(t, "Find", "c", "$db", "x"))), want: request{write: true, db: "x", command: "Find"}},
		{name: "a command without $db", msg: buildMsg(0, bodySection(doc(t, "delete", "c"))), want: request{write: true, command: "delete"}},
		{name: "unacknowledged write", msg: buildMsg(flagMoreToCome, bodySection(insert), sequenceSection("documents", doc(t, "_id", 1))),
			want: request{write: true, db: "x", command: "insert", moreToCome: true}},
		{name: "with a checksum", msg: buildMsg(flagChecksumPresent, bodySection(find)), want: request{db: "x", command: "find"}},
		{name: "unacknowledged with a checksum", msg: buildMsg(flagChecksumPresent|flagMoreToCome, bodySection(insert)),
			want: request{write: true, db: "x", command: "insert", moreToCome: true}},
		{name: "legacy hello", msg: opQueryMsg(0, "admin.$cmd", doc(t, "isMaster", 1, "helloOk", true)), want: request{command: "isMaster"}},
		{name: "legacy hello with a field selector", msg: func() []byte {
			m := append(opQueryMsg(0, "admin.$cmd", doc(t, "isMaster", 1)), doc(t, "a", 1)...)
			binary.LittleEndian.PutUint32(m, uint32(len(m)))
			return m
		}(), want: request{command: "isMaster"}},
		{name: "a length that is not the message's", msg: append(opQueryMsg(0, "admin.$cmd", doc(t, "isMaster", 1)), 0), refused: "header length"},
		{name: "a write in OP_QUERY", msg: opQueryMsg(0, "x.$cmd", doc(t, "insert", "c", "documents", bson.A{bson.D{}})), want: request{write: true, db: "x", command: "insert"}},

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
			if err != nil || got != c.want {
				t.Fatalf("%+v, %v; want %+v", got, err, c.want)
			}
			checkRequest(t, c.msg, got)
		})
	}
}

// checkRequest holds an accepted request to what the proxy relies on: it names the command as
// FerretDB reads it, a read is a command known to change nothing, and an unacknowledged
// request rewritten to be answered is the same request but for that.
func checkRequest(t *testing.T, msg []byte, req request) {
	t.Helper()
	if cmd, db, ok := ferretCommand(msg); ok && (cmd != req.command || (db != req.db && !(db == "admin" && req.db == ""))) {
		t.Fatalf("proxy read %q on %q, FerretDB reads %q on %q", req.command, req.db, cmd, db)
	}
	if !req.write && !readOnly[req.command] && req.command != "aggregate" {
		t.Fatalf("%q passes as a read", req.command)
	}
	if req.moreToCome {
		again, err := parseRequest(withoutMoreToCome(msg))
		want := req
		want.moreToCome = false
		if err != nil || again != want {
			t.Fatalf("without moreToCome: %+v %v, want %+v", again, err, want)
		}
	}
}

// ferretCommand reads msg as FerretDB does (its wire package): the command name, and $db for
// OP_MSG; ok is false when FerretDB would refuse the message (or panics on it, which its
// connection recovers from).
func ferretCommand(msg []byte) (cmd, db string, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	_, body, err := wire.ReadMessage(bufio.NewReader(bytes.NewReader(msg)))
	if err != nil {
		return "", "", false
	}
	switch b := body.(type) {
	case *wire.OpMsg:
		raw := b.RawSection0()
		if raw == nil {
			return "", "", false
		}
		d, err := raw.Decode()
		if err != nil {
			return "", "", false
		}
		db, _ := d.Get("$db").(string)
		return d.Command(), db, true
	case *wire.OpQuery:
		q := b.Query()
		if q == nil {
			return "", "", false
		}
		return q.Command(), strings.TrimSuffix(b.FullCollectionName, ".$cmd"), true
	}
	return "", "", false
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
