package fakenet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// ChangeTimes says when a policy change showed from inside a sandbox's
// namespace, each measured from the moment the change was asked for.
type ChangeTimes struct {
	// Denied: until a new connection to the address the change denies was
	// refused.
	Denied time.Duration
	// Allowed: until a new connection to the address the change allows
	// succeeded.
	Allowed time.Duration
	// Call: how long the change itself took (the PUT's round trip).
	Call time.Duration
}

// TimeChange measures a live policy change as a program in the sandbox sees
// it. Two probers open new TCP connections from the namespace at nsPath
// (a sandbox's network namespace), one after another about every interval:
// one to denied (host:port, reachable before the change), one to allowed
// (refused before). change is called at the same moment; each figure ends
// when a prober's attempt first came back with the new outcome. Denied
// connections are rejected with a reset, so an attempt never waits on a
// dropped SYN and each one reads the rules as they were when it was made.
func TimeChange(ctx context.Context, nsPath, denied, allowed string, interval time.Duration, change func() error) (ChangeTimes, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var (
		res  ChangeTimes
		wg   sync.WaitGroup
		errs [2]error
	)
	start := time.Now()
	for i, p := range []struct {
		addr    string
		connect bool
		out     *time.Duration
	}{{denied, false, &res.Denied}, {allowed, true, &res.Allowed}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = InNS(nsPath, func() error {
				at, err := untilDial(ctx, p.addr, p.connect, interval)
				*p.out = at.Sub(start)
				return err
			})
		}()
	}
	err := change()
	res.Call = time.Since(start)
	if err != nil {
		cancel()
	}
	wg.Wait()
	return res, errors.Join(err, errs[0], errs[1])
}

// untilDial dials addr, a new connection each time, until an attempt
// connects (connect) or fails (!connect), and returns when that attempt
// came back. It runs on a thread inside the namespace to dial from.
func untilDial(ctx context.Context, addr string, connect bool, interval time.Duration) (time.Time, error) {
	d := net.Dialer{Timeout: time.Second}
	for {
		c, err := d.DialContext(ctx, "tcp4", addr)
		at := time.Now()
		if err == nil {
			c.Close()
		}
		if ctx.Err() != nil {
			// Also when the dial failed: it may have failed for this.
			still := map[bool]string{true: "refused", false: "connects"}[connect]
			return at, fmt.Errorf("%s still %s: %w", addr, still, ctx.Err())
		}
		if (err == nil) == connect {
			return at, nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(interval):
		}
	}
}
