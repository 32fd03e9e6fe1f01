// Package jsoncodec is the API's JSON at the gateway.
//
// Requests: Unmarshal reads a body {"data": {...}} into the request message. It refuses bodies
// nested deeper than MaxDepth before anything parses them, reads the common shapes with a
// small decoder and the rest with protojson, ignores unknown fields except near misses of known
// ones, and words every refusal for the caller (*InputError).
//
// Responses: Marshal writes a message as protojson does with EmitUnpopulated, straight from its
// wire bytes: an answer the gateway's connections kept undecoded, or a decoded message it
// marshals first.
package jsoncodec
