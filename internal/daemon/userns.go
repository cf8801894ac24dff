package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/runtime/native"
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

// userNSMode decides whether native sandboxes start in user namespaces:
// cfg.UserNS (the default) if the host passes native.ProbeUserNS on the
// pool at poolRoot. A host that fails it is an error when the operator
// asked for namespaces explicitly; otherwise the daemon falls back to
// none, loudly, and off says why for GET /health.
func userNSMode(cfg config.Config, poolRoot string, log *slog.Logger) (on bool, off string, err error) {
	if !cfg.UserNS {
		log.Info("native sandboxes run without user namespaces (--userns=false): root inside is root on the host, held back by capabilities and seccomp")
		return false, "turned off (--userns=false)", nil
	}
	start := time.Now()
	probeErr := native.ProbeUserNS(poolRoot, usernsRanges{base: cfg.UserNSBase}.of(0))
	if probeErr != nil && cfg.UserNSExplicit {
		return false, "", fmt.Errorf("--userns: this host cannot run sandboxes in user namespaces (start with --userns=false to run them without): %w", probeErr)
	}
	if probeErr != nil {
		log.Warn("this host cannot run sandboxes in user namespaces; native sandboxes run WITHOUT one (root inside is root on the host). Fix the host, or pass --userns=false to silence this", "reason", probeErr)
		return false, probeErr.Error(), nil
	}
	log.Info("native sandboxes run in user namespaces: root inside is an unprivileged host uid", "first_uid", cfg.UserNSBase,
		"ids_each", config.UserNSSize, "slots", cfg.UserNSSlots, "probe", time.Since(start).Round(time.Microsecond))
	return true, "", nil
}

// markUserNS records the mode in the runtimes GET /health lists: the
// runtimes that can put sandboxes in user namespaces do so when on.
func markUserNS(infos []client.RuntimeInfo, caps func(string) (runtime.Capabilities, bool), on bool, off string) {
	for i := range infos {
		if c, ok := caps(infos[i].Name); ok && c.UserNS {
			infos[i].UserNS = on
			if !on {
				infos[i].UserNSOff = off
			}
		}
	}
}
