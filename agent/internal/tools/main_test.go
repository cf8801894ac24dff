package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/agent/internal/initproc"
	"github.com/warrenhq/warren/agent/internal/reaper"
	"github.com/warrenhq/warren/agent/internal/users"
)

func TestMain(m *testing.M) {
	// Like the agent, collect the orphans of the commands the tests start.
	if err := initproc.BecomeReaper(); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go testReaper.Run(ctx)
	code := m.Run()
	cancel()
	os.Exit(code)
}

var testReaper = reaper.New(nil)

// testEnv is a service whose default user "user" is the test's own uid with
// a fresh home directory.
type testEnv struct {
	s    *Service
	home string
	db   users.DB
}

func newEnv(t testing.TB) *testEnv {
	t.Helper()
	return newEnvAs(t, os.Getuid(), os.Getgid())
}

// newEnvAs makes "user" uid:gid. Its home is world-searchable so that a
// different uid can work in it.
func newEnvAs(t testing.TB, uid, gid int) *testEnv {
	t.Helper()
	etc := t.TempDir()
	home := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, uid, gid); err != nil {
		t.Fatal(err)
	}
	for p := filepath.Dir(home); p != "/"; p = filepath.Dir(p) {
		if strings.HasPrefix(p, os.TempDir()+"/") {
			_ = os.Chmod(p, 0o755) // t.TempDir makes 0700 directories
		}
	}
	db := users.DB{PasswdPath: filepath.Join(etc, "passwd"), GroupPath: filepath.Join(etc, "group")}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/bin/sh\nuser:x:%d:%d::%s:/bin/sh\n", uid, gid, home)
	group := fmt.Sprintf("root:x:0:\nuser:x:%d:\n", gid)
	if err := os.WriteFile(db.PasswdPath, []byte(passwd), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(db.GroupPath, []byte(group), 0o644); err != nil {
		t.Fatal(err)
	}
	return &testEnv{s: New(Config{Users: db, Reaper: testReaper}), home: home, db: db}
}

// run calls a tool as the default user; params is marshalled to JSON.
func (e *testEnv) run(t testing.TB, tool string, params any) Result {
	t.Helper()
	res, err := e.runErr(tool, params, nil)
	if err != nil {
		t.Fatalf("%s %v: %v", tool, params, err)
	}
	return res
}

func (e *testEnv) runErr(tool string, params any, progress func([]byte)) (Result, error) {
	raw, err := json.Marshal(params)
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return e.s.Run(ctx, Request{Tool: tool, Params: raw}, progress)
}

// ok and bad assert a result's IsError and return its content.
func mustOK(t testing.TB, r Result) string {
	t.Helper()
	if r.IsError {
		t.Fatalf("unexpected error result: %s", r.Content)
	}
	return r.Content
}

func mustFail(t testing.TB, r Result, want ...string) string {
	t.Helper()
	if !r.IsError {
		t.Fatalf("want an error result, got: %s", r.Content)
	}
	for _, w := range want {
		if !strings.Contains(r.Content, w) {
			t.Fatalf("error %q does not mention %q", r.Content, w)
		}
	}
	return r.Content
}

func contains(t testing.TB, s string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Fatalf("%q does not contain %q", s, w)
		}
	}
}

// writeFile writes a test fixture below dir, creating parents.
func writeFile(t testing.TB, dir, rel, content string) string {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func readFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
