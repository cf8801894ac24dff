package session

import (
	"context"
	"fmt"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store"
)

// claimDevices gives a reserved sandbox the devices its create asks for;
// if it cannot, the record goes and the error says why (a 400 or a 409).
// A fork restoring memory gets none: a device's state is not in the image.
func (l *lifecycle) claimDevices(ctx context.Context, req CreateRequest, rec store.Sandbox, spec sandbox.Spec) error {
	if len(req.Devices) == 0 {
		return nil
	}
	err := fmt.Errorf("this server gives sandboxes no devices: %w", errdefs.ErrUnsupported)
	switch {
	case spec.MemoryFrom != "":
		err = fmt.Errorf("snapshot %s holds memory, which cannot be restored onto devices; ask for filesOnly to start from its files with devices: %w", spec.MemoryFrom, errdefs.ErrInvalid)
	case l.cfg.Devices != nil:
		err = l.cfg.Devices.Claim(ctx, rec.ID, rec.Runtime, req.Devices)
	}
	if err != nil {
		if derr := l.store.DeleteSandbox(context.WithoutCancel(ctx), rec.ID); derr != nil {
			l.log.Warn("drop record of a sandbox refused its devices", "sandbox", rec.ID, "err", derr)
		}
	}
	return err
}

// releaseDevices frees what sandbox id holds; a failure is logged (the
// claim then names a gone sandbox until the next start's reconcile).
func (l *lifecycle) releaseDevices(ctx context.Context, id string) {
	if l.cfg.Devices == nil {
		return
	}
	if err := l.cfg.Devices.Release(ctx, id); err != nil {
		l.log.Warn("release devices", "sandbox", id, "err", err)
	}
}
