package treemerge

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// resolveHow keeps every lookup inside a tree: symlinks resolve against the
// tree's root (never the host's), magic links and other filesystems are
// refused. The last component is never followed (O_NOFOLLOW, or the *at
// calls' own no-follow forms).
var resolveHow = uint64(unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV)

// tree is one of a merge's trees, reached through a descriptor of its root.
type tree struct {
	root *os.File
}

func openTree(dir string) (*tree, error) {
	f, err := os.OpenFile(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open tree: %w", err)
	}
	return &tree{root: f}, nil
}

func (t *tree) Close() error { return t.root.Close() }

// node is what lstat says of a path (typ "" when it does not exist).
type node struct {
	typ      string // file, dir, symlink, other
	mode     uint32 // permission bits with setuid/setgid/sticky
	uid, gid uint32
	size     int64
}

func (n node) exists() bool { return n.typ != "" }

// openat opens p (absolute inside the tree) without following its last
// component.
func (t *tree) openat(p string, flags int) (*os.File, error) {
	fd, err := unix.Openat2(int(t.root.Fd()), rel(p), &unix.OpenHow{
		Flags: uint64(flags | unix.O_CLOEXEC | unix.O_NOFOLLOW), Resolve: resolveHow,
	})
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	return os.NewFile(uintptr(fd), p), nil
}

// parent opens the directory holding p and returns it with p's last
// component.
func (t *tree) parent(p string) (*os.File, string, error) {
	dir, name := path.Split(path.Clean("/" + p))
	if name == "" {
		return nil, "", fmt.Errorf("the tree's root cannot be merged as a path: %w", os.ErrInvalid)
	}
	f, err := t.openat(dir, unix.O_PATH|unix.O_DIRECTORY)
	return f, name, err
}

// stat lstats p; a missing path (or one under a missing or non-directory
// parent) is a node that does not exist.
func (t *tree) stat(p string) (node, error) {
	dir, name, err := t.parent(p)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return node{}, nil
		}
		return node{}, err
	}
	defer dir.Close()
	var st unix.Stat_t
	if err := unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return node{}, nil
		}
		return node{}, &os.PathError{Op: "lstat", Path: p, Err: err}
	}
	n := node{mode: st.Mode & 0o7777, uid: st.Uid, gid: st.Gid, size: st.Size}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		n.typ = "file"
	case unix.S_IFDIR:
		n.typ, n.size = "dir", 0
	case unix.S_IFLNK:
		n.typ = "symlink"
	default:
		n.typ = "other"
	}
	return n, nil
}

// read returns regular file p's content (nil, nil if it is not one).
func (t *tree) read(p string) ([]byte, error) {
	f, err := t.openat(p, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) {
			return nil, nil
		}
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// readlink returns symlink p's target.
func (t *tree) readlink(p string) (string, error) {
	dir, name, err := t.parent(p)
	if err != nil {
		return "", err
	}
	defer dir.Close()
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(int(dir.Fd()), name, buf)
	if err != nil {
		return "", &os.PathError{Op: "readlink", Path: p, Err: err}
	}
	return string(buf[:n]), nil
}

// sameContent says whether p is the same (type, mode and content or link
// target) in trees a and b; na and nb are its nodes there.
func sameContent(a, b *tree, p string, na, nb node) (bool, error) {
	if na.typ != nb.typ || na.mode != nb.mode {
		return false, nil
	}
	switch na.typ {
	case "", "dir":
		return true, nil
	case "symlink":
		la, err := a.readlink(p)
		if err != nil {
			return false, err
		}
		lb, err := b.readlink(p)
		return la == lb, err
	case "file":
		if na.size != nb.size {
			return false, nil
		}
		return sameFile(a, b, p)
	}
	return false, nil
}

// sameFile compares regular file p in trees a and b a chunk at a time.
func sameFile(a, b *tree, p string) (bool, error) {
	fa, err := a.openat(p, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return false, err
	}
	defer fa.Close()
	fb, err := b.openat(p, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return false, err
	}
	defer fb.Close()
	ba, bb := make([]byte, 256<<10), make([]byte, 256<<10)
	for {
		na, ea := io.ReadFull(fa, ba)
		nb, eb := io.ReadFull(fb, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return false, nil
		}
		doneA := ea == io.EOF || ea == io.ErrUnexpectedEOF
		doneB := eb == io.EOF || eb == io.ErrUnexpectedEOF
		if doneA || doneB {
			return doneA == doneB, nil
		}
		if ea != nil {
			return false, ea
		}
		if eb != nil {
			return false, eb
		}
	}
}

// entries lists the names in directory p (none if it is not a directory).
func (t *tree) entries(p string) ([]string, error) {
	f, err := t.openat(p, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return nil, nil
		}
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

func rel(p string) string {
	if r := strings.TrimLeft(path.Clean("/"+p), "/"); r != "" {
		return r
	}
	return "."
}
