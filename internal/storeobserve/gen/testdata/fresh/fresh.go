// Package fresh is a new service's package before its first generation: it calls observeStore,
// which only the generated store_observed.go will declare.
package fresh

import (
	"context"

	"github.com/collab/collab/internal/storeobserve"
)

// Store is the package's store.
type Store interface {
	Get(ctx context.Context, id string) (string, error)
}

// wrap is what module.go does with the store it chose.
func wrap(s Store, o *storeobserve.Observer) Store { return observeStore(s, o) }
