package template

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/storage"
	"github.com/warrenhq/warren/internal/testutil"
)

func newTestBuilder(t *testing.T) (*Builder, *testStorage) {
	t.Helper()
	testutil.RequireRoot(t)
	st := newTestStorage(t)
	return &Builder{Storage: st, Log: testLogger(t)}, st
}

func templatePath(st *testStorage, name string) string {
	return st.Path(storage.Key{Kind: storage.KindTemplate, Name: name})
}

func requireNoScratch(t *testing.T, st *testStorage) {
	t.Helper()
	vols, err := st.List(context.Background(), storage.KindScratch)
	if err != nil {
		t.Fatal(err)
	}
	if len(vols) != 0 {
		t.Errorf("scratch volumes left behind: %v", vols)
	}
}

func TestBusybox(t *testing.T) {
	b, st := newTestBuilder(t)
	testutil.RequireBinary(t, "busybox")
	start := time.Now()
	info, err := b.Build(context.Background(), "bb", Source{Busybox: true}, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("busybox template: %s, %d KB", time.Since(start).Round(time.Millisecond), info.SizeBytes>>10)
	if info.Name != "bb" || info.Source != "busybox" || info.Created.IsZero() || info.SizeBytes < 1<<20 {
		t.Errorf("info = %+v", info)
	}
	root := templatePath(st, "bb")
	for _, p := range []string{"bin/sh", "bin/ls", "usr/bin/env", "bin/busybox"} {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	checkConventions(t, root, "/bin/sh")
	vi, err := st.Stat(context.Background(), storage.Key{Kind: storage.KindTemplate, Name: "bb"})
	if err != nil || !vi.ReadOnly {
		t.Errorf("template volume: %+v %v (want read-only)", vi, err)
	}
	requireNoScratch(t, st)

	out, err := exec.Command("chroot", root, "/bin/sh", "-c", "id -un 1000; ls /workspace && echo ok").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "user") || !strings.Contains(string(out), "ok") {
		t.Errorf("shell in the template: %v: %s", err, out)
	}
}

func TestSourceValidation(t *testing.T) {
	b, st := newTestBuilder(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		src  Source
	}{
		{"none", Source{}},
		{"two", Source{Busybox: true, RootFS: "/x"}},
		{"pkgs-without-debootstrap", Source{Busybox: true, Packages: []string{"git"}}},
		{"option-as-package", Source{Debootstrap: "bookworm", Packages: []string{"--foo"}}},
		{"bad-suite", Source{Debootstrap: "../x"}},
	} {
		if _, err := b.Build(ctx, "x", tc.src, BuildOptions{}); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", tc.name, err)
		}
	}
	for _, name := range []string{"", "Bad", "../x", "a/b", ".x"} {
		if _, err := b.Build(ctx, name, Source{Busybox: true}, BuildOptions{}); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("name %q: err = %v, want ErrInvalid", name, err)
		}
	}
	requireNoScratch(t, st)
}

func TestExistsAndReplace(t *testing.T) {
	b, st := newTestBuilder(t)
	ctx := context.Background()
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n", 0o644)
	writeFile(t, filepath.Join(src, "version"), "1\n", 0o644)
	if _, err := b.Build(ctx, "app", Source{RootFS: src}, BuildOptions{}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(src, "version"), "2\n", 0o644)
	if _, err := b.Build(ctx, "app", Source{RootFS: src}, BuildOptions{}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("second build: err = %v, want ErrAlreadyExists", err)
	}
	if got := readFile(t, filepath.Join(templatePath(st, "app"), "version")); got != "1\n" {
		t.Fatalf("refused build changed the template: version %q", got)
	}
	// A failing replacement leaves the old template in place.
	if _, err := b.Build(ctx, "app", Source{RootFS: filepath.Join(src, "missing")}, BuildOptions{Replace: true}); err == nil {
		t.Fatal("replace from a missing rootfs succeeded")
	}
	if got := readFile(t, filepath.Join(templatePath(st, "app"), "version")); got != "1\n" {
		t.Fatalf("failed replace changed the template: version %q", got)
	}
	if _, err := b.Build(ctx, "app", Source{RootFS: src}, BuildOptions{Replace: true}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(templatePath(st, "app"), "version")); got != "2\n" {
		t.Fatalf("replaced template: version %q, want 2", got)
	}
	requireNoScratch(t, st)
}

