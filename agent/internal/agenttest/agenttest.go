// Package agenttest serves the agent's handlers over cleartext HTTP/2 for
// tests, the way the daemon reaches them, and fakes a sandbox's accounts.
package agenttest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/warrenhq/warren/agent/internal/users"
)

// Serve starts h on a loopback HTTP/2 (prior knowledge) server and returns a
// client for it and its base URL.
func Serve(t testing.TB, h http.Handler) (*http.Client, string) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}, srv.URL
}

// Users writes a passwd and group file whose "user" is the test's own uid and
// gid, so commands and files can be owned by "user" without root.
func Users(t testing.TB) users.DB {
	t.Helper()
	dir := t.TempDir()
	uid, gid := os.Getuid(), os.Getgid()
	db := users.DB{PasswdPath: filepath.Join(dir, "passwd"), GroupPath: filepath.Join(dir, "group")}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/bin/sh\nuser:x:%d:%d::%s:/bin/sh\n", uid, gid, dir)
	group := fmt.Sprintf("root:x:0:\nuser:x:%d:\n", gid)
	if err := os.WriteFile(db.PasswdPath, []byte(passwd), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(db.GroupPath, []byte(group), 0o644); err != nil {
		t.Fatal(err)
	}
	return db
}

// RequireRoot marks a test that needs root (switching users, changing
// owners). `make test` runs as root, so there a missing privilege is a
// failure; in -short mode (`make test-unit`, the tests that need no root) it
// skips, as root too. It mirrors the main module's testutil.RequireRoot,
// which this module cannot import.
func RequireRoot(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs root (not run in -short mode)")
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root; run it through `make test` as root")
	}
}
