package sandbox

import (
	"context"
	"fmt"
	"io"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/storage"
)

// transferer is the storage's export and import of volumes, or an error
// saying it has none.
func (ar *archives) transferer() (storage.Transferer, error) {
	if ar.transfers == nil {
		return nil, fmt.Errorf("the %s storage cannot export or import snapshots: %w", ar.storageName, errdefs.ErrUnsupported)
	}
	return ar.transfers, nil
}

// TransferFormat names the streams ExportSnapshot writes ("" when the
// storage cannot export).
func (ar *archives) TransferFormat() string {
	t, err := ar.transferer()
	if err != nil {
		return ""
	}
	return t.TransferFormat()
}

// ExportSnapshot writes a snapshot's files to w: whole, or as a delta
// against baseID's when baseID is set. Both volumes must be in the pool.
func (ar *archives) ExportSnapshot(ctx context.Context, snapID, baseID string, w io.Writer) error {
	t, err := ar.transferer()
	if err != nil {
		return err
	}
	var base storage.Key
	for _, id := range []string{snapID, baseID} {
		if id == "" {
			continue
		}
		if err := ar.settled.snapshot(ctx, id); err != nil {
			return err
		}
	}
	if baseID != "" {
		base = snapshotKey(baseID)
	}
	return t.Export(ctx, snapshotKey(snapID), base, w)
}

// ImportSnapshot builds snapID's volume from a stream ExportSnapshot
// wrote, as a delta against baseID's volume when baseID is set; verify
// runs before the volume appears (see storage.Transferer).
func (ar *archives) ImportSnapshot(ctx context.Context, r io.Reader, baseID, snapID string, verify func() error) error {
	t, err := ar.transferer()
	if err != nil {
		return err
	}
	var base storage.Key
	if baseID != "" {
		if err := ar.settled.snapshot(ctx, baseID); err != nil {
			return err
		}
		base = snapshotKey(baseID)
	}
	return t.Import(ctx, r, base, snapshotKey(snapID), verify)
}
