package btrfs

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/storage"
	"github.com/warrenhq/warren/internal/testutil"
)

// TestRestoreEveryKind rebuilds a chain whose streams use every command
// warren's applier replays: files, directories, symlinks, hard links,
// FIFOs, sockets, device nodes, renames (a swap needs the kernel's orphan
// names), removals, xattrs set and removed, capabilities, set-uid bits after
// a chown, sparse files, truncation, times, and clones both from the
// stream's own volume and from its parent (the latter in a stream after the
// first, where the parent's state exists only as it was mid-restore).
func TestRestoreEveryKind(t *testing.T) {
	ctx, s, live := archivePool(t)
	in := func(p string) string { return filepath.Join(live, p) }
	fillTree(t, live, 50)
	must(t, os.WriteFile(in("shared"), bytes.Repeat([]byte("s"), 256<<10), 0o644))
	must(t, os.Mkdir(in("swap-a"), 0o755))
	must(t, os.Mkdir(in("swap-b"), 0o755))
	must(t, os.WriteFile(in("swap-a/which"), []byte("a"), 0o644))
	must(t, os.WriteFile(in("swap-b/which"), []byte("b"), 0o644))
	must(t, unix.Setxattr(in("d0"), "user.gone", []byte("soon"), 0))
	mustSnapshot(t, s, sandboxKey("live"), snapshotKey("t0"), true)

	stream := func(n int) string { return streamPath(s, n) }
	turn := func(n int, change func()) {
		change()
		name := fmt.Sprintf("t%d", n)
		mustSnapshot(t, s, sandboxKey("live"), snapshotKey(name), true)
		mustSnapshot(t, s, snapshotKey(name), snapshotKey("ref"+name), true)
		must(t, s.Archive(ctx, snapshotKey(name), snapshotKey(fmt.Sprintf("t%d", n-1)), stream(n)))
	}
	turn(1, func() {
		must(t, os.MkdirAll(in("new/deep"), 0o750))
		big := make([]byte, 300<<10) // past one WRITE command's 48 KiB
		for i := range big {
			big[i] = byte(i * 7)
		}
		must(t, os.WriteFile(in("new/deep/big"), big, 0o640))
		must(t, os.Symlink("../d1/f1", in("new/link")))
		must(t, os.Link(in("d2/f2"), in("new/hardlink")))
		must(t, unix.Mkfifo(in("new/fifo"), 0o620))
		l, err := net.Listen("unix", in("new/sock"))
		must(t, err)
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		l.Close()
		must(t, unix.Mknod(in("new/null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
		must(t, unix.Setxattr(in("new/deep/big"), "user.note", []byte("kept"), 0))
		must(t, unix.Lremovexattr(in("d0"), "user.gone"))
		// Within one turn: a clone from a file of the same volume.
		cloneFile(t, in("new/deep/big"), in("new/deep/big-copy"))
		sparse, err := os.Create(in("sparse"))
		must(t, err)
		_, err = sparse.WriteAt([]byte("end"), 10<<20)
		must(t, err)
		sparse.Close()
		must(t, os.Rename(in("swap-a"), in("swap-tmp")))
		must(t, os.Rename(in("swap-b"), in("swap-a")))
		must(t, os.Rename(in("swap-tmp"), in("swap-b")))
		must(t, os.RemoveAll(in("d3")))
	})
	turn(2, func() {
		// A clone from the parent (t1), in the chain's second stream: the
		// source is gone from t2, so the sender can only name t1's copy.
		cloneFile(t, in("shared"), in("shared-copy"))
		must(t, os.Remove(in("shared")))
		cloneFile(t, in("new/deep/big"), in("big-from-self"))
		must(t, os.WriteFile(in("new/deep/big"), []byte("rewritten after the clone"), 0o640))
		must(t, os.Truncate(in("d4/f4"), 100))
		must(t, os.WriteFile(in("setuid"), []byte("#!/bin/true\n"), 0o755))
		must(t, os.Chown(in("setuid"), 1000, 1000))
		must(t, unix.Chmod(in("setuid"), 0o4755))
		must(t, unix.Setxattr(in("d5/f5"), "security.capability", capNetBindService(), 0))
		must(t, os.Chtimes(in("d6"), time.Unix(1e9, 5), time.Unix(1e9, 7)))
		must(t, os.Remove(in("new/fifo")))
		must(t, os.Chmod(live, 0o711))
	})
	// The streams hold what this test means to exercise.
	kinds := map[sendCmd]int{}
	for n := 1; n <= 2; n++ {
		for k, v := range streamCommands(t, stream(n)) {
			kinds[k] += v
		}
	}
	for _, c := range []sendCmd{cmdMkfile, cmdMkdir, cmdMknod, cmdMkfifo, cmdMksock, cmdSymlink, cmdRename,
		cmdLink, cmdUnlink, cmdRmdir, cmdSetXattr, cmdRemoveXattr, cmdWrite, cmdClone, cmdTruncate,
		cmdChmod, cmdChown, cmdUtimes} {
		if kinds[c] == 0 {
			t.Errorf("no %s command in the streams", c)
		}
	}
	if n, err := streamClonesParent(t, stream(2)); err != nil || !n {
		t.Errorf("the second stream clones from its parent: %v, %v; want true", n, err)
	}
	for n := 1; n <= 2; n++ {
		must(t, s.Delete(ctx, snapshotKey(fmt.Sprintf("t%d", n))))
	}
	must(t, s.Restore(ctx, []string{stream(1), stream(2)}, snapshotKey("t0"), snapshotKey("t2")))
	got, want := s.Path(snapshotKey("t2")), s.Path(snapshotKey("reft2"))
	assertSameTree(t, want, got)
	assertSameExtras(t, want, got)
	if scratch, err := s.List(ctx, storage.KindScratch); err != nil || len(scratch) != 0 {
		t.Errorf("scratch volumes left: %v, %v", scratch, err)
	}

	// A restored t1 is the base t2's stream (a delta against the original
	// t1) is replayed on: it is found by the UUID it was received as.
	must(t, s.Restore(ctx, []string{stream(1)}, snapshotKey("t0"), snapshotKey("t1")))
	assertSameTree(t, s.Path(snapshotKey("reft1")), s.Path(snapshotKey("t1")))
	must(t, s.Delete(ctx, snapshotKey("t2")))
	must(t, s.Restore(ctx, []string{stream(2)}, snapshotKey("t1"), snapshotKey("t2")))
	assertSameTree(t, want, got)
	assertSameExtras(t, want, got)
}

// TestRestoreBadStreams feeds broken streams: each is refused with
// ErrInvalid before the pool changes, and nothing is left behind.
func TestRestoreBadStreams(t *testing.T) {
	ctx, s, live := archivePool(t)
	fillTree(t, live, 20)
	mustSnapshot(t, s, sandboxKey("live"), snapshotKey("t0"), true)
	must(t, os.WriteFile(filepath.Join(live, "d1", "new"), bytes.Repeat([]byte("x"), 100<<10), 0o644))
	mustSnapshot(t, s, sandboxKey("live"), snapshotKey("t1"), true)
	good := filepath.Join(s.ArchiveDir(), "t1.stream")
	must(t, s.Archive(ctx, snapshotKey("t1"), snapshotKey("t0"), good))
	must(t, s.Delete(ctx, snapshotKey("t1")))
	data, err := os.ReadFile(good)
	must(t, err)

	bad := filepath.Join(t.TempDir(), "bad.stream")
	for name, b := range map[string][]byte{
		"empty":     {},
		"not btrfs": []byte("hello, world, this is not a stream"),
		"version 9": append(append([]byte(streamMagic), 9, 0, 0, 0), data[17:]...),
		"flipped":   flip(data, len(data)/2),
		"truncated": data[:len(data)-100],
		"head only": data[:17],
	} {
		must(t, os.WriteFile(bad, b, 0o600))
		err := s.Restore(ctx, []string{bad}, snapshotKey("t0"), snapshotKey("t1"))
		if !errdefs.IsInvalid(err) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
		if _, err := s.Stat(ctx, snapshotKey("t1")); !errdefs.IsNotFound(err) {
			t.Errorf("%s: a failed restore left the volume: %v", name, err)
		}
		if scratch, err := s.List(ctx, storage.KindScratch); err != nil || len(scratch) != 0 {
			t.Errorf("%s: scratch volumes left: %v, %v", name, scratch, err)
		}
		if snaps, err := s.List(ctx, storage.KindSnapshot); err != nil || len(snaps) != 1 {
			t.Errorf("%s: snapshot volumes %v, %v; want only t0", name, snaps, err)
		}
	}
	// The good stream still restores.
	must(t, s.Restore(ctx, []string{good}, snapshotKey("t0"), snapshotKey("t1")))
}

func streamCommands(t *testing.T, path string) map[sendCmd]int {
	f, err := os.Open(path)
	must(t, err)
	defer f.Close()
	r, err := newStreamReader(f)
	must(t, err)
	out := map[sendCmd]int{}
	for {
		c, err := r.next()
		if err == io.EOF {
			return out
		}
		must(t, err)
		out[c.cmd]++
	}
}

func streamClonesParent(t *testing.T, path string) (bool, error) {
	f, r, h, err := openStreamBody(path)
	must(t, err)
	defer f.Close()
	return scanStream(r, h.parentUUID)
}

func flip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 0x40
	return c
}

func cloneFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	must(t, err)
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	must(t, err)
	defer out.Close()
	must(t, unix.IoctlFileClone(int(out.Fd()), int(in.Fd())))
}

// capNetBindService is a version 2 security.capability value granting
// CAP_NET_BIND_SERVICE (bit 10), permitted and effective.
func capNetBindService() []byte {
	return []byte{0x01, 0x00, 0x00, 0x02, 0x00, 0x04, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
}

// assertSameExtras compares what assertSameTree does not: xattrs, which
// paths share an inode, and device numbers.
func assertSameExtras(t *testing.T, want, got string) {
	t.Helper()
	a, b := extras(t, want), extras(t, got)
	for p, w := range a {
		if g, ok := b[p]; !ok || g != w {
			t.Errorf("%s: restored %q, want %q", p, g, w)
		}
	}
	if len(a) != len(b) {
		t.Errorf("restored tree has %d entries, want %d", len(b), len(a))
	}
}

func extras(t *testing.T, root string) map[string]string {
	out := map[string]string{}
	inodes := map[uint64]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		desc := fmt.Sprintf("mode=%o rdev=%d nlink=%d", st.Mode, st.Rdev, st.Nlink)
		if st.Nlink > 1 && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			if first, ok := inodes[st.Ino]; ok {
				desc += " same-inode-as=" + first
			} else {
				inodes[st.Ino] = rel
			}
		}
		buf := make([]byte, 4096)
		n, err := unix.Llistxattr(p, buf)
		if err != nil {
			return err
		}
		for name := range bytes.SplitSeq(buf[:n], []byte{0}) {
			if len(name) == 0 {
				continue
			}
			v := make([]byte, 256)
			m, err := unix.Lgetxattr(p, string(name), v)
			if err != nil {
				return err
			}
			desc += fmt.Sprintf(" %s=%x", name, v[:m])
		}
		out[rel] = desc
		return nil
	})
	must(t, err)
	return out
}

