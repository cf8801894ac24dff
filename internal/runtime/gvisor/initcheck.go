package gvisor

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/runtime"
)

// checkInit finds PID 1's program the way warren-gvisor-init will (PATH
// from the spec's environment), in the root filesystem or a bind mount,
// from the host. runsc itself only ever starts warren-gvisor-init, so a
// missing init would otherwise show up as a sandbox that starts and stops
// at once; this makes it a Start error, as it is in the native runtime.
// Paths are resolved inside their root (openat2 RESOLVE_IN_ROOT): a
// symlink in the tree cannot point the check at a host file.
func checkInit(spec runtime.Spec) error {
	name := spec.Init[0]
	var candidates []string
	if strings.Contains(name, "/") {
		p := name
		if !path.IsAbs(p) {
			cwd := spec.Cwd
			if cwd == "" {
				cwd = "/"
			}
			p = path.Join(cwd, p)
		}
		candidates = []string{path.Clean(p)}
	} else {
		for _, dir := range strings.Split(pathOf(withPath(spec.Env)), ":") {
			if path.IsAbs(dir) {
				candidates = append(candidates, path.Join(dir, name))
			}
		}
	}
	for _, c := range candidates {
		if executableIn(spec, c) {
			return nil
		}
	}
	if len(candidates) == 1 {
		return fmt.Errorf("init %q: no executable file at %s in the sandbox", name, candidates[0])
	}
	return fmt.Errorf("init %q: not found in the sandbox's PATH", name)
}

func pathOf(env []string) string {
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			return v
		}
	}
	return ""
}

// executableIn reports whether p (a path inside the sandbox) is an
// executable regular file, looking through the spec's bind mounts.
func executableIn(spec runtime.Spec, p string) bool {
	root, rel := spec.RootFS, p
	best := ""
	for _, m := range spec.Mounts {
		dest := filepath.Clean(m.Destination)
		if dest == p {
			return executableFile(m.Source)
		}
		if strings.HasPrefix(p, dest+"/") && len(dest) > len(best) {
			best, root, rel = dest, m.Source, strings.TrimPrefix(p, dest)
		}
	}
	dir, err := os.Open(root)
	if err != nil {
		return false
	}
	defer dir.Close()
	fd, err := unix.Openat2(int(dir.Fd()), strings.TrimPrefix(rel, "/"), &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false
	}
	return st.Mode&unix.S_IFMT == unix.S_IFREG && st.Mode&0o111 != 0
}

func executableFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}
