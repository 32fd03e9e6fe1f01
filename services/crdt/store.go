package crdt

import (
	"context"
	"errors"

	"github.com/collab/collab/internal/lifecycle"
)

var (
	// ErrNotFound is returned for an editor that has no data.
	ErrNotFound = errors.New("not found")
	// ErrExists is returned by Create for an editor that has data.
	ErrExists = errors.New("already exists")
)

// Editor names one editor's data: the tenant, the organization and document incarnations
// (collab.lifecycle.v1 generations) and the editor id. Data is keyed by the document's
// generation, not its id: a migrated document keeps its generation under its new id, so its
// data follows it without being rewritten. DocumentID is kept beside it for operators, and
// keys the data of a document without a generation (made before generations existed).
type Editor struct {
	APIKey         string
	OrganizationID string
	OrgGen         string
	DocumentID     string
	DocGen         string
	EditorID       string
}

// Meta is an editor's record. Stream names the update log and snapshots of this incarnation
// of the editor's data: a new one for every Create, so a log entry a racing writer appends
// after a deletion never becomes part of data created later under the same editor id.
type Meta struct {
	Editor
	Stream string
	// Type and ContentKey are those of Add ("" when Apply created the data).
	Type       string
	ContentKey string
	CreatedAt  int64 // Unix milliseconds
}

// Update is one entry of an editor's log: a Yjs update, opaque to the store.
type Update struct {
	// Seq numbers the entries of a stream from 1, without gaps.
	Seq  int64
	Data []byte
	At   int64 // Unix milliseconds
	// Origin is the process that wrote it, so a replica following the log can skip its own.
	Origin string
}

// State is an editor's data as stored: a base (the newest snapshot, or the first update when
// there is none) holding everything up to BaseSeq, then the log after it.
type State struct {
	Meta    Meta
	Base    []byte
	BaseSeq int64
	BaseAt  int64 // Unix milliseconds of the base's newest change
	// Updates are the entries after BaseSeq, ascending and contiguous.
	Updates []Update
}

// Parts are the updates that make the editor's document, base first, leaving out empty ones
// (an editor added with empty content has an empty base).
func (s *State) Parts() [][]byte {
	out := make([][]byte, 0, 1+len(s.Updates))
	if len(s.Base) > 0 {
		out = append(out, s.Base)
	}
	for _, u := range s.Updates {
		if len(u.Data) > 0 {
			out = append(out, u.Data)
		}
	}
	return out
}

// LastUpdate is when the data last changed, in Unix milliseconds.
func (s *State) LastUpdate() int64 {
	last := max(s.BaseAt, s.Meta.CreatedAt)
	for _, u := range s.Updates {
		last = max(last, u.At)
	}
	return last
}

// LastSeq is the sequence number of the newest update the state holds.
func (s *State) LastSeq() int64 {
	if n := len(s.Updates); n > 0 {
		return s.Updates[n-1].Seq
	}
	return s.BaseSeq
}

// logBytes is the size of the log after the base.
func (s *State) logBytes() int {
	n := 0
	for _, u := range s.Updates {
		n += len(u.Data)
	}
	return n
}

// MergeFunc merges Yjs updates into one equal to applying them all (yjs.Merge).
type MergeFunc func(updates ...[]byte) ([]byte, error)

// Compaction says when Compact writes a snapshot: when the log after the newest one holds more
// than MaxUpdates entries or more than MaxBytes bytes.
type Compaction struct {
	MaxUpdates int
	MaxBytes   int
}

// DefaultCompaction keeps a load at one snapshot and at most 100 entries or 1 MiB of log.
var DefaultCompaction = Compaction{MaxUpdates: 100, MaxBytes: 1 << 20}

// due reports whether a state's log is long enough to compact.
func (c Compaction) due(s *State) bool {
	return len(s.Updates) > 0 && (len(s.Updates) > c.MaxUpdates || s.logBytes() > c.MaxBytes)
}

