package embed

import (
	"context"
	"errors"
)

// Embedder turns texts into vectors.
type Embedder interface {
	// Name identifies the model and its settings, e.g. "use-lite-512" or
	// "openai:nomic-embed-text". It is stored with every vector: vectors of two names are
	// never compared, and a new name means re-embedding.
	Name() string
	// Dim is the length of every vector.
	Dim() int
	// Embed returns one vector per text, in order, each of length Dim and unit length (L2),
	// so that a dot product is the cosine similarity. Failures of a remote model wrap
	// ErrUnavailable; the context bounds the call.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// ErrUnavailable is wrapped by failures to embed that a retry later may cure (a remote model
// down, timing out, rate limiting): callers answer UNAVAILABLE, never store data without its
// vectors.
var ErrUnavailable = errors.New("embedder unavailable")
