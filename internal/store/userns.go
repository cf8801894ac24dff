package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/warrenhq/warren/internal/errdefs"
)

// UserNSSlot returns sandbox id's slot of host ids for its user namespace,
// giving it the lowest free slot below slots the first time. The slot stays
// the sandbox's until ReleaseUserNSSlot, restarts included.
func (s usernsTable) UserNSSlot(ctx context.Context, id string, slots int) (int, error) {
	var slot int
	err := s.writeTx(ctx, func(ctx context.Context, tx *stmtTx) error {
		err := tx.QueryRowContext(ctx, `SELECT slot FROM userns_slots WHERE sandbox_id = ?`, id).Scan(&slot)
		if err == nil {
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("read user namespace slot of %s: %w", id, dbErr(err))
		}
		// The first gap: 0 if free, else the lowest taken slot whose
		// successor is free.
		err = tx.QueryRowContext(ctx, `
			SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM userns_slots WHERE slot = 0)
			UNION ALL
			SELECT a.slot + 1 FROM userns_slots a
			WHERE NOT EXISTS (SELECT 1 FROM userns_slots b WHERE b.slot = a.slot + 1)
			ORDER BY 1 LIMIT 1`).Scan(&slot)
		if err != nil {
			return fmt.Errorf("find a free user namespace slot: %w", dbErr(err))
		}
		if slot >= slots {
			return fmt.Errorf("all %d user namespace id ranges are in use; destroy sandboxes or raise --userns-slots: %w", slots, errdefs.ErrResourceExhausted)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO userns_slots (slot, sandbox_id) VALUES (?, ?)`, slot, id); err != nil {
			return fmt.Errorf("record user namespace slot of %s: %w", id, dbErr(err))
		}
		return nil
	})
	return slot, err
}

// ReleaseUserNSSlot frees sandbox id's slot; releasing twice is harmless.
func (s usernsTable) ReleaseUserNSSlot(ctx context.Context, id string) error {
	if _, err := s.w.ExecContext(ctx, `DELETE FROM userns_slots WHERE sandbox_id = ?`, id); err != nil {
		return fmt.Errorf("release user namespace slot of %s: %w", id, dbErr(err))
	}
	return nil
}

// UserNSSlotOf returns sandbox id's slot, if it has one.
func (s usernsTable) UserNSSlotOf(ctx context.Context, id string) (int, bool, error) {
	var slot int
	err := s.r.QueryRowContext(ctx, `SELECT slot FROM userns_slots WHERE sandbox_id = ?`, id).Scan(&slot)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read user namespace slot of %s: %w", id, dbErr(err))
	}
	return slot, true, nil
}
