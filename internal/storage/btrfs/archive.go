package btrfs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/storage"
)

var _ storage.Archiver = (*Storage)(nil)

// archives writes volumes out as send streams and rebuilds them from
// those (warren's own receive: receive.go).
type archives struct {
	vols *volumes
	log  *slog.Logger
}

// ArchiveDir is where archive streams are meant to live: beside the kind
// directories, on the pool's own filesystem (so a stream's rename into place
// is atomic and the space is the pool's).
func (ar *archives) ArchiveDir() string { return filepath.Join(ar.vols.root, "archive") }

// Archive implements storage.Archiver: the send ioctl, `btrfs send -p
// parent key` without the process, writes into dst.tmp, which is synced and
// renamed to dst, so a file under dst is always a whole stream.
func (ar *archives) Archive(ctx context.Context, key, parent storage.Key, dst string) error {
	src := make([]*os.File, 0, 2)
	defer func() {
		for _, f := range src {
			f.Close()
		}
	}()
	for _, k := range []storage.Key{key, parent} {
		if err := k.Validate(); err != nil {
			return err
		}
		f, err := ar.vols.openSubvol(k)
		if err != nil {
			return fmt.Errorf("archive %s: %w", key, err)
		}
		src = append(src, f)
		flags, err := subvolGetFlags(int(f.Fd()))
		if err != nil {
			return fmt.Errorf("archive %s: read the flags of %s: %w", key, k, errnoKind(err))
		}
		if flags&subvolRdonly == 0 {
			return fmt.Errorf("archive %s: %s is writable; only read-only volumes can be sent: %w", key, k, errdefs.ErrInvalid)
		}
	}
	parentID, err := subvolID(int(src[1].Fd()))
	if err != nil {
		return fmt.Errorf("archive %s: id of %s: %w", key, parent, errnoKind(err))
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return fmt.Errorf("archive %s: create %s: %w", key, filepath.Dir(dst), err)
	}
	tmp := dst + ".tmp"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("archive %s: remove leftover %s: %w", key, tmp, err)
	}
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("archive %s: %w", key, err)
	}
	err = sendDelta(int(src[0].Fd()), parentID, out)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("archive %s against %s: send: %w", key, parent, errnoKind(err))
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("archive %s: put stream in place: %w", key, err)
	}
	return syncPath(filepath.Dir(dst))
}

