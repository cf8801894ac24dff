package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/warrenhq/warren/client"
)

// ConcurrencyLevel is the core suite's per-sandbox operations timed with n
// sandboxes busy at once: each sample is one client's call while the others
// make theirs. Each figure has the JSON name of its single-sandbox twin.
type ConcurrencyLevel struct {
	Sandboxes int `json:"sandboxes"`
	// Create: POST /sandboxes to first output, all n at once.
	Create Stats `json:"create_to_first_output"`
	// Exec: `true` through the API, every sandbox in a loop at once.
	Exec Stats `json:"exec_true_api"`
	// Write4KiB, Read4KiB: PUT and GET /sandboxes/{id}/files of 4 KiB,
	// every sandbox in a loop at once (all the writes, then all the reads).
	Write4KiB Stats `json:"write_4kib"`
	Read4KiB  Stats `json:"read_4kib"`
	// Pause, Resume: every sandbox paused at once, then every one resumed
	// at once (resume includes the agent answering again).
	Pause  Stats `json:"pause"`
	Resume Stats `json:"resume"`
	// PortRoute: GET through the daemon's port route, by headers, to busybox
	// httpd in each sandbox, every sandbox's client in a loop at once.
	PortRoute Stats `json:"port_route_headers"`
	// Turn: a turn snapshot of every sandbox at once.
	Turn Stats `json:"turn"`
	// Fork1: POST /fork ×1 of every sandbox's live state at once, until
	// each fork runs (the forks are deleted after, untimed).
	Fork1 Stats `json:"fork_x1"`
	// Delete: every sandbox deleted at once.
	Delete Stats `json:"delete"`
}

