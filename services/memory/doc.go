// Package memory is the memory service: judgments (past review decisions) with their
// embeddings and their exact semantic search, and the history of agent executions (spec
// section 4.6, docs/api.md "Memory and agents"). It holds the gRPC server, its Store interface,
// the memory and MongoDB stores, and the background re-embedding after a change of embedder.
package memory
