package embedmongo

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// The parts of the MongoDB wire protocol the write lock reads
// (https://www.mongodb.com/docs/manual/reference/mongodb-wire-protocol/).
const (
	opReply = 1    // a server's answer to OP_QUERY
	opQuery = 2004 // the drivers' first handshake message, and nothing else today
	opMsg   = 2013 // every command

	headerLen = 16
	// maxMessageLen is the wire's maxMessageSizeBytes (48 MB), which FerretDB announces in its
	// hello and the drivers keep to: no longer message is read, either way.
	maxMessageLen = 48_000_000

	flagChecksumPresent = 1 << 0
	flagMoreToCome      = 1 << 1
	// flagsRequired are the OP_MSG flag bits a receiver must understand (bits 0 to 15); the only
	// ones defined are checksumPresent and moreToCome.
	flagsRequired = 0xffff

	// queryFlagExhaust asks for a stream of OP_REPLYs to one OP_QUERY.
	queryFlagExhaust = 1 << 6
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errRefused wraps every reason a message is not forwarded.
var errRefused = errors.New("embedded mongo proxy: message refused")

func refuse(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errRefused, fmt.Sprintf(format, args...))
}

// header is what the proxy reads of a message's standard header (length, request id, the id
// it responds to, opcode): its length and opcode.
type header struct {
	length, opCode int32
}

func parseHeader(b []byte) header {
	return header{
		length: int32(binary.LittleEndian.Uint32(b[0:])),  //nolint:gosec // G115: the wire's int32, read as such
		opCode: int32(binary.LittleEndian.Uint32(b[12:])), //nolint:gosec // G115: as above
	}
}

// readHeader reads a message's header into b (headerLen bytes) and checks its length against
// the wire's bounds: at least the header, at most maxMessageLen.
func readHeader(r io.Reader, b []byte) (header, error) {
	if _, err := io.ReadFull(r, b[:headerLen]); err != nil {
		return header{}, err
	}
	h := parseHeader(b)
	if h.length < headerLen || h.length > maxMessageLen {
		return header{}, refuse("message length %d outside [%d, %d]", h.length, headerLen, maxMessageLen)
	}
	return h, nil
}

// readMessage reads one whole message: into buf when it fits there, else into a new slice, so a
// connection keeps no large buffer after a large message.
func readMessage(r io.Reader, buf []byte) ([]byte, error) {
	var hb [headerLen]byte
	h, err := readHeader(r, hb[:])
	if err != nil {
		return nil, err
	}
	msg := buf[:0]
	if int(h.length) > cap(buf) {
		msg = make([]byte, 0, h.length)
	}
	msg = append(msg, hb[:]...)
	msg = msg[:h.length]
	if _, err := io.ReadFull(r, msg[headerLen:]); err != nil {
		return nil, fmt.Errorf("read message body: %w", err)
	}
	return msg, nil
}

// request is what the proxy needs to know of a client's message.
type request struct {
	// write is set unless the command is known to change no data.
	write bool
	// db is the database it acts on; "" when that is not one database (commands on admin, or
	// none named): such a write takes every database's lock.
	db string
	// command is the command's name, for logs.
	command string
	// moreToCome is set when the client expects no reply (an unacknowledged write).
	moreToCome bool
}

// parseRequest reads a client's message (whole, header included) as the proxy classifies it.
// Anything it cannot read exactly as the protocol lays it out is refused, never guessed at:
// OP_COMPRESSED and the legacy opcodes, which no current driver sends unasked, are refused too.
func parseRequest(msg []byte) (request, error) {
	if len(msg) < headerLen {
		return request{}, refuse("message of %d bytes", len(msg))
	}
	h := parseHeader(msg)
	if int(h.length) != len(msg) {
		return request{}, refuse("header length %d for %d bytes", h.length, len(msg))
	}
	switch h.opCode {
	case opMsg:
		if len(msg) >= headerLen+4 && binary.LittleEndian.Uint32(msg[headerLen:])&flagChecksumPresent != 0 {
			// The checksum (CRC-32C of everything before it) is checked here, as the server
			// would, because withoutMoreToCome computes a new one.
			if len(msg) < headerLen+8 {
				return request{}, refuse("OP_MSG without its checksum")
			}
			n := len(msg) - 4
			if crc32.Checksum(msg[:n], castagnoli) != binary.LittleEndian.Uint32(msg[n:]) {
				return request{}, refuse("OP_MSG checksum mismatch")
			}
		}
		return parseOpMsg(msg[headerLen:])
	case opQuery:
		return parseOpQuery(msg[headerLen:])
	default:
		return request{}, refuse("opcode %d", h.opCode)
	}
}

