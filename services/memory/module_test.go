package memory

import (
	"context"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/collab/collab/internal/service"
)

func parseFlags(t *testing.T, env map[string]string, args ...string) (service.BuildFunc, error) {
	t.Helper()
	fs := flag.NewFlagSet("collabd", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := service.NewFlags(fs, func(k string) string { return env[k] })
	build := Module().Setup(f)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return build, f.Finish()
}

func TestEmbedderFlags(t *testing.T) {
	if _, err := parseFlags(t, nil, "--embedder=cloud"); err == nil || !strings.Contains(err.Error(), "must be local or remote") {
		t.Fatalf("--embedder=cloud: %v", err)
	}
	if _, err := parseFlags(t, map[string]string{"COLLAB_EMBEDDER": "cloud"}); err == nil || !strings.Contains(err.Error(), "COLLAB_EMBEDDER") {
		t.Fatalf("COLLAB_EMBEDDER=cloud: %v", err)
	}
	build, err := parseFlags(t, map[string]string{"COLLAB_EMBEDDER_KEY": "sk-secret"}, "--embedder=remote", "--embedder-model=m")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := build(context.Background(), service.Env{}); err == nil || err.Error() != "memory: --embedder=remote needs --embedder-url and --embedder-model" {
		t.Fatalf("remote without a URL: %v", err)
	}
	build, err = parseFlags(t, nil, "--embedder=remote", "--embedder-url=http://127.0.0.1:1/v1", "--embedder-model=m", "--embedder-timeout=0s")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := build(context.Background(), service.Env{}); err == nil || err.Error() != "memory: --embedder-timeout must be positive" {
		t.Fatalf("zero timeout: %v", err)
	}
	// The key is a secret: its environment value is not the flag's printed default.
	fs := flag.NewFlagSet("collabd", flag.ContinueOnError)
	Module().Setup(service.NewFlags(fs, func(k string) string { return map[string]string{"COLLAB_EMBEDDER_KEY": "sk-secret"}[k] }))
	if fl := fs.Lookup("embedder-key"); fl == nil || fl.DefValue != "" {
		t.Fatalf("embedder-key default %v", fl)
	}
}
