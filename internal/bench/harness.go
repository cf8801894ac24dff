package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/template"
)

// harness is a daemon on a throwaway data directory, serving its API on
// loopback, with a client holding the admin key and a template to start
// sandboxes from. Every suite runs against one.
type harness struct {
	cfg  config.Config
	d    *daemon.Daemon
	c    *client.Client
	addr string // the API's host:port
	key  string // its admin key
	tmpl string
	log  *slog.Logger

	stop func()
	wg   sync.WaitGroup
}

// startHarness opens the daemon with cfg (DataDir, Storage and AgentBinary
// taken from opts), builds a busybox template unless opts names one, and
// serves the API. On error nothing is left mounted or running.
func startHarness(ctx context.Context, opts Options, tune func(*config.Config)) (_ *harness, retErr error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg := config.Default()
	cfg.DataDir = opts.DataDir
	cfg.Listen = "127.0.0.1:0"
	cfg.BuildBase = false
	// Its own cgroup parent, removed at close: the shared default would be
	// removed under a daemon serving on this host (or another bench run)
	// while it makes a sandbox's cgroup there.
	cfg.CgroupParent = "warren-bench-" + ids.New(8)
	if opts.Storage != "" {
		cfg.Storage = opts.Storage
	}
	if opts.AgentBinary != "" {
		cfg.AgentBinary = opts.AgentBinary
	}
	if tune != nil {
		tune(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d, err := daemon.Open(ctx, cfg, opts.Log)
	if err != nil {
		return nil, errors.Join(err, unmountPool(context.WithoutCancel(ctx), cfg, opts.Log))
	}
	h := &harness{cfg: cfg, d: d, log: opts.Log, stop: func() {}}
	defer func() {
		if retErr != nil {
			retErr = errors.Join(retErr, h.close())
		}
	}()
	if err := d.EnsureAdminKey(ctx, io.Discard); err != nil {
		return h, err
	}
	h.tmpl = opts.Template
	if h.tmpl == "" {
		h.tmpl = "bench"
		if _, err := d.Templates.Build(ctx, h.tmpl, template.Source{Busybox: true}, daemon.BuildOptions{Replace: true}); err != nil {
			return h, fmt.Errorf("build bench template: %w", err)
		}
	}
	key, err := os.ReadFile(cfg.AdminKeyPath())
	if err != nil {
		return h, err
	}

	serveCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	h.stop = stop
	addrc := make(chan string, 1)
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		if err := d.Serve(serveCtx, func(addr string) { addrc <- addr }); err != nil {
			opts.Log.Error("serve", "err", err)
		}
	}()
	var addr string
	select {
	case addr = <-addrc:
	case <-time.After(10 * time.Second):
		return h, errors.New("bench daemon did not start serving")
	}
	h.addr = addr
	// Concurrent callers (up to 50 sandboxes at once in the concurrency
	// item) each keep their connection, as agents with their own clients
	// would: Go's default keeps 2 idle per host, and the rest would time a
	// new connection per call.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	h.key = string(trimNL(key))
	h.c = client.New("http://"+addr, h.key, client.WithHTTPClient(&http.Client{Transport: tr}))
	return h, nil
}

// close deletes every sandbox still alive (a suite that failed half-way
// leaves some), stops serving, closes the daemon and unmounts its pool.
func (h *harness) close() error {
	var errs []error
	if h.c != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if err := deleteAllSandboxes(ctx, h.c); err != nil {
			errs = append(errs, fmt.Errorf("delete bench sandboxes: %w", err))
		}
		cancel()
	}
	h.stop()
	h.wg.Wait()
	h.d.Close()
	if r, ok := h.d.Runtime.(interface{ RemoveParentCgroups() }); ok {
		r.RemoveParentCgroups()
	}
	if u, ok := h.d.Storage.(interface{ Unmount() error }); ok {
		if err := unmountRetrying(u); err != nil {
			errs = append(errs, fmt.Errorf("unmount bench pool: %w", err))
		}
	}
	return errors.Join(errs...)
}

// unmountRetrying unmounts the pool, retrying for a few seconds while it is
// busy: the teardown of sandboxes deleted just before can hold it briefly.
func unmountRetrying(u interface{ Unmount() error }) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := u.Unmount()
		if err == nil || !errdefs.IsConflict(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// deleteAllSandboxes deletes every sandbox the API lists.
func deleteAllSandboxes(ctx context.Context, c *client.Client) error {
	var ids []string
	token := ""
	for {
		page, next, err := c.Sandboxes.List(ctx, client.ListOptions{NextToken: token})
		if err != nil {
			return err
		}
		for _, sb := range page {
			ids = append(ids, sb.SandboxID)
		}
		if next == "" {
			break
		}
		token = next
	}
	var errs []error
	for _, id := range ids {
		if err := c.Sandboxes.Delete(ctx, id); err != nil && client.StatusCode(err) != 404 {
			errs = append(errs, fmt.Errorf("sandbox %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}
