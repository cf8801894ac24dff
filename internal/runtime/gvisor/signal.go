package gvisor

import (
	"context"
	"fmt"
	"strconv"
	"syscall"
)

// SignalInit sends sig to the sandbox's PID 1 (runsc kill), the agent,
// which forwards SIGTERM to every process of the sandbox and then exits.
func (l *lifecycle) SignalInit(ctx context.Context, id string, sig syscall.Signal) error {
	unlock := l.locks.Lock(id)
	defer unlock()
	if _, err := l.status(ctx, id); err != nil {
		return err
	}
	if _, err := l.runsc.out(ctx, "kill", id, strconv.Itoa(int(sig))); err != nil {
		return fmt.Errorf("sandbox %s: signal %v: %w", id, sig, err)
	}
	return nil
}
