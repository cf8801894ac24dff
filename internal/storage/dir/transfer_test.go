package dir

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/storage"
)

// TestTransfer exports a volume as a tar and imports it into another pool:
// contents, modes (setuid), owners, symlinks (one pointing out), a fifo,
// xattrs and times come through; a delta is refused both ways; a failed
// verify, a hostile tar and an existing key leave nothing behind.
func TestTransfer(t *testing.T) {
	ctx := context.Background()
	a, b := newStorage(t), newStorage(t)
	src := storage.Key{Kind: storage.KindSnapshot, Name: "snap1"}
	p, err := a.Create(ctx, src)
	must(t, err)
	must(t, os.MkdirAll(filepath.Join(p, "src", "deep"), 0o755))
	must(t, os.WriteFile(filepath.Join(p, "src", "deep", "main.go"), []byte("package main\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(p, "tool"), bytes.Repeat([]byte("x"), 300_000), 0o4750))
	must(t, os.Symlink("/etc/passwd", filepath.Join(p, "out")))
	must(t, unix.Mkfifo(filepath.Join(p, "fifo"), 0o640))
	if os.Geteuid() == 0 {
		must(t, os.Lchown(filepath.Join(p, "tool"), 1234, 5678))
		must(t, os.Lchown(filepath.Join(p, "out"), 42, 43))
	}
	xattr := unix.Setxattr(filepath.Join(p, "src", "deep", "main.go"), "user.kept", []byte("yes"), 0) == nil
	must(t, a.SetReadOnly(ctx, src, true))

	var buf bytes.Buffer
	if err := a.Export(ctx, storage.Key{Kind: storage.KindSnapshot, Name: "snap2"}, src, &buf); !errdefs.IsUnsupported(err) {
		t.Fatalf("export against a base: %v, want unsupported", err)
	}
	must(t, a.Export(ctx, src, storage.Key{}, &buf))
	tarball := buf.Bytes()
	if err := b.Import(ctx, bytes.NewReader(tarball), src, src, nil); !errdefs.IsInvalid(err) {
		t.Fatalf("import against a base: %v, want invalid", err)
	}
	refused := errors.New("refused by verify")
	if err := b.Import(ctx, bytes.NewReader(tarball), storage.Key{}, src, func() error { return refused }); !errors.Is(err, refused) {
		t.Fatalf("import with a failing verify: %v", err)
	}
	assertOnly(t, b, nil)
	must(t, b.Import(ctx, bytes.NewReader(tarball), storage.Key{}, src, func() error { return nil }))
	if err := b.Import(ctx, bytes.NewReader(tarball), storage.Key{}, src, nil); !errdefs.IsAlreadyExists(err) {
		t.Fatalf("import over an existing volume: %v", err)
	}
	if info, err := b.Stat(ctx, src); err != nil || !info.ReadOnly {
		t.Fatalf("imported volume: %+v, %v (want read-only)", info, err)
	}
	q := b.Path(src)
	for _, name := range []string{".", "src", "src/deep", "src/deep/main.go", "tool", "out", "fifo"} {
		if w, g := describe(t, filepath.Join(p, name)), describe(t, filepath.Join(q, name)); w != g {
			t.Errorf("%s: %s, want %s", name, g, w)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(q, "tool")); len(got) != 300_000 {
		t.Errorf("tool: %d bytes", len(got))
	}
	if v := make([]byte, 8); xattr {
		if n, err := unix.Lgetxattr(filepath.Join(q, "src", "deep", "main.go"), "user.kept", v); err != nil || string(v[:n]) != "yes" {
			t.Errorf("xattr: %q, %v", v[:max(n, 0)], err)
		}
	}

	for what, entries := range map[string][]tar.Header{
		"dot-dot":         {{Name: "../escaped", Typeflag: tar.TypeReg}},
		"absolute":        {{Name: "/etc/escaped", Typeflag: tar.TypeReg}},
		"through symlink": {{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "/tmp"}, {Name: "link/escaped", Typeflag: tar.TypeReg}},
		"twice":           {{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755}, {Name: "d", Typeflag: tar.TypeSymlink, Linkname: "/"}},
		"hard link":       {{Name: "h", Typeflag: tar.TypeLink, Linkname: "/etc/shadow"}},
	} {
		var hostile bytes.Buffer
		tw := tar.NewWriter(&hostile)
		for _, h := range entries {
			must(t, tw.WriteHeader(&h))
		}
		must(t, tw.Close())
		k := storage.Key{Kind: storage.KindSnapshot, Name: "hostile"}
		if err := b.Import(ctx, &hostile, storage.Key{}, k, nil); !errdefs.IsInvalid(err) {
			t.Errorf("%s: %v, want invalid", what, err)
		}
	}
	assertOnly(t, b, []string{"snap1"})
	if _, err := os.Lstat("/tmp/escaped"); err == nil {
		t.Error("a hostile tar wrote /tmp/escaped")
	}
}

// describe is an entry's type, mode, owner, size, link target and mtime.
func describe(t *testing.T, p string) string {
	t.Helper()
	var st unix.Stat_t
	must(t, unix.Lstat(p, &st))
	l, _ := os.Readlink(p)
	return strings.Join([]string{
		"mode=" + itoa(int64(st.Mode)), "uid=" + itoa(int64(st.Uid)), "gid=" + itoa(int64(st.Gid)),
		"size=" + itoa(sizeOf(st)), "link=" + l, "mtime=" + itoa(st.Mtim.Nano()),
	}, " ")
}

func sizeOf(st unix.Stat_t) int64 {
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return 0 // a directory's size is the filesystem's business
	}
	return st.Size
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// assertOnly checks that the snapshot kind holds exactly the volumes
// names, and no temporaries.
func assertOnly(t *testing.T, s *Storage, names []string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(s.root, string(storage.KindSnapshot)))
	must(t, err)
	var got []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), roSuffix) {
			got = append(got, e.Name())
		}
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Fatalf("snapshot kind holds %v, want %v", got, names)
	}
}