// TestApplyHostileStreams replays crafted streams into a plain directory:
// commands that would leave it (through "..", a symbolic link to a file or
// a directory outside), block (a FIFO) or reach a device are refused, and
// nothing outside changes.
func TestApplyHostileStreams(t *testing.T) {
	testutil.RequireRoot(t)
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	must(t, os.WriteFile(secret, []byte("host"), 0o600))
	path := func(p string) streamAttrSpec { return streamAttrSpec{attrPath, []byte(p)} }
	data := func(b string) []streamAttrSpec {
		return []streamAttrSpec{{attrFileOffset, u64le(0)}, {attrData, []byte(b)}}
	}
	self, parent := bytes.Repeat([]byte{1}, 16), bytes.Repeat([]byte{2}, 16)
	for name, cmds := range map[string][]streamCmdSpec{
		"write through dotdot":   {{cmdWrite, append([]streamAttrSpec{path("../secret")}, data("x")...)}},
		"write through symlink":  {{cmdWrite, append([]streamAttrSpec{path("link")}, data("x")...)}},
		"truncate through link":  {{cmdTruncate, []streamAttrSpec{path("link"), {attrSize, u64le(0)}}}},
		"chmod through symlink":  {{cmdChmod, []streamAttrSpec{path("link"), {attrMode, u64le(0o777)}}}},
		"create under dir link":  {{cmdMkfile, []streamAttrSpec{path("dlink/new")}}},
		"rename into dir link":   {{cmdRename, []streamAttrSpec{path("plain"), {attrPathTo, []byte("dlink/plain")}}}},
		"link from dir link":     {{cmdLink, []streamAttrSpec{path("stolen"), {attrPathLink, []byte("dlink/secret")}}}},
		"xattr under dir link":   {{cmdSetXattr, []streamAttrSpec{path("dlink/secret"), {attrXattrName, []byte("user.x")}, {attrXattrData, []byte("y")}}}},
		"utimes under dir link":  {{cmdUtimes, []streamAttrSpec{path("dlink/secret"), {attrAtime, make([]byte, 12)}, {attrMtime, make([]byte, 12)}}}},
		"write to a fifo":        {{cmdWrite, append([]streamAttrSpec{path("fifo")}, data("x")...)}},
		"write to a device":      {{cmdWrite, append([]streamAttrSpec{path("null")}, data("x")...)}},
		"clone from elsewhere":   {{cmdClone, []streamAttrSpec{path("plain"), {attrFileOffset, u64le(0)}, {attrCloneLen, u64le(4096)}, {attrCloneUUID, bytes.Repeat([]byte{9}, 16)}, {attrClonePath, []byte("plain")}, {attrCloneOffset, u64le(0)}}}},
		"a second head":          {{cmdSubvol, []streamAttrSpec{path("x")}}},
		"an unknown command":     {{sendCmd(99), []streamAttrSpec{path("x")}}},
		"update_extent (nodata)": {{cmdUpdateExtent, []streamAttrSpec{path("plain")}}},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			must(t, os.Symlink(secret, filepath.Join(dir, "link")))
			must(t, os.Symlink(outside, filepath.Join(dir, "dlink")))
			must(t, os.WriteFile(filepath.Join(dir, "plain"), []byte("p"), 0o644))
			must(t, unix.Mkfifo(filepath.Join(dir, "fifo"), 0o600))
			must(t, unix.Mknod(filepath.Join(dir, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
			root, err := os.Open(dir)
			must(t, err)
			defer root.Close()
			a := &applier{root: root}
			copy(a.self[:], self)
			copy(a.parent[:], parent)
			defer a.closeOpen()
			r, err := newStreamReader(bytes.NewReader(encodeStream(cmds...)))
			must(t, err)
			done := make(chan error, 1)
			go func() { done <- a.apply(r) }()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the stream blocked")
			}
			if err == nil {
				t.Error("applied; want a refusal")
			}
			t.Logf("refused: %v", err)
			if b, err := os.ReadFile(secret); err != nil || string(b) != "host" {
				t.Errorf("the file outside: %q, %v", b, err)
			}
			if st, err := os.Stat(secret); err != nil || st.Mode().Perm() != 0o600 {
				t.Errorf("the file outside: mode %v, %v", st.Mode(), err)
			}
			if names := dirNames(t, outside); len(names) != 1 {
				t.Errorf("the directory outside holds %v", names)
			}
		})
	}
}

