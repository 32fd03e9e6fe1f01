// Package webhooks is the webhooks service: the advanced webhook config, endpoints and their
// signing secrets, the basic webhook config, and the delivery engine: it takes every domain
// event, stores a message for it and a delivery per matching endpoint, and sends them with
// Standard Webhooks signatures, retries, rate limits and leases shared by every worker (spec
// 4.9, section 6; docs/webhooks.md). It holds the gRPC server, its Store interface and the
// memory and MongoDB stores.
package webhooks
