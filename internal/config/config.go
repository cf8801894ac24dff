// Package config holds the daemon's configuration: one struct, filled from
// flags and environment variables, checked once by Validate.
package config

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/selfexe"
)

// Config is everything `warren serve` can be told.
type Config struct {
	// DataDir holds the database, the storage pool, runtime state and keys.
	DataDir string
	// Listen is the API's address.
	Listen string
	// Domain is the sandbox domain of E2B's host routing: a request whose
	// Host is <port>-<sandbox id>.<Domain> goes to that port in the
	// sandbox. It is returned in create answers, where the SDKs' getHost
	// uses it. Browsers resolve *.localhost to loopback.
	Domain string
	// MaxUploadBytes bounds one file upload (warren's PUT /files and the
	// E2B sandbox plane's POST /files).
	MaxUploadBytes int64
	// MaxImportBytes bounds one snapshot bundle POST /snapshots/import
	// reads.
	MaxImportBytes int64
	// SandboxLogBytes bounds each sandbox's log (process output and
	// lifecycle) on disk; it is rotated within that budget.
	SandboxLogBytes int64
	// Storage is "btrfs" (default) or "dir".
	Storage string
	// ImageSize is the size of the loop-backed btrfs image made when DataDir
	// is not on btrfs.
	ImageSize int64
	// MaxSandboxes bounds the sandboxes alive at once (all teams).
	MaxSandboxes int
	// MaxConcurrentStarts bounds the sandbox starts running at once
	// (starts.go): -1 picks one from the CPU count, 0 is no bound.
	MaxConcurrentStarts int
	// DefaultLimits apply to sandboxes that ask for none.
	DefaultLimits runtime.Limits
	// MaxLimits bound what a request may ask for.
	MaxLimits runtime.Limits
	// IdleTimeout pauses (IdleAction "pause") or kills ("kill") a sandbox
	// with no API call, no command running and no process output for that
	// long; 0 = never. PausedRetention kills a sandbox paused that long.
	IdleTimeout     time.Duration
	IdleAction      string
	PausedRetention time.Duration
	// Pools are warm pools: TEMPLATE=MIN[:MAX[:TTL]] ready sandboxes per template.
	Pools []string
	// MaxTurns is how many turn snapshots a sandbox keeps (older unnamed
	// turns without forks are pruned; 0 = keep all). -1 (the default)
	// means 0 when archiving is on, else 100.
	MaxTurns int
	// ArchiveAfter is how many of a sandbox's newest turn snapshots stay in
	// the btrfs pool; older ones become send streams restored on demand
	// (0 = no archiving). AnchorEvery: turns 1, N+1, 2N+1, … stay in the
	// pool as the streams' bases.
	ArchiveAfter int
	AnchorEvery  int
	// DefaultDiskBytes is the disk quota of a sandbox that asks for none
	// (0 = no quota; -1 = a tenth of the pool, at most 10 GiB, where the
	// storage can enforce quotas). DiskReserveBytes is the part of the
	// pool no sandbox may write into (0 = none; -1 = a twentieth of the
	// pool within 256 MiB..4 GiB). See internal/diskshare.
	DefaultDiskBytes int64
	DiskReserveBytes int64
	// VolumeSizeBytes caps a shared volume whose create names no size
	// (0 = no cap).
	VolumeSizeBytes int64
	// DefaultTimeout is the run timeout of a sandbox whose create names none.
	DefaultTimeout time.Duration
	// AllowNoTimeout lets a caller ask for a run timeout of 0 (the sandbox
	// never expires) at create, fork, /timeout and resume. Off, those
	// answer 400, so that every sandbox ends by itself.
	AllowNoTimeout bool
	// OutputLimit caps an exec's output when the request names no cap.
	OutputLimit uint64
	// AgentBinary is the static warren-agent to mount into sandboxes; empty
	// means "warren-agent beside the warren binary".
	AgentBinary string
	// CacheDir keeps slow build artefacts (debootstrap trees, runsc).
	CacheDir string
	// Runsc is gVisor's runsc binary for the gvisor runtime; empty: runsc
	// on PATH, else the newest <CacheDir>/runsc/<version>/runsc (what `make
	// runsc` builds). DefaultRuntime ("native" or "gvisor") runs sandboxes
	// whose create names no runtime.
	Runsc          string
	DefaultRuntime string
	// BuildBase builds the `base` template at start when it is missing.
	BuildBase bool
	// MetricsPublic serves GET /metrics without an API key (without the
	// per-sandbox series); by default it needs an admin key.
	MetricsPublic bool
	// CgroupFavorDynmods turns on the kernel's favordynmods cgroup option at
	// start, so that moving a new sandbox's first process into its cgroups
	// does not wait for an RCU grace period (see internal/favordynmods). It
	// is host-wide and, on recent kernels, stays on until reboot.
	CgroupFavorDynmods bool
	// CgroupParent is the relative cgroup path the native runtime makes each
	// sandbox's cgroups under (<CgroupParent>/<id>); the gvisor runtime uses
	// <CgroupParent>-gvisor. Daemons on one host need one each: `warren
	// teardown` removes a daemon's parent once empty, which fails another
	// daemon making a sandbox's cgroup in it at that moment. The daemon
	// records it in the data directory (CgroupParentPath), where teardown
	// reads it.
	CgroupParent string
	// NoNewPrivileges starts every sandbox with no_new_privs, whatever its
	// template says: sudo and other setuid binaries then fail inside. Off
	// by default, as in E2B, where `user` has passwordless sudo; root in a
	// sandbox is one API call away anyway (docs/security.md).
	NoNewPrivileges bool
	// UserNS starts every native sandbox in a user namespace: its root is
	// an unprivileged host uid, from a block of UserNSSize ids of its own
	// (slot n: UserNSBase + n*UserNSSize), recorded in the metadata so that
	// a restart keeps it; files keep their in-sandbox owners on disk
	// through idmapped mounts (docs/security.md). On by default: the
	// daemon probes the host at start and, unless UserNSExplicit, falls
	// back to no namespace (with a warning) on a host that cannot.
	UserNS bool
	// UserNSExplicit: the operator asked for UserNS (flag or env), so a
	// host that cannot is an error at start rather than a fallback.
	UserNSExplicit bool
	UserNSBase     uint32
	UserNSSlots    int
	// CDISpecDirs are where host devices' CDI specs are read from
	// (docs/devices.md); CDITrustedHookDirs those of them whose specs may
	// run hooks on the host.
	CDISpecDirs        []string
	CDITrustedHookDirs []string
	// AgentLogs keeps each sandbox agent's own output in <data-dir>/logs.
	// For debugging only: a sandbox's root can write to that host file.
	AgentLogs bool
	// Network configures the network of sandboxes that ask for one (see
	// network.go).
	Network NetworkConfig
	// Cluster is node mode (see cluster.go); its zero value is a single
	// host.
	Cluster ClusterConfig
	// TLS is the TLS listener (see tls.go); its zero value is none.
	TLS TLSConfig
}

