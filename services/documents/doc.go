// Package documents is the documents service: organizations, nested folders and documents per
// API key, their access types, document migrations and delete-by-location
// (docs/api.md, "Documents, folders and organizations"). It holds the gRPC server, its Store
// interface and the memory and MongoDB stores.
package documents
