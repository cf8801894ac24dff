package btrfs

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/storage"
)

func sandboxKey(name string) storage.Key  { return storage.Key{Kind: storage.KindSandbox, Name: name} }
func snapshotKey(name string) storage.Key { return storage.Key{Kind: storage.KindSnapshot, Name: name} }

func mustSnapshot(t testing.TB, s *Storage, parent, key storage.Key, ro bool) string {
	t.Helper()
	p, err := s.Snapshot(context.Background(), parent, key, storage.SnapshotOptions{ReadOnly: ro})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDiffIoctlLayouts checks the hand-written structures against each
// other: a root item read through the tree search agrees with
// GET_SUBVOL_INFO, and INO_PATHS gives every name of an inode.
func TestDiffIoctlLayouts(t *testing.T) {
	s := newPool(t, t.TempDir())
	ctx := context.Background()
	p, err := s.Create(ctx, sandboxKey("l"))
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.MkdirAll(filepath.Join(p, "d", "e"), 0o755))
	must(t, os.WriteFile(filepath.Join(p, "d", "e", "f"), []byte("x"), 0o644))
	must(t, os.Link(filepath.Join(p, "d", "e", "f"), filepath.Join(p, "g")))
	snap := mustSnapshot(t, s, sandboxKey("l"), snapshotKey("s"), true)

	f, err := os.Open(snap)
	must(t, err)
	defer f.Close()
	info, err := getSubvolInfo(int(f.Fd()))
	must(t, err)
	if !info.readOnly || info.parentUUID.zero() || info.otransid == 0 {
		t.Fatalf("subvol info looks wrong: %+v", info)
	}
	byUUID, ok, err := lookupSubvolByUUID(int(f.Fd()), info.uuid)
	must(t, err)
	if !ok || byUUID != info {
		t.Fatalf("root item %+v (found %t) disagrees with subvol info %+v", byUUID, ok, info)
	}
	parent, ok, err := lookupSubvolByUUID(int(f.Fd()), info.parentUUID)
	must(t, err)
	lf, err := os.Open(p)
	must(t, err)
	defer lf.Close()
	live, err := getSubvolInfo(int(lf.Fd()))
	must(t, err)
	if !ok || parent.id != live.id {
		t.Fatalf("parent by uuid: %+v (found %t), want id %d", parent, ok, live.id)
	}
	// The received UUID (a restore's mark) reads the same both ways.
	mark := subvolUUID{7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7}
	must(t, setReceived(int(lf.Fd()), mark, 42))
	marked, err := getSubvolInfo(int(lf.Fd()))
	must(t, err)
	byUUID, ok, err = lookupSubvolByUUID(int(f.Fd()), live.uuid)
	must(t, err)
	if marked.received != mark || !ok || byUUID.received != mark {
		t.Fatalf("received uuid: subvol info %v, root item %v (found %t); want %v", marked.received, byUUID.received, ok, mark)
	}

	var st unix.Stat_t
	must(t, unix.Stat(filepath.Join(snap, "g"), &st))
	paths, complete, err := inodePaths(int(f.Fd()), st.Ino, make([]byte, inoPathsBufSize))
	must(t, err)
	sort.Strings(paths)
	if !complete || !reflect.DeepEqual(paths, []string{"d/e/f", "g"}) {
		t.Fatalf("inode paths %v (complete %t), want [d/e/f g]", paths, complete)
	}
}

// TestDiffFastMatchesWalk makes random changes between snapshots and
// checks that the transid path finds exactly what a whole walk finds.
func TestDiffFastMatchesWalk(t *testing.T) {
	s := newPool(t, t.TempDir())
	for seed := int64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			runDiffScenario(t, s, seed)
		})
	}
}

