package workspace

import (
	"context"
	"flag"
	"log/slog"
	"testing"

	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/email"
	"github.com/collab/collab/internal/service"
)

func TestParseRateLimits(t *testing.T) {
	l, err := ParseRateLimits("createWorkspace=3, emailStatus=0")
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultRateLimits
	want.CreateWorkspace, want.EmailStatus = 3, 0
	if l != want {
		t.Fatalf("%+v", l)
	}
	if l, err := ParseRateLimits("off"); err != nil || l != (RateLimits{}) {
		t.Fatalf("off: %+v %v", l, err)
	}
	for _, bad := range []string{"createWorkspace=x", "speed=3", "createWorkspace=-1", "createWorkspace"} {
		if _, err := ParseRateLimits(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The development workspace is made unless data lives in an operator's MongoDB; the flag
// decides when given.
func TestDevWorkspaceDefault(t *testing.T) {
	for _, c := range []struct {
		args    []string
		storage service.Storage
		want    bool
	}{
		{nil, service.StorageMemory, true},
		{nil, service.StorageEmbedded, true},
		{nil, service.StorageMongoDB, false},
		{[]string{"--dev-workspace=true"}, service.StorageMongoDB, true},
		{[]string{"--dev-workspace=off"}, service.StorageMemory, false},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		build := Module().Setup(service.NewFlags(fs, func(string) string { return "" }))
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		inst, err := build(context.Background(), service.Env{Log: slog.New(slog.DiscardHandler), Clock: clock.Real(),
			Secret: make([]byte, 32), Storage: c.storage, Email: &email.Memory{}})
		if err != nil {
			t.Fatal(err)
		}
		if got := inst.Dev != nil; got != c.want {
			t.Errorf("%v on %v: dev workspace %v, want %v", c.args, c.storage, got, c.want)
		}
		if c.want && inst.Dev.APIKey != "dev-api-key" {
			t.Errorf("dev credentials %+v", inst.Dev)
		}
	}
}

// The development tokens are marked published only when they are the documented ones, so the
// banner never prints tokens an operator chose; the environment's tokens apply.
func TestDevTokensPublishedOnlyWhenDocumented(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, true},
		{map[string]string{"COLLAB_DEV_AUTH_TOKEN": "chosen"}, false},
		{map[string]string{"COLLAB_DEV_WORKSPACE_TOKEN": "chosen"}, false},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		f := service.NewFlags(fs, func(k string) string { return c.env[k] })
		build := Module().Setup(f)
		if err := fs.Parse(nil); err != nil {
			t.Fatal(err)
		}
		if err := f.Finish(); err != nil {
			t.Fatal(err)
		}
		inst, err := build(context.Background(), service.Env{Log: slog.New(slog.DiscardHandler), Clock: clock.Real(),
			Secret: make([]byte, 32), Email: &email.Memory{}})
		if err != nil {
			t.Fatal(err)
		}
		if inst.Dev.Published != c.want {
			t.Errorf("%v: published %v, want %v", c.env, inst.Dev.Published, c.want)
		}
		if v := c.env["COLLAB_DEV_AUTH_TOKEN"]; v != "" && inst.Dev.AuthToken != v {
			t.Errorf("the environment's token was not applied: %+v", inst.Dev)
		}
	}
}
