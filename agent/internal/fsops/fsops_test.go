package fsops

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"connectrpc.com/connect"
)

func TestConnectCodesAndMessages(t *testing.T) {
	rules := Errors{{Errno: syscall.ELOOP, Code: connect.CodeFailedPrecondition, Hint: "cyclic symlink"}}
	dir := t.TempDir()
	_, missing := os.Stat(filepath.Join(dir, "nope"))
	for _, tc := range []struct {
		err  error
		code connect.Code
		msg  string
	}{
		{missing, connect.CodeNotFound, "stat /x: no such file or directory"},
		{&fs.PathError{Op: "mkdir", Path: "/x", Err: syscall.EEXIST}, connect.CodeAlreadyExists, "stat /x: file exists"},
		{&os.LinkError{Op: "rename", Old: "/a", New: "/b", Err: syscall.EXDEV}, connect.CodeFailedPrecondition, "(source and destination are on different filesystems)"},
		{syscall.ENOSPC, connect.CodeResourceExhausted, "(the sandbox's disk is full or over quota)"},
		{syscall.ELOOP, connect.CodeFailedPrecondition, "stat /x: too many levels of symbolic links (cyclic symlink)"},
		{syscall.EROFS, connect.CodeInternal, "stat /x: read-only file system"},
	} {
		got := rules.Connect("stat", "/x", tc.err)
		if connect.CodeOf(got) != tc.code {
			t.Errorf("%v: code %v, want %v", tc.err, connect.CodeOf(got), tc.code)
		}
		var ce *connect.Error
		if !errors.As(got, &ce) || !strings.Contains(ce.Message(), tc.msg) {
			t.Errorf("%v: message %q, want it to contain %q", tc.err, got, tc.msg)
		}
	}
	orig := connect.NewError(connect.CodeAborted, errors.New("keep me"))
	if got := rules.Connect("stat", "/x", orig); got != error(orig) {
		t.Errorf("a Connect error was rewrapped: %v", got)
	}
}

func TestMkdirAll(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "a", "b", "c")
	created, err := Errors(nil).MkdirAll(dir, 0o750, os.Getuid(), os.Getgid())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(root, "a"), filepath.Join(root, "a", "b"), dir}
	if strings.Join(created, ",") != strings.Join(want, ",") {
		t.Fatalf("created %v, want %v", created, want)
	}
	for _, p := range created {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o750 {
			t.Errorf("%s: mode %v, want 0750 whatever the umask", p, fi.Mode().Perm())
		}
	}
	if created, err := Errors(nil).MkdirAll(dir, 0o750, -1, -1); err != nil || len(created) != 0 {
		t.Errorf("existing dir: created %v, err %v", created, err)
	}

	file := filepath.Join(root, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Errors(nil).MkdirAll(file, 0o755, -1, -1)
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "exists and is not a directory") {
		t.Errorf("file in the way: %v", err)
	}
	_, err = Errors(nil).MkdirAll(filepath.Join(file, "sub"), 0o755, -1, -1)
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "a parent is not a directory") {
		t.Errorf("file as a parent: %v", err)
	}

	RemoveDirs(created)
	if _, err := os.Stat(filepath.Join(root, "a")); !os.IsNotExist(err) {
		t.Errorf("RemoveDirs left %s: %v", filepath.Join(root, "a"), err)
	}
}

func TestWalk(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"a/b/c", "z"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(root, filepath.Join(root, "a", "loop")); err != nil {
		t.Fatal(err)
	}
	list := func(w Walk) ([]string, error) {
		var got []string
		w.SkipSubdir = func(error) bool { return false }
		err := w.Run(root, func(p string, _ fs.FileInfo) {
			rel, _ := filepath.Rel(root, p)
			got = append(got, rel)
		})
		return got, err
	}
	got, err := list(Walk{Depth: 1, Limit: 100})
	if err != nil || strings.Join(got, ",") != "a,z" {
		t.Errorf("depth 1: %v, %v", got, err)
	}
	got, err = list(Walk{Depth: 5, Limit: 100})
	if err != nil || strings.Join(got, ",") != "a,a/b,a/b/c,a/loop,z" {
		t.Errorf("depth 5: %v, %v (the symlink must be listed, not entered)", got, err)
	}
	if _, err := list(Walk{Depth: 5, Limit: 3}); connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Errorf("over the limit: %v", err)
	}
	if _, err := list(Walk{Depth: 5, Limit: 5}); err != nil {
		t.Errorf("exactly at the limit: %v", err)
	}
	root = filepath.Join(root, "gone")
	if _, err := list(Walk{Depth: 1, Limit: 5}); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("missing root: %v", err)
	}
}
