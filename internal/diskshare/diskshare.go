// Package diskshare keeps one sandbox, or all of them together, from
// filling the storage pool (issue 31): it picks the default disk quota of a
// sandbox, and keeps a reserve of the pool that no sandbox can write into,
// by capping every sandbox's quota group together (storage.GroupsCap) at
// what the pool has free minus the reserve. The daemon's own files,
// snapshots' metadata and the room a delete needs live in the reserve.
package diskshare

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/storage"
)

// Auto, as a configured size, asks for the size picked from the pool's.
const Auto = -1

const (
	// maxDefaultQuota bounds the default quota: a tenth of a large pool
	// is more than one agent's sandbox needs.
	maxDefaultQuota = 10 << 30
	minReserve      = 256 << 20
	maxReserve      = 4 << 30
)

// DefaultQuota is the quota of a sandbox that asks for none, for a pool of
// size bytes: a tenth of the pool, at most 10 GiB.
func DefaultQuota(size int64) int64 { return min(maxDefaultQuota, size/10) }

// DefaultReserve is the reserve of a pool of size bytes: a twentieth,
// within 256 MiB..4 GiB, and never more than half the pool.
func DefaultReserve(size int64) int64 {
	return min(max(size/20, minReserve), maxReserve, size/2)
}

// CapFor is the cap on all sandboxes' groups together: what they hold now
// plus what the pool has free beyond the reserve. It is never 0, which
// would mean no cap: a pool already inside its reserve gets 1 byte more
// than the groups hold, so that every write of theirs fails.
func CapFor(used, avail, reserve int64) int64 {
	return max(used+max(avail-reserve, 0), 1)
}

// Share applies the reserve to a pool.
type Share struct {
	pool    storage.GroupsCap
	reserve int64 // 0: no reserve, the groups uncapped
	log     *slog.Logger
}

// Options configures New.
type Options struct {
	// DefaultQuota and Reserve are in bytes: Auto picks them from the
	// pool's size, 0 turns them off.
	DefaultQuota, Reserve int64
	Log                   *slog.Logger
}

// New resolves the default quota and the reserve for st and returns the
// Share that keeps the reserve (nil when there is none to keep) and the
// default quota (0: none). A backend that cannot cap groups gets neither
// when they are Auto; asked for explicitly, that is an error.
func New(ctx context.Context, st storage.Storage, o Options) (*Share, int64, error) {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.DefaultQuota < Auto || o.Reserve < Auto {
		return nil, 0, fmt.Errorf("default disk quota %d and disk reserve %d: want -1 (auto), 0 (none) or a size: %w", o.DefaultQuota, o.Reserve, errdefs.ErrInvalid)
	}
	pool, ok := st.(storage.GroupsCap)
	var size int64
	if ok {
		if _, _, err := pool.GroupsUsage(ctx); errors.Is(err, errdefs.ErrUnsupported) {
			ok = false // e.g. btrfs without simple quotas
		} else if err != nil {
			return nil, 0, fmt.Errorf("disk share: %w", err)
		}
	}
	if ok {
		var err error
		if size, _, err = pool.Space(ctx); err != nil {
			return nil, 0, fmt.Errorf("disk share: %w", err)
		}
	}
	quota, reserve := o.DefaultQuota, o.Reserve
	if !ok {
		if quota > 0 {
			// As before: SetGroupLimit says so at create, per sandbox.
			o.Log.Warn("the storage cannot enforce disk quotas; --default-disk-mb asks for one on every sandbox", "storage", st.Name())
		}
		if reserve > 0 {
			return nil, 0, fmt.Errorf("--disk-reserve-mb needs disk quotas, which the %s storage here cannot enforce (btrfs with simple quotas can: warren's own pool image): %w", st.Name(), errdefs.ErrUnsupported)
		}
		return nil, max(quota, 0), nil
	}
	if quota == Auto {
		quota = DefaultQuota(size)
	}
	if reserve == Auto {
		reserve = DefaultReserve(size)
	}
	if reserve >= size {
		return nil, 0, fmt.Errorf("disk reserve %d MiB is not below the pool's size %d MiB: %w", reserve>>20, size>>20, errdefs.ErrInvalid)
	}
	o.Log.Info("disk share", "pool_mib", size>>20, "default_quota_mib", quota>>20, "reserve_mib", reserve>>20)
	s := &Share{pool: pool, reserve: reserve, log: o.Log}
	if err := s.Apply(ctx); err != nil {
		return nil, 0, err
	}
	if reserve == 0 {
		return nil, quota, nil
	}
	return s, quota, nil
}

// Apply sets the cap once, from the pool's state now. With no reserve it
// lifts the cap (one an earlier run left).
func (s *Share) Apply(ctx context.Context) error {
	if s.reserve == 0 {
		return s.pool.SetGroupsCap(ctx, 0)
	}
	used, _, err := s.pool.GroupsUsage(ctx)
	if err != nil {
		return fmt.Errorf("disk reserve: %w", err)
	}
	_, avail, err := s.pool.Space(ctx)
	if err != nil {
		return fmt.Errorf("disk reserve: %w", err)
	}
	if err := s.pool.SetGroupsCap(ctx, CapFor(used, avail, s.reserve)); err != nil {
		return fmt.Errorf("disk reserve: %w", err)
	}
	return nil
}

// Run applies the cap every interval until ctx ends. Between two runs the
// sandboxes can write at most what was free beyond the reserve; what else
// grows meanwhile (a template build, an archived turn) comes out of the
// reserve until the next run takes it into account. A deleted sandbox
// needs no run: its group leaves the parent's count, which makes room
// under the same cap.
func (s *Share) Run(ctx context.Context, every time.Duration) {
	if s == nil {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.Apply(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("could not update the sandboxes' share of the pool", "err", err)
		}
	}
}
