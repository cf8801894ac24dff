package sharedvol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
)

// The content API works on the volume's tree from the host, through an
// os.Root: every path is resolved inside the volume and a symlink cannot
// lead out of it (a sandbox that mounts the volume may have planted any).

// maxListEntries bounds one listing.
const maxListEntries = 100_000

// Entry describes one file or directory of a volume.
type Entry struct {
	Name, Path string // Path is absolute inside the volume ("/a/b")
	Type       string // file, directory, symlink or unknown
	Size       int64
	Mode       uint32 // permission bits with setuid, setgid and sticky
	UID, GID   uint32
	Atime      time.Time
	Mtime      time.Time
	Ctime      time.Time
	Target     string // a symlink's target
}

// Owner says who owns what the content API makes (nil fields: the
// sandboxes' user) and its mode (nil: 0644 for files, 0755 for
// directories).
type Owner struct {
	UID, GID *uint32
	Mode     *uint32
}

// rel turns an API path ("/a/b", "a/b", "" or "/") into one relative to the
// volume's root ("." for the root). '..' is refused rather than resolved, so
// that a path means what it says.
func rel(p string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("path holds a NUL byte: %w", errdefs.ErrInvalid)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", fmt.Errorf("path %q must not hold '..': %w", p, errdefs.ErrInvalid)
		}
	}
	r := strings.TrimPrefix(path.Clean("/"+p), "/")
	if r == "" {
		return ".", nil
	}
	return r, nil
}

func (s *Service) open(v store.Volume) (*os.Root, error) {
	r, err := os.OpenRoot(s.st.Path(key(v.ID)))
	if err != nil {
		return nil, fmt.Errorf("open volume %s: %w", v.Name, kindOf(err))
	}
	return r, nil
}

// Stat describes one path of the volume.
func (s *Service) Stat(ctx context.Context, v store.Volume, p string) (Entry, error) {
	r, err := s.open(v)
	if err != nil {
		return Entry{}, err
	}
	defer r.Close()
	rp, err := rel(p)
	if err != nil {
		return Entry{}, err
	}
	return entryOf(r, rp)
}

