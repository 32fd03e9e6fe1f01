// Package users is the users service: user identities per API key, the organization and
// document contact lists, and organization user groups (docs/api.md, "Users"). Roles given here are
// kept by the access service. It holds the gRPC server, its Store interface and the memory and
// MongoDB stores.
package users
