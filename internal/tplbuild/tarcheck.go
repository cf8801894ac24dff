package tplbuild

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/warrenhq/warren/internal/errdefs"
)

// checkTar reads a copy's archive (gzip or plain tar) and refuses one that
// could write outside its destination or make a device: absolute names,
// ".." components, links pointing out, and anything but files,
// directories and links. It reports whether the archive is gzipped.
func checkTar(r io.Reader) (gzipped bool, err error) {
	br := bufio.NewReader(r)
	magic, _ := br.Peek(2)
	var in io.Reader = br
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return false, fmt.Errorf("archive: %v: %w", err, errdefs.ErrInvalid)
		}
		defer zr.Close()
		in, gzipped = zr, true
	}
	tr := tar.NewReader(in)
	n := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return false, fmt.Errorf("archive: %v: %w", err, errdefs.ErrInvalid)
		}
		n++
		if err := checkEntry(h); err != nil {
			return false, err
		}
	}
	if n == 0 {
		return false, fmt.Errorf("archive holds no files: %w", errdefs.ErrInvalid)
	}
	return gzipped, nil
}

func checkEntry(h *tar.Header) error {
	if err := checkRel("entry", h.Name); err != nil {
		return err
	}
	switch h.Typeflag {
	case tar.TypeReg, tar.TypeDir, tar.TypeSymlink:
	case tar.TypeLink:
		if err := checkRel("hard link target", h.Linkname); err != nil {
			return err
		}
	default:
		return fmt.Errorf("archive entry %q is a %s: only files, directories and links may be copied: %w", h.Name, typeName(h.Typeflag), errdefs.ErrInvalid)
	}
	if h.Typeflag == tar.TypeSymlink && strings.HasPrefix(h.Linkname, "/") {
		return nil // an absolute symlink points inside the sandbox, wherever it lands
	}
	if h.Typeflag == tar.TypeSymlink {
		target := path.Join(path.Dir(h.Name), h.Linkname)
		if target == ".." || strings.HasPrefix(target, "../") {
			return fmt.Errorf("archive symlink %q points outside the archive (%s): %w", h.Name, h.Linkname, errdefs.ErrInvalid)
		}
	}
	return nil
}

func checkRel(what, name string) error {
	if name == "" || strings.HasPrefix(name, "/") {
		return fmt.Errorf("archive %s %q: absolute or empty names may not be copied: %w", what, name, errdefs.ErrInvalid)
	}
	for _, part := range strings.Split(strings.TrimSuffix(name, "/"), "/") {
		if part == ".." {
			return fmt.Errorf("archive %s %q holds \"..\": %w", what, name, errdefs.ErrInvalid)
		}
	}
	return nil
}

func typeName(t byte) string {
	switch t {
	case tar.TypeChar:
		return "character device"
	case tar.TypeBlock:
		return "block device"
	case tar.TypeFifo:
		return "fifo"
	}
	return fmt.Sprintf("entry of type %q", t)
}
