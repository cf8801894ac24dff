package dir

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/storage"
)

// A dir pool moves a snapshot to another host as a tar (PAX) of its tree:
// every entry with its numeric owner, mode (setuid bits included), times to
// the nanosecond and xattrs (SCHILY.xattr.*). Whole only: plain
// directories keep no record of what changed since a parent, so there is
// no delta to send. Hard links arrive as separate files.

var _ storage.Transferer = (*Storage)(nil)

// xattrPrefix is the PAX record name of an extended attribute.
const xattrPrefix = "SCHILY.xattr."

// TransferFormat implements storage.Transferer.
func (s *Storage) TransferFormat() string { return "tar" }

// Export implements storage.Transferer: the tree of key, parents before
// their children.
func (s *Storage) Export(ctx context.Context, key, base storage.Key, w io.Writer) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if base != (storage.Key{}) {
		return fmt.Errorf("export %s against %s: the dir storage exports whole snapshots only (no base): %w", key, base, errdefs.ErrUnsupported)
	}
	if err := s.checkVolume(key); err != nil {
		return fmt.Errorf("export %s: %w", key, err)
	}
	root := s.Path(key)
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		return writeEntry(tw, p, filepath.ToSlash(rel))
	})
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		return fmt.Errorf("export %s: %w", key, err)
	}
	return nil
}

// writeEntry writes the file at p, named rel in the tar.
func writeEntry(tw *tar.Writer, p, rel string) error {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return err
	}
	h := &tar.Header{
		Name: rel, Mode: int64(st.Mode & 0o7777), Uid: int(st.Uid), Gid: int(st.Gid),
		ModTime:    time.Unix(st.Mtim.Unix()),
		AccessTime: time.Unix(st.Atim.Unix()),
		Format:     tar.FormatPAX,
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		h.Typeflag, h.Name = tar.TypeDir, rel+"/"
	case unix.S_IFREG:
		h.Typeflag, h.Size = tar.TypeReg, st.Size
	case unix.S_IFLNK:
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		h.Typeflag, h.Linkname = tar.TypeSymlink, target
	case unix.S_IFCHR, unix.S_IFBLK:
		h.Typeflag = tar.TypeChar
		if st.Mode&unix.S_IFMT == unix.S_IFBLK {
			h.Typeflag = tar.TypeBlock
		}
		h.Devmajor, h.Devminor = int64(unix.Major(st.Rdev)), int64(unix.Minor(st.Rdev))
	case unix.S_IFIFO:
		h.Typeflag = tar.TypeFifo
	default:
		return nil // sockets: nothing to carry
	}
	h.PAXRecords = xattrsOf(p)
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	if h.Typeflag != tar.TypeReg {
		return nil
	}
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.CopyN(tw, f, st.Size); err != nil {
		return fmt.Errorf("%s changed while it was exported: %w", p, err)
	}
	return nil
}

// xattrsOf is p's extended attributes as PAX records (nil: none).
func xattrsOf(p string) map[string]string {
	size, err := unix.Llistxattr(p, nil)
	if err != nil || size <= 0 {
		return nil
	}
	buf := make([]byte, size)
	if size, err = unix.Llistxattr(p, buf); err != nil {
		return nil
	}
	out := map[string]string{}
	for _, name := range strings.Split(string(buf[:size]), "\x00") {
		if name == "" {
			continue
		}
		n, err := unix.Lgetxattr(p, name, nil)
		if err != nil {
			continue
		}
		val := make([]byte, n)
		if n, err = unix.Lgetxattr(p, name, val); err == nil {
			out[xattrPrefix+name] = string(val[:n])
		}
	}
	return out
}

// Import implements storage.Transferer: the tar is unpacked beside the
// kind's volumes under a temporary name, checked with verify, and renamed
// into place read-only.
func (s *Storage) Import(ctx context.Context, r io.Reader, base, key storage.Key, verify func() error) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if base != (storage.Key{}) {
		return fmt.Errorf("import %s: a tar is whole, never a delta against %s: %w", key, base, errdefs.ErrInvalid)
	}
	if _, err := os.Lstat(s.Path(key)); err == nil {
		return fmt.Errorf("import %s: %w", key, errdefs.ErrAlreadyExists)
	}
	tmp := filepath.Join(s.root, string(key.Kind), tmpPrefix+key.Name+"-"+ids.New(8))
	err := untar(ctx, r, tmp)
	if err == nil && verify != nil {
		err = verify()
	}
	if err == nil {
		err = s.publish(key, tmp, true)
	}
	if err != nil {
		removeAll(tmp)
		return fmt.Errorf("import %s: %w", key, err)
	}
	return nil
}

