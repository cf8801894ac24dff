package storagetest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/storage"
)

const mib = 1 << 20

// testQuotaGroups walks one sandbox's life through a quota group: create
// from a template, write, snapshot, hit the limit, roll back, fork, delete.
// Backends without storage.QuotaGroups skip it; so does one that reports
// ErrUnsupported (btrfs without simple quotas).
func testQuotaGroups(t *testing.T, s storage.Storage) {
	q, ok := s.(storage.QuotaGroups)
	if !ok {
		t.Skipf("%s has no quota groups", s.Name())
	}
	ctx := context.Background()
	if err := q.SetGroupLimit(ctx, "ga", 0); errors.Is(err, errdefs.ErrUnsupported) {
		t.Skipf("quota groups unsupported here: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}

	base := mustCreate(t, s, storage.Key{Kind: storage.KindTemplate, Name: "base"})
	writeBytes(t, filepath.Join(base, "base.bin"), 2*mib)
	flush(t, base)

	// A sandbox made from a template is charged nothing for the template.
	a := snapInto(t, s, storage.Key{Kind: storage.KindTemplate, Name: "base"}, sandbox("a"), "ga", false)
	if used := usage(t, q, "ga"); used >= mib {
		t.Errorf("a fresh sandbox is charged %d bytes for its template", used)
	}
	writeBytes(t, filepath.Join(a, "four"), 4*mib)
	flush(t, a)
	before := waitUsage(t, q, "ga", a, "the 4 MiB written", func(u int64) bool { return u >= 4*mib })

	// A snapshot into the group does not count the data twice.
	snapInto(t, s, sandbox("a"), snapshot("a-1"), "ga", true)
	flush(t, a)
	if used := usage(t, q, "ga"); used > before+mib {
		t.Errorf("usage went from %d to %d with a snapshot: counted twice", before, used)
	}

	// The limit: writing past it fails with EDQUOT, and not much earlier.
	must(t, q.SetGroupLimit(ctx, "ga", 12*mib))
	if _, limit, err := q.GroupUsage(ctx, "ga"); err != nil || limit != 12*mib {
		t.Fatalf("GroupUsage limit = %d, %v; want %d", limit, err, 12*mib)
	}
	if n := writeUntilFull(t, filepath.Join(a, "fill"), 32*mib); n < 4*mib {
		t.Errorf("only %d bytes written before EDQUOT with ~8 MiB left under the limit", n)
	}

	// Another group's volume is unaffected.
	b := snapInto(t, s, storage.Key{Kind: storage.KindTemplate, Name: "base"}, sandbox("b"), "gb", false)
	must(t, q.SetGroupLimit(ctx, "gb", 64*mib))
	writeBytes(t, filepath.Join(b, "sixteen"), 16*mib)
	flush(t, b)
	// So is a volume in no group.
	free := mustCreate(t, s, sandbox("free"))
	writeBytes(t, filepath.Join(free, "sixteen"), 16*mib)

	// Rollback: drop the live volume, snapshot the old snapshot into the
	// group. What only the dropped volume held leaves the count (the
	// kernel reclaims it in the background).
	must(t, s.Delete(ctx, sandbox("a")))
	a = snapInto(t, s, snapshot("a-1"), sandbox("a"), "ga", false)
	waitUsage(t, q, "ga", a, "usage back to the snapshot's", func(u int64) bool { return u <= before+mib })
	writeBytes(t, filepath.Join(a, "after-rollback"), 4*mib)
	flush(t, a)
	if n := writeUntilFull(t, filepath.Join(a, "fill"), 32*mib); n < 2*mib {
		t.Errorf("only %d bytes written after rollback before EDQUOT with ~4 MiB left", n)
	}
	flush(t, a)
	full := usage(t, q, "ga")

	// A fork into a new group starts near zero, and its writes are its own.
	f := snapInto(t, s, snapshot("a-1"), sandbox("f"), "gf", false)
	if used := usage(t, q, "gf"); used >= mib {
		t.Errorf("a fork is charged %d bytes for its parent's data", used)
	}
	writeBytes(t, filepath.Join(f, "two"), 2*mib)
	flush(t, f)
	waitUsage(t, q, "gf", f, "the fork's 2 MiB", func(u int64) bool { return u >= 2*mib })
	if used := usage(t, q, "ga"); used > full+mib/4 {
		t.Errorf("the fork's writes reached the parent's group: %d → %d", full, used)
	}

	checkDeleteGroup(t, ctx, s, q, f)
}

// checkDeleteGroup deletes group ga, which holds sandbox a and its
// snapshot a-1, and checks that fork f (of a-1, in another group) keeps its
// data.
func checkDeleteGroup(t *testing.T, ctx context.Context, s storage.Storage, q storage.QuotaGroups, f string) {
	// DeleteGroup waits for the group's volumes to go, even though the
	// fork still shares the data they wrote.
	if err := q.DeleteGroup(ctx, "ga"); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("DeleteGroup with volumes left: %v, want ErrConflict", err)
	}
	must(t, s.Delete(ctx, sandbox("a")))
	must(t, s.Delete(ctx, snapshot("a-1")))
	must(t, q.DeleteGroup(ctx, "ga"))
	if _, _, err := q.GroupUsage(ctx, "ga"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("GroupUsage after DeleteGroup: %v, want ErrNotFound", err)
	}
	must(t, q.DeleteGroup(ctx, "ga"))
	must(t, q.DeleteGroup(ctx, "never-made"))
	if got := readFile(t, filepath.Join(f, "four")); len(got) != 4*mib {
		t.Errorf("the fork lost data when its parent's group went: %d bytes", len(got))
	}
	writeBytes(t, filepath.Join(f, "more"), mib)
}

// testQuotaGroupErrors covers the argument checks and that a failed
// snapshot leaves no group behind.
func testQuotaGroupErrors(t *testing.T, s storage.Storage) {
	q, ok := s.(storage.QuotaGroups)
	if !ok {
		t.Skipf("%s has no quota groups", s.Name())
	}
	ctx := context.Background()
	if err := q.SetGroupLimit(ctx, "g", 0); errors.Is(err, errdefs.ErrUnsupported) {
		t.Skipf("quota groups unsupported here: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "../x", "a/b", "UPPER"} {
		if err := q.SetGroupLimit(ctx, bad, 0); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("SetGroupLimit(%q): %v, want ErrInvalid", bad, err)
		}
		if _, _, err := q.GroupUsage(ctx, bad); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("GroupUsage(%q): %v, want ErrInvalid", bad, err)
		}
		if err := q.DeleteGroup(ctx, bad); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("DeleteGroup(%q): %v, want ErrInvalid", bad, err)
		}
	}
	if err := q.SetGroupLimit(ctx, "g", -1); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("negative limit: %v, want ErrInvalid", err)
	}
	mustCreate(t, s, sandbox("src"))
	if _, err := s.Snapshot(ctx, sandbox("src"), sandbox("dst"), storage.SnapshotOptions{Group: "../x"}); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("Snapshot into group ../x: %v, want ErrInvalid", err)
	}
	mustNotExist(t, s.Path(sandbox("dst")))
	if _, err := s.Snapshot(ctx, sandbox("missing"), sandbox("dst"), storage.SnapshotOptions{Group: "gx"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Snapshot of a missing volume: %v, want ErrNotFound", err)
	}
	mustCreate(t, s, sandbox("taken"))
	if _, err := s.Snapshot(ctx, sandbox("src"), sandbox("taken"), storage.SnapshotOptions{Group: "gy"}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("Snapshot onto an existing volume: %v, want ErrAlreadyExists", err)
	}
	for _, g := range []string{"gx", "gy"} {
		if _, _, err := q.GroupUsage(ctx, g); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("a failed snapshot left group %s behind: %v", g, err)
		}
	}
	// Clearing a limit.
	must(t, q.SetGroupLimit(ctx, "g", 5*mib))
	must(t, q.SetGroupLimit(ctx, "g", 0))
	if _, limit, err := q.GroupUsage(ctx, "g"); err != nil || limit != 0 {
		t.Errorf("limit after clearing: %d, %v", limit, err)
	}
	must(t, q.DeleteGroup(ctx, "g"))
}