func TestFailedBuildLeavesNoScratch(t *testing.T) {
	b, st := newTestBuilder(t)
	ctx := context.Background()
	garbage := filepath.Join(t.TempDir(), "garbage.tar")
	writeFile(t, garbage, strings.Repeat("not a tarball ", 100), 0o644)
	if _, err := b.Build(ctx, "g", Source{RootFS: garbage}, BuildOptions{}); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("garbage tarball: err = %v, want ErrInvalid", err)
	}
	requireNoScratch(t, st)

	st.failSnapshot = true
	if _, err := b.Build(ctx, "g", Source{Busybox: true}, BuildOptions{}); err == nil {
		t.Error("build with a failing snapshot succeeded")
	}
	requireNoScratch(t, st)
	if _, err := st.Stat(ctx, storage.Key{Kind: storage.KindTemplate, Name: "g"}); !errdefs.IsNotFound(err) {
		t.Errorf("template exists after failed builds: %v", err)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	st.failSnapshot = false
	if _, err := b.Build(cctx, "g", Source{Busybox: true}, BuildOptions{}); err == nil {
		t.Error("build with a cancelled context succeeded")
	}
	requireNoScratch(t, st)
}

func TestPrepareIdempotentAndConfined(t *testing.T) {
	testutil.RequireRoot(t)
	root := t.TempDir()
	outside := t.TempDir()
	// A hostile tree: /etc is an absolute symlink that, followed on the
	// host, would lead outside the tree.
	if err := os.Symlink(outside, filepath.Join(root, "etc")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, outside), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, outside, "passwd"), "root:x:0:0:root:/root:/bin/sh", 0o644)
	for range 2 {
		if err := Prepare(root); err != nil {
			t.Fatal(err)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("Prepare wrote outside the tree: %v", ents)
	}
	got := readFile(t, filepath.Join(root, outside, "passwd"))
	if strings.Count(got, "user:x:1000") != 1 || !strings.HasPrefix(got, "root:x:0:0:root:/root:/bin/sh\n") {
		t.Errorf("passwd after two Prepares:\n%s", got)
	}
}

// Debian's /etc/profile asks id for the uid; bash's $EUID answers without a fork.
func TestPrepareQuickProfile(t *testing.T) {
	testutil.RequireRoot(t) // Prepare chowns what it writes
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n", 0o644)
	profile := "if [ \"$(id -u)\" -eq 0 ]; then\n  PATH=/usr/sbin:/usr/bin\nfi\n"
	writeFile(t, filepath.Join(root, "etc/profile"), profile, 0o644)
	for range 2 {
		if err := Prepare(root); err != nil {
			t.Fatal(err)
		}
	}
	want := "if [ \"${EUID:-$(id -u)}\" -eq 0 ]; then\n  PATH=/usr/sbin:/usr/bin\nfi\n"
	if got := readFile(t, filepath.Join(root, "etc/profile")); got != want {
		t.Errorf("profile:\n%s\nwant:\n%s", got, want)
	}
}

// --- rootfs ---

