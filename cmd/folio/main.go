// Command folio is the Folio binary: bookie, standalone cluster, shell and
// tools. All logic lives in internal packages; this file only wires the
// process to the command tree.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/foliodb/folio/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.Env{Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv, Environ: os.Environ})
	stop()
	os.Exit(code)
}
