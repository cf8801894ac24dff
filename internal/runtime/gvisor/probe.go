package gvisor

import (
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/runtime"
)

// probeTimeout bounds the probe's trivial sandbox (about 0.3 s when runsc
// works; a platform that hangs, as KVM does on these hosts, never ends).
const probeTimeout = 30 * time.Second

// prober checks, once, that runsc works here, and keeps its answer and
// runsc's version.
type prober struct {
	*core
	stateDir string // the probe's empty root filesystem is made in it
	specs    specWriter

	mu       sync.Mutex
	probed   bool
	probeErr error
	version  string
}

// Probe checks, once, that runsc runs and that a trivial sandbox starts and
// exits on the systrap platform here; later calls return the first
// answer. An unusable runsc is ErrUnavailable with what was wrong.
func (p *prober) Probe(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.probed {
		return p.probeErr
	}
	p.version, p.probeErr = p.probe(ctx)
	if p.probeErr != nil && ctx.Err() != nil {
		// A cancelled caller proves nothing about runsc: ask again next time.
		return p.probeErr
	}
	p.probed = true
	if p.probeErr == nil {
		p.log.Info("runsc works", "runsc", p.runsc.bin, "version", p.version)
	}
	return p.probeErr
}

// Version is runsc's version (the gVisor module version it was built
// from), known once Probe has succeeded.
func (p *prober) Version() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.version
}

func (p *prober) probe(ctx context.Context) (string, error) {
	unavailable := func(format string, a ...any) error {
		return fmt.Errorf("gvisor runtime: runsc %s: %s; rebuild it with `make runsc` (CGO_ENABLED=0 go install gvisor.dev/gvisor/runsc@...): %w",
			p.runsc.bin, fmt.Sprintf(format, a...), errdefs.ErrUnavailable)
	}
	out, err := exec.CommandContext(ctx, p.runsc.bin, "--version").CombinedOutput()
	if err != nil {
		return "", unavailable("does not run (`runsc --version`: %v: %s)", err, strings.TrimSpace(lastLines(string(out), 3)))
	}
	if !strings.HasPrefix(string(out), "runsc version") {
		return "", unavailable("is not runsc (`--version` said %q)", lastLines(strings.TrimSpace(string(out)), 1))
	}
	version := versionOf(p.runsc.bin, string(out))

	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if err := p.probeSandbox(ctx); err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return "", unavailable("a trivial sandbox did not finish within %s on the systrap platform", probeTimeout)
		}
		return "", unavailable("cannot run a trivial sandbox: %v", err)
	}
	return version, nil
}

// versionOf returns the module version runsc was built from (`go install
// ...@v0.0.0-...` leaves runsc's own version string empty), or what
// --version printed.
func versionOf(bin, out string) string {
	if bi, err := buildinfo.ReadFile(bin); err == nil && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	first, _, _ := strings.Cut(out, "\n")
	return strings.TrimSpace(strings.TrimPrefix(first, "runsc version"))
}

// probeSandbox runs warren-gvisor-init alone in an empty root filesystem
// with the same flags, limits and cgroups as a real sandbox, and waits for
// it to exit 0. Everything it makes is removed.
func (p *prober) probeSandbox(ctx context.Context) (retErr error) {
	id := "probe" + ids.New(8)
	root, err := os.MkdirTemp(p.stateDir, ".probe-rootfs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	bundle := p.bundles.bundle(id)
	if err := os.Mkdir(bundle, 0o700); err != nil {
		return err
	}
	defer func() {
		if err := p.teardown(context.WithoutCancel(ctx), id); err != nil {
			// A runsc that cannot start a sandbox may not delete one either:
			// kill what its cgroups hold and drop the bundle anyway.
			dirs, _ := p.cgroups.cgroupDirs(id)
			err = errors.Join(err, removeCgroups(dirs), os.RemoveAll(bundle))
			retErr = errors.Join(retErr, fmt.Errorf("clean up probe sandbox: %w", err))
		}
	}()
	spec := p.probeSpec(id, root)
	if err := writeSpec(filepath.Join(bundle, "config.json"), spec); err != nil {
		return err
	}
	args := append(p.runsc.baseFlags(), "--network=none", "--log="+filepath.Join(bundle, "runsc.log"),
		"run", "--bundle="+bundle, id)
	cmd := exec.CommandContext(ctx, p.runsc.bin, args...)
	out, err := os.CreateTemp(bundle, "out-")
	if err != nil {
		return err
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		msg := runscLogError(bundle)
		if msg == "" {
			data, _ := os.ReadFile(out.Name())
			msg = strings.TrimSpace(lastLines(string(data), 3))
		}
		return fmt.Errorf("%v: %s", err, msg)
	}
	return nil
}

// probeSpec is a real sandbox's spec whose PID 1 only sets its pids limit
// and exits.
func (p *prober) probeSpec(id, root string) *specs.Spec {
	s := p.specs.ociSpec(runtime.Spec{ID: id, RootFS: root, Init: []string{InitPath}, Cwd: "/"})
	s.Process.Args = []string{InitPath, "--pids-max", "16"}
	return s
}
