// Package gateway is the HTTP face of the API: grpc-gateway routes from http_rules.yaml, the
// {"data"} request and {"result"}/{"error"} response envelopes, header forwarding, body limits,
// request ids, health endpoints and the OpenAPI document. It reaches the services only through
// gRPC client connections, so their interceptors (authentication first) run on every call.
package gateway