// untar unpacks the tar in r into the new directory dst. Every entry must
// name a path inside dst whose parents the tar made as directories before
// it, and nothing twice: nothing is ever written through a symlink or over
// an entry already made.
func untar(ctx context.Context, r io.Reader, dst string) error {
	if err := os.Mkdir(dst, 0o700); err != nil {
		return errnoKind(err)
	}
	dirs := map[string]*tar.Header{".": nil} // made so far; metadata set at the end
	var order []string
	tr := tar.NewReader(r)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return badTar("%v", err)
		}
		name, err := entryName(h.Name, dirs)
		if err != nil {
			return err
		}
		p := filepath.Join(dst, filepath.FromSlash(name))
		if name == "." {
			if h.Typeflag != tar.TypeDir {
				return badTar("the root entry is not a directory")
			}
			dirs["."] = h
			continue
		}
		if h.Typeflag == tar.TypeDir {
			if err := os.Mkdir(p, 0o700); err != nil {
				return badTar("%s: %v", name, err)
			}
			dirs[name], order = h, append(order, name)
			continue
		}
		if err := makeEntry(tr, h, p, name); err != nil {
			return err
		}
	}
	// Directories last, deepest first: their times would move with every
	// entry made in them.
	for i := len(order) - 1; i >= 0; i-- {
		if err := setMeta(filepath.Join(dst, filepath.FromSlash(order[i])), dirs[order[i]]); err != nil {
			return err
		}
	}
	if h := dirs["."]; h != nil {
		return setMeta(dst, h)
	}
	return nil
}

// entryName is a tar entry's cleaned name, refused unless it lies inside
// the tree and its parent is a directory the tar made.
func entryName(raw string, dirs map[string]*tar.Header) (string, error) {
	name := path.Clean(raw)
	if path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
		return "", badTar("bad path %q: out of the volume", raw)
	}
	if name == "." {
		return name, nil
	}
	if _, ok := dirs[name]; ok {
		return "", badTar("bad path %q: twice in the tar", raw)
	}
	if _, ok := dirs[path.Dir(name)]; !ok {
		return "", badTar("bad path %q: its directory is not in the tar before it", raw)
	}
	return name, nil
}

// makeEntry makes the non-directory entry h at p (never replacing one).
func makeEntry(tr *tar.Reader, h *tar.Header, p, name string) error {
	var err error
	switch h.Typeflag {
	case tar.TypeReg:
		err = writeFile(tr, p)
	case tar.TypeSymlink:
		err = os.Symlink(h.Linkname, p)
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		mode := map[byte]uint32{tar.TypeChar: unix.S_IFCHR, tar.TypeBlock: unix.S_IFBLK, tar.TypeFifo: unix.S_IFIFO}[h.Typeflag]
		err = unix.Mknod(p, mode|0o600, int(unix.Mkdev(uint32(h.Devmajor), uint32(h.Devminor))))
	default:
		return badTar("%s: entry type %q is not one the dir storage exports", name, h.Typeflag)
	}
	if err != nil {
		return badTar("%s: %v", name, err)
	}
	return setMeta(p, h)
}

func writeFile(r io.Reader, p string) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// setMeta gives p the owner, mode, xattrs and times of h, in the order
// setMetadata (copy.go) explains.
func setMeta(p string, h *tar.Header) error {
	if err := unix.Lchown(p, h.Uid, h.Gid); err != nil && (!errors.Is(err, unix.EPERM) || os.Geteuid() == 0) {
		return fmt.Errorf("chown %s: %w", p, err)
	}
	if h.Typeflag != tar.TypeSymlink {
		if err := unix.Fchmodat(unix.AT_FDCWD, p, uint32(h.Mode)&0o7777, 0); err != nil {
			return fmt.Errorf("chmod %s: %w", p, err)
		}
	}
	for k, v := range h.PAXRecords {
		if name, ok := strings.CutPrefix(k, xattrPrefix); ok {
			unix.Lsetxattr(p, name, []byte(v), 0) // optional, as in copyXattrs
		}
	}
	ts := []unix.Timespec{unix.NsecToTimespec(h.AccessTime.UnixNano()), unix.NsecToTimespec(h.ModTime.UnixNano())}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("set times of %s: %w", p, err)
	}
	return nil
}

func badTar(format string, args ...any) error {
	return fmt.Errorf("tar stream: "+format+": %w", append(args, errdefs.ErrInvalid)...)
}
