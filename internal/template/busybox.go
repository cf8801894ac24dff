package template

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
)

// DefaultBusybox is where Debian's busybox-static puts its binary.
const DefaultBusybox = "/bin/busybox"

func (b *Builder) busyboxPath() string {
	if b.Busybox != "" {
		return b.Busybox
	}
	return DefaultBusybox
}

// populateBusybox makes a minimal tree around the host's static busybox:
// the binary at /bin/busybox and a symlink to it for every applet at the
// path busybox itself names (bin/ls, usr/bin/awk, ...).
func populateBusybox(ctx context.Context, root, bin string) error {
	out, err := exec.CommandContext(ctx, bin, "--list-full").Output()
	if err != nil {
		return fmt.Errorf("run %s --list-full (install busybox-static): %w", bin, errdefs.ErrUnavailable)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return fmt.Errorf("read %s: %w", bin, err)
	}
	t, err := openTree(root)
	if err != nil {
		return err
	}
	defer t.Close()
	for _, d := range []string{"bin", "sbin", "usr/bin", "usr/sbin", "etc", "root", "home", "var", "run", "proc", "sys", "dev"} {
		perm := uint32(0o755)
		if d == "root" {
			perm = 0o700
		}
		if err := t.ensureDir(d, perm, 0, 0); err != nil {
			return err
		}
	}
	if err := t.writeFile("bin/busybox", data, 0o755, 0, 0); err != nil {
		return err
	}
	for _, line := range strings.Split(string(out), "\n") {
		rel := strings.TrimSpace(line)
		// linuxrc sits at the top level and is an initrd's init; skip it.
		if rel == "" || !strings.Contains(rel, "/") || rel == "bin/busybox" {
			continue
		}
		rel, err := cleanRel(rel)
		if err != nil {
			return err
		}
		if err := symlinkIn(t, rel, "/bin/busybox"); err != nil {
			return err
		}
	}
	if !t.exists("bin/sh") {
		if err := symlinkIn(t, "bin/sh", "/bin/busybox"); err != nil {
			return err
		}
	}
	files := map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n",
		"etc/group":  "root:x:0:\n",
		"etc/shadow": "root:*:19000:0:99999:7:::\n",
	}
	for rel, content := range files {
		perm := uint32(0o644)
		if rel == "etc/shadow" {
			perm = 0o640
		}
		if err := t.writeFile(rel, []byte(content), perm, 0, 0); err != nil {
			return err
		}
	}
	return nil
}

// symlinkIn makes rel a symlink to target, replacing whatever is there.
func symlinkIn(t *tree, rel, target string) error {
	parent, base := path.Split(rel)
	pfd, err := t.dirFD(strings.TrimSuffix(parent, "/"))
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if err := removeAt(pfd, base); err != nil {
		return fmt.Errorf("replace /%s: %w", rel, err)
	}
	if err := unix.Symlinkat(target, pfd, base); err != nil {
		return fmt.Errorf("symlink /%s: %w", rel, err)
	}
	return nil
}
