// Package crdt is the CRDT service: the Yjs state of every editor of a document
// (docs/api.md, "CRDT"), read and replaced as JSON or exchanged as Yjs updates. It holds the gRPC server, its
// Store interface (an append-only log of updates with immutable snapshots per editor) and the
// memory and MongoDB stores.
package crdt
