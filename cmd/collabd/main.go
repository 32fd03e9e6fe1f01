// Command collabd runs collab: by default every service and the HTTP gateway in one process on
// the memory store, with a development workspace whose credentials it prints.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/collab/collab/collabd"
	"github.com/collab/collab/services"
)

// gcPercent is the collector's target unless GOGC says otherwise: the heap may grow by half
// its live data between collections, not by all of it (Go's default). Most of what the
// process holds is live sync's documents and connections; at 50 a thousand open documents
// take about a quarter less memory, for no measured CPU (docs/operations.md, "Memory").
const gcPercent = 50

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	if err := run(os.Args[1:], os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "collabd:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	cfg, err := collabd.ParseFlags(services.All(), args, os.Getenv)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	p, err := collabd.Start(ctx, cfg, collabd.Deps{})
	if err != nil {
		return err
	}
	collabd.PrintBanner(out, p)
	select {
	case <-ctx.Done():
	case err = <-p.Err():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return errors.Join(err, p.Shutdown(shutdownCtx))
}
