package agentconn

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
	"github.com/warrenhq/warren/internal/errdefs"
)

// retryDelay spaces Pings to a connection that did not answer.
const retryDelay = 20 * time.Millisecond

// WaitReady blocks until an agent connection is up and answers Ping, or ctx
// ends.
func (c *Conn) WaitReady(ctx context.Context) error {
	var lastErr error
	for {
		cc, changed := c.current()
		if cc != nil {
			pctx, cancel := context.WithTimeout(ctx, pingTimeout)
			_, err := c.process.Ping(pctx, connect.NewRequest(&agentv1.PingRequest{}))
			cancel()
			if err == nil {
				return nil
			}
			lastErr = err
			// Try again soon, or as soon as a new connection arrives.
			t := time.NewTimer(retryDelay)
			select {
			case <-ctx.Done():
				t.Stop()
				return c.notReady(ctx, lastErr)
			case <-changed:
			case <-t.C:
			}
			t.Stop()
			continue
		}
		select {
		case <-ctx.Done():
			return c.notReady(ctx, lastErr)
		case <-changed:
		}
	}
}

func (c *Conn) notReady(ctx context.Context, last error) error {
	if last != nil {
		return fmt.Errorf("agent on %s not ready (%v; last ping: %v): %w", c.path, ctx.Err(), last, errdefs.ErrUnavailable)
	}
	return fmt.Errorf("no agent connected on %s (%v): check that the sandbox started and its agent runs: %w", c.path, ctx.Err(), errdefs.ErrUnavailable)
}
