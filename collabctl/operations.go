package collabctl

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/collab/collab/gateway"
	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/protoset"
	optionsv1 "github.com/collab/collab/proto/collab/options/v1"
)

// operation is one API operation as collabctl calls it.
type operation struct {
	// Method is the full method name, collab.<service>.v1.<Service>.<Method>; empty for a path
	// this build does not know.
	Method string
	// Path is the HTTP path; empty for an internal operation, which has none.
	Path string
	// Class is the method's declared auth class.
	Class optionsv1.Auth
}

// auth is the credentials the HTTP call sends. Body credentials (B) travel in the data the
// caller writes; internal operations are not on the HTTP API.
func (o operation) auth() Auth {
	switch o.Class {
	case optionsv1.Auth_AUTH_KEY, optionsv1.Auth_AUTH_KEY_AND_BODY, optionsv1.Auth_AUTH_KEY_OR_USER:
		return AuthKey
	case optionsv1.Auth_AUTH_WORKSPACE:
		return AuthWorkspace
	}
	return AuthNone
}

type routeTable struct {
	byMethod map[string]string // full method name -> path
	byPath   map[string]string // path -> full method name
}

var routes = sync.OnceValues(loadRoutes)

// loadRoutes reads the gateway's http_rules.yaml, built into this binary.
func loadRoutes() (*routeTable, error) {
	var cfg struct {
		HTTP struct {
			Rules []struct {
				Selector string `yaml:"selector"`
				Post     string `yaml:"post"`
			} `yaml:"rules"`
		} `yaml:"http"`
	}
	if err := yaml.Unmarshal(gateway.HTTPRules, &cfg); err != nil {
		return nil, fmt.Errorf("reading the built-in http_rules.yaml: %w", err)
	}
	t := &routeTable{byMethod: map[string]string{}, byPath: map[string]string{}}
	for _, r := range cfg.HTTP.Rules {
		if r.Selector == "" || r.Post == "" {
			continue
		}
		t.byMethod[r.Selector] = r.Post
		t.byPath[r.Post] = r.Selector
	}
	return t, nil
}

// methods indexes every method of the API by its full name: those of internal/protoset, every
// proto package of proto/, whatever else this binary links.
var methods = sync.OnceValue(func() map[string]protoreflect.MethodDescriptor {
	out := map[string]protoreflect.MethodDescriptor{}
	for _, md := range protoset.Methods() {
		out[string(md.FullName())] = md
	}
	return out
})

// apiMethods lists the full names of every method of the API, sorted.
func apiMethods() []string {
	out := make([]string, 0, len(methods()))
	for name := range methods() {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// classOf is a method's auth class from its descriptor, unspecified for a method the API does
// not have.
func classOf(method string) optionsv1.Auth {
	md, ok := methods()[method]
	if !ok {
		return optionsv1.Auth_AUTH_UNSPECIFIED
	}
	return authn.ClassOf("/" + string(md.Parent().FullName()) + "/" + string(md.Name()))
}

// resolveOperation finds an operation by its HTTP path (/v2/...), its full method name
// (collab.workspace.v1.WorkspaceService.GetWorkspace, or the gRPC form
// /collab.workspace.v1.WorkspaceService/GetWorkspace) or its short one
// (WorkspaceService.GetWorkspace). A path this build does not know resolves with no method.
func resolveOperation(name string) (operation, error) {
	t, err := routes()
	if err != nil {
		return operation{}, err
	}
	if strings.HasPrefix(name, "/v") && !strings.Contains(name, ".") {
		m := t.byPath[name]
		return operation{Method: m, Path: name, Class: classOf(m)}, nil
	}
	full := strings.TrimPrefix(name, "/")
	if i := strings.LastIndexByte(full, '/'); i >= 0 {
		full = full[:i] + "." + full[i+1:]
	}
	if !strings.HasPrefix(full, "collab.") {
		var found []string
		for _, m := range apiMethods() {
			if strings.HasSuffix(m, "."+full) {
				found = append(found, m)
			}
		}
		switch len(found) {
		case 0:
			return operation{}, usagef("no operation %q: give a path (/v2/...) or a method (collab.<service>.v1.<Service>.<Method>)", name)
		case 1:
			full = found[0]
		default:
			return operation{}, usagef("%q names several methods: %s", name, strings.Join(found, ", "))
		}
	}
	class := classOf(full)
	if class == optionsv1.Auth_AUTH_UNSPECIFIED {
		return operation{}, usagef("no method %s in the API this collabctl was built with", full)
	}
	return operation{Method: full, Path: t.byMethod[full], Class: class}, nil
}
