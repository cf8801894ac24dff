package sandbox

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/warrenhq/warren/internal/dirsize"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
)

// Memory images travel between daemons as tars of their directories (in a
// snapshot bundle's memory section). A tar, not the files as they are: an
// image is a directory of a few files the runtime names, and a resumed
// transfer makes the stream again from its start, so it must come out the
// same each time: entries in name order, with the files' own times and
// modes and no owners.

// incomingPrefix names an image being received: reconcile removes those
// left by an import that did not finish (no snapshot has an id like it).
const incomingPrefix = "incoming-"

// MemoryImageSize is the size of a snapshot's memory image on disk (0, false
// when it has none).
func (m *memoryImages) MemoryImageSize(snapID string) (int64, bool) {
	if m.dir == "" {
		return 0, false
	}
	n, err := dirsize.Of(m.dir.snapshotImage(snapID))
	return n, err == nil
}

// WriteMemoryImage writes a snapshot's memory image to w as a tar.
func (m *memoryImages) WriteMemoryImage(ctx context.Context, snapID string, w io.Writer) error {
	if m.dir == "" {
		return fmt.Errorf("this server keeps no memory images: %w", errdefs.ErrUnsupported)
	}
	root := m.dir.snapshotImage(snapID)
	var names []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != root {
			names = append(names, path)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read the memory image of snapshot %s: %w", snapID, err)
	}
	sort.Strings(names)
	tw := tar.NewWriter(w)
	for _, path := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := addToTar(tw, root, path); err != nil {
			return fmt.Errorf("send the memory image of snapshot %s: %w", snapID, err)
		}
	}
	return tw.Close()
}

func addToTar(tw *tar.Writer, root, path string) error {
	info, err := os.Lstat(path)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return err
	}
	hdr := &tar.Header{Name: filepath.ToSlash(rel), Mode: int64(info.Mode().Perm()), ModTime: info.ModTime(), Format: tar.FormatPAX}
	switch {
	case info.IsDir():
		hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
		return tw.WriteHeader(hdr)
	case !info.Mode().IsRegular():
		return fmt.Errorf("%s is neither a file nor a directory", rel)
	}
	hdr.Typeflag, hdr.Size = tar.TypeReg, info.Size()
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(tw, f)
	return err
}

// StagedMemory is a memory image received but not yet a snapshot's: Place
// makes it one, Drop removes it.
type StagedMemory struct {
	dir   memoryDir
	path  string
	Bytes int64
}

// ReceiveMemoryImage unpacks a memory image from r (a tar WriteMemoryImage
// wrote) into a directory of its own beside the images.
func (m *memoryImages) ReceiveMemoryImage(r io.Reader) (*StagedMemory, error) {
	if m.dir == "" {
		return nil, fmt.Errorf("this server keeps no memory images: %w", errdefs.ErrUnsupported)
	}
	if err := os.MkdirAll(string(m.dir), 0o700); err != nil {
		return nil, fmt.Errorf("make memory dir: %w", err)
	}
	path := filepath.Join(string(m.dir), incomingPrefix+ids.New(12))
	if err := os.Mkdir(path, 0o700); err != nil {
		return nil, fmt.Errorf("make the directory of an incoming memory image: %w", err)
	}
	st := &StagedMemory{dir: m.dir, path: path}
	n, err := untarImage(r, path)
	if err != nil {
		st.Drop()
		return nil, err
	}
	st.Bytes = n
	return st, nil
}

// untarImage unpacks a memory image's tar into dir: files and directories
// only, every name inside dir.
func untarImage(r io.Reader, dir string) (int64, error) {
	tr := tar.NewReader(r)
	var total int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			if errdefs.IsInvalid(err) { // the bundle's own words for a damaged section
				return 0, err
			}
			return 0, fmt.Errorf("memory image: %v: %w", err, errdefs.ErrInvalid)
		}
		name := filepath.Clean(filepath.FromSlash(hdr.Name))
		if !filepath.IsLocal(name) {
			return 0, fmt.Errorf("memory image: entry %q lies outside the image: %w", hdr.Name, errdefs.ErrInvalid)
		}
		path := filepath.Join(dir, name)
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, 0o700)
		case tar.TypeReg:
			err = writeImageFile(path, tr, hdr)
			total += hdr.Size
		default:
			return 0, fmt.Errorf("memory image: entry %q is neither a file nor a directory: %w", hdr.Name, errdefs.ErrInvalid)
		}
		if err != nil {
			return 0, fmt.Errorf("memory image: write %s: %w", hdr.Name, err)
		}
	}
}

