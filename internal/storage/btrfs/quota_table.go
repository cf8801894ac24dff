package btrfs

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
)

// Quota groups are btrfs level-1 qgroups "1/N". The name → N table is kept
// in quota-groups.json so it survives daemon restarts: in the data
// directory beside the pool image when the pool is warren's own (a full
// pool must not stop the daemon from recording a group), else in <root>
// with the qgroups it names. N is not derived from the name:
// names are long and N is 48 bits, and a hash could collide. Instead a new
// group takes one more than the largest level-1 qgroup on the filesystem,
// which also keeps two pools that share one filesystem (two data
// directories on one btrfs) from taking the same qgroup.
//
// Every access holds an exclusive flock on the root directory, so two
// goroutines, or two Storage values opened on one pool, never interleave a
// read-modify-write of the table or allocate one N twice.
const groupTableFile = "quota-groups.json"

// groupTableVersion is bumped if the file's shape ever changes.
const groupTableVersion = 1

type groupTableJSON struct {
	Version int               `json:"version"`
	Groups  map[string]uint64 `json:"groups"` // name → N of qgroup 1/N
	// Parent is N of the qgroup 2/N every group is a member of, which
	// caps them together (quota_cap.go); 0 = none made yet. An older
	// warren reads the file and ignores it.
	Parent uint64 `json:"parent,omitempty"`
}

// groupTable is the table, loaded, with the lock held until close.
type groupTable struct {
	dir     *os.File // the root directory: flocked, and the fd for qgroup ioctls
	path    string
	qgroups string // /sys/fs/btrfs/<uuid>/qgroups
	groups  map[string]uint64
	parent  uint64 // N of qgroup 2/N (0: none)
}

// errNoSimpleQuotas says why a pool has no quota groups.
var errNoSimpleQuotas = fmt.Errorf("btrfs simple quotas are not enabled on this filesystem (warren enables them only on a pool image it formats itself, on kernel 6.7 or later; use the default pool rather than a data directory on btrfs to get disk quotas): %w", errdefs.ErrUnsupported)

// openGroupTable locks and loads the table. It fails with errNoSimpleQuotas
// when the filesystem does not run simple quotas (classic qgroups are not
// used: their accounting is slow and inconsistent across snapshots).
func (g *quotaGroups) openGroupTable() (*groupTable, error) {
	dir, err := os.OpenFile(g.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s (was the pool set up by Open?): %w", g.root, errnoKind(err))
	}
	t := &groupTable{dir: dir, path: filepath.Join(g.tableDir, groupTableFile)}
	uuid, err := fsUUID(int(dir.Fd()))
	if err != nil {
		dir.Close()
		return nil, fmt.Errorf("read filesystem id of %s: %w", g.root, errnoKind(err))
	}
	t.qgroups = fmt.Sprintf("%s/%s/qgroups", sysfsBtrfs, uuid)
	if mode, err := os.ReadFile(t.qgroups + "/mode"); err != nil || strings.TrimSpace(string(mode)) != "squota" {
		dir.Close()
		return nil, errNoSimpleQuotas
	}
	if err := unix.Flock(int(dir.Fd()), unix.LOCK_EX); err != nil {
		dir.Close()
		return nil, fmt.Errorf("lock %s: %w", g.root, err)
	}
	if err := t.load(); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

// close releases the lock.
func (t *groupTable) close() { t.dir.Close() }

func (t *groupTable) fd() int { return int(t.dir.Fd()) }

func (t *groupTable) load() error {
	t.groups, t.parent = map[string]uint64{}, 0
	b, err := os.ReadFile(t.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read quota group table: %w", err)
	}
	var f groupTableJSON
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("quota group table %s is damaged (%v): fix or remove it (groups are then forgotten, their limits stay on the qgroups): %w", t.path, err, errdefs.ErrConflict)
	}
	if f.Version != groupTableVersion {
		return fmt.Errorf("quota group table %s has version %d, this warren reads %d: %w", t.path, f.Version, groupTableVersion, errdefs.ErrUnsupported)
	}
	for name, n := range f.Groups {
		if n == 0 || n >= 1<<48 {
			return fmt.Errorf("quota group table %s: group %q has id %d, outside 1..2^48: %w", t.path, name, n, errdefs.ErrConflict)
		}
		t.groups[name] = n
	}
	if f.Parent >= 1<<48 {
		return fmt.Errorf("quota group table %s: parent id %d is outside 0..2^48: %w", t.path, f.Parent, errdefs.ErrConflict)
	}
	t.parent = f.Parent
	return nil
}

// saveSpaceWait bounds how long save waits for a full pool to free space.
const saveSpaceWait = 20 * time.Second

