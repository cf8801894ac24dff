package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/agentconn"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/storage"
)

// memoryRuntime is a host runtime that saves and restores sandboxes'
// memory (runtimeset.Set; a runtime.Checkpointer restores on itself).
type memoryRuntime interface {
	Checkpoint(ctx context.Context, id, dir string, stop bool) (runtime.CheckpointInfo, error)
	Restore(ctx context.Context, runtimeName string, spec runtime.Spec, dir string) (runtime.Status, error)
}

// Memory images live in MemoryDir, one directory each: snapshot-<id> beside
// a snapshot's volume, hibernate-<id> for a hibernated sandbox.
const (
	snapshotImagePrefix  = "snapshot-"
	hibernateImagePrefix = "hibernate-"
)

// memoryDir is the directory of memory images ("": this host keeps none).
type memoryDir string

func (d memoryDir) snapshotImage(snapID string) string {
	return filepath.Join(string(d), snapshotImagePrefix+snapID)
}

func (d memoryDir) hibernationImage(id string) string {
	return filepath.Join(string(d), hibernateImagePrefix+id)
}

// memoryHostRuntime is what memory images need of the host runtime: its
// name and features, a freeze around a snapshot, the release of a
// hibernated sandbox's remains. Saving and restoring is memoryRuntime.
type memoryHostRuntime interface {
	Name() string
	Capabilities() runtime.Capabilities
	Pause(ctx context.Context, id string) error
	Resume(ctx context.Context, id string) error
	Destroy(ctx context.Context, id string) error
}

// memoryImages saves sandboxes' memory and processes and brings them
// back: with a snapshot (a fork or rollback resumes them), or as a
// hibernation (Hibernate, Wake).
type memoryImages struct {
	dir     memoryDir
	runtime memoryHostRuntime
	pool    *volumes
	// syncs writes back a sandbox's data before its memory snapshot
	// (writeBackTickets).
	syncs interface{ syncVolume(key storage.Key) error }
	// specs says what a woken sandbox runs (launcher).
	specs interface {
		runtimeSpec(ctx context.Context, spec Spec, root string) (runtime.Spec, error)
	}
	sockets agentSockets
	log     *slog.Logger
	// devices: see Config.Devices.
	devices func(ctx context.Context, id string) (*runtime.Devices, error)
}

// refuseDevices refuses to save the memory of a sandbox holding devices:
// a device's state (a GPU's memory, its driver's handles) is not in the
// image, so a restore would resume processes against a device that
// forgot them.
func (m *memoryImages) refuseDevices(ctx context.Context, id string) error {
	if m.devices == nil {
		return nil
	}
	d, err := m.devices(ctx, id)
	if err != nil {
		return err
	}
	if d != nil {
		return fmt.Errorf("sandbox %s holds devices (%s) whose state a memory image cannot hold; take a filesystem snapshot or pause instead: %w",
			id, strings.Join(d.Names, ", "), errdefs.ErrInvalid)
	}
	return nil
}

func (m *memoryImages) memoryRuntime() (memoryRuntime, error) {
	if m.dir == "" {
		return nil, fmt.Errorf("this server keeps no memory images (no memory directory): %w", errdefs.ErrUnsupported)
	}
	if mr, ok := m.runtime.(memoryRuntime); ok {
		return mr, nil
	}
	if c, ok := m.runtime.(runtime.Checkpointer); ok && m.runtime.Capabilities().MemorySnapshot {
		return single{c}, nil
	}
	return nil, fmt.Errorf("the %s runtime cannot save memory; memory snapshots need the gvisor runtime (filesystem snapshots work on every runtime): %w", m.runtime.Name(), errdefs.ErrUnsupported)
}

// CanSaveMemory says whether the memory of a sandbox on the runtime named
// name ("" = the host's default) can be saved and restored here (nil), or
// why not (ErrUnsupported). Callers ask before they record anything, so
// that a refused request leaves nothing behind.
func (m *memoryImages) CanSaveMemory(name string) error {
	if _, err := m.memoryRuntime(); err != nil {
		return err
	}
	if name == "" {
		name = m.runtime.Name()
	}
	caps, ok := m.runtime.Capabilities(), name == m.runtime.Name()
	if set, isSet := m.runtime.(interface {
		CapabilitiesOf(string) (runtime.Capabilities, bool)
	}); isSet {
		caps, ok = set.CapabilitiesOf(name)
	}
	if !ok {
		return fmt.Errorf("no runtime named %q here: %w", name, errdefs.ErrUnsupported)
	}
	if av, isSet := m.runtime.(interface{ Available(string) error }); isSet {
		if err := av.Available(name); err != nil {
			return fmt.Errorf("the %s runtime cannot run here (%v): %w", name, err, errdefs.ErrUnsupported)
		}
	}
	if !caps.MemorySnapshot {
		return fmt.Errorf("the %s runtime cannot save memory; memory snapshots need the gvisor runtime (filesystem snapshots work on every runtime): %w", name, errdefs.ErrUnsupported)
	}
	return nil
}

