package selfexe

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/runc/libcontainer/exeseal"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/testutil"
)

// envChild holds, in the child process, the state directory to pass.
const envChild = "SELFEXE_TEST_CHILD"

// report is what the child process says about itself after SealIfCopied.
type report struct {
	Exe    string // readlink /proc/self/exe
	Sealed bool   // libcontainer will skip its copy
	Path   string // Path()
	Err    string
}

// TestMain is also the child: it runs SealIfCopied (which may re-execute
// it, child mode included) and reports.
func TestMain(m *testing.M) {
	if os.Getenv(envChild) == "" {
		os.Exit(m.Run())
	}
	var r report
	if err := SealIfCopied(slog.New(slog.NewTextHandler(io.Discard, nil)), os.Getenv(envChild)); err != nil {
		r.Err = err.Error()
	}
	r.Exe, _ = os.Readlink("/proc/self/exe")
	r.Sealed = exeseal.IsSelfExeCloned()
	if p, err := Path(); err != nil {
		r.Err += err.Error()
	} else {
		r.Path = p
	}
	_ = json.NewEncoder(os.Stdout).Encode(r)
	os.Exit(0)
}

func runChild(t *testing.T, bin, stateDir string) report {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), envChild+"="+stateDir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", bin, err)
	}
	var r report
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("child said %q: %v", out, err)
	}
	if r.Err != "" {
		t.Fatalf("child: %s", r.Err)
	}
	return r
}

func copyTestBinary(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "selfexe.test")
	if err := os.WriteFile(p, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func mount(t *testing.T, source, target, fstype, data string) {
	t.Helper()
	if err := os.MkdirAll(target, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(source, target, fstype, 0, data); err != nil {
		t.Fatalf("mount %s at %s (%s): %v", fstype, target, data, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(target, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", target, err)
		}
	})
}

// TestBinaryOnStackedOverlayRunsFromASealedCopy runs a binary from a
// directory two overlayfs mounts deep, where libcontainer's overlayfs view
// cannot be made (a third layer is past the kernel's stacking limit): the
// binary re-executes itself from a sealed copy, and still knows its path.
func TestBinaryOnStackedOverlayRunsFromASealedCopy(t *testing.T) {
	testutil.RequireRoot(t)
	root := t.TempDir()
	mount(t, "tmpfs", root, "tmpfs", "size=256m")
	for _, d := range []string{"lower", "upper", "work", "empty"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyTestBinary(t, filepath.Join(root, "lower"))
	first := filepath.Join(root, "first")
	mount(t, "overlay", first, "overlay", fmt.Sprintf("lowerdir=%s/lower,upperdir=%s/upper,workdir=%s/work", root, root, root))
	second := filepath.Join(root, "second")
	mount(t, "overlay", second, "overlay", fmt.Sprintf("lowerdir=%s:%s/empty", first, root))
	bin := filepath.Join(second, "selfexe.test")

	r := runChild(t, bin, filepath.Join(root, "state"))
	if !r.Sealed || !strings.HasPrefix(r.Exe, "/memfd:") {
		t.Fatalf("the binary on a stacked overlay still runs from %q (sealed %v)", r.Exe, r.Sealed)
	}
	if r.Path != bin {
		t.Fatalf("Path() = %q in the sealed copy, want %q", r.Path, bin)
	}
}

// TestBinaryOnPlainDirectoryStaysPut: where libcontainer's cheap way
// works, nothing re-executes.
func TestBinaryOnPlainDirectoryStaysPut(t *testing.T) {
	testutil.RequireRoot(t)
	root := t.TempDir()
	mount(t, "tmpfs", root, "tmpfs", "size=256m")
	bin := copyTestBinary(t, filepath.Join(root, "bin"))
	r := runChild(t, bin, filepath.Join(root, "data", "runtime", "native"))
	if r.Exe != bin || r.Path != bin || r.Sealed {
		t.Fatalf("child = %+v; want it still running from %s", r, bin)
	}
}

// TestStateInsideTheBinarysDirectory: a data directory kept beside the
// binary (./warren serve --data-dir ./data) is inside the directory
// libcontainer's overlayfs view would have as a layer, which overlayfs
// refuses; the binary runs from a sealed copy instead.
func TestStateInsideTheBinarysDirectory(t *testing.T) {
	testutil.RequireRoot(t)
	root := t.TempDir()
	mount(t, "tmpfs", root, "tmpfs", "size=256m")
	bin := copyTestBinary(t, root)
	state := filepath.Join(root, "data", "runtime", "native")
	r := runChild(t, bin, state)
	if !r.Sealed || r.Path != bin {
		t.Fatalf("child = %+v; want it running from a sealed copy of %s", r, bin)
	}
	if left, _ := os.ReadDir(state); len(left) != 0 {
		t.Fatalf("the probe left %v in the state directory", left)
	}
}
