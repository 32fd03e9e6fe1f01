package gateway

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"go.yaml.in/yaml/v3"
)

// Routing: grpc-gateway's mux tries its patterns one after another, and each pattern that does
// not match costs two allocations and a walk of its operations; with every service's routes in
// one mux, Get Permissions came after 43 of them. So each service's routes also go in a mux of
// their own, and an operation's exact method and path (every route of http_rules.yaml is a
// literal path) pick that mux. Anything else (unknown paths, wrong methods, escaped paths) goes
// to the mux of all routes, which tells a 404 from a 405 as before.

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

// operation returns the mux of r's service when r is one of its operations.
func (g *Gateway) operation(r *http.Request) (*runtime.ServeMux, bool) {
	// An escaped path is matched by grpc-gateway on its raw form: leave it to the whole mux.
	if r.URL.RawPath != "" {
		return nil, false
	}
	m, ok := g.operations[operation{r.Method, r.URL.Path}]
	return m, ok
}