func runDiffScenario(t *testing.T, s *Storage, seed int64) {
	ctx := context.Background()
	rng := rand.New(rand.NewSource(seed))
	n := func(name string) string { return fmt.Sprintf("%s-%d", name, seed) }
	live, err := s.Create(ctx, sandboxKey(n("live")))
	must(t, err)
	m := &mutator{t: t, rng: rng}
	m.populate(live, 120)
	mustSnapshot(t, s, sandboxKey(n("live")), snapshotKey(n("a")), true)
	m.mutate(live, 40)
	mustSnapshot(t, s, sandboxKey(n("live")), snapshotKey(n("b")), true)

	check := func(from, to storage.Key, want diffMethod) {
		t.Helper()
		fast, method, err := s.diff(ctx, from, to, false)
		must(t, err)
		if method != want {
			t.Errorf("diff %s -> %s: method %s, want %s", from, to, method, want)
		}
		walk, _, err := s.diff(ctx, from, to, true)
		must(t, err)
		if !reflect.DeepEqual(fast, walk) {
			t.Errorf("diff %s -> %s (%s) differs from the walk:\n%s", from, to, method, changeSetDiff(fast, walk))
		}
		t.Logf("diff %s -> %s: %s, %d changes", from, to, method, len(walk))
	}
	check(snapshotKey(n("a")), snapshotKey(n("b")), diffFast)   // two turns
	check(snapshotKey(n("a")), sandboxKey(n("live")), diffFast) // a turn and the live volume
	m.mutate(live, 20)
	check(snapshotKey(n("b")), sandboxKey(n("live")), diffFast)
	check(snapshotKey(n("a")), sandboxKey(n("live")), diffFast)
	check(snapshotKey(n("b")), snapshotKey(n("a")), diffWalkInodes) // backwards

	// Roll back to a: a new live volume made from the snapshot.
	rb := mustSnapshot(t, s, snapshotKey(n("a")), sandboxKey(n("rollback")), false)
	m.mutate(rb, 30)
	check(snapshotKey(n("a")), sandboxKey(n("rollback")), diffFast)
	mustSnapshot(t, s, sandboxKey(n("rollback")), snapshotKey(n("c")), true)
	m.mutate(rb, 10)
	check(snapshotKey(n("a")), snapshotKey(n("c")), diffFast)             // across the rollback
	check(snapshotKey(n("c")), sandboxKey(n("rollback")), diffFast)       // after it
	check(snapshotKey(n("b")), snapshotKey(n("c")), diffWalkInodes)       // diverged branches
	check(sandboxKey(n("rollback")), snapshotKey(n("c")), diffWalkInodes) // from changed since c

	// A fork of the live volume, changed on both sides.
	fork := mustSnapshot(t, s, sandboxKey(n("live")), sandboxKey(n("fork")), false)
	m.mutate(fork, 10)
	m.mutate(live, 10)
	check(sandboxKey(n("live")), sandboxKey(n("fork")), diffWalkInodes)
	check(snapshotKey(n("b")), sandboxKey(n("fork")), diffFast)

	// Unrelated volumes: inode numbers mean nothing.
	other, err := s.Create(ctx, sandboxKey(n("other")))
	must(t, err)
	m.populate(other, 20)
	check(snapshotKey(n("a")), sandboxKey(n("other")), diffWalk)
	check(snapshotKey(n("a")), snapshotKey(n("a")), diffSame)
}

// changeSetDiff shows what one list has that the other lacks.
func changeSetDiff(got, want []storage.Change) string {
	index := func(cs []storage.Change) map[string]bool {
		m := map[string]bool{}
		for _, c := range cs {
			m[fmt.Sprintf("%+v", c)] = true
		}
		return m
	}
	g, w := index(got), index(want)
	var b strings.Builder
	for k := range g {
		if !w[k] {
			fmt.Fprintf(&b, "  only fast: %s\n", k)
		}
	}
	for k := range w {
		if !g[k] {
			fmt.Fprintf(&b, "  only walk: %s\n", k)
		}
	}
	if b.Len() == 0 {
		b.WriteString("  same set, different order\n")
	}
	return b.String()
}

// mutator makes random changes to a tree: every kind the diff must see.
type mutator struct {
	t   *testing.T
	rng *rand.Rand
	ops int
	seq int
}

func (m *mutator) name() string {
	m.seq++
	return fmt.Sprintf("n%d", m.seq)
}

// entries lists the tree's paths (not the root), files and dirs apart.
func (m *mutator) entries(root string) (files, dirs []string) {
	dirs = []string{root}
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == root {
			return nil
		}
		if fi.IsDir() {
			dirs = append(dirs, p)
		} else {
			files = append(files, p)
		}
		return nil
	})
	return files, dirs
}

func (m *mutator) pick(list []string) string { return list[m.rng.Intn(len(list))] }

func (m *mutator) content() []byte {
	b := make([]byte, m.rng.Intn(3000))
	m.rng.Read(b)
	return b
}

func (m *mutator) populate(root string, n int) {
	for i := 0; i < n; i++ {
		_, dirs := m.entries(root)
		d := m.pick(dirs)
		switch m.rng.Intn(5) {
		case 0:
			must(m.t, os.Mkdir(filepath.Join(d, m.name()), 0o755))
		case 1:
			must(m.t, os.Symlink(m.name(), filepath.Join(d, m.name())))
		default:
			must(m.t, os.WriteFile(filepath.Join(d, m.name()), m.content(), 0o644))
		}
	}
}