// save replaces the file atomically: a crash leaves the old or the new
// table, never a torn one. In a full pool (every write on btrfs needs new
// space) it waits for space, committing the filesystem so that the
// volumes just deleted — a delete is what frees a full pool — give theirs
// back: deleting must work best exactly when the disk is full.
func (t *groupTable) save() error {
	b, err := json.MarshalIndent(groupTableJSON{Version: groupTableVersion, Groups: t.groups, Parent: t.parent}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode quota group table: %w", err)
	}
	deadline := time.Now().Add(saveSpaceWait)
	for {
		err = t.write(b)
		if !errors.Is(err, unix.ENOSPC) || time.Now().After(deadline) {
			return err
		}
		// A deleted subvolume's space comes back once btrfs's cleaner has
		// dropped it, which otherwise waits for the next periodic commit.
		_ = reclaimDeleted(t.fd())
		time.Sleep(100 * time.Millisecond)
	}
}

// write is one attempt of save (one writer at a time: we hold the lock).
func (t *groupTable) write(b []byte) error {
	if err := writeFileSynced(t.path, append(b, '\n')); err != nil {
		return fmt.Errorf("write quota group table %s: %w", t.path, errnoKind(err))
	}
	return nil
}

// qgroupExists tells whether qgroup 1/n is in the kernel's in-memory set.
func (t *groupTable) qgroupExists(n uint64) bool { return t.exists(1, n) }

// exists tells whether qgroup level/n is in the kernel's in-memory set.
func (t *groupTable) exists(level uint16, n uint64) bool {
	_, err := os.Stat(fmt.Sprintf("%s/%d_%d", t.qgroups, level, n))
	return err == nil
}

// lookup returns the qgroup of an existing group.
func (t *groupTable) lookup(name string) (uint64, bool) {
	n, ok := t.groups[name]
	if !ok || !t.qgroupExists(n) {
		return 0, false
	}
	return qgroupID(1, n), true
}

// ensure returns the qgroup of name, creating the group if it is missing.
// A table entry whose qgroup is gone (removed by hand) is given its qgroup
// back under the same id. A group made here is not yet under the groups'
// cap (quota_cap.go says why).
func (t *groupTable) ensure(name string) (uint64, error) {
	q, added, err := t.ensureUnsaved(name)
	if err != nil || !added {
		return q, err
	}
	if err := t.save(); err != nil {
		if derr := t.unmake(name); derr != nil {
			err = fmt.Errorf("%w (and %v)", err, derr)
		}
		return 0, err
	}
	return q, nil
}

// ensureUnsaved is ensure without the save: added says that name is new
// in the table, which then needs saving (unmake undoes it if the save
// fails).
func (t *groupTable) ensureUnsaved(name string) (q uint64, added bool, err error) {
	if n, ok := t.groups[name]; ok {
		if t.qgroupExists(n) {
			return qgroupID(1, n), false, nil
		}
		err := qgroupCreate(t.fd(), qgroupID(1, n), true)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return 0, false, fmt.Errorf("recreate qgroup 1/%d of quota group %s: %w", n, name, errnoKind(err))
		}
		return qgroupID(1, n), false, nil
	}
	n, err := t.create(1)
	if err != nil {
		return 0, false, fmt.Errorf("quota group %s: %w", name, err)
	}
	t.groups[name] = n
	return qgroupID(1, n), true, nil
}

// unmake takes a group ensureUnsaved added out of the table again and
// removes its qgroup.
func (t *groupTable) unmake(name string) error {
	n := t.groups[name]
	delete(t.groups, name)
	if err := qgroupCreate(t.fd(), qgroupID(1, n), false); err != nil {
		return fmt.Errorf("qgroup 1/%d is left behind: %w", n, err)
	}
	return nil
}

// create makes a new qgroup at level and returns its n.
func (t *groupTable) create(level uint16) (uint64, error) {
	n, err := t.nextID(level)
	if err != nil {
		return 0, err
	}
	for tries := 0; ; tries++ {
		err = qgroupCreate(t.fd(), qgroupID(level, n), true)
		if err == nil {
			return n, nil
		}
		// Another pool on this filesystem took n between our look and
		// the create.
		if !errors.Is(err, unix.EEXIST) || tries == 100 {
			return 0, fmt.Errorf("create qgroup %d/%d: %w", level, n, errnoKind(err))
		}
		n++
	}
}

// nextID is one more than the largest qgroup at level on the filesystem or
// in the table.
func (t *groupTable) nextID(level uint16) (uint64, error) {
	entries, err := os.ReadDir(t.qgroups)
	if err != nil {
		return 0, fmt.Errorf("list qgroups: %w", err)
	}
	var max uint64
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), fmt.Sprintf("%d_", level))
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(rest, 10, 64); err == nil && n > max {
			max = n
		}
	}
	known := slices.Collect(maps.Values(t.groups))
	if level == 2 {
		known = []uint64{t.parent}
	}
	for _, n := range known {
		if n > max {
			max = n
		}
	}
	if max+1 >= 1<<48 {
		return 0, fmt.Errorf("no free level-%d qgroup id: %w", level, errdefs.ErrResourceExhausted)
	}
	return max + 1, nil
}
