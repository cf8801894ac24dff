package btrfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/storage"
)

// fillUntilFull writes 1 MiB files into dir until a write fails, and
// returns that error and how much went in.
func fillUntilFull(t *testing.T, dir string, most int) (int, error) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i * 7) // not all zeros: no compression can hide it
	}
	for i := 0; i < most; i++ {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("f%d", i)))
		if err != nil {
			return i, err
		}
		_, err = f.Write(buf)
		if err == nil {
			err = f.Sync() // the reservation is checked at write, the charge at writeback
		}
		f.Close()
		if err != nil {
			return i, err
		}
	}
	return most, nil
}

// TestGroupsCap: with the groups' parent capped, two groups with no limit
// of their own together cannot write past the cap; a group made after the
// cap is under it once it joins (JoinGroupsCap, or the next SetGroupsCap);
// the full groups still take snapshots and are deleted, and deleting one
// gives its room back to the others.
func TestGroupsCap(t *testing.T) {
	ctx := context.Background()
	s := newPool(t, t.TempDir())
	base := storage.Key{Kind: storage.KindTemplate, Name: "base"}
	if _, err := s.Create(ctx, base); err != nil {
		t.Fatal(err)
	}
	before := storage.Key{Kind: storage.KindSandbox, Name: "before"}
	pb, err := s.Snapshot(ctx, base, before, storage.SnapshotOptions{Group: "before"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fillUntilFull(t, pb, 8); err != nil {
		t.Fatal(err)
	}
	unix.Sync()
	const capBytes = 40 << 20
	if err := s.SetGroupsCap(ctx, capBytes); err != nil {
		t.Fatal(err)
	}
	used, limit, err := s.GroupsUsage(ctx)
	if err != nil || limit != capBytes || used < 8<<20 {
		t.Fatalf("GroupsUsage after cap: used %d limit %d err %v; want the 8 MiB written before counted, limit %d", used, limit, err, capBytes)
	}
	after := storage.Key{Kind: storage.KindSandbox, Name: "after"}
	pa, err := s.Snapshot(ctx, base, after, storage.SnapshotOptions{Group: "after"})
	if err != nil {
		t.Fatal(err)
	}
	// Outside the cap until it joins: a sandbox's start writes there.
	if _, err := fillUntilFull(t, pa, 1); err != nil {
		t.Fatalf("a new group, not yet under the cap: %v", err)
	}
	if err := s.JoinGroupsCap(ctx, "after"); err != nil {
		t.Fatal(err)
	}
	if err := s.JoinGroupsCap(ctx, "after"); err != nil {
		t.Fatalf("joining twice: %v", err)
	}
	n, err := fillUntilFull(t, pa, 100)
	if !errors.Is(err, unix.EDQUOT) {
		t.Fatalf("group made after the cap wrote %d MiB, then %v; want EDQUOT before 100 MiB", n, err)
	}
	if _, err := fillUntilFull(t, pb, 1); !errors.Is(err, unix.EDQUOT) {
		t.Fatalf("group made before the cap wrote into a full parent: %v, want EDQUOT", err)
	}
	unix.Sync()
	if used, _, _ := s.GroupsUsage(ctx); used > capBytes {
		t.Errorf("groups hold %d bytes, over the cap %d", used, capBytes)
	}
	// The daemon's work goes on: a snapshot into the full group, a new
	// group, a delete.
	snap := storage.Key{Kind: storage.KindSnapshot, Name: "turn"}
	if _, err := s.Snapshot(ctx, after, snap, storage.SnapshotOptions{ReadOnly: true, Group: "after"}); err != nil {
		t.Fatalf("snapshot of a full group: %v", err)
	}
	third := storage.Key{Kind: storage.KindSandbox, Name: "third"}
	pt, err := s.Snapshot(ctx, base, third, storage.SnapshotOptions{Group: "third"})
	if err != nil {
		t.Fatalf("new group while the parent is full: %v", err)
	}
	// The next SetGroupsCap (the daemon's periodic one) puts it under.
	if err := s.SetGroupsCap(ctx, capBytes); err != nil {
		t.Fatal(err)
	}
	if _, err := fillUntilFull(t, pt, 1); !errors.Is(err, unix.EDQUOT) {
		t.Fatalf("a group put under a full cap by SetGroupsCap wrote: %v, want EDQUOT", err)
	}
	for _, k := range []storage.Key{snap, after} {
		if err := s.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteGroup(ctx, "after"); err != nil {
		t.Fatalf("delete a group under the cap: %v", err)
	}
	if err := reclaimDeleted(int(mustOpen(t, s.Root()).Fd())); err != nil {
		t.Fatal(err)
	}
	var got int
	for try := 0; try < 50; try++ {
		if got, err = fillUntilFull(t, pt, 4); err == nil {
			break
		}
		unix.Sync() // the deleted volume's extents leave the count as the cleaner drops them
	}
	if err != nil {
		t.Fatalf("after a delete the other groups got no room back: wrote %d MiB, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(s.Root(), groupTableFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the group table is in the pool (%v); it belongs in the data directory", err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(s.poolDir), groupTableFile)); err != nil {
		t.Errorf("the group table is not in the data directory: %v", err)
	}
}

func mustOpen(t *testing.T, p string) *os.File {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestGroupTableMovesOutOfThePool: a table an older warren kept in the
// pool is moved to the data directory at open, with its groups.
func TestGroupTableMovesOutOfThePool(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := newPool(t, dir)
	if err := s.SetGroupLimit(ctx, "old", 1<<20); err != nil {
		t.Fatal(err)
	}
	n := groupOf(t, s, "old")
	inData := filepath.Join(dir, groupTableFile)
	b, err := os.ReadFile(inData)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Root(), groupTableFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(inData); err != nil {
		t.Fatal(err)
	}
	if err := s.Unmount(); err != nil {
		t.Fatal(err)
	}
	s2 := newPool(t, dir)
	if got := groupOf(t, s2, "old"); got != n {
		t.Fatalf("group old is 1/%d after the move, was 1/%d", got, n)
	}
	if _, err := os.Stat(filepath.Join(s2.Root(), groupTableFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("old table still in the pool: %v", err)
	}
}
