package daemon

import (
	"context"

	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/store"
)

// usernsRanges hands out sandboxes' host id ranges from the slots the
// store records (sandbox.UserNSRanges).
type usernsRanges struct {
	store *store.Store
	base  uint32
	slots int
}

func (u usernsRanges) Range(ctx context.Context, id string) (runtime.IDRange, error) {
	slot, err := u.store.UserNSSlot(ctx, id, u.slots)
	if err != nil {
		return runtime.IDRange{}, err
	}
	return u.of(slot), nil
}

func (u usernsRanges) Lookup(ctx context.Context, id string) (runtime.IDRange, bool, error) {
	slot, ok, err := u.store.UserNSSlotOf(ctx, id)
	if err != nil || !ok {
		return runtime.IDRange{}, false, err
	}
	return u.of(slot), true, nil
}

func (u usernsRanges) of(slot int) runtime.IDRange {
	return runtime.IDRange{HostID: u.base + uint32(slot)*config.UserNSSize, Size: config.UserNSSize}
}

func (u usernsRanges) Release(ctx context.Context, id string) error {
	return u.store.ReleaseUserNSSlot(ctx, id)
}