func writeImageFile(path string, r io.Reader, hdr *tar.Header) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fs.FileMode(hdr.Mode).Perm()|0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Chtimes(path, hdr.ModTime, hdr.ModTime)
}

// Place makes the staged image snapshot snapID's.
func (s *StagedMemory) Place(snapID string) error {
	dst := s.dir.snapshotImage(snapID)
	if err := removeMemoryImage(dst); err != nil {
		return err
	}
	if err := os.Rename(s.path, dst); err != nil {
		return fmt.Errorf("place the memory image of snapshot %s: %w", snapID, err)
	}
	s.path = ""
	return nil
}

// Drop removes the staged image (after Place: nothing).
func (s *StagedMemory) Drop() {
	if s == nil || s.path == "" {
		return
	}
	_ = os.RemoveAll(s.path)
	s.path = ""
}

// KeepHibernationAsSnapshot makes a hibernated sandbox's image also the
// memory image of snapshot snapID (a snapshot of its files taken at rest),
// so that the snapshot resumes its processes: what a move of a hibernated
// sandbox sends. The files are linked, not copied (an image is not written
// once saved); where links cannot be made they are copied. runtimeName is
// the runtime that saved it. It returns the image's size.
func (m *memoryImages) KeepHibernationAsSnapshot(id, snapID, runtimeName string) (int64, error) {
	if !m.IsHibernated(id) {
		return 0, fmt.Errorf("sandbox %s has no hibernation image: %w", id, errdefs.ErrNotFound)
	}
	src, dst := m.dir.hibernationImage(id), m.dir.snapshotImage(snapID)
	if err := removeMemoryImage(dst); err != nil {
		return 0, err
	}
	if err := linkTree(src, dst); err != nil {
		_ = removeMemoryImage(dst)
		return 0, fmt.Errorf("keep the hibernation image of sandbox %s with snapshot %s: %w", id, snapID, err)
	}
	if err := os.WriteFile(filepath.Join(dst, runtimeFile), []byte(runtimeName+"\n"), 0o600); err != nil {
		_ = removeMemoryImage(dst)
		return 0, fmt.Errorf("record the runtime of snapshot %s's memory image: %w", snapID, err)
	}
	return dirsize.Of(dst)
}

// DropMemoryImage removes a snapshot's memory image, keeping its files (a
// missing one is not an error).
func (m *memoryImages) DropMemoryImage(snapID string) error {
	if m.dir == "" {
		return nil
	}
	return removeMemoryImage(m.dir.snapshotImage(snapID))
}

// putHibernationImage makes snapshot snapID's memory image also sandbox
// id's hibernation image (linked, as KeepHibernationAsSnapshot): the
// sandbox then holds its processes on disk, and Wake restores them.
func (d memoryDir) putHibernationImage(snapID, id string) error {
	if d == "" {
		return fmt.Errorf("this server keeps no memory images: %w", errdefs.ErrUnsupported)
	}
	src, dst := d.snapshotImage(snapID), d.hibernationImage(id)
	if _, err := os.Stat(src); err != nil {
		return fmt.Errorf("snapshot %s has no memory image: %w", snapID, errdefs.ErrNotFound)
	}
	if err := removeMemoryImage(dst); err != nil {
		return err
	}
	if err := linkTree(src, dst); err != nil {
		_ = removeMemoryImage(dst)
		return fmt.Errorf("make snapshot %s's memory image sandbox %s's hibernation image: %w", snapID, id, err)
	}
	return nil
}

// linkTree makes dst a tree of hard links to src's files (copies where a
// link fails, as across file systems), leaving out the runtime's name.
func linkTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o700)
		case !d.Type().IsRegular() || strings.EqualFold(rel, runtimeFile):
			return nil
		}
		if os.Link(path, to) == nil {
			return nil
		}
		return copyFile(path, to)
	})
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
