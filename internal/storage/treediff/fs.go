package treediff

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
)

// tree is one side of a comparison: its root directory, held open so that
// every lookup is relative to it, and the device that marks what belongs to it.
type tree struct {
	fd  int
	dev uint64
}

func openTree(root string) (*tree, error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return nil, fmt.Errorf("diff: %s is not a directory: %w", root, errdefs.ErrNotFound)
		}
		return nil, fmt.Errorf("diff: open %s: %w", root, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("diff: stat %s: %w", root, err)
	}
	return &tree{fd: fd, dev: st.Dev}, nil
}

func (t *tree) close() { unix.Close(t.fd) }

// entry is what a tree holds at one path.
type entry struct {
	st     unix.Stat_t
	target string // symlinks only
}

func (e *entry) isDir() bool { return e != nil && e.st.Mode&unix.S_IFMT == unix.S_IFDIR }

func (e *entry) typ() string {
	switch e.st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "file"
	case unix.S_IFDIR:
		return "dir"
	case unix.S_IFLNK:
		return "symlink"
	}
	return "other"
}

// size is what a Change reports: directories' sizes are bookkeeping.
func (e *entry) size() int64 {
	if e.isDir() {
		return 0
	}
	return e.st.Size
}

func (e *entry) mode() uint32 { return e.st.Mode & 0o7777 }

// statAt looks at name inside the open directory dirFd without following
// it. It returns nil for a missing name and for an entry on another device
// (not part of the tree).
func (t *tree) statAt(dirFd int, name string) (*entry, error) {
	// A live tree changes under the walk: a symlink replaced by a file
	// between the stat and the readlink (EINVAL) is looked at again.
	// Against a sandbox that keeps flipping it, the last look wins, target
	// unknown: the diff reports the path changed, which it is.
	for attempt := 0; ; attempt++ {
		e, err := t.statOnce(dirFd, name, attempt == 5)
		if errors.Is(err, unix.EINVAL) {
			continue
		}
		return e, err
	}
}

func (t *tree) statOnce(dirFd int, name string, lastTry bool) (*entry, error) {
	e := &entry{}
	if err := unix.Fstatat(dirFd, name, &e.st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return nil, nil
		}
		return nil, fmt.Errorf("stat %s: %w", name, err)
	}
	if e.st.Dev != t.dev {
		return nil, nil
	}
	if e.st.Mode&unix.S_IFMT == unix.S_IFLNK {
		buf := make([]byte, 256)
		for {
			n, err := unix.Readlinkat(dirFd, name, buf)
			if err != nil {
				if errors.Is(err, unix.ENOENT) {
					return nil, nil // removed under us
				}
				if errors.Is(err, unix.EINVAL) && lastTry {
					return e, nil
				}
				return nil, fmt.Errorf("read link %s: %w", name, err)
			}
			if n < len(buf) {
				e.target = string(buf[:n])
				break
			}
			buf = make([]byte, 2*len(buf))
		}
	}
	return e, nil
}

// openDirAt opens the directory name inside dirFd, refusing symlinks. It
// returns -1 when the name is gone or no longer a directory of this tree
// (the tree changed under us; the walk then sees it as empty).
func (t *tree) openDirAt(dirFd int, name string) (int, error) {
	fd, err := unix.Openat(dirFd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return -1, nil
		}
		return -1, fmt.Errorf("open directory %s: %w", name, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Dev != t.dev {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// openDir opens the directory at the tree path p ("/a/b") strictly inside
// the tree: no symlink, no "..", no mount crossing on the way. It returns
// -1 when p is not a directory of this tree.
func (t *tree) openDir(p string) (int, error) {
	rel := strings.TrimPrefix(path.Clean(p), "/")
	if rel == "" {
		rel = "."
	}
	fd, err := unix.Openat2(t.fd, rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		switch {
		case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
			return -1, nil
		}
		return -1, fmt.Errorf("open directory %s: %w", p, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Dev != t.dev {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// lookup returns the entry at tree path p (nil when absent), and the
// open parent directory (-1 when absent) for the caller to close.
func (t *tree) lookup(p string) (*entry, int, error) {
	p = path.Clean(p)
	if p == "/" {
		e := &entry{}
		if err := unix.Fstat(t.fd, &e.st); err != nil {
			return nil, -1, fmt.Errorf("stat root: %w", err)
		}
		return e, -1, nil
	}
	dir, name := path.Split(p)
	dfd, err := t.openDir(dir)
	if err != nil || dfd < 0 {
		return nil, -1, err
	}
	e, err := t.statAt(dfd, name)
	if err != nil {
		unix.Close(dfd)
		return nil, -1, err
	}
	return e, dfd, nil
}

// readDir lists the open directory fd (without "." and ".."), reading
// inode numbers from getdents so that unchanged names cost no stat.
func readDir(fd int) (map[string]uint64, error) {
	if _, err := unix.Seek(fd, 0, 0); err != nil {
		return nil, fmt.Errorf("rewind directory: %w", err)
	}
	out := map[string]uint64{}
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return nil, fmt.Errorf("read directory: %w", err)
		}
		if n <= 0 {
			return out, nil
		}
		for off := 0; off < n; {
			// struct linux_dirent64: u64 ino, s64 off, u16 reclen, u8 type, name.
			rec := buf[off:n]
			if len(rec) < 19 {
				return nil, fmt.Errorf("read directory: short record")
			}
			ino := *(*uint64)(unsafe.Pointer(&rec[0]))
			reclen := int(*(*uint16)(unsafe.Pointer(&rec[16])))
			if reclen < 19 || reclen > len(rec) {
				return nil, fmt.Errorf("read directory: bad record length %d", reclen)
			}
			name := rec[19:reclen]
			if i := indexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if s := string(name); s != "." && s != ".." {
				out[s] = ino
			}
			off += reclen
		}
	}
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

func join(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}
