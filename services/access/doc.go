// Package access is the access service: permission grants (user × organization, folder or
// document; role; expiry), access context fields, permission resolution (docs/permissions.md),
// token generation and the Ed25519 signing keys behind it. It holds the gRPC server, its Store
// interface and the memory and MongoDB stores.
package access
