package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/favordynmods"
	"github.com/warrenhq/warren/internal/runtime/gvisor"
	"github.com/warrenhq/warren/internal/runtime/native"
	"github.com/warrenhq/warren/internal/runtime/runtimeset"
	"github.com/warrenhq/warren/internal/selfexe"
)

// openRuntimes opens the native runtime (always) and the gvisor runtime
// (when runsc is found and a trivial sandbox starts with it), and puts them
// behind one runtime.Runtime that starts sandboxes on the runtime their
// create names and routes every later call to the runtime holding them. A
// gvisor runtime that cannot run sandboxes still manages the ones it has.
func openRuntimes(ctx context.Context, cfg config.Config, log *slog.Logger) (*runtimeset.Set, []client.RuntimeInfo, error) {
	if err := recordCgroupParent(cfg, log); err != nil {
		return nil, nil, err
	}
	nat, err := openNative(cfg, log)
	if err != nil {
		return nil, nil, fmt.Errorf("open native runtime: %w", err)
	}
	members := []runtimeset.Member{{Runtime: nat}}
	gv, gvErr := openGVisor(cfg, log)
	var version string
	if gvErr == nil {
		if gvErr = gv.Probe(ctx); gvErr == nil {
			version = gv.Version()
		}
	}
	if gvErr != nil {
		log.Info("the gvisor runtime is not available; sandboxes asking for it are refused", "reason", gvErr)
	}
	m := runtimeset.Member{Name: "gvisor", Unavailable: gvErr}
	if gv != nil {
		m.Runtime = gv
	}
	members = append(members, m)
	set, err := runtimeset.New(cfg.DefaultRuntime, members...)
	if err != nil {
		return nil, nil, fmt.Errorf("--default-runtime: %w", err)
	}
	var infos []client.RuntimeInfo
	for _, m := range set.Members() {
		name := m.Name
		if name == "" {
			name = m.Runtime.Name()
		}
		info := client.RuntimeInfo{Name: name, Default: name == cfg.DefaultRuntime, Available: m.Unavailable == nil}
		if m.Unavailable != nil {
			info.Error = m.Unavailable.Error()
		}
		if caps, ok := set.CapabilitiesOf(name); ok {
			info.Pause, info.MemorySnapshot = caps.Pause, caps.MemorySnapshot
		}
		if name == "gvisor" {
			info.Version = version
		}
		infos = append(infos, info)
	}
	sort.SliceStable(infos, func(i, j int) bool { return infos[i].Default && !infos[j].Default })
	return set, infos, nil
}

// favorDynmods turns on the favordynmods cgroup option; sandboxes start
// without it, only slower.
func favorDynmods(log *slog.Logger) {
	res, err := favordynmods.Enable()
	switch {
	case errors.Is(err, favordynmods.ErrUnsupported):
		log.Info("sandbox starts wait for an RCU grace period in the kernel's cgroup code", "reason", err)
	case err != nil:
		log.Warn("turn on the favordynmods cgroup option (--cgroup-favordynmods=false stops trying)", "err", err)
	case !res.Already:
		log.Info("turned on the kernel's favordynmods cgroup option: a sandbox start no longer waits for an RCU grace period (host-wide; --cgroup-favordynmods=false leaves it alone)", "mount", res.MountPoint)
	}
}

// openGVisor opens the gvisor runtime over the runsc binary findRunsc
// finds and the warren-gvisor-init beside the agent (or warren).
func openGVisor(cfg config.Config, log *slog.Logger) (*gvisor.Runtime, error) {
	runsc, err := findRunsc(cfg)
	if err != nil {
		return nil, err
	}
	initBin, err := findBeside(cfg.AgentBinary, "warren-gvisor-init")
	if err != nil {
		return nil, err
	}
	return gvisor.New(gvisor.Options{Runsc: runsc, Init: initBin, StateDir: cfg.GVisorStateDir(),
		CgroupParent: cfg.CgroupParent + "-gvisor", Logger: log})
}

// openNative opens the native runtime, its sandboxes' cgroups under
// cfg.CgroupParent.
func openNative(cfg config.Config, log *slog.Logger) (*native.Runtime, error) {
	return native.New(native.Options{StateDir: cfg.RuntimeStateDir(), CgroupParent: cfg.CgroupParent, Logger: log})
}

// recordCgroupParent writes cfg.CgroupParent into the data directory before
// any sandbox is made under it, so that `warren teardown`, which is given
// no serve flags, removes the parent this daemon used and no other.
func recordCgroupParent(cfg config.Config, log *slog.Logger) error {
	p := cfg.CgroupParentPath()
	if was, err := recordedCgroupParent(cfg); err == nil && was != cfg.CgroupParent {
		log.Warn("the cgroup parent changed: running sandboxes stay in the old one, which nothing removes", "was", was, "now", cfg.CgroupParent)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("record the cgroup parent: %w", err)
	}
	if err := os.WriteFile(p, []byte(cfg.CgroupParent+"\n"), 0o600); err != nil {
		return fmt.Errorf("record the cgroup parent: %w", err)
	}
	return nil
}

// recordedCgroupParent is the cgroup parent the data directory's daemon
// last used; a data directory without a record (written before
// --cgroup-parent existed) used cfg's, the default "warren".
func recordedCgroupParent(cfg config.Config) (string, error) {
	b, err := os.ReadFile(cfg.CgroupParentPath())
	if errors.Is(err, os.ErrNotExist) {
		return cfg.CgroupParent, nil
	}
	if err != nil {
		return "", fmt.Errorf("read the recorded cgroup parent: %w", err)
	}
	p := strings.TrimSpace(string(b))
	if err := config.ValidateCgroupParent(p); err != nil {
		return "", fmt.Errorf("%s: %w", cfg.CgroupParentPath(), err)
	}
	return p, nil
}

// findRunsc returns --runsc (or WARREN_RUNSC), else runsc on PATH, else the
// newest runsc `make runsc` left in the cache directory.
func findRunsc(cfg config.Config) (string, error) {
	if cfg.Runsc != "" {
		return cfg.Runsc, nil
	}
	if p, err := exec.LookPath("runsc"); err == nil {
		return filepath.Abs(p)
	}
	matches, _ := filepath.Glob(filepath.Join(cfg.CacheDir, "runsc", "*", "runsc"))
	var newest string
	var newestTime int64
	for _, p := range matches {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.ModTime().UnixNano() > newestTime {
			newest, newestTime = p, st.ModTime().UnixNano()
		}
	}
	if newest != "" {
		return newest, nil
	}
	return "", fmt.Errorf("runsc not found (no --runsc, none on PATH or in %s); build it with `make runsc` or pass --runsc: %w",
		filepath.Join(cfg.CacheDir, "runsc"), errdefs.ErrUnavailable)
}

// findBeside finds a helper binary beside the agent binary, else beside
// warren's own executable.
func findBeside(agent, name string) (string, error) {
	dirs := []string{filepath.Dir(agent)}
	if exe, err := selfexe.Path(); err == nil {
		dirs = append(dirs, filepath.Dir(exe))
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("%s not found beside %s; build it with `make build`: %w", name, agent, errdefs.ErrUnavailable)
}
