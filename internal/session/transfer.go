package session

import (
	"context"
	"fmt"
	"io"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store"
)

// transfers moves snapshots between daemons: an export writes a snapshot's
// files as the storage's stream (whole, or as a delta against a snapshot the
// receiver already holds), an import rebuilds one from such a stream as a
// ready snapshot of the caller's team. The wire format around the stream
// (header, checksum) is the server's (internal/snapbundle). A snapshot's
// memory image travels after its files when it has one (unless the export
// leaves it out); an importer whose runtimes cannot restore it keeps the
// files and drops it, or refuses when asked to keep it (RequireMemory).
//
// An import is atomic: the volume is built under a name no record has and
// placed, then recorded, only once the stream has been read whole and its
// checksum verified; on any failure neither volume nor record remains. It
// is idempotent: importing a snapshot this daemon already holds for the
// team (same id, sandbox, turn and time) answers the snapshot held. The
// retry rule for a cut transfer is therefore to export and import again.
type transfers struct {
	*registry
	host    TransferHost // nil: the host cannot export or import
	store   transferStore
	volumes *archiver
	snaps   *snapshots // a team's usable snapshots
}

// TransferHost is what transfers need of the host (an optional part of it:
// see New).
type TransferHost interface {
	TransferFormat() string
	ExportSnapshot(ctx context.Context, snapID, baseID string, w io.Writer) error
	ImportSnapshot(ctx context.Context, r io.Reader, baseID, snapID string, verify func() error) error
	DeleteSnapshot(ctx context.Context, snapID string) error

	MemoryImage(snapID string) (runtimeName string, ok bool)
	MemoryImageSize(snapID string) (int64, bool)
	WriteMemoryImage(ctx context.Context, snapID string, w io.Writer) error
	ReceiveMemoryImage(r io.Reader) (*sandbox.StagedMemory, error)
	CanSaveMemory(runtimeName string) error
	KeepHibernationAsSnapshot(id, snapID, runtimeName string) (int64, error)
	DropMemoryImage(snapID string) error
}

// transferStore is what transfers need of the store.
type transferStore interface {
	CreateSnapshot(ctx context.Context, snap store.Snapshot) error
	SetSnapshotMemory(ctx context.Context, id string, bytes int64) error
	GetSandbox(ctx context.Context, id string) (store.Sandbox, error)
	GetSnapshot(ctx context.Context, id string) (store.Snapshot, error)
}

// ExportInfo describes a snapshot being exported: what the stream's reader
// needs to record it.
type ExportInfo struct {
	Snapshot store.Snapshot
	// Lineage is the parent chain, nearest first, as far as this daemon
	// has records.
	Lineage []string
	Runtime string // of the sandbox the snapshot was taken of, if known
	Base    string // the snapshot the stream is a delta against; "" = whole
	Format  string // the storage's stream format
	// MemoryLeftOut: the snapshot has a memory image, which is not sent.
	MemoryLeftOut bool
	// Memory describes the memory image sent after the files (nil: none).
	Memory *MemoryImage
}

// MemoryImage describes a snapshot's memory image in transit.
type MemoryImage struct {
	Bytes int64
	// Runtime saved it and alone can restore it.
	Runtime string
}

// ExportSink is where an export writes: the files, then, after
// BeginMemory, the memory image (snapbundle.Writer).
type ExportSink interface {
	io.Writer
	BeginMemory() error
}

// wholeOnlyFormat is the transfer format that has no deltas: the dir
// storage's tar.
const wholeOnlyFormat = "tar"

// maxExportLineage bounds the parent chain an export describes.
const maxExportLineage = 1000

func (t *transfers) usableHost() (TransferHost, error) {
	if t.host == nil || t.host.TransferFormat() == "" {
		return nil, fmt.Errorf("this daemon's storage cannot export or import snapshots: %w", errdefs.ErrUnsupported)
	}
	return t.host, nil
}

