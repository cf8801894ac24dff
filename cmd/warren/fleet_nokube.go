//go:build !kube

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/internal/selfexe"
)

// The warren binary links no Kubernetes library: libcontainer re-executes
// it as every sandbox's init, and the init functions of client-go and
// controller-runtime (about 15 ms under load) would run first each time.
// What needs them (the gateway, node drain, node mode, the fleet suite)
// is warren-fleet, the same CLI built with -tags kube, which these
// commands execute in place of this process with the same arguments.

// fleetBinEnv names warren-fleet where it is not beside warren.
const fleetBinEnv = "WARREN_FLEET_BIN"

// fleetBinary is warren-fleet: $WARREN_FLEET_BIN, else beside this binary.
func fleetBinary() (string, error) {
	if p := os.Getenv(fleetBinEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("warren-fleet ($%s): %w", fleetBinEnv, err)
		}
		return p, nil
	}
	exe, err := selfexe.Path()
	if err != nil {
		return "", err
	}
	p := filepath.Join(filepath.Dir(exe), "warren-fleet")
	if _, err := os.Stat(p); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("%s is missing: the gateway, node drain|uncordon, --cluster kubernetes and the fleet suite run in warren-fleet, installed beside warren (make build, make install; or set %s)", p, fleetBinEnv)
		}
		return "", err
	}
	return p, nil
}

// handOffToFleet replaces this process by warren-fleet with the same
// arguments and environment; it returns only an error.
func handOffToFleet() error {
	bin, err := fleetBinary()
	if err != nil {
		return err
	}
	args := append([]string{bin}, os.Args[1:]...)
	if err := syscall.Exec(bin, args, os.Environ()); err != nil {
		return fmt.Errorf("execute %s: %w", bin, err)
	}
	return nil
}

// handOffCmd is a command of warren-fleet's, reached through warren: its
// flags and --help are warren-fleet's.
func handOffCmd(use, short string) *cobra.Command {
	return &cobra.Command{
		Use:                use,
		Short:              short,
		DisableFlagParsing: true,
		RunE:               func(*cobra.Command, []string) error { return handOffToFleet() },
	}
}

func gatewayCmd() *cobra.Command {
	return handOffCmd("gateway", "Run the gateway of a warren fleet on Kubernetes (routes the API to the nodes)")
}

func nodeCmd(*app) *cobra.Command {
	return handOffCmd("node", "Take a node of a warren fleet out of service and back (Kubernetes mode)")
}
