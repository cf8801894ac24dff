// Package storage defines how warren keeps root filesystems: templates,
// sandbox roots and snapshots are volumes in one pool, made from one another
// by (cheap, on btrfs) snapshots.
//
// The interface lives here; implementations live in subpackages (btrfs, dir)
// and pass the one conformance suite in storagetest. Only internal/daemon
// picks an implementation.
package storage

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
)

// Kind groups volumes; each kind is one directory of the pool.
type Kind string

const (
	KindTemplate Kind = "templates"
	KindSandbox  Kind = "sandboxes"
	KindSnapshot Kind = "snapshots"
	// KindScratch holds volumes under construction (a template being built).
	// Whatever is left there at start-up is garbage from a crash.
	KindScratch Kind = "scratch"
	// KindShared holds shared volumes (E2B's Volume): trees of their own,
	// bind-mounted into the sandboxes that name them, never part of a
	// sandbox's snapshots.
	KindShared Kind = "shared"
)

// Kinds lists every kind, in the order the pool creates their directories.
var Kinds = []Kind{KindTemplate, KindSandbox, KindSnapshot, KindScratch, KindShared}

// Key names one volume.
type Key struct {
	Kind Kind
	Name string
}

func (k Key) String() string { return string(k.Kind) + "/" + k.Name }

// Validate rejects keys that could escape the pool.
func (k Key) Validate() error {
	switch k.Kind {
	case KindTemplate, KindSandbox, KindSnapshot, KindScratch, KindShared:
	default:
		return fmt.Errorf("volume kind %q: %w", k.Kind, errdefs.ErrInvalid)
	}
	return ids.ValidateName("volume name", k.Name)
}

// Info describes one volume.
type Info struct {
	Key      Key
	Path     string
	ReadOnly bool
	// ExclusiveBytes and ReferencedBytes are filled when the backend can
	// account space (btrfs with simple quotas); otherwise they are -1.
	ExclusiveBytes  int64
	ReferencedBytes int64
}

// SnapshotOptions tunes Snapshot.
type SnapshotOptions struct {
	ReadOnly bool
	// Group charges the new volume to a quota group (created if missing)
	// on backends that implement QuotaGroups; others ignore it. Named by
	// the caller, e.g. the sandbox id; validated like a volume name.
	Group string
	// Taken, if set, is called once the new volume's content is fixed,
	// which on btrfs is before Snapshot returns: the rest of the call
	// writes the snapshot out. A caller that froze the source's writers
	// may thaw them then. Snapshot returns only after Taken has returned;
	// backends that cannot tell never call it.
	Taken func()
}

// Storage is a pool of volumes.
//
// Every method is safe for concurrent use on different keys. Errors wrap
// errdefs kinds: ErrNotFound for a missing source or volume, ErrAlreadyExists
// when the destination exists, ErrInvalid for a bad key.
type Storage interface {
	// Name is the backend's name ("btrfs", "dir").
	Name() string
	// Create makes an empty writable volume and returns its path.
	Create(ctx context.Context, key Key) (string, error)
	// Snapshot makes key a copy of parent (a CoW snapshot where the backend
	// can) and returns its path. The copy is read-only if asked.
	Snapshot(ctx context.Context, parent, key Key, opts SnapshotOptions) (string, error)
	// SetReadOnly flips a volume's read-only flag.
	SetReadOnly(ctx context.Context, key Key, readOnly bool) error
	// Exchange swaps two writable volumes' places atomically: at every
	// instant each key holds one whole volume. Both must exist.
	Exchange(ctx context.Context, a, b Key) error
	// Delete removes a volume and everything in it. Deleting a missing
	// volume returns ErrNotFound.
	Delete(ctx context.Context, key Key) error
	// Stat describes a volume.
	Stat(ctx context.Context, key Key) (Info, error)
	// List returns the volumes of one kind, sorted by name.
	List(ctx context.Context, kind Kind) ([]Info, error)
	// Path is where the volume is (or would be) on the host.
	Path(key Key) string
}

// Closer is implemented by backends that hold resources (a loop-mounted
// image) that should be released when the daemon stops.
type Closer interface {
	Close() error
}

// ChangeKind says how a path differs between two volumes.
type ChangeKind string

const (
	ChangeAdded    ChangeKind = "added"
	ChangeModified ChangeKind = "modified"
	ChangeRemoved  ChangeKind = "removed"
)

// Change is one path that differs between two volumes.
type Change struct {
	// Path is absolute inside the volume ("/etc/passwd").
	Path string
	Kind ChangeKind
	// Type is "file", "dir", "symlink" or "other" (in `to`; in `from` for
	// removed paths).
	Type string
	// Size and Mode are in `to`; OldSize and OldMode in `from` (zero for
	// added paths, and Size/Mode zero for removed ones). Mode holds the
	// permission bits plus setuid/setgid/sticky.
	Size    int64
	OldSize int64
	Mode    uint32
	OldMode uint32
}

