package template

import (
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
)

// tree writes into a root filesystem that may hold hostile content (an
// image from a registry, a user's tarball). Every path is resolved by the
// kernel with openat2(RESOLVE_IN_ROOT), so a symlink in a parent component —
// absolute or full of "..", planted by an earlier tar entry or by the image
// itself — resolves inside the tree and can never reach the host. The last
// component is always handled with *at calls that do not follow it.
type tree struct {
	fd   int // O_PATH directory fd of the root
	path string
}

func openTree(root string) (*tree, error) {
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open root %s: %w", root, err)
	}
	return &tree{fd: fd, path: root}, nil
}

func (t *tree) Close() error { return unix.Close(t.fd) }

// cleanRel turns an archive entry name into a clean path relative to the
// root ("." for the root itself). A name whose ".." components would climb
// above the root is rejected rather than clamped: such an archive is broken
// or hostile. A leading "/" is accepted and means the root.
func cleanRel(name string) (string, error) {
	if strings.IndexByte(name, 0) >= 0 {
		return "", fmt.Errorf("entry name %q holds a NUL byte: %w", name, errdefs.ErrInvalid)
	}
	depth := 0
	for _, c := range strings.Split(name, "/") {
		switch c {
		case "", ".":
		case "..":
			depth--
			if depth < 0 {
				return "", fmt.Errorf("entry %q escapes the root filesystem: %w", name, errdefs.ErrInvalid)
			}
		default:
			depth++
		}
	}
	rel := strings.TrimPrefix(path.Clean("/"+name), "/")
	if rel == "" {
		return ".", nil
	}
	return rel, nil
}

// openIn opens rel (resolved inside the root, symlinks included) with flags.
func (t *tree) openIn(rel string, flags int) (int, error) {
	how := &unix.OpenHow{
		Flags:   uint64(flags | unix.O_CLOEXEC),
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	}
	for range 16 {
		fd, err := unix.Openat2(t.fd, rel, how)
		if err == unix.EAGAIN || err == unix.EINTR {
			continue // a concurrent rename; the kernel asks us to retry
		}
		return fd, err
	}
	return -1, unix.EAGAIN
}

// dirFD returns an O_PATH fd of directory rel, creating missing directories
// (mode 0755, root-owned) on the way. Existing symlinks on the way are
// followed inside the root, as a container runtime would.
func (t *tree) dirFD(rel string) (int, error) {
	if rel == "" {
		rel = "."
	}
	fd, err := t.openIn(rel, unix.O_PATH|unix.O_DIRECTORY)
	if err == nil {
		return fd, nil
	}
	if err != unix.ENOENT || rel == "." {
		return -1, fmt.Errorf("open directory /%s in the new root: %w", rel, err)
	}
	parent, base := path.Split(rel)
	pfd, err := t.dirFD(strings.TrimSuffix(parent, "/"))
	if err != nil {
		return -1, err
	}
	err = unix.Mkdirat(pfd, base, 0o755)
	unix.Close(pfd)
	if err != nil && err != unix.EEXIST {
		return -1, fmt.Errorf("create directory /%s in the new root: %w", rel, err)
	}
	fd, err = t.openIn(rel, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		// EEXIST above and ENOENT now: a symlink to a missing directory.
		return -1, fmt.Errorf("directory /%s in the new root is a symlink to a missing directory (%v): %w", rel, err, errdefs.ErrInvalid)
	}
	return fd, nil
}

// removeAt removes name in directory pfd and, when it is a directory,
// everything below it, never following a symlink.
func removeAt(pfd int, name string) error {
	err := unix.Unlinkat(pfd, name, 0)
	if err == nil || err == unix.ENOENT {
		return nil
	}
	if err != unix.EISDIR && err != unix.EPERM {
		return err
	}
	fd, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	err = removeChildren(fd)
	unix.Close(fd)
	if err != nil {
		return err
	}
	if err := unix.Unlinkat(pfd, name, unix.AT_REMOVEDIR); err != nil && err != unix.ENOENT {
		return err
	}
	return nil
}

// removeChildren empties the directory open as fd (O_RDONLY).
func removeChildren(fd int) error {
	names, err := readDirNames(fd)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := removeAt(fd, n); err != nil {
			return err
		}
	}
	return nil
}

// readDirNames lists a directory through a duplicate of fd, so the caller
// keeps its fd.
func readDirNames(fd int) ([]string, error) {
	dup, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "dir")
	defer f.Close()
	return f.Readdirnames(-1)
}

