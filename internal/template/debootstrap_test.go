package template

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/storage"
	"github.com/warrenhq/warren/internal/testutil"
)

// TestDebootstrapBase builds the real `base` template. It needs the Debian
// mirror and ~2 minutes the first time; with WARREN_CACHE_DIR kept between
// runs (CI does) it takes seconds.
func TestDebootstrapBase(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the base template by debootstrap (minutes): not in -short mode")
	}
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "debootstrap")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	st := newTestStorage(t)
	b := &Builder{Storage: st, Log: testLogger(t), CacheDir: os.Getenv("WARREN_CACHE_DIR")}
	var progress strings.Builder
	start := time.Now()
	pw := progressLog{t: t, start: start, buf: &progress}
	info, err := b.Build(ctx, "base", BaseSource(), BuildOptions{Progress: pw})
	if err != nil {
		t.Fatalf("build: %v\nprogress:\n%s", err, lastLines(progress.String(), 40))
	}
	t.Logf("built base in %s, %d MB (cache dir %q)", time.Since(start).Round(time.Millisecond), info.SizeBytes>>20, b.CacheDir)

	root := st.Path(storage.Key{Kind: storage.KindTemplate, Name: "base"})
	for _, p := range []string{"bin/bash", "usr/bin/python3", "usr/bin/python", "usr/bin/git", "usr/bin/curl", "usr/bin/sudo", "etc/ssl/certs/ca-certificates.crt"} {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("%s missing: %v", p, err)
		}
	}
	checkConventions(t, root, "/bin/bash")
	if fi, err := os.Stat(filepath.Join(root, "etc/sudoers.d/warren-user")); err != nil || fi.Mode().Perm() != 0o440 {
		t.Errorf("sudoers drop-in: %v %v", fi, err)
	}
	if ents, _ := os.ReadDir(filepath.Join(root, "var/lib/apt/lists")); len(ents) > 2 {
		t.Errorf("apt lists not cleaned: %d entries", len(ents))
	}
	// The tree works: python runs inside it as the sandbox user would.
	out, err := exec.CommandContext(ctx, "chroot", "--userspec=1000:1000", root, "/usr/bin/python", "-c", "import os; print(os.getuid())").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "1000" {
		t.Errorf("python in the template: %v: %s", err, out)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// progressLog keeps the progress and logs its lines with the time since
// the start, so `go test -v` shows where a build spends its time.
type progressLog struct {
	t     *testing.T
	start time.Time
	buf   *strings.Builder
}

func (p progressLog) Write(b []byte) (int, error) {
	p.buf.Write(b)
	if line := strings.TrimRight(string(b), "\n"); !strings.HasPrefix(line, "debootstrap: I: Retrieving") && !strings.HasPrefix(line, "debootstrap: I: Validating") {
		p.t.Logf("%6.1fs %s", time.Since(p.start).Seconds(), line)
	}
	return len(b), nil
}
