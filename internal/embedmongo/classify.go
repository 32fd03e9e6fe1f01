package embedmongo

import (
	"encoding/binary"
	"slices"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// scope is how much of the data a request may write: it decides the locks it takes
// (locks.go). The scopes are ordered, from nothing to every database.
type scope uint8

const (
	// scopeRead is a command known to change no data: it takes no lock.
	scopeRead scope = iota
	// scopeDocuments is an insert (it only adds documents), or an update, delete or
	// findAndModify whose every statement selects one document by its _id: the documents
	// named by keys, in collection coll.
	scopeDocuments
	// scopeCollection is any document of collection coll: an update, delete or findAndModify
	// by another filter.
	scopeCollection
	// scopeDatabase is any collection of database db: every other write (indexes, drops,
	// collection creation, and any command not known here).
	scopeDatabase
	// scopeAll is any database: a write on admin (renameCollection, say, may reach any), or one
	// naming no database.
	scopeAll
)

// request is what the proxy needs to know of a client's message.
type request struct {
	scope    scope
	db, coll string
	// keys are the _id keys (idKey) of the documents a scopeDocuments request writes, sorted
	// and distinct; none for an insert.
	keys []string
	// command is the command's name, for logs.
	command string
	// moreToCome is set when the client expects no reply (an unacknowledged write).
	moreToCome bool
}

// maxKeys bounds the documents one request locks one by one; one that names more locks its
// collection.
const maxKeys = 1000

// readOnly are the commands that change no data: they pass without a lock. A command missing
// here (a new one, a misspelt one) is taken for a write, which is only slower.
var readOnly = map[string]bool{
	"buildInfo": true, "buildinfo": true, "collStats": true, "connectionStatus": true, "count": true,
	"currentOp": true, "dataSize": true, "dbStats": true, "distinct": true, "endSessions": true,
	"find": true, "getCmdLineOpts": true, "getFreeMonitoringStatus": true, "getLog": true,
	"getMore": true, "getParameter": true, "hello": true, "hostInfo": true, "isMaster": true,
	"ismaster": true, "killCursors": true, "listCollections": true, "listCommands": true,
	"listDatabases": true, "listIndexes": true, "ping": true, "saslContinue": true,
	"saslStart": true, "serverStatus": true, "usersInfo": true, "whatsmyuri": true,
}

// classify reads a command document (and an OP_MSG's document sequences) as FerretDB does: its
// first key names the command and its value the collection, "$db" the database (an OP_QUERY's
// namespace gives it instead: db). A command is a read only when it is one of readOnly (an
// aggregation: without a $out or $merge stage); a write's scope is the least that holds
// everything it may change (writeScope). Only a malformed command is refused; one merely not
// understood gets a wider scope.
func classify(cmd bsoncore.Document, seqs []sequence, db string) (request, error) {
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
	req.db = db
	switch {
	case readOnly[req.command] || req.command == "aggregate" && readOnlyPipeline(elems):
		req.scope = scopeRead
	case db == "" || db == "admin":
		req.scope = scopeAll
	default:
		coll, ok := elems[0].Value().StringValueOK()
		if !ok {
			req.scope = scopeDatabase
			break
		}
		req.coll = coll
		req.scope, req.keys = writeScope(req.command, elems, seqs)
	}
	return req, nil
}

// writeScope is the scope of a write on one collection, and for scopeDocuments the keys of the
// documents it writes.
func writeScope(command string, elems []bsoncore.Element, seqs []sequence) (scope, []string) {
	switch command {
	case "insert":
		return scopeDocuments, nil
	case "update":
		return statementKeys(elems, seqs, "updates")
	case "delete":
		return statementKeys(elems, seqs, "deletes")
	case "findAndModify":
		if count(elems, "collation") > 0 {
			return scopeCollection, nil
		}
		if key, ok := filterKey(elems, "query"); ok {
			return scopeDocuments, []string{key}
		}
		return scopeCollection, nil
	default:
		return scopeDatabase, nil
	}
}

// statementKeys reads the statements of an update or delete (name: "updates", "deletes"),
// given either as an array in the command or as a document sequence: scopeDocuments with their
// filters' keys when each one selects a document by _id, else scopeCollection.
func statementKeys(elems []bsoncore.Element, seqs []sequence, name string) (scope, []string) {
	var stmts [][]byte
	sources := 0
	for _, e := range elems {
		if e.Key() != name {
			continue
		}
		sources++
		if e.Value().Type != bsoncore.TypeArray {
			return scopeCollection, nil
		}
		items, err := elements(e.Value().Data)
		if err != nil {
			return scopeCollection, nil
		}
		for _, it := range items {
			if it.Value().Type != bsoncore.TypeEmbeddedDocument {
				return scopeCollection, nil
			}
			stmts = append(stmts, it.Value().Data)
		}
	}
	for _, s := range seqs {
		if s.id != name {
			continue
		}
		sources++
		for rest := s.docs; len(rest) > 0; {
			n := int(binary.LittleEndian.Uint32(rest)) // checked by readSequence
			stmts, rest = append(stmts, rest[:n]), rest[n:]
		}
	}
	if sources != 1 || len(stmts) == 0 || len(stmts) > maxKeys {
		return scopeCollection, nil
	}
	keys := make([]string, 0, len(stmts))
	for _, st := range stmts {
		fields, err := elements(st)
		if err != nil || count(fields, "collation") > 0 {
			return scopeCollection, nil
		}
		key, ok := filterKey(fields, "q")
		if !ok {
			return scopeCollection, nil
		}
		keys = append(keys, key)
	}
	slices.Sort(keys)
	return scopeDocuments, slices.Compact(keys)
}

// filterKey is the key of the one document the filter in field (given once) selects by _id.
func filterKey(elems []bsoncore.Element, field string) (string, bool) {
	if count(elems, field) != 1 {
		return "", false
	}
	for _, e := range elems {
		if e.Key() == field && e.Value().Type == bsoncore.TypeEmbeddedDocument {
			return idKey(e.Value().Data)
		}
	}
	return "", false
}

// idKey is the lock key of the document a filter selects by _id: a filter holding _id once,
// at its top level, equal to a string or an ObjectId selects at most that document, whatever
// else it holds (top-level conditions are all met at once). Numbers of any type select the
// documents whose _id is an equal number, of whatever type, so every number shares one key.
// Any other _id (a document, which may be an operator such as $in; a regular expression) does
// not name one document: false.
func idKey(filter []byte) (string, bool) {
	fields, err := elements(filter)
	if err != nil || count(fields, "_id") != 1 {
		return "", false
	}
	for _, f := range fields {
		if f.Key() != "_id" {
			continue
		}
		v := f.Value()
		switch v.Type {
		case bsoncore.TypeString:
			s, ok := v.StringValueOK()
			return "s" + s, ok
		case bsoncore.TypeObjectID:
			return "o" + string(v.Data), len(v.Data) == 12
		case bsoncore.TypeInt32, bsoncore.TypeInt64, bsoncore.TypeDouble, bsoncore.TypeDecimal128:
			return "n", true
		}
	}
	return "", false
}

// count is how many of the elements are named key.
func count(elems []bsoncore.Element, key string) int {
	n := 0
	for _, e := range elems {
		if e.Key() == key {
			n++
		}
	}
	return n
}

// elements reads a document's (or an array's) top-level elements: each one's type, key and
// length, not what nested documents hold. classify reads no deeper than it needs, so deep
// nesting costs it nothing; FerretDB checks the rest.
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

// readOnlyPipeline reports whether an aggregate command has exactly one pipeline, an array of
// stage documents none of which is $out or $merge (the stages that write; FerretDB 1.24 refuses
// both, and this keeps them locked should that change).
func readOnlyPipeline(elems []bsoncore.Element) bool {
	if count(elems, "pipeline") != 1 {
		return false
	}
	for _, e := range elems {
		if e.Key() != "pipeline" {
			continue
		}
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
			if err != nil || count(keys, "$out") > 0 || count(keys, "$merge") > 0 {
				return false
			}
		}
	}
	return true
}