// Kinds of buried generations.
const (
	KindOrganization = lifecycle.KindOrganization
	KindDocument     = lifecycle.KindDocument
)

// Store keeps editors' data: a record per editor (Meta, with the first update as the base), an
// append-only log of updates per stream, and immutable snapshots that replace the log's older
// entries. Every write is a single-document insert or delete, or a batch of them whose partial
// run the next run finishes, so the store runs on any MongoDB-wire server without transactions;
// no write is a conditional update, which FerretDB does not apply atomically.
//
// Readers may run beside writers and compactions in other processes: Load always returns every
// update appended before it started.
type Store interface {
	// Create stores a new editor's record with first as its base, or returns ErrExists when
	// the editor has data (concurrent Creates of one editor: exactly one succeeds).
	Create(ctx context.Context, m *Meta, first []byte) error
	// Meta returns the editor's record, or ErrNotFound.
	Meta(ctx context.Context, e Editor) (*Meta, error)
	// Load returns the editor's state, or ErrNotFound.
	Load(ctx context.Context, e Editor) (*State, error)
	// List returns up to limit records of the editors of a document incarnation (e's EditorID
	// ignored), by editor id ascending.
	List(ctx context.Context, doc Editor, limit int) ([]*Meta, error)

	// Append adds an update to the end of the stream's log and returns its sequence number.
	// Concurrent appends to one stream each get their own number; none is lost, also beside
	// compactions. It does not check that a record still names the stream: the caller checks
	// after appending (Meta) and removes a stream nobody names (DeleteStream).
	Append(ctx context.Context, stream string, u Update) (int64, error)
	// Tail returns up to limit entries of the stream's log after seq `after`, ascending. reload
	// is true when a snapshot covers entries after `after`: those may be gone from the log,
	// so the reader must Load instead.
	Tail(ctx context.Context, stream string, after int64, limit int) (updates []Update, reload bool, err error)
	// Compact writes a snapshot of the editor's data when its log is due under c (merging the
	// base and the log with merge), then removes older snapshots and the log entries it covers.
	// It reports whether it wrote one. Concurrent compactions and appends lose nothing: a
	// snapshot is immutable and holds every entry up to its sequence number, and readers take the
	// newest.
	Compact(ctx context.Context, e Editor, c Compaction, merge MergeFunc) (bool, error)

	// DeleteEditor removes the editor's data and reports whether it had any.
	DeleteEditor(ctx context.Context, e Editor) (bool, error)
	// DeleteStream removes a stream's log and snapshots (not its record): the cleanup of a
	// writer that appended to a stream whose record went meanwhile.
	DeleteStream(ctx context.Context, stream string) error
	// DeleteDocument removes the data of every editor of a document incarnation (e's EditorID
	// ignored). Run again after a partial run, it finishes.
	DeleteDocument(ctx context.Context, doc Editor) error
	// DeleteOrganization removes the data of every editor in the organization incarnation
	// (apiKey, orgID, gen). Run again after a partial run, it finishes.
	DeleteOrganization(ctx context.Context, apiKey, orgID, gen string) error
	// MoveDocument records the new id of a migrated document incarnation (gen) on its editors'
	// records. Data is keyed by generation, so it is found under the new id either way.
	MoveDocument(ctx context.Context, apiKey, orgID, from, to, gen string) error

	// Bury records that a generation of an organization or document (kind, id) is deleted;
	// Buried reports whether it is. A writer checks after writing, so data written while its
	// organization or document was being deleted does not survive it. The generation alone
	// names what is buried (lifecycle.ByGeneration): a writer may hold an id the document had
	// before a migration. The stores embed lifecycle's markers.
	Bury(ctx context.Context, apiKey, orgID, kind, id, gen string) error
	Buried(ctx context.Context, apiKey, orgID, kind, id, gen string) (bool, error)

	// Ping reports whether the store answers.
	Ping(ctx context.Context) error
}
