package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/warrenhq/warren/internal/errdefs"
)

// DeviceClaim is one CDI device a sandbox holds.
type DeviceClaim struct {
	Device    string // qualified CDI name, vendor.com/class=name
	SandboxID string
	// Exclusive claims keep every other sandbox off the device; shared
	// ones only keep exclusive claims off.
	Exclusive bool
}

// ClaimDevices records that sandbox id holds claims' devices, all or none:
// a device another sandbox holds exclusively, or one asked for exclusively
// that another holds at all, is ErrConflict naming the holder. Claims the
// sandbox already has are kept (a retry claims nothing twice).
func (s deviceTable) ClaimDevices(ctx context.Context, id string, claims []DeviceClaim) error {
	return s.writeTx(ctx, func(ctx context.Context, tx *stmtTx) error {
		for _, c := range claims {
			var holder string
			err := tx.QueryRowContext(ctx, `
				SELECT sandbox_id FROM device_claims
				WHERE device = ? AND sandbox_id <> ? AND (exclusive = 1 OR ? = 1)
				ORDER BY sandbox_id LIMIT 1`, c.Device, id, c.Exclusive).Scan(&holder)
			if err == nil {
				return fmt.Errorf("device %s is held by sandbox %s; delete it or ask for another device: %w", c.Device, holder, errdefs.ErrConflict)
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("read claims of device %s: %w", c.Device, dbErr(err))
			}
			if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO device_claims (device, sandbox_id, exclusive) VALUES (?, ?, ?)`,
				c.Device, id, c.Exclusive); err != nil {
				return fmt.Errorf("record claim of device %s: %w", c.Device, dbErr(err))
			}
		}
		return nil
	})
}

// ReleaseDevices drops every claim of sandbox id; releasing twice is
// harmless.
func (s deviceTable) ReleaseDevices(ctx context.Context, id string) error {
	if _, err := s.w.ExecContext(ctx, `DELETE FROM device_claims WHERE sandbox_id = ?`, id); err != nil {
		return fmt.Errorf("release devices of %s: %w", id, dbErr(err))
	}
	return nil
}

// DeviceClaims returns every claim, or only sandbox id's if id is not "",
// ordered by device then sandbox.
func (s deviceTable) DeviceClaims(ctx context.Context, id string) ([]DeviceClaim, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT device, sandbox_id, exclusive FROM device_claims
		WHERE ? = '' OR sandbox_id = ? ORDER BY device, sandbox_id`, id, id)
	if err != nil {
		return nil, fmt.Errorf("list device claims: %w", dbErr(err))
	}
	defer rows.Close()
	var out []DeviceClaim
	for rows.Next() {
		var c DeviceClaim
		if err := rows.Scan(&c.Device, &c.SandboxID, &c.Exclusive); err != nil {
			return nil, fmt.Errorf("read device claim: %w", dbErr(err))
		}
		out = append(out, c)
	}
	return out, dbErr(rows.Err())
}
