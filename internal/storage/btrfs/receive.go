package btrfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
)

// applier replays send streams into one writable volume. `btrfs receive`
// makes a new snapshot for every stream and commits it, twice, which on a
// large tree costs ~100 ms a stream; replaying a whole chain into one
// volume writes it back once, at the end (see Restore).
type applier struct {
	root *os.File // the volume being rebuilt

	// Clone sources: the stream's own volume (root) and the state it is a
	// delta against (parentView), which for the first stream of a chain is
	// the base volume and for later ones a snapshot of root taken before
	// the stream, made only when the stream clones from its parent.
	self, parent subvolUUID
	parentView   *os.File

	// The file WRITE, CLONE and TRUNCATE go to, kept open across the run
	// of them the kernel emits for one file.
	openPath string
	open     *os.File
	// The range of the open file written since it was last handed to
	// writeback (see startWriteback).
	dirtyFrom, dirtyTo int64

	// Data of consecutive WRITEs to one file, gathered into one write (see
	// gatherMax): pend goes at pendOff in pendPath.
	pend     []byte
	pendOff  int64
	pendPath string

	written int64 // bytes of file data written, for the log
}

func (a *applier) closeOpen() {
	if a.open != nil {
		if a.dirtyTo-a.dirtyFrom >= writebackMin {
			a.startWriteback()
		}
		a.open.Close()
		a.open, a.openPath = nil, ""
		a.dirtyFrom, a.dirtyTo = 0, 0
	}
}

// A version 1 stream carries at most 48 KiB of data a command, and a
// buffered write to btrfs pays per call for its space reservation and extent
// bookkeeping as much as for the bytes: gathering the data of consecutive
// WRITEs to one file into writes of up to gatherMax costs a copy and saves
// most of those calls.
const gatherMax = 1 << 20

// gather adds a WRITE of data at off in p to the pending write, writing out
// the pending one first when this one does not continue it.
func (a *applier) gather(p string, off int64, data []byte) error {
	if p == a.pendPath && off == a.pendOff+int64(len(a.pend)) && len(a.pend)+len(data) <= gatherMax {
		a.pend = append(a.pend, data...)
		return nil
	}
	if err := a.flush(); err != nil {
		return err
	}
	if a.pend == nil {
		a.pend = make([]byte, 0, gatherMax)
	}
	a.pendPath, a.pendOff, a.pend = p, off, append(a.pend[:0], data...)
	return nil
}

// flush writes the pending write out.
func (a *applier) flush() error {
	if len(a.pend) == 0 {
		return nil
	}
	f, err := a.writable(a.pendPath)
	if err != nil {
		return err
	}
	n, err := f.WriteAt(a.pend, a.pendOff)
	a.written += int64(n)
	a.noteWritten(a.pendOff, int64(n))
	a.pend = a.pend[:0]
	if err != nil {
		return fmt.Errorf("%s: %w", a.pendPath, err)
	}
	return nil
}

// Writeback of received data is started as it is written, in writebackChunk
// pieces of each large file, rather than all at once by the syncfs at the
// end: with the default dirty ratios a whole GiB would wait in memory and
// then be written while the import waits, where this way the disk writes
// while the stream is still arriving. Small files are left to the syncfs.
const (
	writebackChunk = 8 << 20
	writebackMin   = 1 << 20
)

// noteWritten records a write of n bytes at off to the open file and starts
// writeback of what has gathered once it is a chunk.
func (a *applier) noteWritten(off, n int64) {
	if a.dirtyTo == a.dirtyFrom || off < a.dirtyFrom || off > a.dirtyTo {
		if a.dirtyTo-a.dirtyFrom >= writebackMin {
			a.startWriteback()
		}
		a.dirtyFrom, a.dirtyTo = off, off
	}
	a.dirtyTo = max(a.dirtyTo, off+n)
	if a.dirtyTo-a.dirtyFrom >= writebackChunk {
		a.startWriteback()
	}
}