// Default returns the configuration with every default, overridden by the
// WARREN_* environment variables that are set.
func Default() Config {
	c := Config{
		DataDir:            "/var/lib/warren",
		Listen:             "127.0.0.1:3000",
		Domain:             "localhost",
		MaxUploadBytes:     1 << 30,
		MaxImportBytes:     64 << 30,
		SandboxLogBytes:    8 << 20,
		Storage:            "btrfs",
		ImageSize:          20 << 30,
		VolumeSizeBytes:    1 << 30,
		MaxSandboxes:       100,
		DefaultLimits:      runtime.DefaultLimits,
		MaxLimits:          runtime.Limits{MemoryBytes: 16 << 30, CPUMillis: 16000, Pids: 32768},
		DefaultTimeout:     300 * time.Second,
		AllowNoTimeout:     true,
		MaxTurns:           -1,
		DefaultDiskBytes:   -1,
		DiskReserveBytes:   -1,
		ArchiveAfter:       32,
		AnchorEvery:        100,
		OutputLimit:        16 << 20,
		CacheDir:           "/var/cache/warren",
		BuildBase:          true,
		CgroupFavorDynmods: true,
		CgroupParent:       "warren",
		UserNS:             true,
		UserNSBase:         1 << 31,
		UserNSSlots:        16384,
		CDISpecDirs:        []string{"/etc/cdi", "/var/run/cdi"},
		Network:            defaultNetwork(),
		Cluster:            defaultCluster(),
	}
	if v := os.Getenv("WARREN_DATA_DIR"); v != "" {
		c.DataDir = v
	}
	if v := os.Getenv("WARREN_LISTEN"); v != "" {
		c.Listen = v
	}
	if v := os.Getenv("WARREN_DOMAIN"); v != "" {
		c.Domain = v
	}
	tlsFromEnv(&c.TLS)
	if v := os.Getenv("WARREN_STORAGE"); v != "" {
		c.Storage = v
	}
	if v := os.Getenv("WARREN_CACHE_DIR"); v != "" {
		c.CacheDir = v
	}
	if v := os.Getenv("WARREN_AGENT"); v != "" {
		c.AgentBinary = v
	}
	if v := os.Getenv("WARREN_RUNSC"); v != "" {
		c.Runsc = v
	}
	if v := os.Getenv("WARREN_DEFAULT_RUNTIME"); v != "" {
		c.DefaultRuntime = v
	}
	if v := os.Getenv("WARREN_NO_NEW_PRIVILEGES"); v != "" {
		c.NoNewPrivileges = v == "true" || v == "1" || v == "on"
	}
	if v := os.Getenv("WARREN_USERNS"); v != "" {
		c.UserNS = v == "true" || v == "1" || v == "on"
		c.UserNSExplicit = true
	}
	if v := os.Getenv("WARREN_CGROUP_PARENT"); v != "" {
		c.CgroupParent = v
	}
	if v := os.Getenv("WARREN_MAX_SANDBOXES"); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			c.MaxSandboxes = n
		}
	}
	c.MaxConcurrentStarts = startLimitFromEnv()
	return c
}

