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
	"syscall"
	"time"

	"github.com/collab/collab/collabd"
	"github.com/collab/collab/services"
)

func main() {
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