// startWriteback asks the kernel to start writing the open file's dirty
// range without waiting for it (best effort: the syncfs at the end writes
// whatever this did not).
func (a *applier) startWriteback() {
	_ = unix.SyncFileRange(int(a.open.Fd()), a.dirtyFrom, a.dirtyTo-a.dirtyFrom, unix.SYNC_FILE_RANGE_WRITE)
	a.dirtyFrom = a.dirtyTo
}

// resolveBeneath opens the directory holding p inside root without
// following symbolic links or leaving root, and returns it with p's last
// component; the root itself is (root, "."). The caller closes dir unless
// it is root.
func resolveBeneath(root *os.File, p string) (dir int, base string, err error) {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		if p == "" {
			p = "."
		}
		return int(root.Fd()), p, nil
	}
	fd, err := unix.Openat2(int(root.Fd()), p[:i], &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return -1, "", fmt.Errorf("%s: %w", p[:i], err)
	}
	return fd, p[i+1:], nil
}

// at runs op on p's directory and last component.
func (a *applier) at(p string, op func(dir int, base string) error) error {
	return at(a.root, p, op)
}

func at(root *os.File, p string, op func(dir int, base string) error) error {
	dir, base, err := resolveBeneath(root, p)
	if err != nil {
		return err
	}
	if dir != int(root.Fd()) {
		defer unix.Close(dir)
	}
	return op(dir, base)
}

// openFile opens a regular file inside root. Anything else is refused
// before it can block (a FIFO) or reach a device through a node in the
// volume.
func openFile(root *os.File, p string, flags int) (*os.File, error) {
	var f *os.File
	err := at(root, p, func(dir int, base string) error {
		fd, err := unix.Openat(dir, base, flags|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			unix.Close(fd)
			return streamErr("%s is not a regular file", p)
		}
		f = os.NewFile(uintptr(fd), p)
		return nil
	})
	return f, err
}

func (a *applier) writable(p string) (*os.File, error) {
	if a.open != nil && a.openPath == p {
		return a.open, nil
	}
	a.closeOpen()
	f, err := openFile(a.root, p, unix.O_WRONLY)
	if err != nil {
		return nil, err
	}
	a.open, a.openPath = f, p
	return f, nil
}

// xattrPath names p's last component through its already resolved
// directory, so the l*xattr calls cannot be led out of the volume.
func xattrPath(dir int, base string) string {
	return "/proc/self/fd/" + strconv.Itoa(dir) + "/" + base
}

// apply replays the rest of one stream (its head already read) and stops at
// its END command or the end of the input.
func (a *applier) apply(s *streamReader) error {
	for {
		c, err := s.next()
		if err == io.EOF || err == nil && c.cmd == cmdEnd {
			return a.flush()
		}
		if err != nil {
			return err
		}
		if err := a.do(c); err != nil {
			if errdefs.IsInvalid(err) {
				return err
			}
			return fmt.Errorf("send stream command %d (%s): %w", s.n-1, c.cmd, err)
		}
	}
}

// do applies one command of a stream. The replay is hand-written, not `btrfs
// receive`, for a measured reason: receive makes and commits a snapshot per
// stream (~100 ms a stream on a large tree), where a chain replayed into
// one volume is written back once (see applier and Restore).
func (a *applier) do(c *streamCommand) error {
	if c.cmd != cmdWrite {
		if err := a.flush(); err != nil {
			return err
		}
	}
	if c.cmd != cmdWrite && c.cmd != cmdClone && c.cmd != cmdTruncate {
		a.closeOpen()
	}
	p, err := c.path(attrPath)
	if err != nil {
		return err
	}
	switch c.cmd {
	case cmdMkfile, cmdMkdir, cmdMknod, cmdMkfifo, cmdMksock, cmdSymlink, cmdRename, cmdLink, cmdUnlink, cmdRmdir:
		return a.doEntry(c, p)
	case cmdWrite, cmdClone, cmdTruncate:
		return a.doData(c, p)
	case cmdSetXattr, cmdRemoveXattr, cmdChmod, cmdChown, cmdUtimes:
		return a.doAttr(c, p)
	default:
		// SUBVOL or SNAPSHOT past the head, UPDATE_EXTENT (only in
		// streams sent without data) or a later version's command.
		return streamErr("unexpected %s", c.cmd)
	}
}

