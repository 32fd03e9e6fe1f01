package collabd

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/service"
)

// The container image's settings (every interface) with the development workspace's
// published credentials refuse to start, saying what to do; the process opens no listener.
func TestPublishedDevCredentialsBeyondLoopbackRefuseToStart(t *testing.T) {
	for _, args := range [][]string{
		{"--http-addr=0.0.0.0:0", "--grpc-addr=127.0.0.1:0"},
		{"--http-addr=127.0.0.1:0", "--grpc-addr=:0"},
		{"--services=workspace", "--grpc-addr=[::]:0", "--internal-token=9c1e4f7a2b8d05e3f6a9c2d1b4e7f0a3"},
	} {
		cfg, err := parse(t, nil, append(args, "--log-level=error")...)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Start(context.Background(), cfg, Deps{Clock: clock.Real(), LogOutput: io.Discard})
		if err == nil {
			_ = p.Shutdown(context.Background())
			t.Fatalf("%v: started", args)
		}
		for _, want := range []string{"published credentials", "--dev-workspace=false", "--allow-published-dev-credentials"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%v: %q does not say %q", args, err, want)
			}
		}
	}
}

// What lifts the refusal: the flag, tokens of the operator's own, no development workspace,
// or loopback listeners only (localhost, 127.0.0.0/8, ::1).
func TestCheckExposure(t *testing.T) {
	published := &service.DevCredentials{Published: true}
	wide := []string{"127.0.0.1:9090", "0.0.0.0:8080"}
	for _, c := range []struct {
		name    string
		allow   bool
		dev     *service.DevCredentials
		listens []string
		refused bool
	}{
		{"published, every interface", false, published, wide, true},
		{"published, a host name", false, published, []string{"collab.example.com:8080"}, true},
		{"published, an empty host", false, published, []string{":8080"}, true},
		{"published, a private address", false, published, []string{"10.0.0.5:8080"}, true},
		{"published, allowed", true, published, wide, false},
		{"one token published", false, &service.DevCredentials{AnyPublished: true}, wide, true},
		{"published, an empty address (every interface)", false, published, []string{""}, true},
		{"own tokens", false, &service.DevCredentials{}, wide, false},
		{"no development workspace", false, nil, wide, false},
		{"loopback only", false, published, []string{"127.0.0.1:8080", "localhost:9090", "[::1]:1", "127.0.0.2:5"}, false},
	} {
		err := checkExposure(Config{AllowPublishedDevCredentials: c.allow}, c.dev, c.listens)
		if (err != nil) != c.refused {
			t.Errorf("%s: %v, want refused %v", c.name, err, c.refused)
		}
	}
}
