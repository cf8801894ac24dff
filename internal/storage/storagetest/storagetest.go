// Package storagetest is the conformance suite every storage backend passes.
//
// A backend's test calls Run with a function that returns a fresh, empty
// pool; each subtest gets its own.
package storagetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/storage"
)

// Run runs the suite against the pools newStorage returns.
func Run(t *testing.T, newStorage func(t *testing.T) storage.Storage) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s storage.Storage)
	}{
		{"Name", testName},
		{"CreateAndWrite", testCreateAndWrite},
		{"SnapshotWritable", testSnapshotWritable},
		{"SnapshotReadOnly", testSnapshotReadOnly},
		{"SnapshotOfSnapshot", testSnapshotOfSnapshot},
		{"SnapshotPreservesMetadata", testSnapshotPreservesMetadata},
		{"SetReadOnly", testSetReadOnly},
		{"Exchange", testExchange},
		{"Delete", testDelete},
		{"DeleteReadOnly", testDeleteReadOnly},
		{"DeleteRootOwnedReadOnlyTree", testDeleteRootOwnedTree},
		{"RecreateAfterDelete", testRecreateAfterDelete},
		{"AlreadyExists", testAlreadyExists},
		{"NotFound", testNotFound},
		{"InvalidKeys", testInvalidKeys},
		{"List", testList},
		{"Stat", testStat},
		{"ConcurrentSnapshots", testConcurrentSnapshots},
		{"ConcurrentSameKey", testConcurrentSameKey},
		{"Path", testPath},
		{"QuotaGroups", testQuotaGroups},
		{"QuotaGroupErrors", testQuotaGroupErrors},
		{"Diff", testDiff},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStorage(t))
		})
	}
}

func sandbox(name string) storage.Key  { return storage.Key{Kind: storage.KindSandbox, Name: name} }
func snapshot(name string) storage.Key { return storage.Key{Kind: storage.KindSnapshot, Name: name} }

func testName(t *testing.T, s storage.Storage) {
	if s.Name() == "" {
		t.Fatal("Name() is empty")
	}
}