func (m *mutator) mutate(root string, n int) {
	for i := 0; i < n; i++ {
		m.ops++
		files, dirs := m.entries(root)
		d := m.pick(dirs)
		var f string
		if len(files) > 0 {
			f = m.pick(files)
		}
		isReg, isLink := false, false
		if fi, err := os.Lstat(f); err == nil {
			isReg, isLink = fi.Mode().IsRegular(), fi.Mode()&os.ModeSymlink != 0
		}
		switch op := m.rng.Intn(17); {
		case op == 0:
			must(m.t, os.WriteFile(filepath.Join(d, m.name()), m.content(), 0o644))
		case op == 1 && isReg: // rewrite in place, same size
			fh, err := os.OpenFile(f, os.O_WRONLY, 0)
			must(m.t, err)
			fh.WriteAt([]byte("zz"), 0)
			fh.Close()
		case op == 2 && isReg:
			must(m.t, os.Truncate(f, int64(m.rng.Intn(100))))
		case op == 3 && f != "" && !isLink: // chmod a file, or a directory
			if m.rng.Intn(2) == 0 {
				f = d
			}
			must(m.t, unix.Fchmodat(unix.AT_FDCWD, f, uint32(0o700+m.rng.Intn(0o100)), 0))
		case op == 4 && f != "":
			must(m.t, os.Lchown(f, m.rng.Intn(3)*1000, m.rng.Intn(3)*1000))
		case op == 5 && f != "": // rename a file, maybe over another
			dst := filepath.Join(d, m.name())
			if len(files) > 1 && m.rng.Intn(2) == 0 {
				dst = m.pick(files)
			}
			must(m.t, os.Rename(f, dst))
		case op == 6 && f != "":
			must(m.t, os.Remove(f))
		case op == 7:
			must(m.t, os.MkdirAll(filepath.Join(d, m.name(), m.name()), 0o755))
		case op == 8 && d != root: // remove a directory and all below it
			must(m.t, os.RemoveAll(d))
		case op == 9 && d != root: // move a directory elsewhere
			_, all := m.entries(root)
			dst := m.pick(all)
			if !strings.HasPrefix(dst+"/", d+"/") {
				must(m.t, os.Rename(d, filepath.Join(dst, m.name())))
			}
		case op == 10: // symlink, or retarget one
			if fi, err := os.Lstat(f); err == nil && fi.Mode()&os.ModeSymlink != 0 {
				must(m.t, os.Remove(f))
				must(m.t, os.Symlink(m.name(), f))
			} else {
				must(m.t, os.Symlink("../"+m.name(), filepath.Join(d, m.name())))
			}
		case op == 11 && isReg:
			must(m.t, os.Link(f, filepath.Join(d, m.name())))
		case op == 12 && isReg: // modify, then restore the old mtime
			fi, err := os.Stat(f)
			must(m.t, err)
			must(m.t, os.WriteFile(f, m.content(), 0o644))
			must(m.t, os.Chtimes(f, fi.ModTime(), fi.ModTime()))
		case op == 13 && f != "": // a file becomes a directory
			must(m.t, os.Remove(f))
			must(m.t, os.Mkdir(f, 0o700))
		case op == 14 && d != root && f != "" && !strings.HasPrefix(f, d+"/"): // swap two names
			must(m.t, unix.Renameat2(unix.AT_FDCWD, f, unix.AT_FDCWD, d, unix.RENAME_EXCHANGE))
		case op == 15:
			must(m.t, unix.Mkfifo(filepath.Join(d, m.name()), 0o644))
		case op == 16 && isReg: // append
			fh, err := os.OpenFile(f, os.O_WRONLY|os.O_APPEND, 0)
			must(m.t, err)
			fh.Write(m.content())
			fh.Close()
		}
	}
}

// TestDiffSkipsNestedSubvolumes: a subvolume made inside a volume (which
// snapshots do not include) is not part of it, for both methods.
func TestDiffSkipsNestedSubvolumes(t *testing.T) {
	s := newPool(t, t.TempDir())
	ctx := context.Background()
	live, err := s.Create(ctx, sandboxKey("live"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(live, "f"), []byte("x"), 0o644))
	mustSnapshot(t, s, sandboxKey("live"), snapshotKey("a"), true)
	dir, err := os.Open(live)
	must(t, err)
	t.Cleanup(func() { dir.Close() })
	must(t, subvolCreate(int(dir.Fd()), "nested"))
	t.Cleanup(func() {
		if err := snapDestroy(int(dir.Fd()), "nested"); err != nil {
			t.Errorf("delete nested subvolume: %v", err)
		}
	})
	must(t, os.WriteFile(filepath.Join(live, "nested", "inside"), []byte("y"), 0o644))
	mustSnapshot(t, s, sandboxKey("live"), snapshotKey("b"), true)

	for _, to := range []storage.Key{snapshotKey("b"), sandboxKey("live")} {
		fast, method, err := s.diff(ctx, snapshotKey("a"), to, false)
		must(t, err)
		walk, _, err := s.diff(ctx, snapshotKey("a"), to, true)
		must(t, err)
		if method != diffFast || !reflect.DeepEqual(fast, walk) {
			t.Errorf("a -> %s: %s gave %+v, walk %+v", to, method, fast, walk)
		}
		for _, c := range walk {
			if strings.HasPrefix(c.Path, "/nested") {
				t.Errorf("a -> %s lists %s, inside a nested subvolume", to, c.Path)
			}
		}
	}
}