// Validate checks the configuration and fills derived paths.
func (c *Config) Validate() error {
	if c.DataDir == "" {
		return fmt.Errorf("--data-dir is empty: %w", errdefs.ErrInvalid)
	}
	abs, err := filepath.Abs(c.DataDir)
	if err != nil {
		return fmt.Errorf("--data-dir %q: %w", c.DataDir, err)
	}
	c.DataDir = abs
	if err := c.validateUserNS(); err != nil {
		return err
	}
	if err := c.validateServing(); err != nil {
		return err
	}
	if err := c.validateTLS(); err != nil {
		return err
	}
	if err := c.validateStorage(); err != nil {
		return err
	}
	if err := c.validateTimeouts(); err != nil {
		return err
	}
	if err := c.validateStarts(); err != nil {
		return err
	}
	if _, err := c.ParsePools(); err != nil {
		return err
	}
	if err := ValidateCgroupParent(c.CgroupParent); err != nil {
		return err
	}
	if err := c.validateNetwork(); err != nil {
		return err
	}
	if err := c.validateCluster(); err != nil {
		return err
	}
	return c.validateBinaries()
}

// validateServing checks the API's address, domain and size caps.
func (c *Config) validateServing() error {
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("--listen %q is not host:port: %w", c.Listen, errdefs.ErrInvalid)
	}
	if c.Domain == "" || strings.ContainsAny(c.Domain, "/: ") || strings.HasPrefix(c.Domain, ".") {
		return fmt.Errorf("--domain %q is not a DNS name: %w", c.Domain, errdefs.ErrInvalid)
	}
	if c.MaxUploadBytes <= 0 {
		return fmt.Errorf("--max-upload-mb must be positive: %w", errdefs.ErrInvalid)
	}
	if c.MaxImportBytes <= 0 {
		return fmt.Errorf("--max-import-mb must be positive: %w", errdefs.ErrInvalid)
	}
	if c.SandboxLogBytes < 1<<20 {
		return fmt.Errorf("--log-mb must be at least 1: %w", errdefs.ErrInvalid)
	}
	return nil
}

