package template

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// checkConventions asserts what Prepare promises about a tree.
func checkConventions(t *testing.T, root, shell string) {
	t.Helper()
	passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if err != nil {
		t.Fatal(err)
	}
	want := "user:x:1000:1000::/home/user:" + shell
	if !strings.Contains(string(passwd), want+"\n") {
		t.Errorf("passwd lacks %q:\n%s", want, passwd)
	}
	if strings.Count(string(passwd), "\nuser:") > 1 {
		t.Errorf("user added twice:\n%s", passwd)
	}
	group, _ := os.ReadFile(filepath.Join(root, "etc/group"))
	if !strings.Contains(string(group), "user:x:1000:\n") {
		t.Errorf("group lacks user:\n%s", group)
	}
	if shadow, err := os.ReadFile(filepath.Join(root, "etc/shadow")); err == nil && !strings.Contains(string(shadow), "\nuser:!:") {
		t.Errorf("shadow lacks a locked user:\n%s", shadow)
	}
	for _, d := range []struct {
		p        string
		perm     os.FileMode
		uid, gid uint32
	}{
		{".", 0o755, 0, 0},
		{"home/user", 0o755, 1000, 1000},
		{"workspace", 0o755, 1000, 1000},
		{"tmp", 0o777 | os.ModeSticky, 0, 0},
		{".warren", 0o755, 0, 0},
	} {
		fi, err := os.Stat(filepath.Join(root, d.p))
		if err != nil {
			t.Errorf("/%s: %v", d.p, err)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		if !fi.IsDir() || fi.Mode()&(os.ModePerm|os.ModeSticky) != d.perm || st.Uid != d.uid || st.Gid != d.gid {
			t.Errorf("/%s: mode %v owner %d:%d, want dir %v %d:%d", d.p, fi.Mode(), st.Uid, st.Gid, d.perm, d.uid, d.gid)
		}
	}
	if h, err := os.ReadFile(filepath.Join(root, "etc/hostname")); err != nil || strings.TrimSpace(string(h)) == "" {
		t.Errorf("/etc/hostname: %q %v", h, err)
	}
}
