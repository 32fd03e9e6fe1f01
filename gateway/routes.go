package gateway

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
)

// Routing: grpc-gateway's mux tries its patterns one after another, and each pattern that does
// not match costs two allocations and a walk of its operations; with every service's routes in
// one mux, Get Permissions came after 43 of them. Every route of http_rules.yaml is a literal
// path, so the gateway finds an operation's handler by its exact method and path instead
// (operations), and calls it as grpc-gateway's mux would once matched. Anything else (unknown
// paths, wrong methods, escaped paths) goes to the mux of all routes, which tells a 404 from a
// 405 as before.
//
// grpc-gateway keeps its handlers to itself; they are caught as each service registers them
// (a middleware sees each one), and told apart by asking the service's mux to route each of
// the service's operations once, at start.

// operation is an HTTP method and path of http_rules.yaml.
type operation struct{ method, path string }

// rulesByService reads HTTPRules: for each gRPC service ("collab.access.v1.AccessService"),
// the methods and paths of its operations, additional bindings included.
func rulesByService() (map[string][]operation, error) {
	type binding struct {
		Post string `yaml:"post"`
		Get  string `yaml:"get"`
	}
	var cfg struct {
		HTTP struct {
			Rules []struct {
				Selector           string `yaml:"selector"`
				binding            `yaml:",inline"`
				AdditionalBindings []binding `yaml:"additional_bindings"`
			} `yaml:"rules"`
		} `yaml:"http"`
	}
	if err := yaml.Unmarshal(HTTPRules, &cfg); err != nil {
		return nil, fmt.Errorf("gateway: read http_rules.yaml: %w", err)
	}
	out := map[string][]operation{}
	for _, r := range cfg.HTTP.Rules {
		i := strings.LastIndexByte(r.Selector, '.')
		if i < 0 {
			return nil, fmt.Errorf("gateway: http_rules.yaml: selector %q names no method", r.Selector)
		}
		service := r.Selector[:i]
		for _, b := range append([]binding{r.binding}, r.AdditionalBindings...) {
			if b.Post != "" {
				out[service] = append(out[service], operation{http.MethodPost, b.Post})
			}
			if b.Get != "" {
				out[service] = append(out[service], operation{http.MethodGet, b.Get})
			}
		}
	}
	return out, nil
}

// serviceOperations registers u's routes on a mux of their own, built with options, and
// returns the handler of each of its operations that http_rules.yaml lists (ops). An
// operation the mux does not route is left out: the mux of all routes answers it.
func serviceOperations(ctx context.Context, u Upstream, conn grpc.ClientConnInterface, options []runtime.ServeMuxOption, ops []operation) (map[operation]runtime.HandlerFunc, error) {
	var (
		handlers []runtime.HandlerFunc
		routed   = -1
	)
	// Each handler goes in handlers as registered; the mux's copy only says which it is.
	catch := func(h runtime.HandlerFunc) runtime.HandlerFunc {
		i := len(handlers)
		handlers = append(handlers, h)
		return func(http.ResponseWriter, *http.Request, map[string]string) { routed = i }
	}
	// The handlers run with the options of the mux they were registered on: these.
	mux := runtime.NewServeMux(append(slices.Clip(options), runtime.WithMiddlewares(catch))...)
	if err := u.Register(ctx, mux, conn); err != nil {
		return nil, fmt.Errorf("gateway: register %s: %w", u.Name, err)
	}
	out := map[operation]runtime.HandlerFunc{}
	for _, op := range ops {
		req, err := http.NewRequestWithContext(ctx, op.method, op.path, http.NoBody)
		if err != nil {
			return nil, fmt.Errorf("gateway: route %s %s: %w", op.method, op.path, err)
		}
		routed = -1
		mux.ServeHTTP(discard{}, req)
		if routed >= 0 {
			out[op] = handlers[routed]
		}
	}
	return out, nil
}

// discard is a ResponseWriter that keeps nothing (serviceOperations' requests are never
// answered).
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}

// operation returns the handler of r's operation when r is one exactly.
func (g *Gateway) operation(r *http.Request) (runtime.HandlerFunc, bool) {
	// An escaped path is matched by grpc-gateway on its raw form: leave it to the whole mux.
	if r.URL.RawPath != "" {
		return nil, false
	}
	h, ok := g.operations[operation{r.Method, r.URL.Path}]
	return h, ok
}
