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
)

// Kinds lists every kind, in the order the pool creates their directories.
var Kinds = []Kind{KindTemplate, KindSandbox, KindSnapshot, KindScratch}

// Key names one volume.
type Key struct {
	Kind Kind
	Name string
}

func (k Key) String() string { return string(k.Kind) + "/" + k.Name }

// Validate rejects keys that could escape the pool.
func (k Key) Validate() error {
	switch k.Kind {
	case KindTemplate, KindSandbox, KindSnapshot, KindScratch:
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