// Restore implements storage.Archiver. The chain is checked first: the
// first stream must be a delta against parent (by UUID, or by the UUID a
// restored parent was received as), each later one against the one before,
// and the last must be key's. Then a writable snapshot of parent, beside
// key under a name no snapshot has, takes every stream in turn (see
// applier), is written back, marked as received from the last stream (so a
// restored volume can start a later chain) and read-only, and is renamed to
// key. No volume is made only to be deleted: dropping one that holds a
// restore's new data keeps btrfs's cleaner busy for hundreds of
// milliseconds, which the next snapshot (a rollback's) waits for. A crash
// leaves the volume under its building name, which no record names, so
// start-up removes it.
func (ar *archives) Restore(ctx context.Context, srcs []string, parent, key storage.Key) error {
	building, err := restoreKeys(srcs, parent, key)
	if err != nil {
		return err
	}
	base, err := ar.vols.openSubvol(parent)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return fmt.Errorf("restore %s: the volume its streams start from (%s) is gone, so it cannot be rebuilt: %w", key, parent, errdefs.ErrNotFound)
		}
		return fmt.Errorf("restore %s: %w", key, err)
	}
	defer base.Close()
	if _, err := ar.vols.Stat(ctx, key); err == nil {
		return fmt.Errorf("restore %s: the volume exists already: %w", key, errdefs.ErrAlreadyExists)
	}
	heads, err := ar.checkChain(base, srcs, key)
	if err != nil {
		return fmt.Errorf("restore %s: %w", key, err)
	}

	view := storage.Key{Kind: storage.KindScratch, Name: "restorefrom-" + key.Name}
	if err := ar.startBuilding(ctx, base, building, view); err != nil {
		return fmt.Errorf("restore %s: %w", key, err)
	}
	placed := false
	defer func() {
		if placed {
			return
		}
		if err := ar.vols.Delete(context.WithoutCancel(ctx), building); err != nil {
			ar.log.Warn("remove a volume whose restore failed", "volume", building.String(), "err", err)
		}
	}()
	root, err := ar.vols.openSubvol(building)
	if err != nil {
		return fmt.Errorf("restore %s: %w", key, err)
	}
	defer root.Close()
	start := time.Now()
	a := &applier{root: root}
	defer a.closeOpen()
	for i, src := range srcs {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("restore %s: %w", key, err)
		}
		if err := ar.applyStream(a, base, view, src, heads[i], i == 0); err != nil {
			return fmt.Errorf("restore %s: stream %s: %w", key, src, err)
		}
	}
	applied := time.Now()
	// The data must be on disk before the name says the volume is whole:
	// btrfs records a file's extents only once they are written.
	if err := unix.Syncfs(int(root.Fd())); err != nil {
		return fmt.Errorf("restore %s: write back: %w", key, err)
	}
	synced := time.Now()
	last := heads[len(heads)-1]
	if err := setReceived(int(root.Fd()), last.uuid, last.ctransid); err != nil {
		return fmt.Errorf("restore %s: mark the volume received: %w", key, errnoKind(err))
	}
	if err := setReadOnly(int(root.Fd()), true); err != nil {
		return fmt.Errorf("restore %s: make the volume read-only: %w", key, errnoKind(err))
	}
	marked := time.Now()
	if err := ar.rename(building, key); err != nil {
		return fmt.Errorf("restore %s: %w", key, err)
	}
	placed = true
	ar.log.Debug("restored volume", "volume", key.String(), "streams", len(srcs), "bytes_written", a.written,
		"apply_ms", ms(applied.Sub(start)), "sync_ms", ms(synced.Sub(applied)), "mark_ms", ms(marked.Sub(synced)),
		"place_ms", ms(time.Since(marked)))
	return nil
}

// restoreKeys checks a restore's arguments and returns the key of the
// volume it builds.
func restoreKeys(srcs []string, parent, key storage.Key) (storage.Key, error) {
	if err := parent.Validate(); err != nil {
		return storage.Key{}, err
	}
	if err := key.Validate(); err != nil {
		return storage.Key{}, err
	}
	if len(srcs) == 0 {
		return storage.Key{}, fmt.Errorf("restore %s: no stream: %w", key, errdefs.ErrInvalid)
	}
	building := storage.Key{Kind: key.Kind, Name: "restoring-" + key.Name}
	if err := building.Validate(); err != nil {
		return storage.Key{}, fmt.Errorf("restore %s: %w", key, err)
	}
	return building, nil
}

// startBuilding removes what an earlier restore of the same volume left
// (building, and the view of a stream's parent) and makes building a
// writable snapshot of base.
func (ar *archives) startBuilding(ctx context.Context, base *os.File, building, view storage.Key) error {
	for _, k := range []storage.Key{building, view} {
		if err := ar.vols.Delete(ctx, k); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("remove leftover %s: %w", k, err)
		}
	}
	return ar.snapshotInto(base, building, false)
}

// rename moves a volume to another name of its kind (a read-only volume
// can be renamed within its directory, not moved out of it) and makes the
// move durable. The destination must not exist.
func (ar *archives) rename(from, to storage.Key) error {
	if from.Kind != to.Kind {
		return fmt.Errorf("rename %s to %s: different kinds: %w", from, to, errdefs.ErrInvalid)
	}
	dir, err := ar.vols.openKindDir(from.Kind)
	if err != nil {
		return err
	}
	defer dir.Close()
	if err := unix.Renameat2(int(dir.Fd()), from.Name, int(dir.Fd()), to.Name, unix.RENAME_NOREPLACE); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("rename %s to %s: %w", from, to, errdefs.ErrAlreadyExists)
		}
		return fmt.Errorf("rename %s to %s: %w", from, to, errnoKind(err))
	}
	if err := unix.Fsync(int(dir.Fd())); err != nil {
		return fmt.Errorf("rename %s to %s: sync: %w", from, to, err)
	}
	return nil
}

