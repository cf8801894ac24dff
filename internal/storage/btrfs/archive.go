package btrfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/storage"
)

var _ storage.Archiver = (*Storage)(nil)

// ArchiveDir is where archive streams are meant to live: beside the kind
// directories, on the pool's own filesystem (so a stream's rename into place
// is atomic and the space is the pool's).
func (s *Storage) ArchiveDir() string { return filepath.Join(s.root, "archive") }

// btrfsBinary finds btrfs(8); send and receive are off the hot path, so
// they shell out rather than speak the send-stream format themselves.
func btrfsBinary() (string, error) {
	p, err := exec.LookPath("btrfs")
	if err != nil {
		return "", fmt.Errorf("btrfs not found: install btrfs-progs: %w", errdefs.ErrUnavailable)
	}
	return p, nil
}

// Archive implements storage.Archiver: `btrfs send -p parent key` into
// dst.tmp, synced and renamed to dst, so a file under dst is always a whole
// stream.
func (s *Storage) Archive(ctx context.Context, key, parent storage.Key, dst string) error {
	for _, k := range []storage.Key{key, parent} {
		if err := k.Validate(); err != nil {
			return err
		}
		info, err := s.Stat(ctx, k)
		if err != nil {
			return fmt.Errorf("archive %s: %w", key, err)
		}
		if !info.ReadOnly {
			return fmt.Errorf("archive %s: %s is writable; only read-only volumes can be sent: %w", key, k, errdefs.ErrInvalid)
		}
	}
	bin, err := btrfsBinary()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return fmt.Errorf("archive %s: create %s: %w", key, filepath.Dir(dst), err)
	}
	tmp := dst + ".tmp"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("archive %s: remove leftover %s: %w", key, tmp, err)
	}
	out, err := exec.CommandContext(ctx, bin, "send", "-q", "-p", s.Path(parent), "-f", tmp, s.Path(key)).CombinedOutput()
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("archive %s against %s: btrfs send: %v: %s", key, parent, err, strings.TrimSpace(string(out)))
	}
	if err := syncPath(tmp); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("archive %s: put stream in place: %w", key, err)
	}
	return syncPath(filepath.Dir(dst))
}

// Restore implements storage.Archiver: one `btrfs receive` reads the
// streams one after the other into a fresh scratch volume (receive finds
// each stream's parent by its UUID among the pool's subvolumes: the first in
// the pool, the others among those just received), then a read-only
// snapshot of the last received subvolume is put at key's path. A crash
// leaves only the scratch volume, which start-up removes.
func (s *Storage) Restore(ctx context.Context, srcs []string, parent, key storage.Key) error {
	if err := parent.Validate(); err != nil {
		return err
	}
	if err := key.Validate(); err != nil {
		return err
	}
	if len(srcs) == 0 {
		return fmt.Errorf("restore %s: no stream: %w", key, errdefs.ErrInvalid)
	}
	if _, err := s.Stat(ctx, parent); err != nil {
		if errdefs.IsNotFound(err) {
			return fmt.Errorf("restore %s: the volume its streams start from (%s) is gone, so it cannot be rebuilt: %w", key, parent, errdefs.ErrNotFound)
		}
		return fmt.Errorf("restore %s: %w", key, err)
	}
	if _, err := s.Stat(ctx, key); err == nil {
		return fmt.Errorf("restore %s: the volume exists already: %w", key, errdefs.ErrAlreadyExists)
	}
	var files []io.Reader
	for _, src := range srcs {
		f, err := os.Open(src)
		if err != nil {
			return fmt.Errorf("restore %s: stream %s is missing: %w", key, src, errdefs.ErrNotFound)
		}
		defer f.Close()
		if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
			return fmt.Errorf("restore %s: stream %s is not a file: %w", key, src, errdefs.ErrInvalid)
		}
		files = append(files, f)
	}
	bin, err := btrfsBinary()
	if err != nil {
		return err
	}
	scratch := storage.Key{Kind: storage.KindScratch, Name: "restore-" + key.Name}
	if err := s.Delete(ctx, scratch); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("restore %s: remove leftover %s: %w", key, scratch, err)
	}
	dir, err := s.Create(ctx, scratch)
	if err != nil {
		return fmt.Errorf("restore %s: %w", key, err)
	}
	// The scratch volume holds the received ones until the last is
	// snapshotted out; Delete drops every nested subvolume.
	defer func() {
		if err := s.Delete(context.WithoutCancel(ctx), scratch); err != nil {
			s.log.Warn("remove restore scratch volume", "volume", scratch.String(), "err", err)
		}
	}()
	cmd := exec.CommandContext(ctx, bin, "receive", dir)
	cmd.Stdin = io.MultiReader(files...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if strings.Contains(msg, "cannot find parent subvolume") {
			return fmt.Errorf("restore %s: a volume its streams are deltas against is not in the pool (%s): %w", key, msg, errdefs.ErrNotFound)
		}
		return fmt.Errorf("restore %s: btrfs receive: %v: %s", key, err, msg)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("restore %s: %w", key, err)
	}
	if len(entries) != len(srcs) {
		return fmt.Errorf("restore %s: %d streams made %d volumes: %w", key, len(srcs), len(entries), errdefs.ErrInvalid)
	}
	// The last stream's volume carries the name of the snapshot it was
	// sent from, which is key's.
	last := filepath.Join(dir, key.Name)
	if fi, err := os.Lstat(last); err != nil || !fi.IsDir() {
		return fmt.Errorf("restore %s: the streams did not rebuild a volume named %s: %w", key, key.Name, errdefs.ErrInvalid)
	}
	if err := s.placeReceived(last, key); err != nil {
		return err
	}
	if err := s.checkRestored(ctx, key); err != nil {
		if derr := s.Delete(context.WithoutCancel(ctx), key); derr != nil {
			s.log.Warn("remove a volume whose restore failed", "volume", key.String(), "err", derr)
		}
		return err
	}
	return nil
}

// placeReceived puts a read-only snapshot of the received subvolume at
// key's path. A read-only subvolume cannot be renamed to another directory
// (its ".." would change), and making it writable for the move would leave
// a window where a crash leaves a writable volume in place; a snapshot is
// one atomic ioctl, read-only from birth, and costs milliseconds.
func (s *Storage) placeReceived(received string, key storage.Key) error {
	src, err := os.OpenFile(received, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("restore %s: open the received volume: %w", key, errnoKind(err))
	}
	defer src.Close()
	dir, err := s.openKindDir(key.Kind)
	if err != nil {
		return err
	}
	defer dir.Close()
	if err := snapCreate(int(src.Fd()), int(dir.Fd()), key.Name, true); err != nil {
		return fmt.Errorf("restore %s: put the received volume in place: %w", key, errnoKind(err))
	}
	return nil
}

// checkRestored makes sure a received volume is read-only (receive leaves
// it so) and that its rename is durable.
func (s *Storage) checkRestored(ctx context.Context, key storage.Key) error {
	info, err := s.Stat(ctx, key)
	if err != nil {
		return fmt.Errorf("restore %s: %w", key, err)
	}
	if !info.ReadOnly {
		if err := s.SetReadOnly(ctx, key, true); err != nil {
			return fmt.Errorf("restore %s: %w", key, err)
		}
	}
	return syncPath(filepath.Dir(s.Path(key)))
}
