// Package comments is the comments service: comment annotations (threads) of documents, their
// comments, mentions, reactions and read marks, and the events of every change
// (docs/comments.md). It holds the gRPC server, its Store interface and the memory and MongoDB
// stores.
package comments
