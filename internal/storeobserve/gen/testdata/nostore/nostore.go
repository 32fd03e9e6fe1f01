// Package nostore has no Store interface: the generator writes nothing for it.
package nostore

// Thing is not a store.
type Thing struct{}
