package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/storage"
)

// archiveStorage is a storage that can archive volumes, and says where its
// streams belong.
type archiveStorage interface {
	storage.Archiver
	ArchiveDir() string
}

// snapshotWaiter waits until a snapshot being written is (unsettledSnapshots).
type snapshotWaiter interface {
	snapshot(ctx context.Context, id string) error
}

// archives keeps snapshots as streams outside the pool (the storage's
// Archiver) and brings them back.
type archives struct {
	streams     archiveStorage     // nil: the storage cannot archive
	transfers   storage.Transferer // nil: the storage cannot export snapshots
	storageName string
	// settled: an archive reads snapshots that may still be being written.
	settled snapshotWaiter
	log     *slog.Logger
}

func newArchives(st storage.Storage, settled snapshotWaiter, log *slog.Logger) *archives {
	a := &archives{settled: settled, log: log}
	if st != nil {
		a.storageName = st.Name()
	}
	a.streams, _ = st.(archiveStorage)
	a.transfers, _ = st.(storage.Transferer)
	return a
}

func (ar *archives) archiver() (archiveStorage, error) {
	if ar.streams == nil {
		return nil, fmt.Errorf("the %s storage cannot archive snapshots: %w", ar.storageName, errdefs.ErrUnsupported)
	}
	return ar.streams, nil
}

// CanArchive reports whether snapshots can be archived as streams.
func (ar *archives) CanArchive() bool {
	_, err := ar.archiver()
	return err == nil
}

// streamPath is where a snapshot's archive stream lives.
func streamPath(a archiveStorage, snapID string) string {
	return filepath.Join(a.ArchiveDir(), snapID+".stream")
}

// inArchive checks that path names a file directly in the archive
// directory: stream paths come from the database, and nothing else may be
// read or removed through them.
func inArchive(a archiveStorage, path string) error {
	dir := filepath.Clean(a.ArchiveDir())
	if filepath.Dir(filepath.Clean(path)) != dir || !strings.HasSuffix(path, ".stream") {
		return fmt.Errorf("archive stream %q is not in %s: %w", path, dir, errdefs.ErrInvalid)
	}
	return nil
}

// ArchiveSnapshot writes a snapshot as a stream relative to parentID (which
// stays in the pool) and returns the stream's path. The snapshot's volume is
// not deleted.
func (ar *archives) ArchiveSnapshot(ctx context.Context, snapID, parentID string) (string, error) {
	a, err := ar.archiver()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(a.ArchiveDir(), 0o700); err != nil {
		return "", fmt.Errorf("make archive dir: %w", err)
	}
	for _, id := range []string{snapID, parentID} {
		if err := ar.settled.snapshot(ctx, id); err != nil {
			return "", err
		}
	}
	path := streamPath(a, snapID)
	if err := a.Archive(ctx, snapshotKey(snapID), snapshotKey(parentID), path); err != nil {
		return "", fmt.Errorf("archive snapshot %s: %w", snapID, err)
	}
	return path, nil
}

// RestoreSnapshot brings an archived snapshot's volume back from a chain of
// streams: paths[0] is a delta against baseID, which must be in the pool,
// each later one against the snapshot the one before rebuilds, and the last
// is snapID's own.
func (ar *archives) RestoreSnapshot(ctx context.Context, snapID, baseID string, paths []string) error {
	a, err := ar.archiver()
	if err != nil {
		return err
	}
	for _, p := range paths {
		if err := inArchive(a, p); err != nil {
			return err
		}
	}
	if err := ar.settled.snapshot(ctx, baseID); err != nil {
		return err
	}
	if err := a.Restore(ctx, paths, snapshotKey(baseID), snapshotKey(snapID)); err != nil {
		return fmt.Errorf("restore snapshot %s: %w", snapID, err)
	}
	return nil
}

// HasArchive reports whether a stream file exists.
func (ar *archives) HasArchive(path string) bool {
	a, err := ar.archiver()
	if err != nil || inArchive(a, path) != nil {
		return false
	}
	fi, err := os.Lstat(path)
	return err == nil && fi.Mode().IsRegular()
}

// RemoveArchive deletes a stream file; a missing one is not an error.
func (ar *archives) RemoveArchive(path string) error {
	a, err := ar.archiver()
	if err != nil {
		return err
	}
	if err := inArchive(a, path); err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// ReconcileArchives removes every file in the archive directory that keep
// does not name (streams of deleted snapshots, half-written ones).
func (ar *archives) ReconcileArchives(keep map[string]bool) error {
	a, err := ar.archiver()
	if err != nil {
		return nil
	}
	entries, err := os.ReadDir(a.ArchiveDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		p := filepath.Join(a.ArchiveDir(), e.Name())
		if keep[p] {
			continue
		}
		ar.log.Info("removing archive stream no record names", "path", p)
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
