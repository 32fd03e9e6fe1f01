package memory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"

	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	memoryv1 "github.com/collab/collab/proto/collab/memory/v1"

	"github.com/collab/collab/internal/embed"
	"github.com/collab/collab/internal/service"
)

// Module describes the memory service to the process that runs it. It asks documents for
// generations, follows the lifecycle events of organizations and documents, and embeds with
// the model its flags choose.
func Module() service.Module {
	return service.Module{
		Name:        "memory",
		GRPCService: memoryv1.MemoryService_ServiceDesc.ServiceName,
		Gateway: func(ctx context.Context, mux *runtime.ServeMux, conn grpc.ClientConnInterface) error {
			return memoryv1.RegisterMemoryServiceHandlerClient(ctx, mux, memoryv1.NewMemoryServiceClient(conn))
		},
		Calls:    []string{"documents"},
		Consumes: consumes,
		Setup:    setup,
	}
}

// embedderConfig is what the --embedder flags say.
type embedderConfig struct {
	kind            string
	url, model, key string
	timeout         time.Duration
}

func setup(f *service.Flags) service.BuildFunc {
	c := &embedderConfig{}
	f.Func("embedder", "local", "the model that embeds judgments and queries: local (Universal Sentence Encoder lite, in process) or remote (an OpenAI-compatible /v1/embeddings endpoint, --embedder-url)",
		func(v string) error {
			if v != "local" && v != "remote" {
				return errors.New("must be local or remote")
			}
			c.kind = v
			return nil
		})
	url := f.String("embedder-url", "", "with --embedder=remote: the base URL of the OpenAI-compatible embeddings API (e.g. http://localhost:11434/v1)")
	model := f.String("embedder-model", "", "with --embedder=remote: the model name sent to the embeddings API (e.g. nomic-embed-text)")
	key := f.Secret("embedder-key", "", "with --embedder=remote: the API key sent as a bearer token, if the endpoint needs one")
	timeout := f.Duration("embedder-timeout", 10*time.Second, "with --embedder=remote: the time limit of one embeddings request")
	return func(ctx context.Context, env service.Env) (*service.Instance, error) {
		c.url, c.model, c.key, c.timeout = *url, *model, *key, *timeout
		e, err := c.open()
		if err != nil {
			return nil, err
		}
		return build(ctx, env, e)
	}
}

func (c *embedderConfig) open() (embed.Embedder, error) {
	if c.kind == "remote" {
		if c.url == "" || c.model == "" {
			return nil, errors.New("memory: --embedder=remote needs --embedder-url and --embedder-model")
		}
		if c.timeout <= 0 {
			return nil, errors.New("memory: --embedder-timeout must be positive")
		}
		e, err := embed.NewRemote(embed.RemoteConfig{URL: c.url, Model: c.model, APIKey: c.key, Timeout: c.timeout, Retries: 2})
		if err != nil {
			return nil, fmt.Errorf("memory: remote embedder: %w", err)
		}
		return e, nil
	}
	e, err := embed.NewLocal()
	if err != nil {
		return nil, fmt.Errorf("memory: local embedder: %w", err)
	}
	return e, nil
}

func build(ctx context.Context, env service.Env, e embed.Embedder) (*service.Instance, error) {
	var store Store = NewMemoryStore()
	if env.Mongo != nil {
		s, err := NewMongoStore(ctx, env.Mongo.Database("memory"))
		if err != nil {
			return nil, err
		}
		store = s
	}
	o, err := env.ObserveStore(Module().Name)
	if err != nil {
		return nil, err
	}
	store = observeStore(store, o) // after choosing it, so both kinds are observed
	s, err := New(store, documentsv1.NewDocumentsServiceClient(env.Conn("documents")), e, env.Secret, WithClock(env.Clock), WithLogger(env.Log))
	if err != nil {
		return nil, err
	}
	if env.Metrics != nil {
		for _, c := range s.Collectors() {
			if err := env.Metrics.Register(c); err != nil {
				return nil, fmt.Errorf("memory: metrics: %w", err)
			}
		}
	}
	return &service.Instance{
		Register: func(r grpc.ServiceRegistrar) { memoryv1.RegisterMemoryServiceServer(r, s) },
		Ping:     s.Ping,
		Events:   s,
		Run:      s.RunReembedding,
	}, nil
}