// removeAll removes rel (not following its last component) if it exists.
func (t *tree) removeAll(rel string) error {
	if rel == "." {
		return fmt.Errorf("refusing to remove the root itself: %w", errdefs.ErrInvalid)
	}
	parent, base := path.Split(rel)
	pfd, err := t.openIn(orDot(strings.TrimSuffix(parent, "/")), unix.O_PATH|unix.O_DIRECTORY)
	if err == unix.ENOENT || err == unix.ENOTDIR {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove /%s: %w", rel, err)
	}
	defer unix.Close(pfd)
	if err := removeAt(pfd, base); err != nil {
		return fmt.Errorf("remove /%s: %w", rel, err)
	}
	return nil
}

// emptyDir removes everything inside directory rel, keeping rel itself.
func (t *tree) emptyDir(rel string) error {
	fd, err := t.openIn(rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err == unix.ENOENT {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open /%s: %w", rel, err)
	}
	defer unix.Close(fd)
	if err := removeChildren(fd); err != nil {
		return fmt.Errorf("empty /%s: %w", rel, err)
	}
	return nil
}

// lstat describes rel without following its last component.
func (t *tree) lstat(rel string) (unix.Stat_t, error) {
	var st unix.Stat_t
	parent, base := path.Split(rel)
	pfd, err := t.openIn(orDot(strings.TrimSuffix(parent, "/")), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return st, err
	}
	defer unix.Close(pfd)
	if base == "" || rel == "." {
		err = unix.Fstat(pfd, &st)
	} else {
		err = unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	}
	return st, err
}

// exists reports whether rel exists (following symlinks inside the root).
func (t *tree) exists(rel string) bool {
	fd, err := t.openIn(rel, unix.O_PATH)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// isDir reports whether rel is a directory (following symlinks inside the root).
func (t *tree) isDir(rel string) bool {
	fd, err := t.openIn(rel, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// readFile reads rel, following symlinks inside the root. A missing file
// returns an error satisfying errors.Is(err, os.ErrNotExist).
func (t *tree) readFile(rel string) ([]byte, error) {
	fd, err := t.openIn(rel, unix.O_RDONLY)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: "/" + rel, Err: err}
	}
	f := os.NewFile(uintptr(fd), "/"+rel)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("/%s is not a regular file: %w", rel, errdefs.ErrInvalid)
	}
	const limit = 64 << 20 // the files we edit are small; a huge one is hostile
	if st.Size > limit {
		return nil, fmt.Errorf("/%s is larger than %d bytes: %w", rel, limit, errdefs.ErrInvalid)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read /%s: %w", rel, err)
	}
	if len(data) > limit {
		return nil, fmt.Errorf("/%s is larger than %d bytes: %w", rel, limit, errdefs.ErrInvalid)
	}
	return data, nil
}

// writeFile replaces rel with a regular file holding data: written to a
// temporary name in the same directory, then renamed over rel, so a symlink
// at rel is replaced rather than followed and readers never see half a file.
func (t *tree) writeFile(rel string, data []byte, perm uint32, uid, gid int) error {
	parent, base := path.Split(rel)
	pfd, err := t.dirFD(strings.TrimSuffix(parent, "/"))
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	tmp := ".warren-tmp-" + base
	_ = removeAt(pfd, tmp)
	fd, err := unix.Openat(pfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("write /%s: %w", rel, err)
	}
	f := os.NewFile(uintptr(fd), "/"+rel)
	_, err = f.Write(data)
	if err == nil {
		err = f.Chown(uid, gid)
	}
	if err == nil {
		err = unix.Fchmod(fd, perm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(pfd, tmp, pfd, base)
	}
	if err != nil {
		_ = unix.Unlinkat(pfd, tmp, 0)
		return fmt.Errorf("write /%s: %w", rel, err)
	}
	return nil
}

// ensureDir makes rel a directory with the given mode and owner, creating it
// (and missing parents) when absent. An existing directory, or a symlink to
// one inside the root, is kept and re-owned.
func (t *tree) ensureDir(rel string, perm uint32, uid, gid int) error {
	fd, err := t.openIn(rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err == unix.ENOENT {
		parent, base := path.Split(rel)
		pfd, perr := t.dirFD(strings.TrimSuffix(parent, "/"))
		if perr != nil {
			return perr
		}
		err = unix.Mkdirat(pfd, base, 0o700)
		unix.Close(pfd)
		if err != nil && err != unix.EEXIST {
			return fmt.Errorf("create /%s: %w", rel, err)
		}
		fd, err = t.openIn(rel, unix.O_RDONLY|unix.O_DIRECTORY)
	}
	if err != nil {
		return fmt.Errorf("open /%s: %w", rel, err)
	}
	defer unix.Close(fd)
	if err := unix.Fchown(fd, uid, gid); err != nil {
		return fmt.Errorf("chown /%s: %w", rel, err)
	}
	// chmod after chown: chown clears the set-id bits.
	if err := unix.Fchmod(fd, perm); err != nil {
		return fmt.Errorf("chmod /%s: %w", rel, err)
	}
	return nil
}

func orDot(s string) string {
	if s == "" {
		return "."
	}
	return s
}
