package session

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store"
)

// deviceHolds gives sandboxes the devices their creates ask for and frees
// them (Config.Devices; nil: none given).
type deviceHolds struct {
	claimer DeviceClaimer
	records interface {
		DeleteSandbox(ctx context.Context, id string) error
	}
	log *slog.Logger
}

// claim gives a reserved sandbox the devices its create asks for; if it
// cannot, the record goes and the error says why (a 400 or a 409). A fork
// restoring memory gets none: a device's state is not in the image.
func (d deviceHolds) claim(ctx context.Context, req CreateRequest, rec store.Sandbox, spec sandbox.Spec) error {
	if len(req.Devices) == 0 {
		return nil
	}
	err := fmt.Errorf("this server gives sandboxes no devices: %w", errdefs.ErrUnsupported)
	switch {
	case spec.MemoryFrom != "":
		err = fmt.Errorf("snapshot %s holds memory, which cannot be restored onto devices; ask for filesOnly to start from its files with devices: %w", spec.MemoryFrom, errdefs.ErrInvalid)
	case d.claimer != nil:
		err = d.claimer.Claim(ctx, rec.ID, rec.Runtime, req.Devices)
	}
	if err != nil {
		if derr := d.records.DeleteSandbox(context.WithoutCancel(ctx), rec.ID); derr != nil {
			d.log.Warn("drop record of a sandbox refused its devices", "sandbox", rec.ID, "err", derr)
		}
	}
	return err
}

// release frees what sandbox id holds; a failure is logged (the claim
// then names a gone sandbox until the next start's reconcile).
func (d deviceHolds) release(ctx context.Context, id string) {
	if d.claimer == nil {
		return
	}
	if err := d.claimer.Release(ctx, id); err != nil {
		d.log.Warn("release devices", "sandbox", id, "err", err)
	}
}