// parseOpMsg reads an OP_MSG body: flag bits, then sections (one body document, kind 0, and
// any document sequences, kind 1), then the checksum when flagged.
func parseOpMsg(b []byte) (request, error) {
	if len(b) < 4 {
		return request{}, refuse("OP_MSG without flags")
	}
	flags := binary.LittleEndian.Uint32(b)
	if unknown := flags & flagsRequired &^ (flagChecksumPresent | flagMoreToCome); unknown != 0 {
		return request{}, refuse("OP_MSG with unknown required flags %#x", unknown)
	}
	b = b[4:]
	if flags&flagChecksumPresent != 0 {
		if len(b) < 4 {
			return request{}, refuse("OP_MSG without its checksum")
		}
		b = b[:len(b)-4]
	}
	var body bsoncore.Document
	for len(b) > 0 {
		kind := b[0]
		b = b[1:]
		switch kind {
		case 0:
			doc, rest, err := readDocument(b)
			if err != nil {
				return request{}, err
			}
			if body != nil {
				return request{}, refuse("OP_MSG with two body sections")
			}
			body, b = doc, rest
		case 1:
			rest, err := skipSequence(b)
			if err != nil {
				return request{}, err
			}
			b = rest
		default:
			return request{}, refuse("OP_MSG section kind %d", kind)
		}
	}
	if body == nil {
		return request{}, refuse("OP_MSG without a body section")
	}
	req, err := classify(body, "")
	req.moreToCome = flags&flagMoreToCome != 0
	return req, err
}

// readDocument reads the BSON document at the start of b, checking its length and its
// terminating byte (its elements are checked as classify reads them).
func readDocument(b []byte) (bsoncore.Document, []byte, error) {
	if len(b) < 4 {
		return nil, nil, refuse("truncated document")
	}
	n := int(int32(binary.LittleEndian.Uint32(b))) //nolint:gosec // G115: BSON's int32 length, read as such
	if n < 5 || n > len(b) || b[n-1] != 0 {
		return nil, nil, refuse("document of length %d in %d bytes", n, len(b))
	}
	return bsoncore.Document(b[:n]), b[n:], nil
}

// skipSequence steps over a document sequence (kind 1): its size, identifier and documents,
// which must fill the size exactly.
func skipSequence(b []byte) ([]byte, error) {
	if len(b) < 4 {
		return nil, refuse("truncated document sequence")
	}
	n := int(int32(binary.LittleEndian.Uint32(b))) //nolint:gosec // G115: the wire's int32 size, read as such
	if n < 5 || n > len(b) {
		return nil, refuse("document sequence of size %d in %d bytes", n, len(b))
	}
	seq, rest := b[4:n], b[n:]
	_, seq, ok := readCString(seq)
	if !ok {
		return nil, refuse("document sequence without an identifier")
	}
	for len(seq) > 0 {
		_, after, err := readDocument(seq)
		if err != nil {
			return nil, err
		}
		seq = after
	}
	return rest, nil
}

// readCString reads the null-terminated string at the start of b.
func readCString(b []byte) (string, []byte, bool) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return "", nil, false
	}
	return string(b[:i]), b[i+1:], true
}

// parseOpQuery reads an OP_QUERY: flags, the namespace, skip and count, the query document and
// an optional field selector. Only commands (namespace "<db>.$cmd") are read; the command is
// the query document's first key, as FerretDB reads it.
func parseOpQuery(b []byte) (request, error) {
	if len(b) < 4 {
		return request{}, refuse("OP_QUERY without flags")
	}
	if flags := binary.LittleEndian.Uint32(b); flags&queryFlagExhaust != 0 {
		return request{}, refuse("OP_QUERY with the exhaust flag")
	}
	ns, b, ok := readCString(b[4:])
	if !ok {
		return request{}, refuse("OP_QUERY without a namespace")
	}
	db, ok := strings.CutSuffix(ns, ".$cmd")
	if !ok {
		return request{}, refuse("OP_QUERY on %q, not a command", ns)
	}
	if len(b) < 8 {
		return request{}, refuse("truncated OP_QUERY")
	}
	query, b, err := readDocument(b[8:])
	if err != nil {
		return request{}, err
	}
	if len(b) > 0 { // the field selector
		if _, b, err = readDocument(b); err != nil {
			return request{}, err
		}
		if len(b) > 0 {
			return request{}, refuse("%d bytes after OP_QUERY's documents", len(b))
		}
	}
	return classify(query, db)
}

