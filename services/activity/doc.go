// Package activity is the activity service: the activity log of each organization and the
// activity service config (docs/api.md, "Activity logs"; docs/events.md, "Activity records from events"). Records come from the domain
// events the config enables and from Add Activities. It holds the gRPC server, its Store
// interface and the memory and MongoDB stores.
package activity