// ExportSnapshot streams a team's snapshot: start is given its description
// and returns where the stream goes; the files follow, as a delta against
// base when base is set (a snapshot of the team the receiver imported
// before), then its memory image if it has one and withMemory is set. The
// volumes stay in the pool (restored if archived) meanwhile.
func (t *transfers) ExportSnapshot(ctx context.Context, team, id, base string, withMemory bool, start func(ExportInfo) (ExportSink, error)) error {
	host, err := t.usableHost()
	if err != nil {
		return err
	}
	snap, err := t.snaps.usableSnapshot(ctx, team, id)
	if err != nil {
		return err
	}
	use := []store.Snapshot{snap}
	if base != "" {
		if host.TransferFormat() == wholeOnlyFormat {
			// Refused here, before the answer starts: once the bundle's
			// header is out, a failure can only cut the stream.
			return fmt.Errorf("this daemon's storage exports whole snapshots only (a tar); export without base: %w", errdefs.ErrUnsupported)
		}
		if base == id {
			return fmt.Errorf("base %s is the snapshot itself; export it without base: %w", base, errdefs.ErrInvalid)
		}
		b, err := t.snaps.usableSnapshot(ctx, team, base)
		if err != nil {
			return fmt.Errorf("base: %w", err)
		}
		use = append(use, b)
	}
	release, err := t.volumes.useSnapshots(ctx, use...)
	if err != nil {
		return err
	}
	defer release()
	info := ExportInfo{Snapshot: snap, Base: base, Format: host.TransferFormat()}
	info.Lineage = t.lineage(ctx, snap)
	if sb, err := t.store.GetSandbox(ctx, snap.SandboxID); err == nil {
		info.Runtime = sb.Runtime
	}
	info.Memory, info.MemoryLeftOut = t.memoryToSend(snap, info.Runtime, withMemory)
	w, err := start(info)
	if err != nil {
		return err
	}
	if err := host.ExportSnapshot(ctx, id, base, w); err != nil {
		return err
	}
	if info.Memory == nil {
		return nil
	}
	if err := w.BeginMemory(); err != nil {
		return err
	}
	return host.WriteMemoryImage(ctx, id, w)
}

// memoryToSend describes the memory image an export of snap sends, or says
// it leaves one out (not asked for, or its image is not on disk).
func (t *transfers) memoryToSend(snap store.Snapshot, sandboxRuntime string, withMemory bool) (*MemoryImage, bool) {
	if snap.MemoryBytes <= 0 {
		return nil, false
	}
	rt, ok := t.host.MemoryImage(snap.ID)
	size, sized := t.host.MemoryImageSize(snap.ID)
	if !withMemory || !ok || !sized {
		if withMemory {
			t.log.Warn("a snapshot's memory image is missing; exporting its files only", "snapshot", snap.ID)
		}
		return nil, true
	}
	if rt == "" {
		rt = sandboxRuntime
	}
	return &MemoryImage{Bytes: size, Runtime: rt}, false
}

// lineage walks snap's parents as far as their records go.
func (t *transfers) lineage(ctx context.Context, snap store.Snapshot) []string {
	var out []string
	for p := snap.ParentID; p != "" && len(out) < maxExportLineage; {
		out = append(out, p)
		s, err := t.store.GetSnapshot(ctx, p)
		if err != nil {
			break
		}
		p = s.ParentID
	}
	return out
}

// ImportRequest is a snapshot arriving from another daemon.
type ImportRequest struct {
	// Snapshot is the record the exporter sent; Team, State and sizes are
	// set here.
	Snapshot store.Snapshot
	Base     string // the snapshot the stream is a delta against; "" = whole
	Format   string
	Body     io.Reader
	// Verify reads what follows Body — the memory image, given to memory
	// (nil: read and dropped) — and checks all of it against its checksum;
	// it runs before anything is visible.
	Verify func(memory func(io.Reader) error) error
	// Rename gives the snapshot a new id when its own is taken here
	// (instead of ErrAlreadyExists).
	Rename bool
	// Memory describes the memory image the bundle carries (nil: none).
	Memory *MemoryImage
	// RequireMemory refuses a bundle whose memory image this daemon
	// cannot restore, instead of importing its files alone.
	RequireMemory bool
	// MemoryDropped, if set, is told why a memory image the bundle carried
	// was not kept.
	MemoryDropped func(why string)
}