// classify reads a command document: its first key names the command, "$db" its database (an
// OP_QUERY's namespace gives it instead: db). A command is a read only when it is one of
// readOnly (an aggregation: without a $out or $merge stage); anything else is a write.
func classify(cmd bsoncore.Document, db string) (request, error) {
	elems, err := elements(cmd)
	if err != nil {
		return request{}, err
	}
	if len(elems) == 0 {
		return request{}, refuse("empty command document")
	}
	req := request{command: elems[0].Key()}
	dbs := 0
	for _, e := range elems {
		if e.Key() != "$db" {
			continue
		}
		name, ok := e.Value().StringValueOK()
		if !ok {
			return request{}, refuse("$db is not a string")
		}
		db = name
		dbs++
	}
	if dbs > 1 {
		return request{}, refuse("$db given %d times", dbs)
	}
	if req.command == "aggregate" {
		req.write = !readOnlyPipeline(elems)
	} else {
		req.write = !readOnly[req.command]
	}
	if db != "admin" {
		req.db = db
	}
	return req, nil
}

// elements reads a document's (or an array's) top-level elements: each one's type, key and
// length, not what nested documents hold. classify reads no deeper, so deep nesting costs it
// nothing; FerretDB checks the rest.
func elements(doc []byte) ([]bsoncore.Element, error) {
	if len(doc) < 5 || int(int32(binary.LittleEndian.Uint32(doc))) != len(doc) || doc[len(doc)-1] != 0 { //nolint:gosec // G115: BSON's int32 length, read as such
		return nil, refuse("malformed document")
	}
	var out []bsoncore.Element
	for rem := doc[4 : len(doc)-1]; len(rem) > 0; {
		e, rest, ok := bsoncore.ReadElement(rem)
		if !ok {
			return nil, refuse("malformed element")
		}
		out, rem = append(out, e), rest
	}
	return out, nil
}

// readOnly are the commands that change no data: they pass without a lock. A command missing
// here (a new one, a misspelt one) takes the lock, which is only slower.
var readOnly = map[string]bool{
	"buildInfo": true, "buildinfo": true, "collStats": true, "connectionStatus": true, "count": true,
	"currentOp": true, "dataSize": true, "dbStats": true, "distinct": true, "endSessions": true,
	"find": true, "getCmdLineOpts": true, "getFreeMonitoringStatus": true, "getLog": true,
	"getMore": true, "getParameter": true, "hello": true, "hostInfo": true, "isMaster": true,
	"ismaster": true, "killCursors": true, "listCollections": true, "listCommands": true,
	"listDatabases": true, "listIndexes": true, "ping": true, "saslContinue": true,
	"saslStart": true, "serverStatus": true, "usersInfo": true, "whatsmyuri": true,
}

// readOnlyPipeline reports whether an aggregate command has exactly one pipeline, an array of
// stage documents none of which is $out or $merge (the stages that write; FerretDB 1.24 refuses
// both, and this keeps them locked should that change).
func readOnlyPipeline(elems []bsoncore.Element) bool {
	pipelines := 0
	for _, e := range elems {
		if e.Key() != "pipeline" {
			continue
		}
		pipelines++
		if e.Value().Type != bsoncore.TypeArray {
			return false
		}
		stages, err := elements(e.Value().Data)
		if err != nil {
			return false
		}
		for _, st := range stages {
			if st.Value().Type != bsoncore.TypeEmbeddedDocument {
				return false
			}
			keys, err := elements(st.Value().Data)
			if err != nil {
				return false
			}
			for _, k := range keys {
				if k.Key() == "$out" || k.Key() == "$merge" {
					return false
				}
			}
		}
	}
	return pipelines == 1
}

// withoutMoreToCome returns a copy of an OP_MSG with its moreToCome flag cleared (and its
// checksum, when it has one, computed again), so the server answers it: FerretDB answers every
// message anyway, and an answer the client does not read would be taken for the next one's;
// the proxy waits for it, under the write's lock, and drops it.
func withoutMoreToCome(msg []byte) []byte {
	out := append([]byte(nil), msg...)
	flags := binary.LittleEndian.Uint32(out[headerLen:]) &^ flagMoreToCome
	binary.LittleEndian.PutUint32(out[headerLen:], flags)
	if flags&flagChecksumPresent != 0 {
		n := len(out) - 4
		binary.LittleEndian.PutUint32(out[n:], crc32.Checksum(out[:n], castagnoli))
	}
	return out
}
