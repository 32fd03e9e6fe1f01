// Package collabd assembles a collab process: any subset of the services and the gateway, on
// the memory store, MongoDB or an embedded MongoDB-wire server, from one Config. cmd/collabd
// is its command line; the end-to-end tests start it on random ports.
package collabd
