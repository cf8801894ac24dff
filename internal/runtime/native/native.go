// Package native runs sandboxes with runc's libcontainer used as a Go
// library: namespaces, cgroup limits, dropped capabilities, masked paths and
// a seccomp filter, with no runc binary and no OCI bundle on disk.
//
// libcontainer keeps each sandbox's state in <StateDir>/<id>/state.json; that
// directory is the only thing this package needs to find a sandbox again
// after a daemon restart. The sandbox's processes are not children of any
// long-lived daemon goroutine: their stdio is a file (or /dev/null), never a
// pipe, and no parent-death signal is set, so they survive the daemon being
// killed.
//
// The binary must call Init first thing in main, and must be built with cgo
// and the "seccomp" build tag (New refuses to run without it).
package native

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"

	// Registers the device-cgroup backends (v1 files, v2 eBPF); without
	// it libcontainer cannot restrict devices and refuses to start.
	_ "github.com/opencontainers/cgroups/devices"
	"github.com/opencontainers/runc/libcontainer/seccomp"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/keylock"
	"github.com/warrenhq/warren/internal/runtime"
)

// Options configure a Runtime.
type Options struct {
	// StateDir is libcontainer's state root (e.g. <data>/runtime/native).
	// It holds one directory per sandbox.
	StateDir string
	// CgroupParent is a relative cgroup path under which each sandbox gets
	// <CgroupParent>/<id>. Relative paths nest under the daemon's own cgroup
	// (cgroup v1: per controller; v2: beside the daemon's leaf), which is
	// what works when the daemon itself runs in a delegated, non-root cgroup.
	// Default "warren".
	CgroupParent string
	Logger       *slog.Logger
	// UserNSDir holds the idmapped root filesystems of sandboxes started
	// with a user namespace; every directory above it must be searchable by
	// all. Default: /run/warren-userns/<hash of StateDir>.
	UserNSDir string
}

// Runtime is the native (libcontainer) runtime.
type Runtime struct {
	stateDir     string
	cgroupParent string
	roots        idmappedRoots
	log          *slog.Logger
	host         hostFacts
	locks        keylock.Locks
	facts        sync.Map // id → facts
	containers   sync.Map // id → *libcontainer.Container, see load
}

var _ runtime.Runtime = (*Runtime)(nil)

// New checks that this host and binary can run native sandboxes and returns
// a Runtime over opts.StateDir. It returns ErrUnavailable when they cannot.
func New(opts Options) (*Runtime, error) {
	if opts.StateDir == "" {
		return nil, fmt.Errorf("native runtime: StateDir is empty: %w", errdefs.ErrInvalid)
	}
	if opts.CgroupParent == "" {
		opts.CgroupParent = "warren"
	}
	if !validCgroupParent(opts.CgroupParent) {
		return nil, fmt.Errorf("native runtime: CgroupParent %q must be a relative path without '..': %w", opts.CgroupParent, errdefs.ErrInvalid)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.UserNSDir == "" {
		opts.UserNSDir = usernsDirFor(opts.StateDir)
	}
	// Without the build tag libcontainer compiles a stub that cannot load a
	// filter; fail here, loudly, rather than at the first Start.
	if !seccomp.Enabled {
		return nil, fmt.Errorf("native runtime: this binary was built without seccomp support; rebuild with CGO_ENABLED=1 and `-tags seccomp` (needs libseccomp-dev): %w", errdefs.ErrUnavailable)
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("native runtime: needs root (euid is %d): %w", os.Geteuid(), errdefs.ErrUnavailable)
	}
	if err := os.MkdirAll(opts.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("native runtime: create state dir %s: %w", opts.StateDir, err)
	}
	host, err := probeHost()
	if err != nil {
		return nil, fmt.Errorf("native runtime: %w: %w", err, errdefs.ErrUnavailable)
	}
	return &Runtime{
		stateDir:     opts.StateDir,
		cgroupParent: opts.CgroupParent,
		roots:        idmappedRoots(opts.UserNSDir),
		log:          opts.Logger.With("runtime", "native"),
		host:         host,
	}, nil
}

// Name returns "native".
func (r *Runtime) Name() string { return "native" }

// Capabilities: the freezer gives Pause; memory cannot be checkpointed
// (no CRIU); each sandbox has its own network namespace, and may have its
// own user namespace.
func (r *Runtime) Capabilities() runtime.Capabilities {
	return runtime.Capabilities{Pause: true, MemorySnapshot: false, Network: true, UserNS: true}
}

// List returns the ids of every sandbox with a state directory, whatever its
// state (including half-made ones a crashed daemon left; Destroy removes
// them).
func (r *Runtime) List(ctx context.Context) ([]string, error) {
	entries, err := os.ReadDir(r.stateDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list sandboxes in %s: %w", r.stateDir, err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}