// Differ is implemented by backends that can list the differences between
// two volumes. Changes are sorted by path; a removed directory is listed
// with every path below it.
type Differ interface {
	Diff(ctx context.Context, from, to Key) ([]Change, error)
}

// QuotaGroups is implemented by backends that can cap the space a group of
// volumes (a sandbox, its snapshots and rollbacks) may use. Writes past the
// limit fail inside the sandbox with EDQUOT; nothing else is affected.
type QuotaGroups interface {
	// SetGroupLimit makes sure the group exists and caps it at bytes
	// (0 = no limit).
	SetGroupLimit(ctx context.Context, group string, bytes int64) error
	// GroupUsage reports the bytes charged to the group and its limit
	// (0 = none).
	GroupUsage(ctx context.Context, group string) (used, limit int64, err error)
	// DeleteGroup removes the group once none of its volumes remain; it is
	// not an error if the group does not exist.
	DeleteGroup(ctx context.Context, group string) error
}

// GroupsCap is implemented by backends whose quota groups can be capped
// together: what every group holds, added up, stays below one cap, so
// that the rest of the pool (the daemon's own files, snapshots' metadata,
// the room a delete needs) is never filled by sandboxes. A new group is
// outside the cap until it joins (so that the start of a sandbox, which
// writes into its new volume, does not need the sandboxes' share).
type GroupsCap interface {
	// SetGroupsCap caps the groups together at bytes (0 = no cap) and
	// puts every group under the cap.
	SetGroupsCap(ctx context.Context, bytes int64) error
	// JoinGroupsCap puts one group under the cap (done already: nil).
	JoinGroupsCap(ctx context.Context, group string) error
	// GroupsUsage reports the bytes charged to all groups together and
	// their cap (0 = none).
	GroupsUsage(ctx context.Context) (used, limit int64, err error)
	// Space reports the pool's size and the bytes still free in it.
	Space(ctx context.Context) (size, avail int64, err error)
}

// VolumeLimiter is implemented by backends that can cap the space one
// volume's own writes may take (a shared volume's size). A write past the
// cap fails with EDQUOT. Stat's ExclusiveBytes reports the usage.
type VolumeLimiter interface {
	SetVolumeLimit(ctx context.Context, key Key, bytes int64) error
}

// AsideDeleter is implemented by backends whose delete of a volume blocks
// the making of other volumes beside it for as long as it takes (btrfs:
// the kind directory's lock, held while the volume's cached inodes are
// evicted). DeleteAside is Delete with the volume first moved where it
// blocks nothing; a crash midway leaves it to the next open, which drops
// it.
type AsideDeleter interface {
	DeleteAside(ctx context.Context, key Key) error
}

// Archiver is implemented by backends that can move a read-only volume out
// of the pool into a compact incremental stream (relative to a parent volume
// that stays in the pool) and bring it back. Keeping few volumes per lineage
// keeps snapshots fast (btrfs snapshot cost grows with the snapshots kept).
type Archiver interface {
	// Archive writes key's content, as a delta against parent, to the file
	// dst. key and parent must be read-only. The volume is not deleted.
	Archive(ctx context.Context, key, parent Key, dst string) error
	// Restore rebuilds key (read-only) from a chain of streams: srcs[0] is
	// a delta against parent (which must exist), each later stream a delta
	// against the volume the one before it describes, and the last one is
	// key's. Only key is kept.
	Restore(ctx context.Context, srcs []string, parent, key Key) error
}

// Transferer is implemented by backends that can write a read-only volume
// out as one stream for another host's pool and build a volume from such a
// stream (snapshot export and import).
type Transferer interface {
	// TransferFormat names the streams Export writes and Import reads
	// ("btrfs-send-v1", "tar").
	TransferFormat() string
	// Export writes key's content to w: whole when base is the zero Key,
	// else as a delta against base, which the receiving pool must hold as
	// the volume it imported from base's own export. key and base must be
	// read-only.
	Export(ctx context.Context, key, base Key, w io.Writer) error
	// Import builds key, read-only, from a stream Export wrote: a delta
	// against base when base is set. verify runs once the stream has been
	// read, before key appears; when it or anything else fails, nothing
	// is left behind. An existing key is ErrAlreadyExists; a stream that
	// is not a delta against base (or not whole, without base) ErrInvalid.
	Import(ctx context.Context, r io.Reader, base, key Key, verify func() error) error
}

// CloseToOthers makes dir, which holds volumes of one kind, traversable by
// root alone (0700; pools made before kept 0711). A sandbox's root can
// leave setuid-root files in its tree (chmod needs no more than it has,
// and sudo is one), and the pool is mounted without nosuid, since the
// sandboxes' roots are bind mounts of it; so no other host user may reach
// a volume's files by path (docs/security.md).
func CloseToOthers(dir string) error {
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("make %s root's alone: %w", dir, err)
	}
	return nil
}
