// Package activity is the activity service: the activity log of each organization and the
// activity service config (spec section 4.5, section 6 rule 4). Records come from the domain
// events the config enables and from Add Activities. It holds the gRPC server, its Store
// interface and the memory and MongoDB stores.
package activity
