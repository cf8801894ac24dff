package dir

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// copier copies one tree, keeping modes, owners, times, symlinks, device
// nodes, hard links and (where the filesystem takes them) xattrs: a root
// filesystem depends on all of them (setuid binaries, file capabilities).
type copier struct {
	ctx context.Context
	// links maps a source inode with several names to its first copy, so
	// the others become hard links to it rather than copies.
	links map[inode]string
}

type inode struct{ dev, ino uint64 }

// copyTree copies the directory src to dst, which must not exist.
func copyTree(ctx context.Context, src, dst string) error {
	c := &copier{ctx: ctx, links: map[inode]string{}}
	var st unix.Stat_t
	if err := unix.Lstat(src, &st); err != nil {
		return err
	}
	return c.copyDir(src, dst, &st)
}

func (c *copier) copyDir(src, dst string, st *unix.Stat_t) error {
	// Owner-only until filled: nobody else sees a half-made directory, and
	// a read-only source mode cannot block our own writes into it.
	if err := os.Mkdir(dst, 0o700); err != nil {
		return err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := c.ctx.Err(); err != nil {
			return err
		}
		if err := c.copyEntry(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return setMetadata(src, dst, st)
}

func (c *copier) copyEntry(src, dst string) error {
	var st unix.Stat_t
	if err := unix.Lstat(src, &st); err != nil {
		return err
	}
	mode := st.Mode & unix.S_IFMT
	if mode == unix.S_IFDIR {
		return c.copyDir(src, dst, &st)
	}
	if st.Nlink > 1 {
		id := inode{dev: st.Dev, ino: st.Ino}
		if first, ok := c.links[id]; ok {
			return os.Link(first, dst)
		}
		c.links[id] = dst
	}
	switch mode {
	case unix.S_IFREG:
		if err := copyFileData(src, dst); err != nil {
			return fmt.Errorf("copy %s: %w", src, err)
		}
	case unix.S_IFLNK:
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		if err := os.Symlink(target, dst); err != nil {
			return err
		}
	case unix.S_IFCHR, unix.S_IFBLK, unix.S_IFIFO, unix.S_IFSOCK:
		if err := unix.Mknod(dst, st.Mode, int(st.Rdev)); err != nil {
			return fmt.Errorf("make node %s: %w", dst, err)
		}
	default:
		return fmt.Errorf("copy %s: unknown file type %#o", src, mode)
	}
	return setMetadata(src, dst, &st)
}

// copyFileData copies a regular file's bytes: a reflink (FICLONE) where the
// filesystem shares extents, else copy_file_range (which io.Copy uses
// between files, and which may still share extents on some filesystems).
func copyFileData(src, dst string) error {
	in, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	if err := unix.IoctlFileClone(int(out.Fd()), int(in.Fd())); err != nil {
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
	}
	return out.Close()
}

// setMetadata gives dst the owner, mode, xattrs and times of src (whose
// lstat is st). Order matters: chown clears setuid bits and file
// capabilities, so mode and xattrs come after it; times come last because
// every other change touches them.
func setMetadata(src, dst string, st *unix.Stat_t) error {
	isLink := st.Mode&unix.S_IFMT == unix.S_IFLNK
	if err := unix.Lchown(dst, int(st.Uid), int(st.Gid)); err != nil {
		// Only root may give files away; a non-root pool keeps its own ids.
		if !errors.Is(err, unix.EPERM) || os.Geteuid() == 0 {
			return fmt.Errorf("chown %s: %w", dst, err)
		}
	}
	if !isLink { // symlinks have no mode of their own on Linux
		if err := unix.Fchmodat(unix.AT_FDCWD, dst, st.Mode&0o7777, 0); err != nil {
			return fmt.Errorf("chmod %s: %w", dst, err)
		}
	}
	copyXattrs(src, dst)
	ts := []unix.Timespec{st.Atim, st.Mtim}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, dst, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("set times of %s: %w", dst, err)
	}
	return nil
}

// copyXattrs copies what extended attributes it can. Xattrs are optional
// here: the destination filesystem may not take them, and some namespaces
// (trusted.*) need privileges we may not have.
func copyXattrs(src, dst string) {
	size, err := unix.Llistxattr(src, nil)
	if err != nil || size <= 0 {
		return
	}
	buf := make([]byte, size)
	size, err = unix.Llistxattr(src, buf)
	if err != nil {
		return
	}
	for _, name := range strings.Split(string(buf[:size]), "\x00") {
		if name == "" {
			continue
		}
		n, err := unix.Lgetxattr(src, name, nil)
		if err != nil {
			continue
		}
		val := make([]byte, n)
		if n, err = unix.Lgetxattr(src, name, val); err != nil {
			continue
		}
		unix.Lsetxattr(dst, name, val[:n], 0)
	}
}
