// Package sharedvol owns shared volumes (E2B's Volume): btrfs subvolumes of
// their own kind in the pool, each with its own quota, that sandboxes mount
// read-write by name. A volume lives outside every sandbox's tree, so the
// sandbox's snapshots, rollbacks and forks never copy or touch it, and it
// outlives the sandboxes that mount it.
package sharedvol

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/storage"
	"github.com/warrenhq/warren/internal/store"
)

// SandboxUID and SandboxGID own a new volume's root: the `user` of every
// template (uid 1000), so that the sandboxes' default user can write to it.
const (
	SandboxUID = 1000
	SandboxGID = 1000
)

// minSize keeps a quota above btrfs's own metadata for an empty tree.
const minSize = 1 << 20

// Store is what the service needs of the metadata database.
type Store interface {
	CreateVolume(ctx context.Context, v store.Volume) error
	GetVolume(ctx context.Context, id string) (store.Volume, error)
	VolumeByName(ctx context.Context, team, name string) (store.Volume, error)
	ListVolumes(ctx context.Context, team string) ([]store.Volume, error)
	DeleteVolume(ctx context.Context, id string) error
	SandboxVolumeMounts(ctx context.Context, sandboxID string) ([]store.VolumeMount, error)
}

// Service creates, lists and deletes volumes, serves their content, and
// tells the sandboxes' launcher what to mount.
type Service struct {
	st  storage.Storage
	db  Store
	log *slog.Logger
	// defaultSize is a new volume's quota when the create names none (0:
	// none).
	defaultSize int64
}

// New returns the volume service over the pool st and the database db.
func New(st storage.Storage, db Store, defaultSize int64, log *slog.Logger) *Service {
	return &Service{st: st, db: db, defaultSize: defaultSize, log: log.With("component", "volumes")}
}

func key(id string) storage.Key { return storage.Key{Kind: storage.KindShared, Name: id} }

// Create makes a team's volume named name, capped at sizeBytes (0: the
// server's default). Nothing is left behind when it fails.
func (s *Service) Create(ctx context.Context, team, name string, sizeBytes int64) (store.Volume, error) {
	if err := ValidateName(name); err != nil {
		return store.Volume{}, err
	}
	if sizeBytes < 0 || (sizeBytes > 0 && sizeBytes < minSize) {
		return store.Volume{}, fmt.Errorf("volume size must be 0 (the server's default) or at least 1 MiB: %w", errdefs.ErrInvalid)
	}
	if sizeBytes == 0 {
		sizeBytes = s.defaultSize
	}
	if _, err := s.db.VolumeByName(ctx, team, name); err == nil {
		return store.Volume{}, fmt.Errorf("a volume named %q already exists: %w", name, errdefs.ErrAlreadyExists)
	}
	token, err := newToken()
	if err != nil {
		return store.Volume{}, err
	}
	v := store.Volume{ID: ids.New(20), Team: team, Name: name, Token: token, SizeBytes: sizeBytes}
	path, err := s.st.Create(ctx, key(v.ID))
	if err != nil {
		return store.Volume{}, fmt.Errorf("create volume %s: %w", name, err)
	}
	undo := func() {
		if err := s.st.Delete(context.WithoutCancel(ctx), key(v.ID)); err != nil {
			s.log.Warn("could not remove the tree of a volume whose create failed", "volume", v.ID, "err", err)
		}
	}
	if err := os.Chown(path, SandboxUID, SandboxGID); err != nil {
		undo()
		return store.Volume{}, fmt.Errorf("give volume %s to the sandboxes' user: %w", name, err)
	}
	if err := s.limit(ctx, v); err != nil {
		undo()
		return store.Volume{}, err
	}
	if err := s.db.CreateVolume(ctx, v); err != nil {
		undo()
		return store.Volume{}, err
	}
	return v, nil
}