// validateStorage checks the storage backend and its sizes, and derives
// what the backend decides (archiving, the turn cap).
func (c *Config) validateStorage() error {
	switch c.Storage {
	case "btrfs", "dir":
	default:
		return fmt.Errorf("--storage %q: want btrfs or dir: %w", c.Storage, errdefs.ErrInvalid)
	}
	if c.Storage == "btrfs" && c.ImageSize < 256<<20 {
		return fmt.Errorf("--image-size %d is below 256 MiB: %w", c.ImageSize, errdefs.ErrInvalid)
	}
	if c.MaxSandboxes < 1 {
		return fmt.Errorf("--max-sandboxes must be at least 1: %w", errdefs.ErrInvalid)
	}
	if c.MaxTurns < -1 || c.ArchiveAfter < 0 {
		return fmt.Errorf("--max-turns and --archive-after must not be negative: %w", errdefs.ErrInvalid)
	}
	if c.DefaultDiskBytes < -1 || c.DiskReserveBytes < -1 {
		return fmt.Errorf("--default-disk-mb and --disk-reserve-mb: want -1 (auto), 0 (none) or a size in MiB: %w", errdefs.ErrInvalid)
	}
	if c.VolumeSizeBytes < 0 {
		return fmt.Errorf("--volume-size-mb must not be negative: %w", errdefs.ErrInvalid)
	}
	if c.AnchorEvery < 2 {
		return fmt.Errorf("--anchor-every must be at least 2 (every turn an anchor archives nothing): %w", errdefs.ErrInvalid)
	}
	if c.Storage != "btrfs" {
		c.ArchiveAfter = 0 // only btrfs can archive (send/receive)
	}
	if c.MaxTurns == -1 {
		// Archived turns cost no pool snapshots, so keep them all; without
		// archiving, cap the history.
		c.MaxTurns = 100
		if c.ArchiveAfter > 0 {
			c.MaxTurns = 0
		}
	}
	return nil
}

// validateTimeouts checks the run and idle timeouts.
func (c *Config) validateTimeouts() error {
	if c.DefaultTimeout < 0 {
		return fmt.Errorf("--default-timeout is negative: %w", errdefs.ErrInvalid)
	}
	if c.DefaultTimeout == 0 && !c.AllowNoTimeout {
		return fmt.Errorf("--default-timeout 0 (never) contradicts --allow-no-timeout=false: give a default timeout: %w", errdefs.ErrInvalid)
	}
	if c.IdleAction == "" {
		c.IdleAction = "pause"
	}
	if c.IdleAction != "pause" && c.IdleAction != "kill" && c.IdleAction != "hibernate" {
		return fmt.Errorf("--idle-action %q: want pause, hibernate or kill: %w", c.IdleAction, errdefs.ErrInvalid)
	}
	if c.IdleTimeout < 0 || c.PausedRetention < 0 {
		return fmt.Errorf("--idle-timeout and --paused-retention must not be negative: %w", errdefs.ErrInvalid)
	}
	return nil
}

// ValidateCgroupParent checks a --cgroup-parent: a relative path of plain
// names, since the runtimes nest it under the daemon's own cgroup.
func ValidateCgroupParent(p string) error {
	for _, part := range strings.Split(p, "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("--cgroup-parent %q: want a relative path without empty, '.' or '..' parts: %w", p, errdefs.ErrInvalid)
		}
	}
	return nil
}

