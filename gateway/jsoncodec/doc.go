// Package jsoncodec is the API's JSON at the gateway: it reads request bodies ({"data": {...}})
// into request messages, refusing bad input with messages written for the caller, and writes
// response messages as protojson writes them with EmitUnpopulated, straight from their wire
// bytes.
package jsoncodec