func TestRootFSDirectory(t *testing.T) {
	b, st := newTestBuilder(t)
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n", 0o644)
	writeFile(t, filepath.Join(src, "etc/shadow"), "root:*:19000:0:99999:7:::\n", 0o640)
	writeFile(t, filepath.Join(src, "data/secret"), "s3cret", 0o600)
	must(t, os.Chown(filepath.Join(src, "data/secret"), 123, 456))
	writeFile(t, filepath.Join(src, "bin/tool"), "#!/bin/sh\n", 0o4755)
	must(t, os.Link(filepath.Join(src, "bin/tool"), filepath.Join(src, "bin/tool2")))
	must(t, os.Symlink("/etc/passwd", filepath.Join(src, "abs-link")))
	must(t, os.Symlink("../etc", filepath.Join(src, "data/rel-link")))
	must(t, syscall.Mkfifo(filepath.Join(src, "fifo"), 0o620))
	must(t, syscall.Chmod(filepath.Join(src, "fifo"), 0o620))
	must(t, syscall.Mknod(filepath.Join(src, "null"), syscall.S_IFCHR|0o666, 1<<8|3))
	must(t, os.MkdirAll(filepath.Join(src, "empty/dir"), 0o700))

	if _, err := b.Build(context.Background(), "fromdir", Source{RootFS: src}, BuildOptions{}); err != nil {
		t.Fatal(err)
	}
	root := templatePath(st, "fromdir")
	checkTreeFromSource(t, root)
	if fi, err := os.Lstat(filepath.Join(root, "fifo")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 || fi.Mode().Perm() != 0o620 {
		t.Errorf("fifo: %v %v", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(root, "empty/dir")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("empty/dir: %v %v", fi, err)
	}
	if _, err := os.Lstat(filepath.Join(root, "null")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("device node copied: %v", err)
	}
	checkConventions(t, root, "/bin/sh")
}

func TestRootFSTarball(t *testing.T) {
	entries := []tarEntry{
		{name: "etc/", typ: tar.TypeDir, mode: 0o755},
		{name: "etc/passwd", body: "root:x:0:0:root:/root:/bin/sh\n", mode: 0o644},
		{name: "etc/shadow", body: "root:*:19000:0:99999:7:::\n", mode: 0o640},
		{name: "data/secret", body: "s3cret", mode: 0o600, uid: 123, gid: 456}, // parent not listed
		{name: "./bin/tool", body: "#!/bin/sh\n", mode: 0o4755},
		{name: "bin/tool2", typ: tar.TypeLink, link: "bin/tool"},
		{name: "abs-link", typ: tar.TypeSymlink, link: "/etc/passwd"},
		{name: "data/rel-link", typ: tar.TypeSymlink, link: "../etc"},
		{name: "dev/null", typ: tar.TypeChar, mode: 0o666},
	}
	for _, gz := range []bool{true, false} {
		t.Run(map[bool]string{true: "gzip", false: "plain"}[gz], func(t *testing.T) {
			b, st := newTestBuilder(t)
			// The name says nothing: the format is detected by content.
			p := filepath.Join(t.TempDir(), "rootfs.bin")
			writeFile(t, p, string(makeTar(t, entries, gz)), 0o644)
			if _, err := b.Build(context.Background(), "fromtar", Source{RootFS: p}, BuildOptions{}); err != nil {
				t.Fatal(err)
			}
			root := templatePath(st, "fromtar")
			checkTreeFromSource(t, root)
			if _, err := os.Lstat(filepath.Join(root, "dev/null")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("device node extracted: %v", err)
			}
			checkConventions(t, root, "/bin/sh")
		})
	}
}

// checkTreeFromSource checks the tree TestRootFSDirectory and
// TestRootFSTarball both describe.
func checkTreeFromSource(t *testing.T, root string) {
	t.Helper()
	fi, err := os.Lstat(filepath.Join(root, "data/secret"))
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Perm() != 0o600 || st.Uid != 123 || st.Gid != 456 {
		t.Errorf("data/secret: mode %v owner %d:%d", fi.Mode(), st.Uid, st.Gid)
	}
	tool, err := os.Lstat(filepath.Join(root, "bin/tool"))
	if err != nil {
		t.Fatal(err)
	}
	if tool.Mode()&os.ModeSetuid == 0 || tool.Mode().Perm() != 0o755 {
		t.Errorf("bin/tool mode %v, want setuid 0755", tool.Mode())
	}
	tool2, err := os.Lstat(filepath.Join(root, "bin/tool2"))
	if err != nil || !os.SameFile(tool, tool2) {
		t.Errorf("bin/tool2 is not a hard link of bin/tool: %v", err)
	}
	if l, err := os.Readlink(filepath.Join(root, "abs-link")); err != nil || l != "/etc/passwd" {
		t.Errorf("abs-link -> %q, %v", l, err)
	}
	if l, err := os.Readlink(filepath.Join(root, "data/rel-link")); err != nil || l != "../etc" {
		t.Errorf("data/rel-link -> %q, %v", l, err)
	}
	if got := readFile(t, filepath.Join(root, "etc/shadow")); !strings.HasPrefix(got, "root:*:") || !strings.Contains(got, "\nuser:!:") {
		t.Errorf("shadow:\n%s", got)
	}
	if fi, err := os.Stat(filepath.Join(root, "etc/shadow")); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("shadow mode changed: %v %v", fi, err)
	}
}

// TestTarSymlinkEscape is the classic attack: a tar entry makes a symlink
// pointing out of the tree, and a later entry writes "through" it. The
// write must land inside the tree (or fail), never on the host.
func TestTarSymlinkEscape(t *testing.T) {
	b, st := newTestBuilder(t)
	hostPasswd := readFile(t, "/etc/passwd")
	outside := t.TempDir()
	entries := []tarEntry{
		{name: "etc/", typ: tar.TypeDir, mode: 0o755},
		{name: "a", typ: tar.TypeSymlink, link: "/etc"},
		{name: "a/passwd", body: "pwned:x:0:0::/:/bin/sh\n", mode: 0o644},
		{name: "c", typ: tar.TypeSymlink, link: "../../../../../../etc"},
		{name: "c/group", body: "pwned:x:0:\n", mode: 0o644},
		{name: "d", typ: tar.TypeSymlink, link: outside + "/dropped"},
		{name: "d", body: "replaced, not followed", mode: 0o644},
		{name: "hl", typ: tar.TypeLink, link: "a/passwd"},
	}
	p := filepath.Join(t.TempDir(), "evil.tar.gz")
	writeFile(t, p, string(makeTar(t, entries, true)), 0o644)
	if _, err := b.Build(context.Background(), "evil", Source{RootFS: p}, BuildOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, "/etc/passwd"); got != hostPasswd {
		t.Fatal("THE HOST'S /etc/passwd WAS CHANGED")
	}
	root := templatePath(st, "evil")
	// Parent symlinks resolve inside the tree, as they would in the sandbox.
	if got := readFile(t, filepath.Join(root, "etc/passwd")); !strings.HasPrefix(got, "pwned:") {
		t.Errorf("etc/passwd inside the tree:\n%s", got)
	}
	if got := readFile(t, filepath.Join(root, "etc/group")); !strings.HasPrefix(got, "pwned:") {
		t.Errorf("etc/group inside the tree:\n%s", got)
	}
	if got := readFile(t, filepath.Join(root, "d")); got != "replaced, not followed" {
		t.Errorf("d: %q", got)
	}
	if l, err := os.Readlink(filepath.Join(root, "a")); err != nil || l != "/etc" {
		t.Errorf("a -> %q, %v", l, err)
	}

	// A symlink to a directory the tree lacks: the write fails, and
	// nothing reaches the host.
	for _, target := range []string{"/etc", outside, "../../../../" + outside} {
		p := filepath.Join(t.TempDir(), "dangling.tar")
		writeFile(t, p, string(makeTar(t, []tarEntry{
			{name: "a", typ: tar.TypeSymlink, link: target},
			{name: "a/passwd", body: "pwned:x:0:0::/:/bin/sh\n", mode: 0o644},
		}, false)), 0o644)
		if _, err := b.Build(context.Background(), "dangling", Source{RootFS: p}, BuildOptions{}); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("a -> %s: err = %v, want ErrInvalid", target, err)
		}
	}
	if got := readFile(t, "/etc/passwd"); got != hostPasswd {
		t.Fatal("THE HOST'S /etc/passwd WAS CHANGED")
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("files written outside the tree: %v", ents)
	}

	// Names that climb out are refused outright.
	for _, e := range []tarEntry{
		{name: "../escape", body: "x", mode: 0o644},
		{name: "x/../../escape", body: "x", mode: 0o644},
		{name: "hl2", typ: tar.TypeLink, link: "../../etc/passwd"},
	} {
		p := filepath.Join(t.TempDir(), "climb.tar")
		writeFile(t, p, string(makeTar(t, []tarEntry{e}, false)), 0o644)
		if _, err := b.Build(context.Background(), "climb", Source{RootFS: p}, BuildOptions{}); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("entry %q: err = %v, want ErrInvalid", e.name, err)
		}
	}
	requireNoScratch(t, st)
}

