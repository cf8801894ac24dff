package storagetest

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/warrenhq/warren/internal/storage"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustCreate(t *testing.T, s storage.Storage, k storage.Key) string {
	t.Helper()
	p, err := s.Create(context.Background(), k)
	if err != nil {
		t.Fatalf("create %s: %v", k, err)
	}
	return p
}

func mustCreateKey(t *testing.T, s storage.Storage, k storage.Key) storage.Key {
	t.Helper()
	mustCreate(t, s, k)
	return k
}

// writeFile writes p, making its parent directories.
func writeFile(t *testing.T, p, content string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, []byte(content), 0o644))
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustExist(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Lstat(p); err != nil {
		t.Errorf("%s should exist: %v", p, err)
	}
}

func mustNotExist(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s should not exist (lstat: %v)", p, err)
	}
}

func names(entries []os.DirEntry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Name()
	}
	return out
}

func infoNames(infos []storage.Info) []string {
	out := make([]string, len(infos))
	for i, info := range infos {
		out[i] = info.Key.String()
	}
	return out
}

func owner(fi os.FileInfo) (uid, gid uint32) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0
	}
	return st.Uid, st.Gid
}