func dirNames(t *testing.T, dir string) []string {
	entries, err := os.ReadDir(dir)
	must(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// TestDiffRestored diffs a restored volume against its lineage: the files
// the restore wrote have new inode numbers and ctimes, so the diff must not
// compare those (it walks, comparing what a restore keeps). The answer is
// the one the original volume gives, both ways, and for a rollback's copy
// of the restored volume too.
func TestDiffRestored(t *testing.T) {
	ctx, s, live := archivePool(t)
	fillTree(t, live, 100)
	mustSnapshot(t, s, sandboxKey("live"), snapshotKey("t0"), true)
	stream := func(n int) string { return streamPath(s, n) }
	for n := 1; n <= 3; n++ {
		must(t, os.WriteFile(filepath.Join(live, fmt.Sprintf("new%d", n)), []byte(fmt.Sprint(n)), 0o644))
		must(t, os.WriteFile(filepath.Join(live, "d1", fmt.Sprintf("f%d", n)), []byte("changed"), 0o644))
		name := fmt.Sprintf("t%d", n)
		mustSnapshot(t, s, sandboxKey("live"), snapshotKey(name), true)
		mustSnapshot(t, s, snapshotKey(name), snapshotKey("ref"+name), true)
		if n < 3 {
			must(t, s.Archive(ctx, snapshotKey(name), snapshotKey(fmt.Sprintf("t%d", n-1)), stream(n)))
		}
	}
	must(t, s.Delete(ctx, snapshotKey("t1")))
	must(t, s.Delete(ctx, snapshotKey("t2")))
	must(t, s.Restore(ctx, []string{stream(1), stream(2)}, snapshotKey("t0"), snapshotKey("t2")))
	// A rollback's copy of the restored volume, and a turn taken on it.
	mustSnapshot(t, s, snapshotKey("t2"), sandboxKey("rolled"), false)
	mustSnapshot(t, s, sandboxKey("rolled"), snapshotKey("t2b"), true)

	for _, pair := range [][2]string{{"t2", "t3"}, {"t3", "t2"}, {"t2b", "t3"}, {"t0", "t2"}, {"t2", "t2b"}} {
		got, err := s.Diff(ctx, snapshotKey(pair[0]), snapshotKey(pair[1]))
		must(t, err)
		ref := func(n string) storage.Key {
			switch n {
			case "t2", "t2b":
				return snapshotKey("reft2")
			case "t3":
				return snapshotKey("reft3")
			}
			return snapshotKey(n)
		}
		want, err := s.Diff(ctx, ref(pair[0]), ref(pair[1]))
		must(t, err)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("diff %s → %s:\n got %v\nwant %v", pair[0], pair[1], got, want)
		}
	}
}