// --- helpers ---

type tarEntry struct {
	name     string
	typ      byte
	body     string
	link     string
	mode     int64
	uid, gid int
}

func makeTar(t *testing.T, entries []tarEntry, gz bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w = &buf
	var zw *gzip.Writer
	tw := tar.NewWriter(w)
	if gz {
		zw = gzip.NewWriter(w)
		tw = tar.NewWriter(zw)
	}
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		hdr := &tar.Header{Name: e.name, Typeflag: typ, Linkname: e.link, Mode: e.mode, Uid: e.uid, Gid: e.gid,
			Size: int64(len(e.body)), ModTime: time.Unix(1700000000, 0)}
		if typ != tar.TypeReg {
			hdr.Size = 0
		}
		if typ == tar.TypeChar {
			hdr.Devmajor, hdr.Devminor = 1, 3
		}
		must(t, tw.WriteHeader(hdr))
		if typ == tar.TypeReg {
			_, err := tw.Write([]byte(e.body))
			must(t, err)
		}
	}
	must(t, tw.Close())
	if zw != nil {
		must(t, zw.Close())
	}
	return buf.Bytes()
}

func writeFile(t *testing.T, p, body string, mode os.FileMode) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, []byte(body), mode))
	must(t, syscall.Chmod(p, uint32(mode))) // past the umask, with set-id bits as raw bits
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