// measureConcurrency runs the level for each n in opts.Concurrency, one
// after the other, each with its own sandboxes.
func measureConcurrency(ctx context.Context, h *harness, opts Options) ([]ConcurrencyLevel, error) {
	var out []ConcurrencyLevel
	for _, n := range opts.Concurrency {
		lvl, err := concurrencyLevel(ctx, h, n, opts)
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

// timedTogether runs fn(i) for i in 0..n-1 at once and times each call.
func timedTogether(n int, fn func(i int) error) ([]time.Duration, error) {
	return together(n, func(i int) (time.Duration, error) {
		start := time.Now()
		err := fn(i)
		return time.Since(start), err
	})
}

// inLoops has each of n clients call fn(i) k times in a row, all at once,
// and times every call.
func inLoops(n, k int, fn func(i int) error) ([]time.Duration, error) {
	var mu sync.Mutex
	var out []time.Duration
	_, err := together(n, func(i int) (time.Duration, error) {
		for range k {
			start := time.Now()
			if err := fn(i); err != nil {
				return 0, err
			}
			d := time.Since(start)
			mu.Lock()
			out = append(out, d)
			mu.Unlock()
		}
		return 0, nil
	})
	return out, err
}

// roundsFor is how many rounds of n calls at once make at least want
// samples: fewer as n grows, and always one.
func roundsFor(n, want int) int {
	return max(1, (want+n-1)/n)
}

// concurrencyLevel times every operation with n sandboxes at once. The
// loops (exec, files, port route) make opts.ExecsEach calls per sandbox;
// pause and resume take rounds enough for opts.ExecsEach samples, forks
// for opts.ForkRounds, so that a level of one still has a few.
func concurrencyLevel(ctx context.Context, h *harness, n int, opts Options) (ConcurrencyLevel, error) {
	lvl := ConcurrencyLevel{Sandboxes: n}
	c, k := h.c, opts.ExecsEach
	sbs := make([]client.Sandbox, n)
	ids := make([]string, n)
	defer func() {
		for _, id := range ids {
			if id != "" {
				_ = c.Sandboxes.Delete(context.WithoutCancel(ctx), id)
			}
		}
	}()
	var err error
	if lvl.Create, err = summarised(createTogether(ctx, h, sbs, ids)); err != nil {
		return lvl, fmt.Errorf("create: %w", err)
	}

	small := make([]byte, 4<<10)
	if _, err := rand.Read(small); err != nil {
		return lvl, err
	}
	const smallPath = "/workspace/small.bin"
	// Each step leaves every sandbox running for the next.
	steps := []struct {
		name string
		run  func() error
	}{
		{"exec", func() (err error) {
			lvl.Exec, err = summarised(inLoops(n, k, func(i int) error {
				res, err := c.Commands.ExecWait(ctx, ids[i], client.ExecRequest{Cmd: []string{"true"}})
				if err == nil && res.ExitCode != 0 {
					err = fmt.Errorf("true exited %d", res.ExitCode)
				}
				return err
			}))
			return err
		}},
		{"write 4 KiB", func() (err error) {
			lvl.Write4KiB, err = summarised(inLoops(n, k, func(i int) error { return putFile(ctx, c, ids[i], smallPath, small) }))
			return err
		}},
		{"read 4 KiB", func() (err error) {
			lvl.Read4KiB, err = summarised(inLoops(n, k, func(i int) error { return getFile(ctx, c, ids[i], smallPath, len(small)) }))
			return err
		}},
		{"pause", func() (err error) {
			lvl.Pause, lvl.Resume, err = pauseResumeTogether(ctx, c, ids, roundsFor(n, k))
			return err
		}},
		{"port route", func() (err error) {
			lvl.PortRoute, err = summarised(portRouteTogether(ctx, h, sbs, k))
			return err
		}},
		{"turn", func() (err error) {
			lvl.Turn, err = summarised(timedTogether(n, func(i int) error { _, err := c.Snapshots.Turn(ctx, ids[i]); return err }))
			return err
		}},
		{"fork ×1", func() (err error) {
			lvl.Fork1, err = summarised(forkTogether(ctx, c, ids, roundsFor(n, opts.ForkRounds)))
			return err
		}},
		{"delete", func() (err error) {
			lvl.Delete, err = summarised(timedTogether(n, func(i int) error {
				err := c.Sandboxes.Delete(ctx, ids[i])
				if err == nil {
					ids[i] = ""
				}
				return err
			}))
			return err
		}},
	}
	for _, s := range steps {
		if err := s.run(); err != nil {
			return lvl, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return lvl, nil
}

// createTogether creates len(sbs) sandboxes at once, each until its first
// output, and fills in sbs and ids as they come (ids for the caller to
// delete, also after an error).
func createTogether(ctx context.Context, h *harness, sbs []client.Sandbox, ids []string) ([]time.Duration, error) {
	return together(len(sbs), func(i int) (time.Duration, error) {
		start := time.Now()
		sb, err := h.c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: h.tmpl})
		if err != nil {
			return 0, err
		}
		sbs[i], ids[i] = sb, sb.SandboxID
		fw := &firstWrite{}
		if _, err := h.c.Commands.Exec(ctx, sb.SandboxID, client.ExecRequest{Cmd: []string{"echo", "ready"}}, fw, io.Discard); err != nil {
			return 0, err
		}
		return fw.at.Sub(start), nil
	})
}

// summarised is Summarise for a call that returns samples and an error.
func summarised(samples []time.Duration, err error) (Stats, error) {
	if err != nil {
		return Stats{}, err
	}
	return Summarise(samples), nil
}

// pauseResumeTogether pauses every sandbox at once, then resumes every one
// at once, rounds times.
func pauseResumeTogether(ctx context.Context, c *client.Client, ids []string, rounds int) (pause, resume Stats, _ error) {
	var pauses, resumes []time.Duration
	for range rounds {
		p, err := timedTogether(len(ids), func(i int) error { return c.Lifecycle.Pause(ctx, ids[i]) })
		if err != nil {
			return pause, resume, fmt.Errorf("pause: %w", err)
		}
		r, err := timedTogether(len(ids), func(i int) error { _, err := c.Lifecycle.Resume(ctx, ids[i]); return err })
		if err != nil {
			return pause, resume, fmt.Errorf("resume: %w", err)
		}
		pauses, resumes = append(pauses, p...), append(resumes, r...)
	}
	return Summarise(pauses), Summarise(resumes), nil
}

// forkTogether forks every sandbox's live state once, all at once, rounds
// times; the forks are deleted after each round, before the next is timed.
func forkTogether(ctx context.Context, c *client.Client, ids []string, rounds int) ([]time.Duration, error) {
	var mu sync.Mutex
	var forks []string
	deleteForks := func(ctx context.Context) error {
		_, err := timedTogether(len(forks), func(i int) error { return c.Sandboxes.Delete(ctx, forks[i]) })
		forks = nil
		return err
	}
	defer func() { _ = deleteForks(context.WithoutCancel(ctx)) }() // after an error
	var out []time.Duration
	for range rounds {
		took, err := together(len(ids), func(i int) (time.Duration, error) {
			took, made, err := forkTimed(ctx, c, ids[i], 1)
			mu.Lock()
			forks = append(forks, made...)
			mu.Unlock()
			return took, err
		})
		if err != nil {
			return nil, err
		}
		out = append(out, took...)
		if err := deleteForks(ctx); err != nil {
			return nil, fmt.Errorf("delete the forks: %w", err)
		}
	}
	return out, nil
}

// portRouteTogether starts busybox httpd in every sandbox and waits until
// each answers through the daemon's port route (untimed); then every
// sandbox's client, an HTTP client of its own, makes k GETs in a loop at
// once. The clients run in this process, beside the daemon, as the other
// clients of the concurrency item do.
func portRouteTogether(ctx context.Context, h *harness, sbs []client.Sandbox, k int) ([]time.Duration, error) {
	n := len(sbs)
	hcs := make([]*http.Client, n)
	reqs := make([]HTTPRequest, n)
	for i, sb := range sbs {
		hcs[i], _ = newHTTPClient("") // no CA: cannot fail
		reqs[i] = h.routedByHeaders(sb)
	}
	defer func() {
		for _, hc := range hcs {
			hc.CloseIdleConnections()
		}
	}()
	fetch := func(i int) error { return get(ctx, hcs[i], reqs[i]) }
	if _, err := timedTogether(n, func(i int) error {
		if err := startHTTPD(ctx, h.c, sbs[i].SandboxID); err != nil {
			return err
		}
		return untilOK(ctx, func() error { return fetch(i) })
	}); err != nil {
		return nil, err
	}
	return inLoops(n, k, fetch)
}
