// Package events is the events service: the entry point of domain events (`<feature>.<action>`,
// docs/events.md) that a product's backend reports over HTTP and internal callers over gRPC. It
// checks each event, stamps it with the generations of its organization and document, and
// stores it in its outbox, whose relay hands it to every service consuming its type (the
// activity log, webhooks). It keeps no other data.
package events
