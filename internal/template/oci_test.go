package template

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/warrenhq/warren/internal/errdefs"
)

// testImage builds a two-layer image: the upper layer whites out a lower
// file, makes a directory opaque, and replaces a directory with a file.
func testImage(t *testing.T) v1.Image {
	t.Helper()
	lower := []tarEntry{
		{name: "etc/", typ: tar.TypeDir, mode: 0o755},
		{name: "etc/passwd", body: "root:x:0:0:root:/root:/bin/sh\n", mode: 0o644},
		{name: "a/", typ: tar.TypeDir, mode: 0o755},
		{name: "a/keep", body: "keep", mode: 0o644},
		{name: "a/gone", body: "gone", mode: 0o644},
		{name: "a/gonedir/", typ: tar.TypeDir, mode: 0o755},
		{name: "a/gonedir/f", body: "f", mode: 0o644},
		{name: "opq/", typ: tar.TypeDir, mode: 0o755},
		{name: "opq/old", body: "old", mode: 0o644},
		{name: "opq/sub/", typ: tar.TypeDir, mode: 0o755},
		{name: "opq/sub/old2", body: "old2", mode: 0o644},
		{name: "becomesfile/", typ: tar.TypeDir, mode: 0o755},
		{name: "becomesfile/x", body: "x", mode: 0o644},
		{name: "bin/", typ: tar.TypeDir, mode: 0o755},
		{name: "bin/prog", body: "prog", mode: 0o4711, uid: 0, gid: 50},
		{name: "bin/prog-link", typ: tar.TypeLink, link: "bin/prog"},
		{name: "bin/sh", typ: tar.TypeSymlink, link: "prog"},
	}
	upper := []tarEntry{
		{name: "a/.wh.gone", mode: 0o644},
		{name: "a/.wh.gonedir", mode: 0o644},
		{name: "opq/", typ: tar.TypeDir, mode: 0o750},
		{name: "opq/new", body: "new", mode: 0o644},
		{name: "opq/sub/", typ: tar.TypeDir, mode: 0o755},
		{name: "opq/sub/new2", body: "new2", mode: 0o644},
		// The marker after its siblings: it must still hide only the lower layer.
		{name: "opq/.wh..wh..opq", mode: 0o644},
		{name: "becomesfile", body: "now a file", mode: 0o600, uid: 1000, gid: 1000},
		// An escape attempt inside an image layer.
		{name: "esc", typ: tar.TypeSymlink, link: "/"},
		{name: "esc/etc/warren-escape-test", body: "x", mode: 0o644},
	}
	img := empty.Image
	for _, entries := range [][]tarEntry{lower, upper} {
		data := makeTar(t, entries, false)
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
		must(t, err)
		img, err = mutate.AppendLayers(img, l)
		must(t, err)
	}
	img, err := mutate.Config(img, v1.Config{Env: []string{"IMAGE_VAR=it's here", "bad-key=x", "PATH=/opt/bin:/usr/bin:/bin"}})
	must(t, err)
	return img
}

func checkImageTree(t *testing.T, root string) {
	t.Helper()
	exists := func(p string) bool { _, err := os.Lstat(filepath.Join(root, p)); return err == nil }
	for _, p := range []string{"a/keep", "opq/new", "opq/sub/new2", "bin/prog", "bin/sh"} {
		if !exists(p) {
			t.Errorf("%s missing", p)
		}
	}
	for _, p := range []string{"a/gone", "a/gonedir", "opq/old", "opq/sub/old2", "becomesfile/x", "a/.wh.gone", "opq/.wh..wh..opq"} {
		if exists(p) {
			t.Errorf("%s should be gone", p)
		}
	}
	if got := readFile(t, filepath.Join(root, "becomesfile")); got != "now a file" {
		t.Errorf("becomesfile = %q", got)
	}
	if fi, err := os.Stat(filepath.Join(root, "opq")); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("opq: %v %v", fi, err)
	}
	prog, err := os.Lstat(filepath.Join(root, "bin/prog"))
	must(t, err)
	if prog.Mode()&os.ModeSetuid == 0 || prog.Mode().Perm() != 0o711 {
		t.Errorf("bin/prog mode %v", prog.Mode())
	}
	if link, err := os.Lstat(filepath.Join(root, "bin/prog-link")); err != nil || !os.SameFile(prog, link) {
		t.Errorf("bin/prog-link not a hard link: %v", err)
	}
	if l, _ := os.Readlink(filepath.Join(root, "bin/sh")); l != "prog" {
		t.Errorf("bin/sh -> %q", l)
	}
	if _, err := os.Lstat("/etc/warren-escape-test"); err == nil {
		os.Remove("/etc/warren-escape-test")
		t.Fatal("an image layer wrote to the host's /etc")
	}
	if !exists("etc/warren-escape-test") {
		t.Error("esc/etc/... was not confined to the tree")
	}
	checkConventions(t, root, "/bin/sh")
	// The image's Env, for login shells; a name no shell takes is left out.
	env := readFile(t, filepath.Join(root, imageEnvFile))
	if !strings.Contains(env, `export IMAGE_VAR='it'\''s here'`) || !strings.Contains(env, "export PATH='/opt/bin:/usr/bin:/bin'") || strings.Contains(env, "bad-key") {
		t.Errorf("%s:\n%s", imageEnvFile, env)
	}
	if got := readFile(t, filepath.Join(root, "etc/profile")); got != profileReadingDropIns {
		t.Errorf("etc/profile of an image without one: %q", got)
	}
}

func TestImageOCILayout(t *testing.T) {
	b, st := newTestBuilder(t)
	dir := filepath.Join(t.TempDir(), "layout")
	p, err := layout.Write(dir, empty.Index)
	must(t, err)
	must(t, p.AppendImage(testImage(t)))
	if _, err := b.Build(context.Background(), "oci", Source{Image: dir}, BuildOptions{}); err != nil {
		t.Fatal(err)
	}
	checkImageTree(t, templatePath(st, "oci"))
	requireNoScratch(t, st)
}

func TestImageDockerArchive(t *testing.T) {
	b, st := newTestBuilder(t)
	p := filepath.Join(t.TempDir(), "image.tar")
	tag, err := name.NewTag("warren.test/img:latest")
	must(t, err)
	must(t, tarball.WriteToFile(p, tag, testImage(t)))
	var progress bytes.Buffer
	if _, err := b.Build(context.Background(), "archive", Source{Image: p}, BuildOptions{Progress: &progress}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(progress.Bytes(), []byte("layer 2/2")) {
		t.Errorf("progress:\n%s", progress.String())
	}
	checkImageTree(t, templatePath(st, "archive"))
	requireNoScratch(t, st)
}

func TestImageBadPaths(t *testing.T) {
	b, st := newTestBuilder(t)
	ctx := context.Background()
	if _, err := b.Build(ctx, "x", Source{Image: t.TempDir()}, BuildOptions{}); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("directory without oci-layout: err = %v, want ErrInvalid", err)
	}
	if _, err := b.Build(ctx, "x", Source{Image: "/nonexistent/image.tar"}, BuildOptions{}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("missing path: err = %v, want ErrNotFound", err)
	}
	requireNoScratch(t, st)
}