// doEntry applies a command that makes, moves or removes a directory entry
// at p.
func (a *applier) doEntry(c *streamCommand, p string) error {
	switch c.cmd {
	case cmdMkfile:
		return a.at(p, func(dir int, base string) error {
			fd, err := unix.Openat(dir, base, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
			if err == nil {
				unix.Close(fd)
			}
			return err
		})
	case cmdMkdir:
		return a.at(p, func(dir int, base string) error { return unix.Mkdirat(dir, base, 0o700) })
	case cmdMknod, cmdMkfifo, cmdMksock:
		return a.mknod(c, p)
	case cmdSymlink:
		target, err := c.get(attrPathLink)
		if err != nil {
			return err
		}
		return a.at(p, func(dir int, base string) error { return unix.Symlinkat(string(target), dir, base) })
	case cmdRename:
		to, err := c.path(attrPathTo)
		if err != nil {
			return err
		}
		return a.at(p, func(odir int, obase string) error {
			return a.at(to, func(ndir int, nbase string) error { return unix.Renameat(odir, obase, ndir, nbase) })
		})
	case cmdLink:
		existing, err := c.path(attrPathLink)
		if err != nil {
			return err
		}
		return a.at(existing, func(odir int, obase string) error {
			return a.at(p, func(ndir int, nbase string) error { return unix.Linkat(odir, obase, ndir, nbase, 0) })
		})
	case cmdUnlink:
		return a.at(p, func(dir int, base string) error { return unix.Unlinkat(dir, base, 0) })
	case cmdRmdir:
		return a.at(p, func(dir int, base string) error { return unix.Unlinkat(dir, base, unix.AT_REMOVEDIR) })
	default:
		return streamErr("unexpected %s", c.cmd)
	}
}

// mknod makes the device node, FIFO or socket of c at p.
func (a *applier) mknod(c *streamCommand, p string) error {
	var err error
	mode, rdev := uint64(unix.S_IFIFO), uint64(0)
	switch c.cmd {
	case cmdMksock:
		mode = unix.S_IFSOCK
	case cmdMknod:
		if mode, err = c.u64(attrMode); err != nil {
			return err
		}
		if rdev, err = c.u64(attrRdev); err != nil {
			return err
		}
		mode &= unix.S_IFMT
	}
	// Permissions come in a later CHMOD.
	return a.at(p, func(dir int, base string) error { return unix.Mknodat(dir, base, uint32(mode)|0o600, int(rdev)) })
}

// doData applies a command that writes file data at p.
func (a *applier) doData(c *streamCommand, p string) error {
	switch c.cmd {
	case cmdWrite:
		off, err := c.u64(attrFileOffset)
		if err != nil {
			return err
		}
		data, err := c.get(attrData)
		if err != nil {
			return err
		}
		return a.gather(p, int64(off), data)
	case cmdClone:
		return a.clone(c, p)
	case cmdTruncate:
		size, err := c.u64(attrSize)
		if err != nil {
			return err
		}
		f, err := a.writable(p)
		if err != nil {
			return err
		}
		return f.Truncate(int64(size))
	default:
		return streamErr("unexpected %s", c.cmd)
	}
}

// doAttr applies a command that sets p's extended attributes, mode, owner
// or times.
func (a *applier) doAttr(c *streamCommand, p string) error {
	switch c.cmd {
	case cmdSetXattr, cmdRemoveXattr:
		name, err := c.get(attrXattrName)
		if err != nil {
			return err
		}
		if c.cmd == cmdRemoveXattr {
			return a.at(p, func(dir int, base string) error { return unix.Lremovexattr(xattrPath(dir, base), string(name)) })
		}
		data, err := c.get(attrXattrData)
		if err != nil {
			return err
		}
		return a.at(p, func(dir int, base string) error { return unix.Lsetxattr(xattrPath(dir, base), string(name), data, 0) })
	case cmdChmod:
		mode, err := c.u64(attrMode)
		if err != nil {
			return err
		}
		return a.at(p, func(dir int, base string) error {
			// fchmodat follows a symbolic link; the kernel never sends a
			// chmod for one (its mode means nothing), so refuse it.
			var st unix.Stat_t
			if err := unix.Fstatat(dir, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return err
			}
			if st.Mode&unix.S_IFMT == unix.S_IFLNK {
				return streamErr("chmod of the symbolic link %s", p)
			}
			return unix.Fchmodat(dir, base, uint32(mode&0o7777), 0)
		})
	case cmdChown:
		uid, err := c.u64(attrUID)
		if err != nil {
			return err
		}
		gid, err := c.u64(attrGID)
		if err != nil {
			return err
		}
		return a.at(p, func(dir int, base string) error {
			return unix.Fchownat(dir, base, int(uid), int(gid), unix.AT_SYMLINK_NOFOLLOW)
		})
	case cmdUtimes:
		asec, ansec, err := c.timespec(attrAtime)
		if err != nil {
			return err
		}
		msec, mnsec, err := c.timespec(attrMtime)
		if err != nil {
			return err
		}
		ts := []unix.Timespec{{Sec: asec, Nsec: ansec}, {Sec: msec, Nsec: mnsec}}
		return a.at(p, func(dir int, base string) error { return unix.UtimesNanoAt(dir, base, ts, unix.AT_SYMLINK_NOFOLLOW) })
	default:
		return streamErr("unexpected %s", c.cmd)
	}
}

// clone shares a range of another file's extents, as the sender did.
func (a *applier) clone(c *streamCommand, p string) error {
	off, err := c.u64(attrFileOffset)
	if err != nil {
		return err
	}
	n, err := c.u64(attrCloneLen)
	if err != nil {
		return err
	}
	from, err := c.uuid(attrCloneUUID)
	if err != nil {
		return err
	}
	srcPath, err := c.path(attrClonePath)
	if err != nil {
		return err
	}
	srcOff, err := c.u64(attrCloneOffset)
	if err != nil {
		return err
	}
	var srcRoot *os.File
	switch {
	case from == a.self:
		srcRoot = a.root
	case from == a.parent && a.parentView != nil:
		srcRoot = a.parentView
	default:
		return streamErr("clone from volume %s, which is neither the stream's nor its parent's", from)
	}
	src, err := openFile(srcRoot, srcPath, unix.O_RDONLY)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := a.writable(p)
	if err != nil {
		return err
	}
	return unix.IoctlFileCloneRange(int(dst.Fd()), &unix.FileCloneRange{
		Src_fd: int64(src.Fd()), Src_offset: srcOff, Src_length: n, Dest_offset: off,
	})
}

// scanStream reads the rest of a stream (its head already read), so that
// every command's checksum and layout is checked, and reports whether any
// CLONE takes its source from the stream's parent.
func scanStream(s *streamReader, parent subvolUUID) (clonesParent bool, err error) {
	for {
		c, err := s.next()
		if errors.Is(err, io.EOF) {
			return clonesParent, nil
		}
		if err != nil {
			return false, err
		}
		if c.cmd == cmdEnd {
			return clonesParent, nil
		}
		if c.cmd == cmdClone {
			u, err := c.uuid(attrCloneUUID)
			if err != nil {
				return false, err
			}
			clonesParent = clonesParent || u == parent
		}
	}
}