// validateBinaries checks the default runtime and finds runsc and the
// agent.
func (c *Config) validateBinaries() error {
	if c.DefaultRuntime == "" {
		c.DefaultRuntime = "native"
	}
	if err := ValidateRuntime("--default-runtime", c.DefaultRuntime); err != nil {
		return err
	}
	if c.Runsc != "" && !filepath.IsAbs(c.Runsc) {
		abs, err := filepath.Abs(c.Runsc)
		if err != nil {
			return fmt.Errorf("--runsc %q: %w", c.Runsc, err)
		}
		c.Runsc = abs
	}
	if c.AgentBinary == "" {
		exe, err := selfexe.Path()
		if err != nil {
			return fmt.Errorf("find warren-agent: %w", err)
		}
		c.AgentBinary = filepath.Join(filepath.Dir(exe), "warren-agent")
	}
	if _, err := os.Stat(c.AgentBinary); err != nil {
		return fmt.Errorf("agent binary %s: %w (build it with `make build`, or set --agent)", c.AgentBinary, errdefs.ErrInvalid)
	}
	return nil
}

// Paths inside the data directory.
// Runtimes are the runtimes warren knows by name. Whether one can run on
// this host is found at start (the daemon probes it); this list only
// catches a misspelt name where no daemon is asked, e.g. in `warren
// template build --runtime`.
var Runtimes = []string{"native", "gvisor"}

// ValidateRuntime checks that name is one of Runtimes; what names the
// setting that carried it (a flag).
func ValidateRuntime(what, name string) error {
	if slices.Contains(Runtimes, name) {
		return nil
	}
	return fmt.Errorf("%s %q: want one of %s: %w", what, name, strings.Join(Runtimes, ", "), errdefs.ErrInvalid)
}

func (c *Config) DBPath() string          { return filepath.Join(c.DataDir, "warren.db") }
func (c *Config) AdminKeyPath() string    { return filepath.Join(c.DataDir, "admin.key") }
func (c *Config) AccessKeyPath() string   { return filepath.Join(c.DataDir, "access-token.key") }
func (c *Config) RunDir() string          { return filepath.Join(c.DataDir, "run") }
func (c *Config) RuntimeStateDir() string { return filepath.Join(c.DataDir, "runtime", "native") }
func (c *Config) GVisorStateDir() string  { return filepath.Join(c.DataDir, "runtime", "gvisor") }
func (c *Config) LogDir() string          { return filepath.Join(c.DataDir, "logs") }
func (c *Config) MemoryDir() string       { return filepath.Join(c.DataDir, "memory") }
func (c *Config) SandboxLogDir() string   { return filepath.Join(c.DataDir, "sandbox-logs") }

// CgroupParentPath records the cgroup parent the data directory's sandboxes
// were last made under.
func (c *Config) CgroupParentPath() string {
	return filepath.Join(c.DataDir, "runtime", "cgroup-parent")
}

// UserNSSize is how many ids each sandbox's user namespace maps: 0-65535,
// every uid a Linux distribution hands out.
const UserNSSize = 65536

// validateUserNS checks that the ranges sit above the host's own users
// (below 65536) and end before 2^32-1, the kernel's invalid id.
func (c *Config) validateUserNS() error {
	if c.UserNSBase < UserNSSize {
		return fmt.Errorf("--userns-base %d must be at least %d, above the host's own uids: %w", c.UserNSBase, UserNSSize, errdefs.ErrInvalid)
	}
	if c.UserNSSlots < 1 || uint64(c.UserNSBase)+uint64(c.UserNSSlots)*UserNSSize > 1<<32-1 {
		return fmt.Errorf("--userns-slots %d: need at least 1, and base %d + slots × %d must stay below 2^32-1: %w",
			c.UserNSSlots, c.UserNSBase, UserNSSize, errdefs.ErrInvalid)
	}
	return nil
}
