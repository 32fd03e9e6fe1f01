// Package e2e holds the end-to-end tests: each starts whole collab processes on random
// loopback ports and calls them as an API caller does, over HTTP with plain JSON.
package e2e
