package sharedvol

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/storage/dir"
	"github.com/warrenhq/warren/internal/store"
	"github.com/warrenhq/warren/internal/testutil"
)

func TestValidateName(t *testing.T) {
	for _, ok := range []string{"data", "My-Vol_1.v2", "0", strings.Repeat("a", 64)} {
		if err := ValidateName(ok); err != nil {
			t.Errorf("ValidateName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".x", "-x", "a/b", "../x", "a..b", "a b", "é", strings.Repeat("a", 65)} {
		if err := ValidateName(bad); !errdefs.IsInvalid(err) {
			t.Errorf("ValidateName(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestValidateMountPath(t *testing.T) {
	for _, ok := range []string{"/data", "/home/user/shared", "/mnt/a.b", "/tmp", "/procfs", "/devices"} {
		if err := ValidateMountPath(ok); err != nil {
			t.Errorf("ValidateMountPath(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "/", "data", "./data", "/a/../b", "/a/./b", "/a/", "//a", "/proc", "/proc/1",
		"/sys", "/sys/fs", "/dev", "/dev/shm", "/.warren", "/.warren/run", "/a\x00b"} {
		if err := ValidateMountPath(bad); !errdefs.IsInvalid(err) {
			t.Errorf("ValidateMountPath(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestCheckMounts(t *testing.T) {
	ok := []store.VolumeMount{{Name: "a", Path: "/a"}, {Name: "b", Path: "/a/b"}}
	if err := checkMounts(ok); err != nil {
		t.Errorf("nested mounts of two volumes: %v", err)
	}
	for what, ms := range map[string][]store.VolumeMount{
		"volume twice": {{Name: "a", Path: "/a"}, {Name: "a", Path: "/b"}},
		"path twice":   {{Name: "a", Path: "/a"}, {Name: "b", Path: "/a"}},
		"too many":     make([]store.VolumeMount, maxMounts+1),
	} {
		if err := checkMounts(ms); !errdefs.IsInvalid(err) {
			t.Errorf("%s: %v, want ErrInvalid", what, err)
		}
	}
}

// newService is a service over a dir pool and a real database in a
// temporary directory.
func newService(t *testing.T) *Service {
	t.Helper()
	tmp := t.TempDir()
	st, err := dir.New(filepath.Join(tmp, "volumes"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(context.Background(), filepath.Join(tmp, "warren.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return New(st, db, 0, slog.New(slog.DiscardHandler))
}

// TestContent: the content API's operations on a real tree, and a symlink
// planted in the volume never leads them out of it.
func TestContent(t *testing.T) {
	testutil.RequireRoot(t) // volumes are chowned to the sandboxes' user
	s := newService(t)
	ctx := context.Background()
	v, err := s.Create(ctx, "team", "data", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "team", "data", 0); !errdefs.IsAlreadyExists(err) {
		t.Errorf("a second volume named data: %v", err)
	}
	if _, err := s.Get(ctx, "other", v.ID); !errdefs.IsNotFound(err) {
		t.Errorf("another team's Get: %v, want ErrNotFound", err)
	}
	if _, err := s.Authorize(ctx, v.ID, "vtk_wrong"); err == nil {
		t.Errorf("a wrong token was accepted")
	}
	if got, err := s.Authorize(ctx, v.ID, v.Token); err != nil || got.ID != v.ID {
		t.Fatalf("Authorize with the token: %+v, %v", got, err)
	}

	if _, err := s.MakeDir(ctx, v, "/a/b", false, Owner{}); !errdefs.IsNotFound(err) {
		t.Errorf("mkdir without parents: %v, want ErrNotFound", err)
	}
	if e, err := s.MakeDir(ctx, v, "/a/b", true, Owner{}); err != nil || e.Type != "directory" || e.UID != SandboxUID || e.Path != "/a/b" {
		t.Fatalf("mkdir -p /a/b: %+v, %v", e, err)
	}
	e, err := s.WriteFile(ctx, v, "a/b/f.txt", false, Owner{}, strings.NewReader("hello"))
	if err != nil || e.Size != 5 || e.Mode != 0o644 || e.UID != SandboxUID || e.GID != SandboxGID {
		t.Fatalf("write: %+v, %v", e, err)
	}
	f, _, err := s.ReadFile(ctx, v, "/a/b/f.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	if string(b) != "hello" {
		t.Errorf("read back %q", b)
	}
	es, err := s.ListDir(ctx, v, "/", 3)
	if err != nil || len(es) != 3 {
		t.Errorf("list depth 3: %+v, %v", es, err)
	}
	mode := uint32(0o600)
	if e, err := s.UpdateMetadata(ctx, v, "/a/b/f.txt", Owner{Mode: &mode}); err != nil || e.Mode != 0o600 {
		t.Errorf("chmod 600: %+v, %v", e, err)
	}

	// Symlinks out of the volume, as a sandbox could plant them.
	root := s.st.Path(key(v.ID))
	if err := os.Symlink("/", filepath.Join(root, "up")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../../../../../etc/passwd", filepath.Join(root, "pw")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/up/etc/passwd", "/pw"} {
		if f, _, err := s.ReadFile(ctx, v, p); err == nil {
			f.Close()
			t.Errorf("read %s: served a file outside the volume", p)
		}
	}
	if _, err := s.WriteFile(ctx, v, "/up/tmp/escaped", false, Owner{}, strings.NewReader("x")); err == nil {
		t.Errorf("write through /up succeeded")
	}
	if _, err := s.Stat(ctx, v, "/../etc"); !errdefs.IsInvalid(err) {
		t.Errorf("stat /../etc: %v, want ErrInvalid", err)
	}
	if err := s.Remove(ctx, v, "/"); !errdefs.IsInvalid(err) {
		t.Errorf("remove /: %v, want ErrInvalid", err)
	}
	if err := s.Remove(ctx, v, "/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(ctx, v, "/a"); !errdefs.IsNotFound(err) {
		t.Errorf("stat of a removed dir: %v", err)
	}
	if err := s.Delete(ctx, "team", "data"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("the deleted volume's tree remains: %v", err)
	}
}
