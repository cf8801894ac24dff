// Command warren is warren's one host binary: the daemon (`warren serve`),
// the CLI that drives it, and libcontainer's hidden `init`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/warrenhq/warren/internal/runtime/native"
	// Runs libcontainer's init before the heavy package initialisers.
	_ "github.com/warrenhq/warren/internal/runtime/native/earlyinit"
)

func main() {
	// First: in a sandbox's init process this never returns.
	native.Init()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
