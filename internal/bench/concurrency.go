package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/warrenhq/warren/client"
)

// ConcurrencyLevel is the core operations timed with n sandboxes busy at
// once: each sample is one client's call while the others make theirs.
type ConcurrencyLevel struct {
	Sandboxes int `json:"sandboxes"`
	// Create: POST /sandboxes to first output, all n at once.
	Create Stats `json:"create_to_first_output"`
	// Exec: `true` through the API, every sandbox in a loop at once.
	Exec Stats `json:"exec_true_api"`
	// Turn: a turn snapshot of every sandbox at once.
	Turn Stats `json:"turn"`
	// Delete: every sandbox deleted at once.
	Delete Stats `json:"delete"`
}

// measureConcurrency runs the level for each n in levels, one after the
// other, each with its own sandboxes.
func measureConcurrency(ctx context.Context, c *client.Client, tmpl string, levels []int, execsEach int) ([]ConcurrencyLevel, error) {
	var out []ConcurrencyLevel
	for _, n := range levels {
		lvl, err := concurrencyLevel(ctx, c, tmpl, n, execsEach)
		if err != nil {
			return out, fmt.Errorf("%d at once: %w", n, err)
		}
		out = append(out, lvl)
	}
	return out, nil
}

// together runs fn(i) for i in 0..n-1 at once and collects each call's
// duration; the first error wins.
func together(n int, fn func(i int) (time.Duration, error)) ([]time.Duration, error) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	var out []time.Duration
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			d, err := fn(i)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			out = append(out, d)
		}(i)
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

func concurrencyLevel(ctx context.Context, c *client.Client, tmpl string, n, execsEach int) (ConcurrencyLevel, error) {
	lvl := ConcurrencyLevel{Sandboxes: n}
	ids := make([]string, n)
	defer func() {
		for _, id := range ids {
			if id != "" {
				_ = c.DeleteSandbox(context.WithoutCancel(ctx), id)
			}
		}
	}()
	created, err := together(n, func(i int) (time.Duration, error) {
		start := time.Now()
		sb, err := c.CreateSandbox(ctx, client.NewSandbox{TemplateID: tmpl})
		if err != nil {
			return 0, err
		}
		ids[i] = sb.SandboxID
		fw := &firstWrite{}
		if _, err := c.Exec(ctx, sb.SandboxID, client.ExecRequest{Cmd: []string{"echo", "ready"}}, fw, io.Discard); err != nil {
			return 0, err
		}
		return fw.at.Sub(start), nil
	})
	if err != nil {
		return lvl, fmt.Errorf("create: %w", err)
	}
	lvl.Create = Summarise(created)

	var mu sync.Mutex
	var execs []time.Duration
	if _, err := together(n, func(i int) (time.Duration, error) {
		for j := 0; j < execsEach; j++ {
			start := time.Now()
			res, err := c.ExecWait(ctx, ids[i], client.ExecRequest{Cmd: []string{"true"}})
			if err != nil {
				return 0, err
			}
			if res.ExitCode != 0 {
				return 0, fmt.Errorf("true exited %d", res.ExitCode)
			}
			mu.Lock()
			execs = append(execs, time.Since(start))
			mu.Unlock()
		}
		return 0, nil
	}); err != nil {
		return lvl, fmt.Errorf("exec: %w", err)
	}
	lvl.Exec = Summarise(execs)

	turns, err := together(n, func(i int) (time.Duration, error) {
		start := time.Now()
		_, err := c.Turn(ctx, ids[i])
		return time.Since(start), err
	})
	if err != nil {
		return lvl, fmt.Errorf("turn: %w", err)
	}
	lvl.Turn = Summarise(turns)

	deleted, err := together(n, func(i int) (time.Duration, error) {
		start := time.Now()
		err := c.DeleteSandbox(ctx, ids[i])
		if err == nil {
			ids[i] = ""
		}
		return time.Since(start), err
	})
	if err != nil {
		return lvl, fmt.Errorf("delete: %w", err)
	}
	lvl.Delete = Summarise(deleted)
	return lvl, nil
}
