// Command collabctl is the operator's command line of collab: workspaces, keys and tokens,
// settings, any operation with JSON data, webhook attempts as they come, the event relay's
// backlog. Its logic is package collabctl; docs/operations.md, "collabctl", shows each command.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/collab/collab/collabctl"
)

func main() {
	// Ctrl-C ends a command such as webhooks attempts tail cleanly (exit 0) and interrupts a
	// request in flight.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := collabctl.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