// ListDir lists a directory, depth levels deep (1: its entries only).
func (s *Service) ListDir(ctx context.Context, v store.Volume, p string, depth int) ([]Entry, error) {
	if depth <= 0 {
		depth = 1
	}
	r, err := s.open(v)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	rp, err := rel(p)
	if err != nil {
		return nil, err
	}
	if e, err := entryOf(r, rp); err != nil {
		return nil, err
	} else if e.Type != "directory" {
		return nil, fmt.Errorf("%s is not a directory: %w", p, errdefs.ErrInvalid)
	}
	out := []Entry{}
	var walk func(dir string, level int) error
	walk = func(dir string, level int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		f, err := r.Open(dir)
		if err != nil {
			return fmt.Errorf("list %s: %w", dir, kindOf(err))
		}
		names, err := f.Readdirnames(-1)
		f.Close()
		if err != nil {
			return fmt.Errorf("list %s: %w", dir, kindOf(err))
		}
		for _, n := range names {
			if len(out) >= maxListEntries {
				return fmt.Errorf("listing holds more than %d entries; list a smaller depth: %w", maxListEntries, errdefs.ErrInvalid)
			}
			e, err := entryOf(r, path.Join(dir, n))
			if errdefs.IsNotFound(err) {
				continue // removed while listed
			}
			if err != nil {
				return err
			}
			out = append(out, e)
			if e.Type == "directory" && level < depth {
				if err := walk(path.Join(dir, n), level+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(rp, 1); err != nil {
		return nil, err
	}
	return out, nil
}

// MakeDir makes a directory; with parents, its missing parents too, and an
// existing directory is no error.
func (s *Service) MakeDir(ctx context.Context, v store.Volume, p string, parents bool, o Owner) (Entry, error) {
	r, err := s.open(v)
	if err != nil {
		return Entry{}, err
	}
	defer r.Close()
	rp, err := rel(p)
	if err != nil {
		return Entry{}, err
	}
	if rp == "." {
		return Entry{}, fmt.Errorf("the volume's root exists already: %w", errdefs.ErrAlreadyExists)
	}
	mode := o.modeOr(0o755)
	if parents {
		err = mkdirAll(r, rp, mode, o)
	} else {
		err = r.Mkdir(rp, mode)
		if err == nil {
			err = own(r, rp, mode, o)
		}
	}
	if err != nil {
		return Entry{}, fmt.Errorf("make directory %s: %w", p, kindOf(err))
	}
	return entryOf(r, rp)
}

// mkdirAll makes rp and its missing parents, each owned as o says.
func mkdirAll(r *os.Root, rp string, mode fs.FileMode, o Owner) error {
	parts := strings.Split(rp, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		err := r.Mkdir(p, mode)
		if errors.Is(err, fs.ErrExist) {
			if st, serr := r.Stat(p); serr == nil && st.IsDir() {
				continue
			}
			return err
		}
		if err != nil {
			return err
		}
		if err := own(r, p, mode, o); err != nil {
			return err
		}
	}
	return nil
}

// WriteFile writes body to a file, replacing what it held; with parents,
// missing directories are made. A write past the volume's quota is
// ErrNoSpace and leaves no partial file behind.
func (s *Service) WriteFile(ctx context.Context, v store.Volume, p string, parents bool, o Owner, body io.Reader) (Entry, error) {
	r, err := s.open(v)
	if err != nil {
		return Entry{}, err
	}
	defer r.Close()
	rp, err := rel(p)
	if err != nil {
		return Entry{}, err
	}
	if rp == "." {
		return Entry{}, fmt.Errorf("the volume's root is a directory, not a file: %w", errdefs.ErrInvalid)
	}
	if dir := path.Dir(rp); parents && dir != "." {
		if err := mkdirAll(r, dir, 0o755, Owner{UID: o.UID, GID: o.GID}); err != nil {
			return Entry{}, fmt.Errorf("make the directories of %s: %w", p, kindOf(err))
		}
	}
	mode := o.modeOr(0o644)
	_, statErr := r.Lstat(rp)
	created := errors.Is(statErr, fs.ErrNotExist)
	f, err := r.OpenFile(rp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return Entry{}, fmt.Errorf("write %s: %w", p, kindOf(err))
	}
	_, err = io.Copy(f, body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if created {
			_ = r.Remove(rp)
		} else {
			_ = truncate(r, rp)
		}
		return Entry{}, fmt.Errorf("write %s: %w", p, kindOf(err))
	}
	if created || o.UID != nil || o.GID != nil || o.Mode != nil {
		if err := own(r, rp, mode, o); err != nil {
			return Entry{}, fmt.Errorf("write %s: %w", p, kindOf(err))
		}
	}
	return entryOf(r, rp)
}

func truncate(r *os.Root, rp string) error {
	f, err := r.OpenFile(rp, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	return f.Close()
}

// ReadFile opens a regular file for reading; the caller closes it.
func (s *Service) ReadFile(ctx context.Context, v store.Volume, p string) (*os.File, Entry, error) {
	r, err := s.open(v)
	if err != nil {
		return nil, Entry{}, err
	}
	defer r.Close()
	rp, err := rel(p)
	if err != nil {
		return nil, Entry{}, err
	}
	f, err := r.Open(rp)
	if err != nil {
		return nil, Entry{}, fmt.Errorf("read %s: %w", p, kindOf(err))
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, Entry{}, fmt.Errorf("read %s: %w", p, kindOf(err))
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, Entry{}, fmt.Errorf("%s is not a regular file: %w", p, errdefs.ErrInvalid)
	}
	return f, entryFromInfo(rp, st, ""), nil
}

// Remove removes a file, or a directory with everything in it.
func (s *Service) Remove(ctx context.Context, v store.Volume, p string) error {
	r, err := s.open(v)
	if err != nil {
		return err
	}
	defer r.Close()
	rp, err := rel(p)
	if err != nil {
		return err
	}
	if rp == "." {
		return fmt.Errorf("the volume's root cannot be removed; delete the volume instead: %w", errdefs.ErrInvalid)
	}
	if _, err := r.Lstat(rp); err != nil {
		return fmt.Errorf("remove %s: %w", p, kindOf(err))
	}
	if err := r.RemoveAll(rp); err != nil {
		return fmt.Errorf("remove %s: %w", p, kindOf(err))
	}
	return nil
}

// UpdateMetadata changes a path's owner and mode (nil fields stay).
func (s *Service) UpdateMetadata(ctx context.Context, v store.Volume, p string, o Owner) (Entry, error) {
	r, err := s.open(v)
	if err != nil {
		return Entry{}, err
	}
	defer r.Close()
	rp, err := rel(p)
	if err != nil {
		return Entry{}, err
	}
	if _, err := r.Lstat(rp); err != nil {
		return Entry{}, fmt.Errorf("update %s: %w", p, kindOf(err))
	}
	if o.UID != nil || o.GID != nil {
		uid, gid := -1, -1
		if o.UID != nil {
			uid = int(*o.UID)
		}
		if o.GID != nil {
			gid = int(*o.GID)
		}
		if err := r.Lchown(rp, uid, gid); err != nil {
			return Entry{}, fmt.Errorf("change the owner of %s: %w", p, kindOf(err))
		}
	}
	if o.Mode != nil {
		if err := r.Chmod(rp, fileMode(*o.Mode)); err != nil {
			return Entry{}, fmt.Errorf("change the mode of %s: %w", p, kindOf(err))
		}
	}
	return entryOf(r, rp)
}

// own gives what the content API made to its owner (the sandboxes' user
// unless o says) with its mode.
func own(r *os.Root, rp string, mode fs.FileMode, o Owner) error {
	uid, gid := SandboxUID, SandboxGID
	if o.UID != nil {
		uid = int(*o.UID)
	}
	if o.GID != nil {
		gid = int(*o.GID)
	}
	if err := r.Lchown(rp, uid, gid); err != nil {
		return err
	}
	return r.Chmod(rp, mode) // after the chown, which clears setuid bits
}

func (o Owner) modeOr(def fs.FileMode) fs.FileMode {
	if o.Mode == nil {
		return def
	}
	return fileMode(*o.Mode)
}

// fileMode turns unix permission bits (with setuid, setgid, sticky) into
// an fs.FileMode.
func fileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	if m&syscall.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&syscall.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&syscall.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

func entryOf(r *os.Root, rp string) (Entry, error) {
	st, err := r.Lstat(rp)
	if err != nil {
		return Entry{}, fmt.Errorf("stat /%s: %w", strings.TrimPrefix(rp, "."), kindOf(err))
	}
	target := ""
	if st.Mode()&fs.ModeSymlink != 0 {
		target, _ = r.Readlink(rp)
	}
	return entryFromInfo(rp, st, target), nil
}

func entryFromInfo(rp string, st fs.FileInfo, target string) Entry {
	p := "/" + strings.TrimPrefix(rp, ".")
	if rp != "." {
		p = "/" + rp
	}
	e := Entry{Name: path.Base(p), Path: p, Size: st.Size(), Mtime: st.ModTime(), Target: target}
	switch {
	case st.Mode().IsRegular():
		e.Type = "file"
	case st.IsDir():
		e.Type = "directory"
	case st.Mode()&fs.ModeSymlink != 0:
		e.Type = "symlink"
	default:
		e.Type = "unknown"
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		e.Mode = sys.Mode & 0o7777
		e.UID, e.GID = sys.Uid, sys.Gid
		e.Atime = time.Unix(sys.Atim.Sec, sys.Atim.Nsec)
		e.Ctime = time.Unix(sys.Ctim.Sec, sys.Ctim.Nsec)
	}
	return e
}

// kindOf gives a file system error its errdefs kind. A full quota is
// ErrNoSpace (E2B's 507); a path that leaves the volume, ErrInvalid.
func kindOf(err error) error {
	var kind error
	switch {
	case errors.Is(err, syscall.EDQUOT), errors.Is(err, syscall.ENOSPC):
		kind = errdefs.ErrNoSpace
	case errors.Is(err, fs.ErrNotExist):
		kind = errdefs.ErrNotFound
	case errors.Is(err, fs.ErrExist):
		kind = errdefs.ErrAlreadyExists
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ELOOP),
		errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, syscall.EXDEV), isEscape(err):
		kind = errdefs.ErrInvalid
	case errors.Is(err, fs.ErrPermission):
		kind = errdefs.ErrPermissionDenied
	default:
		return err
	}
	return fmt.Errorf("%w: %w", kind, err)
}

// isEscape tells os.Root's refusal of a path that leads out of the root:
// a path error that no system call returned.
func isEscape(err error) bool {
	var pe *fs.PathError
	var errno syscall.Errno
	return errors.As(err, &pe) && !errors.As(pe.Err, &errno)
}
