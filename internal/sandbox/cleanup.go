package sandbox

import (
	"context"
	"log/slog"
)

// cleanups is an undo list built while a sandbox is being made: on failure
// every step runs, newest first, so nothing half-made is left behind.
type cleanups struct {
	steps []cleanupStep
}

type cleanupStep struct {
	what string
	fn   func(context.Context) error
}

func (c *cleanups) add(what string, fn func(context.Context) error) {
	c.steps = append(c.steps, cleanupStep{what, fn})
}

// run undoes every step under a context that no request can cancel.
func (c *cleanups) run(log *slog.Logger) {
	ctx := context.Background()
	for i := len(c.steps) - 1; i >= 0; i-- {
		if err := c.steps[i].fn(ctx); err != nil {
			log.Warn("cleanup failed", "step", c.steps[i].what, "err", err)
		}
	}
	c.steps = nil
}
