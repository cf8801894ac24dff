package sandbox

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/warrenhq/warren/internal/agentconn"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/runtime"
)

// initSignaller is implemented by runtimes that can signal a sandbox's
// PID 1.
type initSignaller interface {
	SignalInit(ctx context.Context, id string, sig syscall.Signal) error
}

// Stop ends a sandbox's processes and keeps its filesystem. With grace > 0
// the processes get SIGTERM first (through PID 1, the agent, which passes it
// on) and grace to exit before everything is killed. It returns whether the
// processes exited by themselves.
func (l *lifecycle) Stop(ctx context.Context, id string, grace time.Duration, conn *agentconn.Conn) (graceful bool, err error) {
	ctx = context.WithoutCancel(ctx)
	if s, ok := l.runtime.(initSignaller); ok && grace > 0 {
		if err := l.runtime.Resume(ctx, id); err != nil && !errdefs.IsNotFound(err) {
			l.log.Debug("thaw before stop", "sandbox", id, "err", err)
		}
		if err := s.SignalInit(ctx, id, syscall.SIGTERM); err == nil {
			deadline := time.Now().Add(grace)
			for time.Now().Before(deadline) {
				st, err := l.runtime.Status(ctx, id)
				if err != nil || st.State == runtime.StateStopped {
					graceful = true
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	if conn != nil {
		conn.Close()
	}
	if err := l.runtime.Destroy(ctx, id); err != nil && !errdefs.IsNotFound(err) {
		return graceful, err
	}
	if l.images != "" {
		// A hibernated sandbox's processes, stopped on disk.
		if err := removeMemoryImage(l.images.hibernationImage(id)); err != nil {
			return graceful, err
		}
	}
	// A stopped sandbox never runs again: its network goes now (or, if
	// that fails, when it is deleted).
	if err := l.net.teardownNetwork(ctx, id); err != nil {
		l.log.Warn("tear down the network of a stopped sandbox", "sandbox", id, "err", err)
	}
	return graceful, nil
}

// limitUpdater is implemented by runtimes that can change a running
// sandbox's limits in place.
type limitUpdater interface {
	UpdateLimits(ctx context.Context, id string, l runtime.Limits) error
}

// UpdateLimits changes a running sandbox's limits.
func (l *lifecycle) UpdateLimits(ctx context.Context, id string, limits runtime.Limits) error {
	u, ok := l.runtime.(limitUpdater)
	if !ok {
		return fmt.Errorf("the %s runtime cannot change limits of a running sandbox: %w", l.runtime.Name(), errdefs.ErrUnsupported)
	}
	return u.UpdateLimits(ctx, id, limits)
}

// Pause freezes a sandbox's processes.
func (l *lifecycle) Pause(ctx context.Context, id string) error {
	if !l.runtime.Capabilities().Pause {
		return fmt.Errorf("the %s runtime cannot pause: %w", l.runtime.Name(), errdefs.ErrUnsupported)
	}
	return l.runtime.Pause(ctx, id)
}

// Resume thaws a sandbox's processes and waits until its agent answers
// again (a frozen agent's connection may have been dropped meanwhile; it
// re-dials by itself).
func (l *lifecycle) Resume(ctx context.Context, id string, conn *agentconn.Conn) error {
	if err := l.runtime.Resume(ctx, id); err != nil {
		return err
	}
	if conn == nil {
		return nil
	}
	return l.sockets.waitReady(ctx, conn)
}