func testCreateAndWrite(t *testing.T, s storage.Storage) {
	ctx := context.Background()
	p := mustCreate(t, s, sandbox("one"))
	writeFile(t, filepath.Join(p, "etc", "hostname"), "one\n")
	if got := readFile(t, filepath.Join(s.Path(sandbox("one")), "etc", "hostname")); got != "one\n" {
		t.Fatalf("read back %q", got)
	}
	info, err := s.Stat(ctx, sandbox("one"))
	if err != nil {
		t.Fatal(err)
	}
	if info.ReadOnly {
		t.Error("a new volume is read-only")
	}
	// A new volume starts empty apart from what was written.
	entries, err := os.ReadDir(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "etc" {
		t.Errorf("new volume holds %v, want only etc", names(entries))
	}
}

func testSnapshotWritable(t *testing.T, s storage.Storage) {
	ctx := context.Background()
	parent := mustCreate(t, s, sandbox("parent"))
	writeFile(t, filepath.Join(parent, "a.txt"), "a")
	writeFile(t, filepath.Join(parent, "dir", "b.txt"), "b")

	child, err := s.Snapshot(ctx, sandbox("parent"), sandbox("child"), storage.SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if child != s.Path(sandbox("child")) {
		t.Errorf("Snapshot returned %q, Path says %q", child, s.Path(sandbox("child")))
	}
	if got := readFile(t, filepath.Join(child, "dir", "b.txt")); got != "b" {
		t.Fatalf("snapshot has %q, want b", got)
	}
	info, err := s.Stat(ctx, sandbox("child"))
	if err != nil {
		t.Fatal(err)
	}
	if info.ReadOnly {
		t.Error("a writable snapshot reports read-only")
	}

	// Changes in the child do not reach the parent...
	writeFile(t, filepath.Join(child, "a.txt"), "child")
	writeFile(t, filepath.Join(child, "new.txt"), "new")
	if err := os.Remove(filepath.Join(child, "dir", "b.txt")); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(parent, "a.txt")); got != "a" {
		t.Errorf("parent's a.txt became %q after the child changed it", got)
	}
	mustExist(t, filepath.Join(parent, "dir", "b.txt"))
	mustNotExist(t, filepath.Join(parent, "new.txt"))

	// ...and changes in the parent do not reach the child.
	writeFile(t, filepath.Join(parent, "dir", "c.txt"), "c")
	writeFile(t, filepath.Join(parent, "a.txt"), "parent")
	mustNotExist(t, filepath.Join(child, "dir", "c.txt"))
	if got := readFile(t, filepath.Join(child, "a.txt")); got != "child" {
		t.Errorf("child's a.txt became %q after the parent changed it", got)
	}
}

func testSnapshotReadOnly(t *testing.T, s storage.Storage) {
	ctx := context.Background()
	parent := mustCreate(t, s, sandbox("live"))
	writeFile(t, filepath.Join(parent, "state"), "turn1")
	ro, err := s.Snapshot(ctx, sandbox("live"), snapshot("turn-1"), storage.SnapshotOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Stat(ctx, snapshot("turn-1"))
	if err != nil {
		t.Fatal(err)
	}
	if !info.ReadOnly {
		t.Error("a read-only snapshot does not report read-only")
	}
	writeFile(t, filepath.Join(parent, "state"), "turn2")
	if got := readFile(t, filepath.Join(ro, "state")); got != "turn1" {
		t.Errorf("read-only snapshot changed with its parent: %q", got)
	}
	// The parent stays writable.
	if info, err := s.Stat(ctx, sandbox("live")); err != nil || info.ReadOnly {
		t.Errorf("parent after a read-only snapshot: %+v, %v", info, err)
	}
}

// testSnapshotOfSnapshot is the rollback/fork flow: a writable volume made
// from a read-only snapshot.
func testSnapshotOfSnapshot(t *testing.T, s storage.Storage) {
	ctx := context.Background()
	parent := mustCreate(t, s, sandbox("orig"))
	writeFile(t, filepath.Join(parent, "f"), "v1")
	if _, err := s.Snapshot(ctx, sandbox("orig"), snapshot("s1"), storage.SnapshotOptions{ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	fork, err := s.Snapshot(ctx, snapshot("s1"), sandbox("fork"), storage.SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Stat(ctx, sandbox("fork"))
	if err != nil {
		t.Fatal(err)
	}
	if info.ReadOnly {
		t.Error("writable snapshot of a read-only snapshot reports read-only")
	}
	writeFile(t, filepath.Join(fork, "f"), "forked")
	if got := readFile(t, filepath.Join(s.Path(snapshot("s1")), "f")); got != "v1" {
		t.Errorf("writing the fork changed its read-only source: %q", got)
	}
	if got := readFile(t, filepath.Join(parent, "f")); got != "v1" {
		t.Errorf("writing the fork changed the original: %q", got)
	}
}

func testSnapshotPreservesMetadata(t *testing.T, s storage.Storage) {
	ctx := context.Background()
	p := mustCreate(t, s, sandbox("meta"))
	writeFile(t, filepath.Join(p, "bin", "tool"), "#!/bin/sh\n")
	must(t, os.Chmod(filepath.Join(p, "bin", "tool"), 0o4755))
	must(t, os.Symlink("bin/tool", filepath.Join(p, "link")))
	must(t, os.Symlink("/does/not/exist", filepath.Join(p, "dangling")))
	must(t, os.Mkdir(filepath.Join(p, "tmp"), 0o755))
	must(t, os.Chmod(filepath.Join(p, "tmp"), 0o1777))
	writeFile(t, filepath.Join(p, "secret"), "x")
	must(t, os.Chmod(filepath.Join(p, "secret"), 0o600))
	root := os.Geteuid() == 0
	if root {
		must(t, os.Lchown(filepath.Join(p, "secret"), 1234, 5678))
		must(t, os.Lchown(filepath.Join(p, "link"), 1234, 5678))
		must(t, os.Chown(filepath.Join(p, "bin", "tool"), 1000, 1000))
		must(t, os.Chmod(filepath.Join(p, "bin", "tool"), 0o4755)) // chown cleared setuid
	}

	c, err := s.Snapshot(ctx, sandbox("meta"), snapshot("meta-ro"), storage.SnapshotOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"bin/tool", "link", "dangling", "tmp", "secret", "bin"} {
		want, err := os.Lstat(filepath.Join(p, rel))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.Lstat(filepath.Join(c, rel))
		if err != nil {
			t.Errorf("%s missing from the snapshot: %v", rel, err)
			continue
		}
		if got.Mode() != want.Mode() {
			t.Errorf("%s: mode %v, want %v", rel, got.Mode(), want.Mode())
		}
		if root {
			gu, gg := owner(got)
			wu, wg := owner(want)
			if gu != wu || gg != wg {
				t.Errorf("%s: owner %d:%d, want %d:%d", rel, gu, gg, wu, wg)
			}
		}
	}
	if target, err := os.Readlink(filepath.Join(c, "link")); err != nil || target != "bin/tool" {
		t.Errorf("symlink in snapshot points to %q (%v), want bin/tool", target, err)
	}
	if target, err := os.Readlink(filepath.Join(c, "dangling")); err != nil || target != "/does/not/exist" {
		t.Errorf("dangling symlink in snapshot points to %q (%v)", target, err)
	}
}

func testSetReadOnly(t *testing.T, s storage.Storage) {
	ctx := context.Background()
	mustCreate(t, s, sandbox("flip"))
	for _, ro := range []bool{true, true, false, false, true} {
		if err := s.SetReadOnly(ctx, sandbox("flip"), ro); err != nil {
			t.Fatalf("SetReadOnly(%t): %v", ro, err)
		}
		info, err := s.Stat(ctx, sandbox("flip"))
		if err != nil {
			t.Fatal(err)
		}
		if info.ReadOnly != ro {
			t.Fatalf("after SetReadOnly(%t), Stat says ReadOnly=%t", ro, info.ReadOnly)
		}
	}
}

// testExchange swaps a sandbox's volume with a scratch one, as a rollback
// does: each name then holds the other's tree, read-only volumes and
// missing ones are refused, and nothing changes on a refusal.
func testExchange(t *testing.T, s storage.Storage) {
	ctx := context.Background()
	scratch := storage.Key{Kind: storage.KindScratch, Name: "swap"}
	writeFile(t, filepath.Join(mustCreate(t, s, sandbox("live")), "which"), "old")
	writeFile(t, filepath.Join(mustCreate(t, s, scratch), "which"), "new")
	must(t, s.Exchange(ctx, scratch, sandbox("live")))
	if got := readFile(t, filepath.Join(s.Path(sandbox("live")), "which")); got != "new" {
		t.Errorf("after the exchange the sandbox holds %q, want new", got)
	}
	if got := readFile(t, filepath.Join(s.Path(scratch), "which")); got != "old" {
		t.Errorf("after the exchange the scratch volume holds %q, want old", got)
	}
	// The exchanged volume is a volume like any other.
	must(t, s.Delete(ctx, scratch))
	if _, err := s.Snapshot(ctx, sandbox("live"), snapshot("after"), storage.SnapshotOptions{ReadOnly: true}); err != nil {
		t.Fatal(err)
	}

	if err := s.Exchange(ctx, scratch, sandbox("live")); !errdefs.IsNotFound(err) {
		t.Errorf("exchange with a missing volume: %v, want ErrNotFound", err)
	}
	if err := s.Exchange(ctx, snapshot("after"), sandbox("live")); !errdefs.IsInvalid(err) {
		t.Errorf("exchange with a read-only volume: %v, want ErrInvalid", err)
	}
	if err := s.Exchange(ctx, storage.Key{Kind: storage.KindSandbox, Name: "../x"}, sandbox("live")); !errdefs.IsInvalid(err) {
		t.Errorf("exchange with a bad key: %v, want ErrInvalid", err)
	}
	if got := readFile(t, filepath.Join(s.Path(sandbox("live")), "which")); got != "new" {
		t.Errorf("a refused exchange changed the sandbox: %q", got)
	}
}

func testDelete(t *testing.T, s storage.Storage) {
	ctx := context.Background()
	p := mustCreate(t, s, sandbox("gone"))
	writeFile(t, filepath.Join(p, "a", "b", "c", "d.txt"), "deep")
	must(t, os.Symlink("/etc/passwd", filepath.Join(p, "a", "link")))
	if err := s.Delete(ctx, sandbox("gone")); err != nil {
		t.Fatal(err)
	}
	mustNotExist(t, p)
	if _, err := s.Stat(ctx, sandbox("gone")); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Stat after Delete: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, sandbox("gone")); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("second Delete: %v, want ErrNotFound", err)
	}
	// The symlink's target is untouched.
	mustExist(t, "/etc/passwd")
}

func testDeleteReadOnly(t *testing.T, s storage.Storage) {
	ctx := context.Background()
	p := mustCreate(t, s, sandbox("src"))
	writeFile(t, filepath.Join(p, "x", "y"), "z")
	ro, err := s.Snapshot(ctx, sandbox("src"), snapshot("ro"), storage.SnapshotOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, snapshot("ro")); err != nil {
		t.Fatalf("delete a read-only snapshot: %v", err)
	}
	mustNotExist(t, ro)
	// A volume made read-only after the fact, too.
	must(t, s.SetReadOnly(ctx, sandbox("src"), true))
	if err := s.Delete(ctx, sandbox("src")); err != nil {
		t.Fatalf("delete a volume set read-only: %v", err)
	}
	mustNotExist(t, p)
}

func testDeleteRootOwnedTree(t *testing.T, s storage.Storage) {
	ctx := context.Background()
	p := mustCreate(t, s, sandbox("tree"))
	for i := range 3 {
		d := filepath.Join(p, "usr", fmt.Sprintf("d%d", i), "sub")
		writeFile(t, filepath.Join(d, "file"), "data")
		must(t, os.Chmod(filepath.Join(d, "file"), 0o400))
		must(t, os.Chmod(d, 0o555))
		if os.Geteuid() == 0 {
			must(t, os.Chown(filepath.Join(d, "file"), 0, 0))
			must(t, os.Chown(d, 4321, 4321))
		}
	}
	must(t, os.Chmod(filepath.Join(p, "usr"), 0o500))
	if _, err := s.Snapshot(ctx, sandbox("tree"), snapshot("tree-ro"), storage.SnapshotOptions{ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []storage.Key{sandbox("tree"), snapshot("tree-ro")} {
		if err := s.Delete(ctx, k); err != nil {
			t.Fatalf("delete %s: %v", k, err)
		}
		mustNotExist(t, s.Path(k))
	}
}

// testRecreateAfterDelete checks that nothing of a deleted volume (its
// read-only flag in particular) sticks to a new volume of the same name.
func testRecreateAfterDelete(t *testing.T, s storage.Storage) {
	ctx := context.Background()
	p := mustCreate(t, s, sandbox("base"))
	writeFile(t, filepath.Join(p, "old"), "old")
	if _, err := s.Snapshot(ctx, sandbox("base"), snapshot("again"), storage.SnapshotOptions{ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	must(t, s.Delete(ctx, snapshot("again")))
	if _, err := s.Snapshot(ctx, sandbox("base"), snapshot("again"), storage.SnapshotOptions{}); err != nil {
		t.Fatal(err)
	}
	info, err := s.Stat(ctx, snapshot("again"))
	if err != nil {
		t.Fatal(err)
	}
	if info.ReadOnly {
		t.Error("a writable snapshot under a reused name reports read-only")
	}
	must(t, s.Delete(ctx, snapshot("again")))
	np := mustCreate(t, s, snapshot("again"))
	mustNotExist(t, filepath.Join(np, "old"))
}

func testAlreadyExists(t *testing.T, s storage.Storage) {
	ctx := context.Background()
	p := mustCreate(t, s, sandbox("taken"))
	writeFile(t, filepath.Join(p, "keep"), "me")
	mustCreate(t, s, sandbox("other"))
	if _, err := s.Create(ctx, sandbox("taken")); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("Create on an existing key: %v, want ErrAlreadyExists", err)
	}
	for _, ro := range []bool{false, true} {
		_, err := s.Snapshot(ctx, sandbox("other"), sandbox("taken"), storage.SnapshotOptions{ReadOnly: ro})
		if !errors.Is(err, errdefs.ErrAlreadyExists) {
			t.Errorf("Snapshot (ro=%t) onto an existing key: %v, want ErrAlreadyExists", ro, err)
		}
	}
	// The existing volume is untouched and still writable.
	if got := readFile(t, filepath.Join(p, "keep")); got != "me" {
		t.Errorf("existing volume changed: %q", got)
	}
	if info, err := s.Stat(ctx, sandbox("taken")); err != nil || info.ReadOnly {
		t.Errorf("existing volume after failed snapshots: %+v, %v", info, err)
	}
}

func testNotFound(t *testing.T, s storage.Storage) {
	ctx := context.Background()
	missing := sandbox("missing")
	if _, err := s.Snapshot(ctx, missing, sandbox("dst"), storage.SnapshotOptions{}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Snapshot of a missing parent: %v, want ErrNotFound", err)
	}
	mustNotExist(t, s.Path(sandbox("dst")))
	if _, err := s.Stat(ctx, missing); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Stat: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, missing); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Delete: %v, want ErrNotFound", err)
	}
	if err := s.SetReadOnly(ctx, missing, true); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("SetReadOnly: %v, want ErrNotFound", err)
	}
	// Same name, other kind: kinds are separate namespaces.
	mustCreate(t, s, snapshot("missing"))
	if _, err := s.Stat(ctx, missing); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Stat of sandboxes/missing with snapshots/missing present: %v, want ErrNotFound", err)
	}
}

func testInvalidKeys(t *testing.T, s storage.Storage) {
	ctx := context.Background()
	good := mustCreateKey(t, s, sandbox("good"))
	bad := []storage.Key{
		{Kind: storage.KindSandbox, Name: ""},
		{Kind: storage.KindSandbox, Name: "a/b"},
		{Kind: storage.KindSandbox, Name: ".."},
		{Kind: storage.KindSandbox, Name: "."},
		{Kind: storage.KindSandbox, Name: "../templates/x"},
		{Kind: storage.KindSandbox, Name: "Upper"},
		{Kind: storage.KindSandbox, Name: ".hidden"},
		{Kind: storage.KindSandbox, Name: "-dash"},
		{Kind: storage.KindSandbox, Name: "sp ace"},
		{Kind: storage.KindSandbox, Name: string(make([]byte, 200))},
		{Kind: "", Name: "x"},
		{Kind: "nope", Name: "x"},
		{Kind: "..", Name: "x"},
	}
	for _, k := range bad {
		if _, err := s.Create(ctx, k); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("Create(%q): %v, want ErrInvalid", k, err)
		}
		if _, err := s.Snapshot(ctx, good, k, storage.SnapshotOptions{}); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("Snapshot(good, %q): %v, want ErrInvalid", k, err)
		}
		if _, err := s.Snapshot(ctx, k, sandbox("dst"), storage.SnapshotOptions{}); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("Snapshot(%q, dst): %v, want ErrInvalid", k, err)
		}
		if err := s.Delete(ctx, k); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("Delete(%q): %v, want ErrInvalid", k, err)
		}
		if _, err := s.Stat(ctx, k); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("Stat(%q): %v, want ErrInvalid", k, err)
		}
		if err := s.SetReadOnly(ctx, k, true); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("SetReadOnly(%q): %v, want ErrInvalid", k, err)
		}
	}
	for _, kind := range []storage.Kind{"", "nope", "..", "sandboxes/../templates"} {
		if _, err := s.List(ctx, kind); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("List(%q): %v, want ErrInvalid", kind, err)
		}
	}
	mustNotExist(t, s.Path(sandbox("dst")))
	if _, err := s.Stat(ctx, good); err != nil {
		t.Errorf("the good volume after bad calls: %v", err)
	}
}

