package sandbox

import (
	"context"
	"fmt"
	"time"

	"github.com/warrenhq/warren/internal/agentconn"
	"github.com/warrenhq/warren/internal/errdefs"
)

// PowerOff ends a sandbox's processes and keeps everything a cold boot
// needs: its root, its network and its agent listener (the new agent dials
// the same socket). A filesystem-only pause is this: no memory, CPU or
// processes are held. A hibernation image left from a memory pause goes,
// since the next start boots cold rather than restore it.
func (l *lifecycle) PowerOff(ctx context.Context, id string) error {
	ctx = context.WithoutCancel(ctx)
	// A frozen cgroup is thawed by the runtime's destroy; nothing needs to
	// run first.
	if err := l.runtime.Destroy(ctx, id); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("end the processes of sandbox %s: %w", id, err)
	}
	if l.images != "" {
		if err := removeMemoryImage(l.images.hibernationImage(id)); err != nil {
			return err
		}
	}
	return nil
}

// ColdBoot starts a powered-off (or frozen, or hibernated) sandbox afresh
// on the files it has, as a create does on a template's, and waits for its
// agent. Processes it still has are ended first: connect's reboot of a
// memory-paused sandbox drops its memory. It returns how long the boot
// took, from the end of the old processes to the agent's answer.
func (l *lifecycle) ColdBoot(ctx context.Context, spec Spec, conn *agentconn.Conn) (time.Duration, error) {
	ctx = context.WithoutCancel(ctx)
	t0 := time.Now()
	if err := l.PowerOff(ctx, spec.ID); err != nil {
		return 0, err
	}
	release, err := l.launch.admit(ctx)
	if err != nil {
		return 0, err
	}
	defer release()
	began := time.Now()
	spec.MemoryFrom = ""
	if _, err := l.launch.start(ctx, spec, l.pool.st.Path(sandboxKey(spec.ID)), conn); err != nil {
		return 0, fmt.Errorf("boot sandbox %s: %w", spec.ID, err)
	}
	started := time.Now()
	if conn != nil {
		if err := l.sockets.waitReady(ctx, conn); err != nil {
			return 0, fmt.Errorf("boot sandbox %s: %w", spec.ID, err)
		}
	}
	l.log.Debug("cold boot phases", "sandbox", spec.ID, "power_off_ms", ms(began.Sub(t0)),
		"start_ms", ms(started.Sub(began)), "ready_ms", ms(time.Since(started)))
	return time.Since(began), nil
}
