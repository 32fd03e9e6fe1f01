package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/collab/collab/gateway"
	optionsv1 "github.com/collab/collab/proto/collab/options/v1"
)

// minimalBody is {"data": {...}} for the method named by selector with its (required) fields
// (the codec refuses a body without them) at their empty values.
func minimalBody(t *testing.T, selector string) string {
	t.Helper()
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(selector))
	if err != nil {
		t.Fatalf("%s: %v", selector, err)
	}
	data := map[string]any{}
	fields := d.(protoreflect.MethodDescriptor).Input().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if required, _ := proto.GetExtension(fd.Options(), optionsv1.E_Required).(bool); !required {
			continue
		}
		switch {
		case fd.IsList():
			data[fd.JSONName()] = []any{}
		case fd.IsMap() || fd.Message() != nil:
			data[fd.JSONName()] = map[string]any{}
		case fd.Kind() == protoreflect.StringKind:
			data[fd.JSONName()] = ""
		case fd.Kind() == protoreflect.BoolKind:
			data[fd.JSONName()] = false
		default:
			data[fd.JSONName()] = 0
		}
	}
	b, err := json.Marshal(map[string]any{"data": data})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every binding of http_rules.yaml reaches its own gRPC method, and only it, found by its exact
// method and path (routes.go), and an escaped form of a path, which the mux of all routes
// serves, reaches it too.
func TestEveryRuleReachesItsMethod(t *testing.T) {
	var mu sync.Mutex
	var called []string
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		m, _ := grpc.MethodFromServerStream(stream)
		mu.Lock()
		called = append(called, m)
		mu.Unlock()
		return status.Error(codes.NotFound, "seen")
	}))
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	gw := newGateway(t, dialBufconn(t, lis))

	var cfg struct {
		HTTP struct {
			Rules []struct {
				Selector           string `yaml:"selector"`
				Post               string `yaml:"post"`
				AdditionalBindings []struct {
					Get string `yaml:"get"`
				} `yaml:"additional_bindings"`
			} `yaml:"rules"`
		} `yaml:"http"`
	}
	if err := yaml.Unmarshal(gateway.HTTPRules, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.HTTP.Rules) < 50 {
		t.Fatalf("read %d rules only", len(cfg.HTTP.Rules))
	}
	check := func(method, target, selector string) {
		t.Helper()
		mu.Lock()
		called = nil
		mu.Unlock()
		body := ""
		if method == http.MethodPost {
			body = minimalBody(t, selector)
		}
		rec := serve(gw, method, target, body, http.Header{"Content-Type": {"application/json"}})
		errorOf(t, rec, http.StatusNotFound, "NOT_FOUND")
		i := strings.LastIndexByte(selector, '.')
		want := "/" + selector[:i] + "/" + selector[i+1:]
		mu.Lock()
		defer mu.Unlock()
		if len(called) != 1 || called[0] != want {
			t.Errorf("%s %s reached %v, want %s", method, target, called, want)
		}
	}
	bindings := 0
	for _, r := range cfg.HTTP.Rules {
		check(http.MethodPost, r.Post, r.Selector)
		bindings++
		for _, b := range r.AdditionalBindings {
			check(http.MethodGet, b.Get+"?token=x", r.Selector)
			bindings++
		}
	}
	// Each of them by its exact path, none left to the mux of all routes.
	if n := gateway.Operations(gw); n != bindings {
		t.Fatalf("%d operations found by their path, of %d bindings", n, bindings)
	}
	check(http.MethodPost, "/v2/auth/permissions%2Fget", "collab.access.v1.AccessService.GetPermissions")
	check(http.MethodPost, "/v2/auth/%70ermissions/get", "collab.access.v1.AccessService.GetPermissions")
}
