package template

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// walkTree visits every entry under root (parents first, symlinks not
// followed) as a tar header, with a reader for regular files' content.
// Files with several links are reported once as files and then as hard
// links to the first path, so copies keep them shared.
func walkTree(ctx context.Context, root string, fn func(hdr *tar.Header, r io.Reader) error) error {
	type devIno struct{ dev, ino uint64 }
	seen := map[devIno]string{}
	n := 0
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if n++; n%256 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no unix stat information", p)
		}
		hdr := &tar.Header{
			Name:    filepath.ToSlash(rel),
			Mode:    int64(st.Mode & 0o7777),
			Uid:     int(st.Uid),
			Gid:     int(st.Gid),
			ModTime: fi.ModTime(),
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			hdr.Typeflag = tar.TypeDir
			if rel != "." {
				hdr.Name += "/"
			}
		case unix.S_IFLNK:
			hdr.Typeflag = tar.TypeSymlink
			if hdr.Linkname, err = os.Readlink(p); err != nil {
				return err
			}
		case unix.S_IFREG:
			if st.Nlink > 1 {
				k := devIno{uint64(st.Dev), st.Ino}
				if first, ok := seen[k]; ok {
					hdr.Typeflag = tar.TypeLink
					hdr.Linkname = first
					return fn(hdr, nil)
				}
				seen[k] = hdr.Name
			}
			hdr.Typeflag = tar.TypeReg
			hdr.Size = st.Size
			return withFile(p, hdr.Size, func(r io.Reader) error { return fn(hdr, r) })
		case unix.S_IFCHR, unix.S_IFBLK:
			hdr.Typeflag = tar.TypeChar
			if st.Mode&unix.S_IFMT == unix.S_IFBLK {
				hdr.Typeflag = tar.TypeBlock
			}
			hdr.Devmajor = int64(unix.Major(uint64(st.Rdev)))
			hdr.Devminor = int64(unix.Minor(uint64(st.Rdev)))
		case unix.S_IFIFO:
			hdr.Typeflag = tar.TypeFifo
		default:
			return nil // sockets belong to running programs, not to a tree
		}
		return fn(hdr, nil)
	})
}

// withFile opens p without following a symlink and hands fn exactly size
// bytes of it.
func withFile(p string, size int64, fn func(io.Reader) error) error {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: p, Err: err}
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	return fn(io.LimitReader(f, size))
}