// limit caps the volume at its size where the pool can; a pool without
// quotas (the dir backend, a btrfs without simple quotas) keeps the volume
// uncapped, and says so once per volume.
func (s *Service) limit(ctx context.Context, v store.Volume) error {
	if v.SizeBytes == 0 {
		return nil
	}
	l, ok := s.st.(storage.VolumeLimiter)
	if !ok {
		s.log.Warn("the storage cannot cap a volume's size; the volume is uncapped", "volume", v.ID, "storage", s.st.Name())
		return nil
	}
	err := l.SetVolumeLimit(ctx, key(v.ID), v.SizeBytes)
	if errdefs.IsUnsupported(err) {
		s.log.Warn("the pool has no quotas; the volume is uncapped", "volume", v.ID, "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("cap volume %s at %d bytes: %w", v.Name, v.SizeBytes, err)
	}
	return nil
}

// Get returns a team's volume by id or name.
func (s *Service) Get(ctx context.Context, team, idOrName string) (store.Volume, error) {
	v, err := s.db.GetVolume(ctx, idOrName)
	if errdefs.IsNotFound(err) {
		v, err = s.db.VolumeByName(ctx, team, idOrName)
	}
	if err != nil {
		return store.Volume{}, err
	}
	if v.Team != team {
		return store.Volume{}, fmt.Errorf("volume %s: %w", idOrName, errdefs.ErrNotFound)
	}
	return v, nil
}

// List returns a team's volumes by name.
func (s *Service) List(ctx context.Context, team string) ([]store.Volume, error) {
	return s.db.ListVolumes(ctx, team)
}

// Usage is the bytes a volume holds (-1 when the pool cannot tell).
func (s *Service) Usage(ctx context.Context, v store.Volume) int64 {
	info, err := s.st.Stat(ctx, key(v.ID))
	if err != nil {
		return -1
	}
	return info.ExclusiveBytes
}

// Delete removes a team's volume and its content. A volume that a sandbox
// which may run again mounts is ErrConflict: kill the sandbox first.
func (s *Service) Delete(ctx context.Context, team, idOrName string) error {
	v, err := s.Get(ctx, team, idOrName)
	if err != nil {
		return err
	}
	if err := s.db.DeleteVolume(ctx, v.ID); err != nil {
		return err
	}
	// The record is gone, so no create can mount it any more; the tree
	// follows (Reconcile retries what a failure here leaves).
	if err := s.st.Delete(context.WithoutCancel(ctx), key(v.ID)); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("remove the tree of volume %s: %w", v.Name, err)
	}
	return nil
}

// Reconcile removes the trees of volumes that have no record (a delete
// interrupted between the two).
func (s *Service) Reconcile(ctx context.Context) error {
	trees, err := s.st.List(ctx, storage.KindShared)
	if err != nil {
		return err
	}
	for _, t := range trees {
		if _, err := s.db.GetVolume(ctx, t.Key.Name); !errdefs.IsNotFound(err) {
			continue
		}
		if err := s.st.Delete(ctx, t.Key); err != nil {
			s.log.Warn("could not remove the tree of a deleted volume", "volume", t.Key.Name, "err", err)
		}
	}
	return nil
}

// Authorize returns the volume id names if token is its content token;
// anything else (an unknown volume included) is ErrUnauthenticated, so that
// a caller without the token learns nothing of which volumes exist.
func (s *Service) Authorize(ctx context.Context, id, token string) (store.Volume, error) {
	v, err := s.db.GetVolume(ctx, id)
	if errdefs.IsNotFound(err) || (err == nil && subtle.ConstantTimeCompare([]byte(v.Token), []byte(token)) != 1) {
		return store.Volume{}, fmt.Errorf("volume %s: a valid volume token is required (Authorization: Bearer <token>): %w", id, errdefs.ErrUnauthenticated)
	}
	return v, err
}

// MountsOf returns the bind mounts of the volumes a sandbox mounts, for
// every start of it (create, rollback, wake, cold boot). A volume that
// vanished is an error: the sandbox must not start without it.
func (s *Service) MountsOf(ctx context.Context, sandboxID string) ([]runtime.Mount, error) {
	ms, err := s.db.SandboxVolumeMounts(ctx, sandboxID)
	if err != nil {
		return nil, err
	}
	out := make([]runtime.Mount, 0, len(ms))
	for _, m := range ms {
		p := s.st.Path(key(m.VolumeID))
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("volume %s mounted at %s: %w", m.Name, m.Path, errors.Join(errdefs.ErrNotFound, err))
		}
		out = append(out, runtime.Mount{Source: p, Destination: m.Path})
	}
	return out, nil
}

// SandboxMounts returns the volumes a sandbox mounts, by path.
func (s *Service) SandboxMounts(ctx context.Context, sandboxID string) ([]store.VolumeMount, error) {
	return s.db.SandboxVolumeMounts(ctx, sandboxID)
}

// ResolveMounts checks a create's volume mounts (names a team's volumes,
// paths a sandbox may mount over, no volume or path twice) and fills in the
// volumes' ids.
func (s *Service) ResolveMounts(ctx context.Context, team string, mounts []store.VolumeMount) ([]store.VolumeMount, error) {
	if err := checkMounts(mounts); err != nil {
		return nil, err
	}
	out := make([]store.VolumeMount, len(mounts))
	for i, m := range mounts {
		v, err := s.db.VolumeByName(ctx, team, m.Name)
		if errdefs.IsNotFound(err) {
			return nil, fmt.Errorf("volumeMounts: no volume named %q; create it first (POST /volumes): %w", m.Name, errdefs.ErrInvalid)
		}
		if err != nil {
			return nil, err
		}
		out[i] = store.VolumeMount{VolumeID: v.ID, Name: v.Name, Path: m.Path}
	}
	return out, nil
}

func newToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("read random bytes for a volume token: %w", err)
	}
	return "vtk_" + hex.EncodeToString(b), nil
}
