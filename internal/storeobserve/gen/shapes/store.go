// Package shapes holds a Store interface with every shape of method the generator must wrap
// (variadic, several results, no error, no result, a context that is not first, names that
// clash with the wrapper's own, generic types of other packages, a renamed import, an embedded
// interface of another package) and two optional interfaces, one sharing a method with Store.
// Its generated wrapper is committed like the services' and tested in this package.
package shapes

import (
	"context"
	"errors"
	"io"
	"iter"
	tm "time"
)

// Sentinel errors: ErrNotFound is not_found, the others refused.
var (
	ErrNotFound = errors.New("not found")
	ErrTaken    = errors.New("taken")
)

// Item is what the store keeps.
type Item struct{ ID string }

// Store has a method of each shape.
type Store interface {
	// Close comes from another package and takes no context: it passes through.
	io.Closer
	Get(ctx context.Context, id string) (*Item, error)
	Put(ctx context.Context, items ...*Item) error
	Stamp(ctx context.Context, at tm.Time) tm.Duration
	Touch(ctx context.Context)
	Split(ctx context.Context, s, call, err string, r0 int) (a, b string, err2 error)
	Keys(ctx context.Context, _ int, seq iter.Seq2[string, int]) (iter.Seq[string], int, error)
	Name() string
	Count(n int, ctx context.Context) (int, error)
}

// Counter is an optional interface of stores.
//
//storeobserve:optional
type Counter interface {
	Total(ctx context.Context) (int, error)
}

// Flusher is another, with a method Store has too.
//
//storeobserve:optional
type Flusher interface {
	Flush(ctx context.Context) error
	Name() string
}
