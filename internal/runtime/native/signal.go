package native

import (
	"context"
	"fmt"
	"syscall"
)

// SignalInit sends sig to a sandbox's PID 1 (the agent, which forwards
// SIGTERM to every process of the sandbox and then exits).
func (r *Runtime) SignalInit(ctx context.Context, id string, sig syscall.Signal) error {
	c, err := r.load(id)
	if err != nil {
		return err
	}
	if err := c.Signal(sig); err != nil {
		return fmt.Errorf("sandbox %s: signal %v: %w", id, sig, err)
	}
	return nil
}
