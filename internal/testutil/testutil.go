// Package testutil holds the helpers privileged tests share.
package testutil

import (
	"os"
	"os/exec"
	"testing"
)

// RequireRoot fails the test when not run as root. `make test` runs as root
// on our machines and in CI, so a missing privilege is a failure, not a skip;
// `go test -short` as a normal user skips instead.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if testing.Short() {
		t.Skip("needs root (skipped in -short mode)")
	}
	t.Fatal("this test needs root; run it through `make test` as root")
}

// RequireBinary fails the test when an external program it needs is missing.
// The Makefile installs every such program, so a miss is a failure.
func RequireBinary(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found in PATH: run `make deps` (the Makefile installs it)", name)
	}
	return p
}
