// Package gvisor runs sandboxes in gVisor: each sandbox is a runsc sandbox
// whose processes talk to gVisor's own kernel (the Sentry, on the systrap
// platform) instead of the host's. It drives the runsc binary with OCI
// bundles.
//
// Layout under StateDir:
//
//	runsc/             runsc --root: runsc's own state for every sandbox
//	sandboxes/<id>/    one directory per sandbox, made first and removed last:
//	    config.json    the OCI bundle's spec (its mtime is the creation time)
//	    cgroups        the host cgroup directories runsc made for it
//	    runsc.log      runsc's error messages for this sandbox
//
// The sandbox's processes (runsc-sandbox, runsc-gofer and the stubs systrap
// makes) are not children of the daemon once runsc has returned, and their
// stdio is a file, never a pipe, so they outlive a daemon restart; Recover
// finds them through runsc's state.
//
// Agent connectivity: the agent inside dials a unix socket the daemon
// listens on in a bind-mounted host directory. gVisor does not share the
// host's socket namespace; runsc's --host-uds=open lets a sandboxed process
// connect to (never create) a host socket reachable through its mounts. The
// only host socket a sandbox can reach is its own agent socket.
//
// Limits: memory and CPU apply to the whole sandbox (gVisor's kernel
// included) through the host cgroup and are shown inside by gVisor's
// cgroupfs. The pids limit maps in two places, see hostPidsLimit.
package gvisor

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/runtime"
)

// InitPath is where the runtime bind-mounts warren-gvisor-init inside each
// sandbox.
const InitPath = "/.warren/gvisor-init"

// Options configure a Runtime.
type Options struct {
	// Runsc is the runsc binary (static; built with CGO_ENABLED=0).
	Runsc string
	// Init is the static warren-gvisor-init binary (see gvisorinit): PID 1
	// runs it first to set the sandbox's own pids limit.
	Init string
	// StateDir holds runsc's state and one bundle per sandbox (e.g.
	// <data>/runtime/gvisor).
	StateDir string
	// CgroupParent is a relative cgroup path under which each sandbox gets
	// <CgroupParent>/<id>; runsc nests relative paths under its caller's
	// cgroup. Default "warren-gvisor".
	CgroupParent string
	Logger       *slog.Logger
}

// Runtime is the gvisor (runsc) runtime: one type per job, over a core they
// share (core.go).
type Runtime struct {
	*lifecycle   // start, state, pause and resume, signal, destroy, list
	*checkpoints // memory images: checkpoint and restore
	*limiter     // limits of a running sandbox, and its counters
	*prober      // whether runsc works here, and its version
	*cgroups     // the host cgroup directories of the sandboxes

	runscBin string
}

var _ runtime.Runtime = (*Runtime)(nil)

// New checks its options and returns a Runtime. It does not start
// anything: Probe tells whether runsc works on this host.
func New(opts Options) (*Runtime, error) {
	if opts.StateDir == "" {
		return nil, fmt.Errorf("gvisor runtime: StateDir is empty: %w", errdefs.ErrInvalid)
	}
	if opts.CgroupParent == "" {
		opts.CgroupParent = "warren-gvisor"
	}
	if !validCgroupParent(opts.CgroupParent) {
		return nil, fmt.Errorf("gvisor runtime: CgroupParent %q must be a relative path without '..': %w", opts.CgroupParent, errdefs.ErrInvalid)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Runsc == "" {
		return nil, fmt.Errorf("gvisor runtime: no runsc binary given; build it with `make runsc` (or see `warren serve --runsc`): %w", errdefs.ErrUnavailable)
	}
	if err := checkExecutable(opts.Runsc); err != nil {
		return nil, fmt.Errorf("gvisor runtime: runsc %s: %w; build it with `make runsc`: %w", opts.Runsc, err, errdefs.ErrUnavailable)
	}
	if opts.Init == "" {
		return nil, fmt.Errorf("gvisor runtime: no warren-gvisor-init binary given; build it with `make build`: %w", errdefs.ErrUnavailable)
	}
	if err := checkExecutable(opts.Init); err != nil {
		return nil, fmt.Errorf("gvisor runtime: warren-gvisor-init %s: %w; build it with `make build`: %w", opts.Init, err, errdefs.ErrUnavailable)
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("gvisor runtime: needs root (euid is %d): %w", os.Geteuid(), errdefs.ErrUnavailable)
	}
	for _, d := range []string{filepath.Join(opts.StateDir, "runsc"), filepath.Join(opts.StateDir, "sandboxes")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("gvisor runtime: create state dir %s: %w", d, err)
		}
	}
	host, err := probeHost()
	if err != nil {
		return nil, fmt.Errorf("gvisor runtime: %w: %w", err, errdefs.ErrUnavailable)
	}
	return compose(opts, host), nil
}

// compose builds the runtime's parts over one core.
func compose(opts Options, host hostFacts) *Runtime {
	bund := bundles{dir: filepath.Join(opts.StateDir, "sandboxes")}
	cg := &cgroups{parent: opts.CgroupParent, host: host, bundles: bund}
	c := &core{
		runsc:   &runsc{bin: opts.Runsc, root: filepath.Join(opts.StateDir, "runsc")},
		bundles: bund,
		cgroups: cg,
		log:     opts.Logger.With("runtime", "gvisor"),
	}
	specs := specWriter{init: opts.Init, host: host, cgroups: cg}
	lc := &lifecycle{core: c, specs: specs}
	return &Runtime{
		lifecycle:   lc,
		checkpoints: &checkpoints{core: c, starter: lc},
		limiter:     &limiter{core: c, host: host},
		prober:      &prober{core: c, stateDir: opts.StateDir, specs: specs},
		cgroups:     cg,
		runscBin:    opts.Runsc,
	}
}

func checkExecutable(path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("path must be absolute")
	}
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("not an executable file")
	}
	return nil
}

// Name returns "gvisor".
func (r *Runtime) Name() string { return "gvisor" }

// Capabilities: runsc pause stops every task in gVisor's kernel, runsc
// checkpoint saves it with its memory (see Checkpoint). A sandbox joins a prepared network namespace
// when its spec names one (gVisor's netstack takes over its interfaces).
func (r *Runtime) Capabilities() runtime.Capabilities {
	return runtime.Capabilities{Pause: true, MemorySnapshot: true, Network: true, DeviceClasses: []string{NVIDIAClass}}
}

// Runsc returns the runsc binary the runtime drives.
func (r *Runtime) Runsc() string { return r.runscBin }

func validCgroupParent(p string) bool {
	if filepath.IsAbs(p) || p == "" {
		return false
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." || part == "." || part == "" {
			return false
		}
	}
	return true
}