func testList(t *testing.T, s storage.Storage) {
	ctx := context.Background()
	for _, kind := range storage.Kinds {
		l, err := s.List(ctx, kind)
		if err != nil {
			t.Fatalf("List(%s) on an empty pool: %v", kind, err)
		}
		if len(l) != 0 {
			t.Fatalf("List(%s) on an empty pool: %v", kind, l)
		}
	}
	for _, n := range []string{"charlie", "alpha", "bravo", "a1", "zulu"} {
		mustCreate(t, s, sandbox(n))
	}
	if _, err := s.Snapshot(ctx, sandbox("alpha"), snapshot("s-ro"), storage.SnapshotOptions{ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	must(t, s.Delete(ctx, sandbox("zulu")))

	got, err := s.List(ctx, storage.KindSandbox)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a1", "alpha", "bravo", "charlie"}
	if len(got) != len(want) {
		t.Fatalf("List(sandboxes) = %v, want %v", infoNames(got), want)
	}
	for i, info := range got {
		if info.Key != sandbox(want[i]) {
			t.Errorf("List(sandboxes)[%d] = %s, want %s", i, info.Key, sandbox(want[i]))
		}
		if info.Path != s.Path(info.Key) {
			t.Errorf("List entry %s: Path %q, want %q", info.Key, info.Path, s.Path(info.Key))
		}
		if info.ReadOnly {
			t.Errorf("List entry %s reports read-only", info.Key)
		}
	}
	snaps, err := s.List(ctx, storage.KindSnapshot)
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) != 1 || snaps[0].Key != snapshot("s-ro") || !snaps[0].ReadOnly {
		t.Errorf("List(snapshots) = %+v, want one read-only s-ro", snaps)
	}
}

func testStat(t *testing.T, s storage.Storage) {
	ctx := context.Background()
	p := mustCreate(t, s, sandbox("sized"))
	writeFile(t, filepath.Join(p, "blob"), string(make([]byte, 256<<10)))
	info, err := s.Stat(ctx, sandbox("sized"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Key != sandbox("sized") || info.Path != p || info.ReadOnly {
		t.Errorf("Stat = %+v", info)
	}
	for what, v := range map[string]int64{"ExclusiveBytes": info.ExclusiveBytes, "ReferencedBytes": info.ReferencedBytes} {
		if v < -1 {
			t.Errorf("%s = %d: must be -1 (unknown) or a size", what, v)
		}
	}
	if (info.ExclusiveBytes == -1) != (info.ReferencedBytes == -1) {
		t.Errorf("sizes half known: %+v", info)
	}
}

func testConcurrentSnapshots(t *testing.T, s storage.Storage) {
	ctx := context.Background()
	p := mustCreate(t, s, sandbox("hot"))
	for i := range 20 {
		writeFile(t, filepath.Join(p, "d", fmt.Sprintf("f%d", i)), fmt.Sprint(i))
	}
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = s.Snapshot(ctx, sandbox("hot"), snapshot(fmt.Sprintf("c%d", i)), storage.SnapshotOptions{ReadOnly: i%2 == 0})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("snapshot %d: %v", i, err)
			continue
		}
		k := snapshot(fmt.Sprintf("c%d", i))
		info, err := s.Stat(ctx, k)
		if err != nil {
			t.Errorf("stat %s: %v", k, err)
			continue
		}
		if info.ReadOnly != (i%2 == 0) {
			t.Errorf("%s: ReadOnly=%t", k, info.ReadOnly)
		}
		if got := readFile(t, filepath.Join(info.Path, "d", "f19")); got != "19" {
			t.Errorf("%s: f19 = %q", k, got)
		}
	}
	l, err := s.List(ctx, storage.KindSnapshot)
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != n {
		t.Errorf("List after %d concurrent snapshots: %v", n, infoNames(l))
	}
}

// testConcurrentSameKey races snapshots onto one key: exactly one wins and
// the others get ErrAlreadyExists.
func testConcurrentSameKey(t *testing.T, s storage.Storage) {
	ctx := context.Background()
	p := mustCreate(t, s, sandbox("src"))
	writeFile(t, filepath.Join(p, "f"), "x")
	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = s.Snapshot(ctx, sandbox("src"), snapshot("one"), storage.SnapshotOptions{ReadOnly: i%2 == 1})
		})
	}
	wg.Wait()
	wins := 0
	for i, err := range errs {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, errdefs.ErrAlreadyExists):
			t.Errorf("racer %d: %v, want nil or ErrAlreadyExists", i, err)
		}
	}
	if wins != 1 {
		t.Errorf("%d racers won, want exactly 1", wins)
	}
	if got := readFile(t, filepath.Join(s.Path(snapshot("one")), "f")); got != "x" {
		t.Errorf("winner holds %q", got)
	}
	entries, err := os.ReadDir(s.Path(snapshot("one")))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("winner holds %v, want only f", names(entries))
	}
}

func testPath(t *testing.T, s storage.Storage) {
	ctx := context.Background()
	k := storage.Key{Kind: storage.KindTemplate, Name: "base-1.0_x"}
	want := s.Path(k)
	if !filepath.IsAbs(want) {
		t.Errorf("Path(%s) = %q is not absolute", k, want)
	}
	if filepath.Base(want) != k.Name {
		t.Errorf("Path(%s) = %q does not end in the name", k, want)
	}
	if s.Path(sandbox("base-1.0_x")) == want {
		t.Error("two kinds map to one path")
	}
	mustNotExist(t, want)
	got, err := s.Create(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("Create returned %q, Path said %q", got, want)
	}
	st, err := os.Stat(got)
	if err != nil || !st.IsDir() {
		t.Errorf("volume path %q: %v (dir=%v)", got, err, err == nil && st.IsDir())
	}
	for _, kind := range storage.Kinds {
		k := storage.Key{Kind: kind, Name: "k"}
		if p := mustCreate(t, s, k); p != s.Path(k) {
			t.Errorf("Create(%s) = %q, Path = %q", k, p, s.Path(k))
		}
	}
}
