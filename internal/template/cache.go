package template

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// writeCache stores the tree at root as a gzip tarball at dst, atomically:
// a reader sees either no file or a complete one. Device nodes are left
// out, as extraction would skip them anyway.
func writeCache(ctx context.Context, root, dst string) (err error) {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(dst), filepath.Base(dst)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	// BestSpeed: the cache is about rebuild time, not disk space.
	zw, err := gzip.NewWriterLevel(bw, gzip.BestSpeed)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	err = walkTree(ctx, root, func(hdr *tar.Header, r io.Reader) error {
		if hdr.Typeflag == tar.TypeChar || hdr.Typeflag == tar.TypeBlock {
			return nil
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if r != nil {
			if _, err := io.Copy(tw, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, c := range []func() error{tw.Close, zw.Close, bw.Flush, f.Sync, f.Close} {
		if err := c(); err != nil {
			return err
		}
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), dst); err != nil {
		return fmt.Errorf("install cache file: %w", err)
	}
	return nil
}