// ImportSnapshot rebuilds a snapshot from another daemon's export as a
// ready snapshot of team. It reports whether it made one (false: this
// daemon held it already, and answers that).
func (t *transfers) ImportSnapshot(ctx context.Context, team string, req ImportRequest) (store.Snapshot, bool, error) {
	host, err := t.usableHost()
	if err != nil {
		return store.Snapshot{}, false, err
	}
	if want := host.TransferFormat(); req.Format != want {
		return store.Snapshot{}, false, fmt.Errorf("the bundle holds a %q stream; this daemon's storage reads %q: %w", req.Format, want, errdefs.ErrInvalid)
	}
	snap := req.Snapshot
	snap.Team, snap.State = team, SnapReady
	snap.ExclusiveBytes, snap.ReferencedBytes = -1, -1
	snap.MemoryBytes, snap.ArchiveParent, snap.ArchivePath = 0, "", ""
	if err := ids.Validate("snapshot id", snap.ID); err != nil {
		return store.Snapshot{}, false, err
	}
	keepMemory, err := t.keepMemory(req)
	if err != nil {
		return store.Snapshot{}, false, err
	}
	unlock := t.volumes.lockSnapshot(snap.ID, true)
	defer func() { unlock() }() // the lock of the id finally used
	held, err := t.store.GetSnapshot(ctx, snap.ID)
	switch {
	case err == nil && held.Team == team && sameImport(held, snap):
		return held, false, nil
	case err == nil && !req.Rename:
		return store.Snapshot{}, false, fmt.Errorf("snapshot id %s is taken on this daemon; import with rename to give it a new id: %w", snap.ID, errdefs.ErrAlreadyExists)
	case err == nil:
		unlock()
		snap.ID = ids.New(20)
		unlock = t.volumes.lockSnapshot(snap.ID, true)
	case !errdefs.IsNotFound(err):
		return store.Snapshot{}, false, err
	}
	if req.Base != "" {
		if _, err := t.snaps.usableSnapshot(ctx, team, req.Base); err != nil {
			return store.Snapshot{}, false, fmt.Errorf("the bundle is a delta against snapshot %s, which this daemon does not hold for the team; import that one first, or export again without base: %w", req.Base, errdefs.ErrNotFound)
		}
		// The new snapshot is newer than its base (see the lock order).
		release, err := t.volumes.useSnapshots(ctx, store.Snapshot{ID: req.Base})
		if err != nil {
			return store.Snapshot{}, false, err
		}
		defer release()
	}
	staged, err := t.importVolume(ctx, req, snap.ID, keepMemory)
	defer staged.Drop() // nothing once placed
	if err != nil {
		return store.Snapshot{}, false, err
	}
	if staged != nil {
		if err := staged.Place(snap.ID); err != nil {
			t.dropImported(ctx, snap.ID)
			return store.Snapshot{}, false, err
		}
		snap.MemoryBytes = max(staged.Bytes, 1)
	}
	if err := t.store.CreateSnapshot(context.WithoutCancel(ctx), snap); err != nil {
		t.dropImported(ctx, snap.ID)
		return store.Snapshot{}, false, err
	}
	t.log.Info("imported snapshot", "snapshot", snap.ID, "team", team, "base", req.Base, "memoryBytes", snap.MemoryBytes)
	return snap, true, nil
}

// keepMemory decides whether an import keeps the memory image its bundle
// carries: only where a runtime here can restore it. Otherwise the files
// are imported alone and the caller told, or, if it asked for the memory,
// the import is refused before anything is read.
func (t *transfers) keepMemory(req ImportRequest) (bool, error) {
	if req.Memory == nil {
		return false, nil
	}
	err := t.host.CanSaveMemory(req.Memory.Runtime)
	if err == nil {
		return true, nil
	}
	why := fmt.Sprintf("its memory image (saved by the %s runtime) was dropped: %v", req.Memory.Runtime, err)
	if req.RequireMemory {
		return false, fmt.Errorf("snapshot %s carries memory this daemon cannot restore (%v); import it without requiring memory to keep its files only: %w", req.Snapshot.ID, err, errdefs.ErrUnsupported)
	}
	t.log.Warn("importing a snapshot's files only: this daemon cannot restore its memory", "snapshot", req.Snapshot.ID, "runtime", req.Memory.Runtime, "err", err)
	if req.MemoryDropped != nil {
		req.MemoryDropped(why)
	}
	return false, nil
}

// importVolume builds snapID's volume from the bundle's body and, when
// keepMemory, receives its memory image aside (the caller places or
// drops it); the bundle's checksum has been verified when it returns.
func (t *transfers) importVolume(ctx context.Context, req ImportRequest, snapID string, keepMemory bool) (*sandbox.StagedMemory, error) {
	var staged *sandbox.StagedMemory
	var save func(io.Reader) error
	if keepMemory {
		save = func(r io.Reader) error {
			var err error
			staged, err = t.host.ReceiveMemoryImage(r)
			return err
		}
	}
	verify := func() error {
		err := req.Verify(save)
		if err != nil {
			staged.Drop()
			staged = nil
		}
		return err
	}
	if err := t.host.ImportSnapshot(ctx, req.Body, req.Base, snapID, verify); err != nil {
		staged.Drop()
		return nil, err
	}
	if keepMemory && staged == nil {
		return nil, fmt.Errorf("the bundle of snapshot %s promised a memory image it did not carry: %w", snapID, errdefs.ErrInvalid)
	}
	return staged, nil
}

// dropImported removes what an import that failed after its volume was
// built made (the volume, a memory image placed).
func (t *transfers) dropImported(ctx context.Context, snapID string) {
	if err := t.host.DeleteSnapshot(context.WithoutCancel(ctx), snapID); err != nil {
		t.log.Warn("remove the volume of an import that failed", "snapshot", snapID, "err", err)
	}
}

// sameImport reports whether held is the snapshot an import brings again.
func sameImport(held, in store.Snapshot) bool {
	return (held.State == SnapReady || held.State == SnapArchived) &&
		held.SandboxID == in.SandboxID && held.Turn == in.Turn && held.CreatedAt.Equal(in.CreatedAt)
}
