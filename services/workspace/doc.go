// Package workspace is the workspace service: workspaces, API keys and their auth tokens,
// allowed domains, owner-email verification and console switches, and the authentication every
// other service relies on. It holds the gRPC server, its Store interface and the memory and
// MongoDB stores.
package workspace
