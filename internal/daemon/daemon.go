// Package daemon is warren's composition root: configuration in, backends
// and services built and wired, the API served. It is the only package that
// imports concrete backends.
package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/accesstoken"
	"github.com/warrenhq/warren/internal/commands"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/devices"
	"github.com/warrenhq/warren/internal/diskshare"
	"github.com/warrenhq/warren/internal/mcpserver"
	"github.com/warrenhq/warren/internal/metrics"
	"github.com/warrenhq/warren/internal/procs"
	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/runtime/runtimeset"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/sandboxlog"
	"github.com/warrenhq/warren/internal/secrets"
	"github.com/warrenhq/warren/internal/server"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/sharedvol"
	"github.com/warrenhq/warren/internal/startgate"
	"github.com/warrenhq/warren/internal/storage"
	"github.com/warrenhq/warren/internal/storage/btrfs"
	"github.com/warrenhq/warren/internal/storage/dir"
	"github.com/warrenhq/warren/internal/store"
	"github.com/warrenhq/warren/internal/template"
	"github.com/warrenhq/warren/internal/tplbuild"
)

// The host exports and imports snapshots (session finds it by assertion).
var _ session.TransferHost = (*sandbox.Host)(nil)

// Version is warren's version, set at build time.
var Version = "0.1.0-dev"

// Base is the name of the default template.
const Base = "base"

// Daemon holds warren's services.
type Daemon struct {
	cfg       config.Config
	log       *slog.Logger
	Storage   storage.Storage
	Store     *store.Store
	Templates *Templates
	Runtime   runtime.Runtime
	Sessions  *session.Manager
	Host      *sandbox.Host
	Procs     *procs.Manager
	Logs      *sandboxlog.Logs
	Metrics   *metrics.Metrics
	Networks  *sandbox.Networks
	Volumes   *sharedvol.Service
	Devices   *devices.Service
	Secrets   *secrets.Service
	audit     *networkAudit
	runtimes  []client.RuntimeInfo // for GET /health
	// share keeps the pool's reserve (nil: none); Serve runs it.
	share *diskshare.Share
	// starts bounds the sandbox starts at once (--max-concurrent-starts).
	starts *startgate.Gate

	// stopMetrics stops the sampler Serve started and waits for it.
	stopMetrics func()
	// cluster is node mode (--cluster kubernetes) once Serve started it;
	// the session service's events nudge it from their goroutines.
	cluster atomic.Pointer[nodeModeRef]
}

// OpenStorage opens the data directory's pool and database: all that
// building templates needs.
func OpenStorage(ctx context.Context, cfg config.Config, log *slog.Logger) (_ *Daemon, retErr error) {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("make data dir: %w", err)
	}
	d := &Daemon{cfg: cfg, log: log}
	defer func() {
		if retErr != nil {
			d.Close()
		}
	}()
	switch cfg.Storage {
	case "dir":
		st, err := dir.New(filepath.Join(cfg.DataDir, "volumes"))
		if err != nil {
			return nil, fmt.Errorf("open dir storage: %w", err)
		}
		d.Storage = st
	default:
		st, err := btrfs.Open(ctx, btrfs.Options{DataDir: cfg.DataDir, ImageSize: cfg.ImageSize, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("open btrfs storage: %w", err)
		}
		d.Storage = st
	}
	db, err := store.Open(ctx, cfg.DBPath())
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	d.Store = db
	d.Templates = &Templates{
		Storage: d.Storage,
		Store:   db,
		Builder: &template.Builder{Storage: d.Storage, Log: log, CacheDir: cfg.CacheDir},
		Log:     log,
	}
	return d, nil
}

