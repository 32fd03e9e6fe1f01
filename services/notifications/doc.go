// Package notifications is the notifications service: per-user notification configs, the
// notifications a product adds and its recipients' inboxes, and their delivery by email (SMTP)
// and Slack (an incoming webhook) from a durable queue (docs/api.md, "Notifications"). Adding a
// notification is one write, its notification.add event; the service's own handler of that
// event resolves the recipients and fans it out, behind the outbox. It holds the gRPC server,
// its Store interface and the memory and MongoDB stores.
package notifications
