package daemon

import (
	"context"
	"log/slog"

	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/devices"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/store"
)

// deviceClaimer claims a create's devices for the runtime it runs on:
// each runtime says which device classes it can pass through.
type deviceClaimer struct {
	svc     *devices.Service
	runtime runtime.Runtime
}

func (c deviceClaimer) Claim(ctx context.Context, id, runtimeName string, names []string) error {
	return c.svc.Claim(ctx, id, names, c.classes(runtimeName))
}

func (c deviceClaimer) Release(ctx context.Context, id string) error { return c.svc.Release(ctx, id) }

// classes are the device classes the runtime named name passes through
// (nil: any).
func (c deviceClaimer) classes(name string) []string {
	if set, ok := c.runtime.(interface {
		CapabilitiesOf(string) (runtime.Capabilities, bool)
		Name() string
	}); ok {
		if name == "" {
			name = set.Name()
		}
		if caps, ok := set.CapabilitiesOf(name); ok {
			return caps.DeviceClasses
		}
	}
	return c.runtime.Capabilities().DeviceClasses
}

// newDevices makes the device service of the host's CDI specs.
func newDevices(cfg config.Config, st *store.Store, log *slog.Logger) *devices.Service {
	reg := devices.New(devices.Options{SpecDirs: cfg.CDISpecDirs, TrustedHookDirs: cfg.CDITrustedHookDirs, Log: log})
	return devices.NewService(reg, st)
}

// releaseOrphanDevices drops the claims of sandboxes that have no record
// (a delete a crash cut short between the destroy and the release).
func (d *Daemon) releaseOrphanDevices(ctx context.Context) {
	claims, err := d.Store.DeviceClaims(ctx, "")
	if err != nil {
		d.log.Warn("reconcile device claims", "err", err)
		return
	}
	for _, c := range claims {
		if _, err := d.Store.GetSandbox(ctx, c.SandboxID); err == nil || !errdefs.IsNotFound(err) {
			continue
		}
		if err := d.Devices.Release(ctx, c.SandboxID); err != nil {
			d.log.Warn("release devices of a gone sandbox", "sandbox", c.SandboxID, "err", err)
		}
	}
}