// checkChain reads every stream whole (so a corrupt one is refused before
// anything is written), checks that their heads rebuild key from the
// volume open at base, and notes which streams clone from their parent.
func (ar *archives) checkChain(base *os.File, srcs []string, key storage.Key) ([]streamHead, error) {
	info, err := getSubvolInfo(int(base.Fd()))
	if err != nil {
		return nil, fmt.Errorf("read the base volume's identity: %w", errnoKind(err))
	}
	heads := make([]streamHead, len(srcs))
	for i, src := range srcs {
		f, r, h, err := openStreamBody(src)
		if err != nil {
			return nil, err
		}
		h.clonesParent, err = scanStream(r, h.parentUUID)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", src, err)
		}
		heads[i] = h
		if i == 0 {
			if h.parentUUID != info.uuid && (info.received.zero() || h.parentUUID != info.received) {
				return nil, fmt.Errorf("stream %s is a delta against volume %s, which is not in the pool: %w", src, h.parentUUID, errdefs.ErrNotFound)
			}
			continue
		}
		if prev := heads[i-1]; h.parentUUID != prev.uuid {
			return nil, fmt.Errorf("stream %s is a delta against volume %s, not against %s, which the stream before it rebuilds: %w", src, h.parentUUID, prev.uuid, errdefs.ErrInvalid)
		}
	}
	if last := heads[len(heads)-1]; last.name != key.Name {
		return nil, fmt.Errorf("the streams rebuild a volume named %s, not %s: %w", last.name, key.Name, errdefs.ErrInvalid)
	}
	return heads, nil
}

func openStream(src string) (*os.File, error) {
	f, err := os.Open(src)
	if err != nil {
		return nil, fmt.Errorf("stream %s is missing: %w", src, errdefs.ErrNotFound)
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("stream %s is not a file: %w", src, errdefs.ErrInvalid)
	}
	return f, nil
}

// applyStream replays one stream through a. A stream that clones from
// its parent needs the parent's state as it was before the stream: the base
// volume itself for the first stream, else a read-only snapshot of a's
// volume taken now (view), dropped afterwards.
func (ar *archives) applyStream(a *applier, base *os.File, view storage.Key, src string, head streamHead, first bool) error {
	a.self, a.parent, a.parentView = head.uuid, head.parentUUID, nil
	defer a.closeOpen()
	if first {
		a.parentView = base
	} else if head.clonesParent {
		if err := ar.snapshotInto(a.root, view, true); err != nil {
			return fmt.Errorf("keep the state before it: %w", err)
		}
		defer func() {
			if err := ar.vols.Delete(context.Background(), view); err != nil {
				ar.log.Warn("remove restore scratch volume", "volume", view.String(), "err", err)
			}
		}()
		v, err := ar.vols.openSubvol(view)
		if err != nil {
			return err
		}
		defer v.Close()
		a.parentView = v
	}
	f, r, _, err := openStreamBody(src)
	if err != nil {
		return err
	}
	defer f.Close()
	return a.apply(r)
}

// openStreamBody opens a stream and reads its head; the reader is left at
// the first command after it.
func openStreamBody(src string) (*os.File, *streamReader, streamHead, error) {
	f, err := openStream(src)
	if err != nil {
		return nil, nil, streamHead{}, err
	}
	r, err := newStreamReader(f)
	var h streamHead
	if err == nil {
		h, err = readHead(r)
	}
	if err != nil {
		f.Close()
		return nil, nil, streamHead{}, fmt.Errorf("stream %s: %w", src, err)
	}
	return f, r, h, nil
}

// snapshotInto snapshots the volume open at src as key.
func (ar *archives) snapshotInto(src *os.File, key storage.Key, readOnly bool) error {
	dir, err := ar.vols.openKindDir(key.Kind)
	if err != nil {
		return err
	}
	defer dir.Close()
	if err := snapCreate(int(src.Fd()), int(dir.Fd()), key.Name, readOnly); err != nil {
		return fmt.Errorf("snapshot as %s: %w", key, errnoKind(err))
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