// single adapts a lone runtime.Checkpointer to memoryRuntime.
type single struct{ runtime.Checkpointer }

func (s single) Restore(ctx context.Context, _ string, spec runtime.Spec, dir string) (runtime.Status, error) {
	return s.Checkpointer.Restore(ctx, spec, dir)
}

func (m *memoryImages) restore(ctx context.Context, runtimeName string, rs runtime.Spec, dir string) (runtime.Status, error) {
	mr, err := m.memoryRuntime()
	if err != nil {
		return runtime.Status{}, err
	}
	return mr.Restore(ctx, runtimeName, rs, dir)
}

// runtimeFile names, inside an image, the runtime that wrote it: only that
// runtime can restore it.
const runtimeFile = "warren-runtime"

// MemoryImage reports whether a snapshot's memory image is on disk, and
// the runtime that wrote it ("" if not recorded).
func (m *memoryImages) MemoryImage(snapID string) (runtimeName string, ok bool) {
	if m.dir == "" {
		return "", false
	}
	if _, err := os.Stat(m.dir.snapshotImage(snapID)); err != nil {
		return "", false
	}
	data, _ := os.ReadFile(filepath.Join(m.dir.snapshotImage(snapID), runtimeFile))
	return strings.TrimSpace(string(data)), true
}

// recordRuntime writes into an image the runtime holding sandbox id.
func (m *memoryImages) recordRuntime(ctx context.Context, id, img string) {
	name := m.runtime.Name()
	if ro, ok := m.runtime.(interface {
		RuntimeOf(context.Context, string) (string, error)
	}); ok {
		if n, err := ro.RuntimeOf(ctx, id); err == nil {
			name = n
		}
	}
	if err := os.WriteFile(filepath.Join(img, runtimeFile), []byte(name+"\n"), 0o600); err != nil {
		m.log.Warn("record the runtime of a memory image", "image", img, "err", err)
	}
}

// SnapshotMemory takes a snapshot of the sandbox's files and, at the same
// instant, an image of its memory and processes: the sandbox is paused,
// its tree snapshotted, its kernel checkpointed, and it is resumed (or
// left paused if it was). A fork or rollback to the snapshot restores
// both, so its processes carry on as they were.
//
// Saving the kernel breaks the agent's connection: it is dropped first and
// the agent's new one awaited before this returns (unless left paused).
func (m *memoryImages) SnapshotMemory(ctx context.Context, id, snapID, group string, wasPaused bool, conn *agentconn.Conn) (SnapshotResult, int64, error) {
	if err := m.refuseDevices(ctx, id); err != nil {
		return SnapshotResult{}, 0, err
	}
	mr, err := m.memoryRuntime()
	if err != nil {
		return SnapshotResult{}, 0, err
	}
	if err := os.MkdirAll(string(m.dir), 0o700); err != nil {
		return SnapshotResult{}, 0, fmt.Errorf("make memory dir: %w", err)
	}
	if err := m.pool.unsettled.sandbox(ctx, id); err != nil {
		return SnapshotResult{}, 0, err
	}
	m.pool.snapMu.Lock()
	defer m.pool.snapMu.Unlock()
	syncStart := time.Now()
	if err := m.syncs.syncVolume(sandboxKey(id)); err != nil {
		m.log.Debug("write back before snapshot", "sandbox", id, "err", err)
	}
	synced := time.Since(syncStart)
	start := time.Now()
	if err := m.runtime.Pause(ctx, id); err != nil {
		return SnapshotResult{}, 0, fmt.Errorf("pause sandbox %s: %w", id, err)
	}
	thaw := func() {
		if wasPaused {
			return
		}
		if err := m.runtime.Resume(context.WithoutCancel(ctx), id); err != nil {
			m.log.Error("resume sandbox after snapshot", "sandbox", id, "err", err)
		}
	}
	if conn != nil {
		conn.Drop()
	}
	if _, err := m.pool.snapshotVolume(ctx, sandboxKey(id), snapshotKey(snapID), storage.SnapshotOptions{ReadOnly: true, Group: group}); err != nil {
		thaw()
		return SnapshotResult{}, 0, fmt.Errorf("snapshot sandbox %s: %w", id, err)
	}
	img := m.dir.snapshotImage(snapID)
	_ = os.RemoveAll(img) // a leftover of a snapshot id never recorded
	info, err := mr.Checkpoint(ctx, id, img, false)
	thaw()
	frozen := time.Since(start)
	if err != nil {
		_ = m.pool.st.Delete(context.WithoutCancel(ctx), snapshotKey(snapID))
		return SnapshotResult{}, 0, fmt.Errorf("save the memory of sandbox %s: %w", id, err)
	}
	m.recordRuntime(ctx, id, img)
	if conn != nil && !wasPaused {
		if err := m.sockets.waitReady(ctx, conn); err != nil {
			return SnapshotResult{}, 0, fmt.Errorf("sandbox %s after its memory was saved: %w", id, err)
		}
	}
	vol, err := m.pool.st.Stat(ctx, snapshotKey(snapID))
	if err != nil {
		return SnapshotResult{}, 0, err
	}
	return SnapshotResult{Info: vol, Frozen: frozen, Synced: synced}, info.Bytes, nil
}

