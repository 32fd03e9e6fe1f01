// Package generic has a Store with type parameters, which the generator refuses.
package generic

import "context"

// Store is generic.
type Store[T any] interface {
	Get(ctx context.Context, id string) (T, error)
}
