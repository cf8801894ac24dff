package template

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/warrenhq/warren/internal/errdefs"
)

// openTarball opens a plain or gzip-compressed tar file, telling them apart
// by content (a gzip stream starts with 1f 8b) rather than by name.
func openTarball(p string) (io.ReadCloser, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("open tarball: %w", err)
	}
	br := bufio.NewReaderSize(f, 1<<20)
	magic, err := br.Peek(2)
	if err != nil && !errors.Is(err, io.EOF) {
		f.Close()
		return nil, fmt.Errorf("read tarball %s: %w", p, err)
	}
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("tarball %s: bad gzip header: %w", p, errdefs.ErrInvalid)
		}
		return readCloser{Reader: zr, close: func() error { zr.Close(); return f.Close() }}, nil
	}
	return readCloser{Reader: br, close: f.Close}, nil
}

type readCloser struct {
	io.Reader
	close func() error
}

func (r readCloser) Close() error { return r.close() }

// extractTar writes every entry of a tar stream into the tree.
func extractTar(ctx context.Context, x *extractor, r io.Reader) error {
	tr := tar.NewReader(r)
	for n := 0; ; n++ {
		if n%256 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			if n == 0 {
				return fmt.Errorf("the archive holds no entries (not a tar file?): %w", errdefs.ErrInvalid)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("read tar entry %d: %v (is it a tar or tar.gz file?): %w", n, err, errdefs.ErrInvalid)
		}
		if err := x.put(hdr, tr); err != nil {
			return err
		}
	}
}