func snapInto(t *testing.T, s storage.Storage, parent, key storage.Key, group string, readOnly bool) string {
	t.Helper()
	p, err := s.Snapshot(context.Background(), parent, key, storage.SnapshotOptions{Group: group, ReadOnly: readOnly})
	if err != nil {
		t.Fatalf("snapshot %s as %s into group %s: %v", parent, key, group, err)
	}
	return p
}

func usage(t *testing.T, q storage.QuotaGroups, group string) int64 {
	t.Helper()
	used, _, err := q.GroupUsage(context.Background(), group)
	if err != nil {
		t.Fatalf("usage of %s: %v", group, err)
	}
	return used
}

// waitUsage polls until ok(usage) holds: space is accounted when data is
// written out, and freed when the filesystem reclaims it, both a little
// after the call that caused them.
func waitUsage(t *testing.T, q storage.QuotaGroups, group, path, what string, ok func(int64) bool) int64 {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		used := usage(t, q, group)
		if ok(used) {
			return used
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s: waited for %s; usage stays at %d", group, what, used)
		}
		flush(t, path)
		time.Sleep(50 * time.Millisecond)
	}
}

// flush writes out the filesystem holding p.
func flush(t *testing.T, p string) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	must(t, unix.Syncfs(int(f.Fd())))
}

// writeBytes writes n incompressible-enough bytes to p.
func writeBytes(t *testing.T, p string, n int) {
	t.Helper()
	buf := make([]byte, n)
	for i := range buf {
		buf[i] = byte(i*7 + i>>12)
	}
	must(t, os.WriteFile(p, buf, 0o644))
}

// writeUntilFull writes up to max bytes to p and expects EDQUOT on the way
// (at a write, or at the latest when the data is synced). It returns how
// much was written.
func writeUntilFull(t *testing.T, p string, max int) int {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if errors.Is(err, unix.EDQUOT) {
		return 0
	}
	must(t, err)
	defer f.Close()
	chunk := make([]byte, mib/4)
	written := 0
	for written < max {
		n, err := f.Write(chunk)
		written += n
		if err != nil {
			if !errors.Is(err, unix.EDQUOT) {
				t.Fatalf("write past the limit failed with %v, want EDQUOT", err)
			}
			return written
		}
	}
	if err := f.Sync(); err != nil {
		if !errors.Is(err, unix.EDQUOT) {
			t.Fatalf("sync past the limit failed with %v, want EDQUOT", err)
		}
		return written
	}
	t.Fatalf("wrote %d bytes, past the group's limit, without EDQUOT", written)
	return written
}