// Open builds every service of the daemon and reattaches to the sandboxes
// an earlier daemon left running.
func Open(ctx context.Context, cfg config.Config, log *slog.Logger) (_ *Daemon, retErr error) {
	// Every failure the daemon logs is also kept for GET /health.
	errs := metrics.NewErrors(0, nil)
	log = slog.New(errs.Handler(log.Handler()))
	d, err := OpenStorage(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if retErr != nil {
			d.Close()
		}
	}()
	if cfg.CgroupFavorDynmods {
		favorDynmods(log)
	}
	rt, runtimes, err := openRuntimes(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	d.Runtime, d.runtimes = rt, runtimes
	usernsOn, usernsOff, err := userNSMode(cfg, filepath.Dir(d.Storage.Path(storage.Key{Kind: storage.KindSandbox})), log)
	if err != nil {
		return nil, err
	}
	markUserNS(d.runtimes, rt.CapabilitiesOf, usernsOn, usernsOff)
	d.Logs = sandboxlog.New(sandboxlog.Options{Dir: cfg.SandboxLogDir(), MaxBytes: cfg.SandboxLogBytes, Log: log})
	d.Procs = procs.New(procs.Options{Dir: filepath.Join(cfg.DataDir, "procs"), Log: log, Sink: d.Logs, OnOutput: func(id string) {
		if d.Sessions != nil {
			d.Sessions.Touch(id)
		}
	}})
	d.audit = newNetworkAudit(d.Store, d.Logs, log)
	if d.Networks, err = newNetworks(cfg, d.audit, log); err != nil {
		return nil, err
	}
	d.Volumes = sharedvol.New(d.Storage, d.Store, cfg.VolumeSizeBytes, log)
	d.Devices = newDevices(cfg, d.Store, log)
	if err := d.openEgress(cfg, log); err != nil {
		return nil, err
	}
	d.starts = startgate.New(cfg.StartLimit())
	d.Host = sandbox.New(d.hostConfig(cfg, rt, usernsOn, log))
	share, defaultDisk, err := diskshare.New(ctx, d.Storage, diskshare.Options{DefaultQuota: cfg.DefaultDiskBytes, Reserve: cfg.DiskReserveBytes, Log: log})
	if err != nil {
		return nil, err
	}
	d.share = share
	d.Metrics = d.newMetrics(errs)
	d.Sessions = session.New(d.sessionConfig(rt.Name(), defaultDisk), d.Store, d.Host, log)
	d.reconcileStorage(ctx)
	startNetworkIfNeeded(ctx, d.Networks, d.Store, log)
	if err := d.Sessions.Recover(ctx); err != nil {
		log.Warn("reconcile sandboxes", "err", err)
	}
	// After the reconcile, which forgets the sandboxes whose destroy a
	// crash cut short.
	d.releaseOrphanDevices(ctx)
	return d, nil
}

// hostConfig is the sandbox host's configuration: the daemon's parts it
// drives and the flags that shape each sandbox.
func (d *Daemon) hostConfig(cfg config.Config, rt *runtimeset.Set, usernsOn bool, log *slog.Logger) sandbox.Config {
	hostCfg := sandbox.Config{
		Network:     d.Networks,
		Storage:     d.Storage,
		Runtime:     rt,
		RunDir:      cfg.RunDir(),
		MemoryDir:   cfg.MemoryDir(),
		AgentBinary: cfg.AgentBinary,
		Procs:       d.Procs,
		Logs:        d.Logs,
		Log:         log,
		NoNewPrivileges: func(template string) bool {
			return noNewPrivileges(cfg.NoNewPrivileges, d.Store, template, log)
		},
		VolumeMounts: d.Volumes.MountsOf,
		// Set without --userns too: its sandboxes are recovered and freed.
		UserNS:   usernsRanges{store: d.Store, base: cfg.UserNSBase, slots: cfg.UserNSSlots},
		UserNSOn: usernsOn,
		Devices:  d.Devices.EditsOf,
		Starts:   d.starts,
	}
	if cfg.AgentLogs {
		hostCfg.LogDir = cfg.LogDir()
	}
	return hostCfg
}

// sessionConfig is the session service's configuration: the flags, the
// default runtime's name and the default disk quota diskshare picked.
func (d *Daemon) sessionConfig(runtimeName string, defaultDisk int64) session.Config {
	return session.Config{
		RuntimeName:     runtimeName,
		MaxSandboxes:    d.cfg.MaxSandboxes,
		DefaultLimits:   d.cfg.DefaultLimits,
		MaxLimits:       d.cfg.MaxLimits,
		DefaultTimeout:  d.cfg.DefaultTimeout,
		RequireTimeout:  !d.cfg.AllowNoTimeout,
		MaxTurns:        d.cfg.MaxTurns,
		Pools:           sessionPools(d.cfg),
		IdleTimeout:     d.cfg.IdleTimeout,
		IdleAction:      d.cfg.IdleAction,
		PausedRetention: d.cfg.PausedRetention,
		ArchiveAfter:    d.cfg.ArchiveAfter,
		AnchorEvery:     d.cfg.AnchorEvery,
		DefaultDisk:     defaultDisk,
		OnEvent:         d.onEvent,
		OnTimeout:       d.Metrics.CountTimeout,
		Volumes:         d.Volumes,
		Devices:         deviceClaimer{svc: d.Devices, runtime: d.Runtime},
	}
}

// reconcileStorage drops what the pool holds of templates and volumes that
// have no record (a build or a delete a crash cut short).
func (d *Daemon) reconcileStorage(ctx context.Context) {
	if err := d.Templates.Reconcile(ctx); err != nil {
		d.log.Warn("reconcile templates", "err", err)
	}
	if err := d.Volumes.Reconcile(ctx); err != nil {
		d.log.Warn("reconcile shared volumes", "err", err)
	}
}

// EnsureAdminKey makes the admin key on first start: it is printed once,
// written to <data-dir>/admin.key (mode 0600) for the local CLI, and only
// its hash is stored.
func (d *Daemon) EnsureAdminKey(ctx context.Context, out io.Writer) error {
	n, err := d.Store.CountAPIKeys(ctx)
	if err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	plain, _, err := d.Store.CreateAPIKey(ctx, server.AdminTeam, "admin")
	if err != nil {
		return fmt.Errorf("create admin key: %w", err)
	}
	if err := os.WriteFile(d.cfg.AdminKeyPath(), []byte(plain+"\n"), 0o600); err != nil {
		return fmt.Errorf("write admin key: %w", err)
	}
	fmt.Fprintf(out, "warren: created the admin API key (shown once; also in %s):\n  %s\n", d.cfg.AdminKeyPath(), plain)
	return nil
}

// Serve serves the API until ctx is cancelled. Sandboxes keep running after
// it returns.
func (d *Daemon) Serve(ctx context.Context, ready func(addr string)) error {
	tokens, err := accesstoken.Load(d.cfg.AccessKeyPath())
	if err != nil {
		return err
	}
	tools, err := toolCatalogue(ctx, d.cfg.AgentBinary)
	if err != nil {
		d.log.Warn("GET /tools will list no tools", "err", err)
	}
	tlsLn, caPEM, err := d.tlsListener()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", d.cfg.Listen)
	if err != nil {
		if tlsLn != nil {
			tlsLn.Close()
		}
		return fmt.Errorf("listen on %s: %w", d.cfg.Listen, err)
	}
	cmds := commands.New(d.Sessions, d.Logs, d.Procs, d.cfg.OutputLimit)
	api := server.New(d.apiDeps(tokens, tools, caPEM, ln.Addr(), cmds))
	srv := newHTTPServer(api)
	// Node mode publishes the address the API listens on, so it starts
	// once that is known, and before the first request.
	if err := d.startCluster(ctx, ln.Addr().String()); err != nil {
		ln.Close()
		if tlsLn != nil {
			tlsLn.Close()
		}
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	d.Sessions.Start(runCtx)
	shareDone := make(chan struct{})
	go func() { defer close(shareDone); d.share.Run(runCtx, shareEvery) }()
	defer func() { stop(); <-shareDone }()
	d.stopMetrics = d.Metrics.Start(runCtx)
	served := []listening{{srv, ln}}
	if tlsLn != nil {
		served = append(served, d.tlsServer(api, tlsLn, caPEM != nil))
	}
	d.log.Info("warren is serving", "addr", ln.Addr().String(), "data", d.cfg.DataDir, "storage", d.Storage.Name())
	return serveUntil(ctx, served, func() {
		if ready != nil {
			ready(ln.Addr().String())
		}
	})
}

// apiDeps is what the API serves from: this daemon's services, the access
// tokens, the tools' catalogue and the TLS CA (nil: none).
func (d *Daemon) apiDeps(tokens *accesstoken.Issuer, tools []client.Tool, caPEM []byte, addr net.Addr, cmds *commands.Service) server.Deps {
	return server.Deps{
		Tokens:         tokens,
		Domain:         d.cfg.Domain,
		MaxUploadBytes: d.cfg.MaxUploadBytes,
		MaxImportBytes: d.cfg.MaxImportBytes,
		Pull:           d.pullConfig(),
		Sessions:       d.Sessions,
		Commands:       cmds,
		Files:          cmds,
		Processes:      cmds,
		Keys:           d.Store,
		Secrets:        d.Secrets,
		Templates:      d.Templates,
		Volumes:        d.Volumes,
		Devices:        d.Devices,
		Procs:          d.Procs,
		Logs:           d.Logs,
		Tools:          tools,
		Log:            d.log,
		Runtimes:       d.runtimes,
		Health: client.Health{
			Status:  "ok",
			Version: Version,
			Storage: d.Storage.Name(),
			Runtime: d.Runtime.Name(),
		},
		Metrics:       d.Metrics,
		MetricsPublic: d.cfg.MetricsPublic,
		TLSCACert:     caPEM,

		TemplateBuilds: d.templateBuilds(cmds),
		// The MCP endpoint drives this daemon's own API over loopback, as
		// its caller (with the caller's key).
		MCP: mcpserver.HTTPHandler(mcpserver.LoopbackURL(addr), mcpserver.HTTPOptions{
			Version: Version, Logger: d.log.With("component", "mcp"),
		}),
	}
}

// templateBuilds is the template build service (E2B's Template SDK),
// with the builds a previous run left unfinished failed.
func (d *Daemon) templateBuilds(cmds *commands.Service) *tplbuild.Service {
	b := tplbuild.New(tplbuild.Config{
		Store: d.Store, Sandboxes: d.Sessions, Commands: cmds,
		Dir: filepath.Join(d.cfg.DataDir, "template-files"), Log: d.log.With("component", "tplbuild"),
		Runtimes:        d.runtimes,
		BuildImage:      d.Templates.buildImage,
		DefaultInternet: d.cfg.Network.BuildInternet,
	})
	if err := b.Recover(context.Background()); err != nil {
		d.log.Warn("fail the template builds a restart interrupted", "err", err)
	}
	return b
}

// listening is an HTTP server and the listener it serves.
type listening struct {
	srv *http.Server
	ln  net.Listener
}

// serveUntil serves every listener until ctx is cancelled (then shuts them
// down, giving requests 5 s) or one fails.
func serveUntil(ctx context.Context, served []listening, ready func()) error {
	errc := make(chan error, len(served))
	for _, l := range served {
		go func() { errc <- l.srv.Serve(l.ln) }()
	}
	ready()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, l := range served {
		if err := l.srv.Shutdown(shutCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
	}
	return nil
}

// shareEvery is how often the cap that keeps the pool's reserve follows
// what else the pool holds (diskshare.Share.Run).
const shareEvery = 10 * time.Second

// Close releases the daemon's resources. Sandboxes and the storage pool's
// mount stay, for the next daemon to reattach to.
func (d *Daemon) Close() error {
	// Node mode reads the sessions and the store closed below.
	d.stopCluster()
	if d.stopMetrics != nil {
		d.stopMetrics() // it reads the runtime and the storage closed below
	}
	var errs []error
	d.Procs.Close() // before the agent connections close under it
	if d.Sessions != nil {
		d.Sessions.Close()
	}
	// The network's rules stay in the kernel, confining the sandboxes.
	errs = append(errs, d.Networks.Close())
	if d.audit != nil {
		d.audit.close()
	}
	d.Logs.Close()
	if d.Store != nil {
		errs = append(errs, d.Store.Close())
	}
	if c, ok := d.Storage.(storage.Closer); ok {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// sessionPools turns the --pool flags (validated by Config.Validate) into
// the session's pool configuration.
func sessionPools(cfg config.Config) []session.PoolConfig {
	pools, _ := cfg.ParsePools()
	out := make([]session.PoolConfig, 0, len(pools))
	for _, p := range pools {
		out = append(out, session.PoolConfig{Template: p.Template, Min: p.Min, Max: p.Max, TTL: p.TTL, Network: p.Network, Runtime: p.Runtime})
	}
	return out
}

// eventLevel is how a sandbox's log rates a step of its life.
func eventLevel(e store.Event) string {
	switch {
	case e.Kind == "failed":
		return "error"
	case e.Cause == session.CauseTimeout || e.Cause == session.CauseError:
		return "warn"
	}
	return "info"
}

// eventLine is a step of a sandbox's life as a line of its log, e.g.
// "paused (running → paused, api)".
func eventLine(e store.Event) string {
	var b strings.Builder
	b.WriteString(e.Kind)
	b.WriteString(" (")
	if e.From != "" && e.To != "" && e.From != e.To {
		fmt.Fprintf(&b, "%s → %s, ", e.From, e.To)
	}
	b.WriteString(e.Cause)
	b.WriteString(")")
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	return b.String()
}

// toolCatalogue asks the agent binary for its tools (`warren-agent -tools`):
// the sandboxes run that binary, so what GET /tools lists is what they do.
func toolCatalogue(ctx context.Context, agentBinary string) ([]client.Tool, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, agentBinary, "-tools").Output()
	if err != nil {
		return nil, fmt.Errorf("read the tool catalogue from %s: %w", agentBinary, err)
	}
	var tools []client.Tool
	if err := json.Unmarshal(out, &tools); err != nil {
		return nil, fmt.Errorf("read the tool catalogue from %s: %w", agentBinary, err)
	}
	return tools, nil
}