// Hibernate saves a running or paused sandbox's memory and processes to
// disk and ends them: it then holds no memory, CPU or processes, only its
// files and that image, and survives a daemon restart or a reboot. Its
// agent listener stays; Wake brings it back.
func (m *memoryImages) Hibernate(ctx context.Context, id string) (runtime.CheckpointInfo, error) {
	if err := m.refuseDevices(ctx, id); err != nil {
		return runtime.CheckpointInfo{}, err
	}
	mr, err := m.memoryRuntime()
	if err != nil {
		return runtime.CheckpointInfo{}, err
	}
	if err := os.MkdirAll(string(m.dir), 0o700); err != nil {
		return runtime.CheckpointInfo{}, fmt.Errorf("make memory dir: %w", err)
	}
	img := m.dir.hibernationImage(id)
	// An image of an earlier hibernation was consumed by its wake; one left
	// now belongs to a hibernation that did not finish.
	if err := os.RemoveAll(img); err != nil {
		return runtime.CheckpointInfo{}, err
	}
	info, err := mr.Checkpoint(ctx, id, img, true)
	if err != nil {
		return runtime.CheckpointInfo{}, fmt.Errorf("hibernate sandbox %s: %w", id, err)
	}
	// Its processes are gone; what remains of them (cgroups, runtime state)
	// goes too.
	if err := m.runtime.Destroy(context.WithoutCancel(ctx), id); err != nil && !errdefs.IsNotFound(err) {
		m.log.Warn("release a hibernated sandbox's runtime", "sandbox", id, "err", err)
	}
	return info, nil
}

// IsHibernated reports whether a sandbox's hibernation image is on disk.
func (m *memoryImages) IsHibernated(id string) bool {
	if m.dir == "" {
		return false
	}
	_, err := os.Stat(m.dir.hibernationImage(id))
	return err == nil
}

// Wake restores a hibernated sandbox from its image and waits for its
// agent. The image is removed once the sandbox runs again: the sandbox
// has moved on from it.
func (m *memoryImages) Wake(ctx context.Context, spec Spec, conn *agentconn.Conn) (time.Duration, error) {
	ctx = context.WithoutCancel(ctx)
	img := m.dir.hibernationImage(spec.ID)
	if _, err := os.Stat(img); err != nil {
		return 0, fmt.Errorf("sandbox %s has no hibernation image: %w", spec.ID, errdefs.ErrNotFound)
	}
	began := time.Now()
	rs, err := m.specs.runtimeSpec(ctx, spec, m.pool.st.Path(sandboxKey(spec.ID)))
	if err != nil {
		return 0, err
	}
	if _, err := m.restore(ctx, spec.Runtime, rs, img); err != nil {
		return 0, fmt.Errorf("wake sandbox %s: %w", spec.ID, err)
	}
	if conn != nil {
		if err := m.sockets.waitReady(ctx, conn); err != nil {
			return 0, fmt.Errorf("wake sandbox %s: %w", spec.ID, err)
		}
	}
	took := time.Since(began)
	if err := os.RemoveAll(img); err != nil {
		m.log.Warn("remove a woken sandbox's hibernation image", "sandbox", spec.ID, "err", err)
	}
	return took, nil
}

// removeMemoryImage removes a memory image directory; a missing one is
// not an error.
func removeMemoryImage(dir string) error {
	if err := os.RemoveAll(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove memory image: %w", err)
	}
	return nil
}

// reconcile removes the images no snapshot (keepSnaps) or sandbox
// (keepSandboxes) names: a key present names it, whatever its value. A nil
// map leaves that kind alone.
func (d memoryDir) reconcile(log *slog.Logger, keepSnaps, keepSandboxes map[string]bool) error {
	if d == "" {
		return nil
	}
	entries, err := os.ReadDir(string(d))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list memory images: %w", err)
	}
	var errs []error
	for _, e := range entries {
		name := e.Name()
		var orphan bool
		switch {
		case strings.HasPrefix(name, incomingPrefix):
			orphan = true // an import that did not finish
		case strings.HasPrefix(name, snapshotImagePrefix) && keepSnaps != nil:
			_, named := keepSnaps[strings.TrimPrefix(name, snapshotImagePrefix)]
			orphan = !named
		case strings.HasPrefix(name, hibernateImagePrefix) && keepSandboxes != nil:
			_, named := keepSandboxes[strings.TrimPrefix(name, hibernateImagePrefix)]
			orphan = !named
		}
		if orphan {
			log.Info("removing orphaned memory image", "image", name)
			errs = append(errs, removeMemoryImage(filepath.Join(string(d), name)))
		}
	}
	return errors.Join(errs...)
}
