package template

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/warrenhq/warren/internal/errdefs"
)

// populateRootFS copies a host directory into root, or extracts a host
// tarball (plain or gzip) into it.
func populateRootFS(ctx context.Context, root, src string, log *slog.Logger) error {
	fi, err := os.Stat(src)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("rootfs %s does not exist: %w", src, errdefs.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("rootfs %s: %w", src, err)
	}
	t, err := openTree(root)
	if err != nil {
		return err
	}
	defer t.Close()
	x := &extractor{t: t, log: log}
	switch {
	case fi.IsDir():
		err = walkTree(ctx, src, func(hdr *tar.Header, r io.Reader) error { return x.put(hdr, r) })
		if err != nil {
			err = fmt.Errorf("copy rootfs directory %s: %w", src, err)
		}
	case fi.Mode().IsRegular():
		err = extractTarball(ctx, x, src)
	default:
		err = fmt.Errorf("rootfs %s is neither a directory nor a tarball: %w", src, errdefs.ErrInvalid)
	}
	if err != nil {
		return err
	}
	x.finish()
	return nil
}

// extractTarball extracts the tar or tar.gz file at p through x.
func extractTarball(ctx context.Context, x *extractor, p string) error {
	rc, err := openTarball(p)
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := extractTar(ctx, x, rc); err != nil {
		return fmt.Errorf("extract %s: %w", p, err)
	}
	return nil
}
