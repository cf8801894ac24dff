package template

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

// DefaultMirror is the Debian mirror debootstrap fetches from.
const DefaultMirror = "http://deb.debian.org/debian"

func (b *Builder) mirror() string {
	if b.Mirror != "" {
		return b.Mirror
	}
	return DefaultMirror
}

// populateDebootstrap fills root with a Debian minbase tree plus
// src.Packages, from the cache when a finished tree of the same recipe is
// there, else by running debootstrap (and then filling the cache).
func (b *Builder) populateDebootstrap(ctx context.Context, root string, src Source, progress io.Writer, log *slog.Logger) error {
	pkgs := slices.Clone(src.Packages)
	slices.Sort(pkgs)
	pkgs = slices.Compact(pkgs)
	cache := b.cachePath(src.Debootstrap, pkgs)

	if cache != "" {
		if _, err := os.Stat(cache); err == nil {
			fmt.Fprintf(progress, "debootstrap: using cached tree %s\n", cache)
			err := extractCache(ctx, root, cache, log)
			if err == nil {
				return writePipConf(root, pkgs)
			}
			if ctx.Err() != nil {
				return err
			}
			// A truncated or corrupt cache must not break builds forever.
			log.Warn("template: debootstrap cache unusable; rebuilding it", "path", cache, "err", err)
			_ = os.Remove(cache)
			if err := emptyRoot(root); err != nil {
				return err
			}
		}
	}

	if err := runDebootstrap(ctx, root, src.Debootstrap, pkgs, b.mirror(), progress); err != nil {
		return err
	}
	if err := cleanApt(root); err != nil {
		return err
	}
	if cache != "" {
		start := time.Now()
		if err := writeCache(ctx, root, cache); err != nil {
			// The template is fine; only the next build is slower.
			log.Warn("template: debootstrap cache not written", "path", cache, "err", err)
		} else {
			fmt.Fprintf(progress, "debootstrap: cached the tree at %s in %s\n", cache, time.Since(start).Round(time.Millisecond))
		}
	}
	return writePipConf(root, pkgs)
}

// cachePath names the cached tree of one recipe (suite, packages, mirror),
// or "" when caching is off.
func (b *Builder) cachePath(suite string, pkgs []string) string {
	if b.CacheDir == "" {
		return ""
	}
	h := sha256.Sum256([]byte("minbase\n" + b.mirror() + "\n" + suite + "\n" + strings.Join(pkgs, ",")))
	return fmt.Sprintf("%s/debootstrap-%s-%s.tar.gz", strings.TrimRight(b.CacheDir, "/"), suite, hex.EncodeToString(h[:8]))
}

func runDebootstrap(ctx context.Context, root, suite string, pkgs []string, mirror string, progress io.Writer) error {
	bin, err := exec.LookPath("debootstrap")
	if err != nil {
		return fmt.Errorf("debootstrap is not installed (apt-get install debootstrap): %w", errdefs.ErrUnavailable)
	}
	args := []string{"--variant=minbase"}
	if len(pkgs) > 0 {
		args = append(args, "--include="+strings.Join(pkgs, ","))
	}
	args = append(args, suite, root, mirror)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(),
		"DEBIAN_FRONTEND=noninteractive",
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"LC_ALL=C")
	// Its own process group, so cancelling stops the whole tree of
	// dpkg and chroot processes it starts. SIGTERM first: debootstrap's
	// trap unmounts what it mounted in the target.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 15 * time.Second

	tail := &lineTail{max: 15}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	fmt.Fprintf(progress, "debootstrap: %s %s\n", bin, strings.Join(args, " "))
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start debootstrap: %w", err)
	}
	var wg sync.WaitGroup
	for _, r := range []io.Reader{stdout, stderr} {
		wg.Go(func() { streamLines(r, "debootstrap: ", progress, tail) })
	}
	wg.Wait()
	err = cmd.Wait()
	if err != nil {
		// Whatever is left of its process group is ours to stop.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	// Mounts it leaves behind (proc, sys, dev) would make the scratch
	// volume undeletable, or worse, let its removal reach the host's files.
	if uerr := unmountUnder(root); uerr != nil && err == nil {
		err = uerr
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("debootstrap %s: %w", suite, ctx.Err())
		}
		return fmt.Errorf("debootstrap %s failed (%v); last lines:\n%s: %w", suite, err, tail.String(), errdefs.ErrUnavailable)
	}
	fmt.Fprintf(progress, "debootstrap: finished in %s\n", time.Since(start).Round(time.Second))
	return nil
}

// streamLines copies r to w line by line with a prefix, remembering the
// last lines for an error message.
func streamLines(r io.Reader, prefix string, w io.Writer, tail *lineTail) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		tail.add(line)
		fmt.Fprintf(w, "%s%s\n", prefix, line)
	}
	_, _ = io.Copy(io.Discard, r) // an over-long line: drain so the child never blocks
}

type lineTail struct {
	mu    sync.Mutex
	max   int
	lines []string
}

func (t *lineTail) add(l string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, l)
	if len(t.lines) > t.max {
		t.lines = t.lines[len(t.lines)-t.max:]
	}
}

func (t *lineTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}

// cleanApt does what `apt-get clean` does, and drops the package lists
// (a sandbox runs `apt-get update` before installing anything): together
// they are tens of MB no sandbox needs.
func cleanApt(root string) error {
	t, err := openTree(root)
	if err != nil {
		return err
	}
	defer t.Close()
	for _, d := range []string{"var/cache/apt/archives/partial", "var/lib/apt/lists/partial"} {
		if err := t.emptyDir(d); err != nil {
			return err
		}
	}
	for _, c := range []struct {
		dir  string
		keep func(string) bool
	}{
		{"var/cache/apt/archives", func(n string) bool { return !strings.HasSuffix(n, ".deb") }},
		{"var/cache/apt", func(n string) bool { return !strings.HasSuffix(n, ".bin") }},
		{"var/lib/apt/lists", func(n string) bool { return n == "partial" || n == "lock" }},
	} {
		fd, err := t.openIn(c.dir, syscall.O_RDONLY|syscall.O_DIRECTORY)
		if err != nil {
			continue
		}
		names, err := readDirNames(fd)
		syscall.Close(fd)
		if err != nil {
			return fmt.Errorf("list /%s: %w", c.dir, err)
		}
		for _, n := range names {
			if c.keep(n) {
				continue
			}
			if err := t.removeAll(c.dir + "/" + n); err != nil {
				return err
			}
		}
	}
	return nil
}

// emptyRoot removes everything inside root.
func emptyRoot(root string) error {
	t, err := openTree(root)
	if err != nil {
		return err
	}
	defer t.Close()
	return t.emptyDir(".")
}

func extractCache(ctx context.Context, root, cache string, log *slog.Logger) error {
	t, err := openTree(root)
	if err != nil {
		return err
	}
	defer t.Close()
	x := &extractor{t: t, log: log}
	if err := extractTarball(ctx, x, cache); err != nil {
		return err
	}
	x.finish()
	return nil
}
