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
	var (
		body bsoncore.Document
		seqs []sequence
	)
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
			seq, rest, err := readSequence(b)
			if err != nil {
				return request{}, err
			}
			seqs, b = append(seqs, seq), rest
		default:
			return request{}, refuse("OP_MSG section kind %d", kind)
		}
	}
	if body == nil {
		return request{}, refuse("OP_MSG without a body section")
	}
	req, err := classify(body, seqs, "")
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

// sequence is an OP_MSG document sequence (kind 1): its identifier ("documents", "updates",
// "deletes") and its documents, one after another.
type sequence struct {
	id   string
	docs []byte
}

// readSequence reads a document sequence: its size, identifier and documents, which must fill
// the size exactly.
func readSequence(b []byte) (sequence, []byte, error) {
	if len(b) < 4 {
		return sequence{}, nil, refuse("truncated document sequence")
	}
	n := int(int32(binary.LittleEndian.Uint32(b))) //nolint:gosec // G115: the wire's int32 size, read as such
	if n < 5 || n > len(b) {
		return sequence{}, nil, refuse("document sequence of size %d in %d bytes", n, len(b))
	}
	id, docs, ok := readCString(b[4:n])
	if !ok {
		return sequence{}, nil, refuse("document sequence without an identifier")
	}
	for rest := docs; len(rest) > 0; {
		_, after, err := readDocument(rest)
		if err != nil {
			return sequence{}, nil, err
		}
		rest = after
	}
	return sequence{id: id, docs: docs}, b[n:], nil
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
	return classify(query, nil, db)
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
