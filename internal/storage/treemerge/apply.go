package treemerge

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/ids"
)

// writeFile makes p in t a regular file holding data (or, when data is nil,
// a copy of p in src), with n's mode and owner. It is written beside p and
// renamed over it, so p is never half-written and a symlink at p is
// replaced, never written through.
func (t *tree) writeFile(p string, n node, data []byte, src *tree) error {
	dir, name, err := t.parent(p)
	if err != nil {
		return err
	}
	defer dir.Close()
	tmp := ".warren-merge-" + ids.New(8)
	fd, err := unix.Openat(int(dir.Fd()), tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return &os.PathError{Op: "create", Path: p, Err: err}
	}
	f := os.NewFile(uintptr(fd), tmp)
	err = fill(f, p, data, src)
	if err == nil {
		err = own(f, n)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = t.replace(dir, tmp, name)
	}
	if err != nil {
		_ = unix.Unlinkat(int(dir.Fd()), tmp, 0)
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}

func fill(f *os.File, p string, data []byte, src *tree) error {
	if data != nil || src == nil {
		_, err := f.Write(data)
		return err
	}
	in, err := src.openat(p, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return err
	}
	defer in.Close()
	_, err = io.Copy(f, in)
	return err
}

// own gives f n's owner, then its mode (a chown clears setuid bits).
func own(f *os.File, n node) error {
	if err := f.Chown(int(n.uid), int(n.gid)); err != nil {
		return err
	}
	return unix.Fchmod(int(f.Fd()), n.mode)
}

// replace renames tmp over name in dir; a directory in the way (emptied
// first by the merge) is removed.
func (t *tree) replace(dir *os.File, tmp, name string) error {
	err := unix.Renameat(int(dir.Fd()), tmp, int(dir.Fd()), name)
	if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
		if err = unix.Unlinkat(int(dir.Fd()), name, unix.AT_REMOVEDIR); err == nil {
			err = unix.Renameat(int(dir.Fd()), tmp, int(dir.Fd()), name)
		}
	}
	return err
}

// symlink makes p in t a symlink to target owned as n.
func (t *tree) symlink(p string, n node, target string) error {
	dir, name, err := t.parent(p)
	if err != nil {
		return err
	}
	defer dir.Close()
	tmp := ".warren-merge-" + ids.New(8)
	if err := unix.Symlinkat(target, int(dir.Fd()), tmp); err != nil {
		return &os.PathError{Op: "symlink", Path: p, Err: err}
	}
	err = unix.Fchownat(int(dir.Fd()), tmp, int(n.uid), int(n.gid), unix.AT_SYMLINK_NOFOLLOW)
	if err == nil {
		err = t.replace(dir, tmp, name)
	}
	if err != nil {
		_ = unix.Unlinkat(int(dir.Fd()), tmp, 0)
		return fmt.Errorf("symlink %s: %w", p, err)
	}
	return nil
}

// mkdir makes p in t a directory with n's mode and owner (a directory
// there keeps its entries and takes the mode; anything else is replaced).
func (t *tree) mkdir(p string, n node) error {
	dir, name, err := t.parent(p)
	if err != nil {
		return err
	}
	defer dir.Close()
	err = unix.Mkdirat(int(dir.Fd()), name, 0o700)
	if errors.Is(err, unix.EEXIST) {
		var st unix.Stat_t
		if err = unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			if err = unix.Unlinkat(int(dir.Fd()), name, 0); err == nil {
				err = unix.Mkdirat(int(dir.Fd()), name, 0o700)
			}
		}
	}
	if err != nil {
		return &os.PathError{Op: "mkdir", Path: p, Err: err}
	}
	f, err := t.openat(p, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return err
	}
	defer f.Close()
	return own(f, n)
}

// remove removes p from t: a file or symlink, or an empty directory. A
// directory that still has entries (added on our side) is an error.
func (t *tree) remove(p string) error {
	dir, name, err := t.parent(p)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	defer dir.Close()
	err = unix.Unlinkat(int(dir.Fd()), name, 0)
	if errors.Is(err, unix.EISDIR) {
		err = unix.Unlinkat(int(dir.Fd()), name, unix.AT_REMOVEDIR)
	}
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return &os.PathError{Op: "remove", Path: p, Err: err}
	}
	return nil
}

// copyNode makes p in dst what it is in src (n): the same file, symlink
// or directory, or nothing.
func copyNode(dst, src *tree, p string, n node) error {
	switch n.typ {
	case "":
		return dst.remove(p)
	case "file":
		return dst.writeFile(p, n, nil, src)
	case "symlink":
		target, err := src.readlink(p)
		if err != nil {
			return err
		}
		return dst.symlink(p, n, target)
	case "dir":
		return dst.mkdir(p, n)
	}
	return fmt.Errorf("%s is neither a file, a directory nor a symlink: %w", p, os.ErrInvalid)
}
