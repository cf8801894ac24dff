package template

import (
	"archive/tar"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
)

// extractor writes archive entries into a tree. It is shared by tarballs,
// image layers and directory copies so that all three get the same care.
type extractor struct {
	t   *tree
	log *slog.Logger
	// skipped counts entries left out (device nodes, sockets, unknown
	// types), reported once at the end rather than once per entry.
	skipped int
}

// put writes one entry; r holds a regular file's content.
func (x *extractor) put(hdr *tar.Header, r io.Reader) error {
	rel, err := cleanRel(hdr.Name)
	if err != nil {
		return err
	}
	if rel == "." {
		if hdr.Typeflag != tar.TypeDir {
			return fmt.Errorf("entry %q replaces the root with a non-directory: %w", hdr.Name, errdefs.ErrInvalid)
		}
		fd, err := unix.Openat(x.t.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return x.ownAndMode(fd, hdr)
	}
	parent, base := path.Split(rel)
	pfd, err := x.t.dirFD(strings.TrimSuffix(parent, "/"))
	if err != nil {
		return err
	}
	defer unix.Close(pfd)

	switch hdr.Typeflag {
	case tar.TypeDir:
		err = x.putDir(pfd, base, hdr)
	case tar.TypeReg, tar.TypeCont: // tar.Reader turns the legacy TypeRegA into one of these
		err = x.putFile(pfd, base, hdr, r)
	case tar.TypeSymlink:
		err = x.putSymlink(pfd, base, hdr)
	case tar.TypeLink:
		err = x.putLink(pfd, base, rel, hdr)
	case tar.TypeFifo:
		if err = removeAt(pfd, base); err == nil {
			err = unix.Mknodat(pfd, base, unix.S_IFIFO|uint32(hdr.Mode&0o7777), 0)
		}
		if err == nil {
			err = unix.Fchownat(pfd, base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW)
		}
		if err == nil {
			// mknod honours the umask; we just made base, so it is no symlink.
			err = unix.Fchmodat(pfd, base, uint32(hdr.Mode&0o7777), 0)
		}
	case tar.TypeXGlobalHeader:
		return nil
	default:
		// Device nodes are the runtime's business (it mounts its own /dev);
		// a template must not carry them.
		x.skipped++
		x.log.Debug("template: skipped entry", "name", hdr.Name, "type", string(hdr.Typeflag))
		return nil
	}
	if err != nil {
		return fmt.Errorf("extract /%s: %w", rel, err)
	}
	return nil
}

func (x *extractor) putDir(pfd int, base string, hdr *tar.Header) error {
	var st unix.Stat_t
	err := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if err := removeAt(pfd, base); err != nil {
			return err
		}
	}
	if err := unix.Mkdirat(pfd, base, 0o700); err != nil && err != unix.EEXIST {
		return err
	}
	fd, err := unix.Openat(pfd, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return x.ownAndMode(fd, hdr)
}

func (x *extractor) putFile(pfd int, base string, hdr *tar.Header, r io.Reader) error {
	if err := removeAt(pfd, base); err != nil {
		return err
	}
	fd, err := unix.Openat(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), base)
	defer f.Close()
	if _, err := io.Copy(f, r); err != nil {
		return err
	}
	if err := x.ownAndMode(fd, hdr); err != nil {
		return err
	}
	ts := []unix.Timespec{unix.NsecToTimespec(hdr.AccessTime.UnixNano()), unix.NsecToTimespec(hdr.ModTime.UnixNano())}
	if hdr.AccessTime.IsZero() {
		ts[0] = ts[1]
	}
	if err := unix.UtimesNanoAt(pfd, base, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	return f.Close()
}

func (x *extractor) putSymlink(pfd int, base string, hdr *tar.Header) error {
	if err := removeAt(pfd, base); err != nil {
		return err
	}
	// The target is stored verbatim and never followed here: it means
	// something only inside the sandbox.
	if err := unix.Symlinkat(hdr.Linkname, pfd, base); err != nil {
		return err
	}
	return unix.Fchownat(pfd, base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW)
}

func (x *extractor) putLink(pfd int, base, rel string, hdr *tar.Header) error {
	target, err := cleanRel(hdr.Linkname)
	if err != nil {
		return err
	}
	if target == rel {
		return nil
	}
	if target == "." {
		return fmt.Errorf("hard link to the root: %w", errdefs.ErrInvalid)
	}
	tparent, tbase := path.Split(target)
	tfd, err := x.t.openIn(orDot(strings.TrimSuffix(tparent, "/")), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return fmt.Errorf("hard link target /%s: %w", target, err)
	}
	defer unix.Close(tfd)
	if err := removeAt(pfd, base); err != nil {
		return err
	}
	// flags 0: if the target is a symlink, link the symlink itself.
	return unix.Linkat(tfd, tbase, pfd, base, 0)
}

// ownAndMode sets owner, permission bits and extended attributes on an
// open file or directory.
func (x *extractor) ownAndMode(fd int, hdr *tar.Header) error {
	if err := unix.Fchown(fd, hdr.Uid, hdr.Gid); err != nil {
		return err
	}
	// After chown, which clears set-id bits.
	if err := unix.Fchmod(fd, uint32(hdr.Mode&0o7777)); err != nil {
		return err
	}
	for k, v := range hdr.PAXRecords {
		name, ok := strings.CutPrefix(k, "SCHILY.xattr.")
		if !ok {
			continue
		}
		if err := unix.Fsetxattr(fd, name, []byte(v), 0); err != nil {
			// Some attributes (security.selinux on a host without it)
			// cannot be set; the file is still usable.
			x.log.Debug("template: xattr not set", "name", hdr.Name, "xattr", name, "err", err)
		}
	}
	return nil
}

// finish reports what was left out.
func (x *extractor) finish() {
	if x.skipped > 0 {
		x.log.Warn("template: skipped device nodes and other special files (the runtime provides /dev)", "count", x.skipped)
	}
}
