// Package testutil holds the helpers tests share: the privileged tests' checks
// of their prerequisites, and a buffer for a subprocess's output.
package testutil

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
)

// AllowSkipEnv names the one opt-out from "a missing prerequisite is a
// failure": with WARREN_TEST_ALLOW_SKIP=1 a test whose prerequisite is
// missing skips instead. `make test` installs or builds every prerequisite
// and CI never sets it; it is for a developer's machine that lacks one (node,
// runsc) and knows it.
const AllowSkipEnv = "WARREN_TEST_ALLOW_SKIP"

// Missing ends a test whose prerequisite is missing. The message says what
// is missing and how to get it. It fails the test, unless
// WARREN_TEST_ALLOW_SKIP=1, when it skips.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv(AllowSkipEnv) == "1" {
		t.Skipf("%s (skipped: %s=1)", msg, AllowSkipEnv)
	}
	t.Fatalf("%s (set %s=1 to skip instead)", msg, AllowSkipEnv)
}

// RequireRoot marks a test that needs root. `make test` runs as root on our
// machines and in CI, so a missing privilege is a failure there. In -short
// mode (`make test-unit`, the tests that need no root) it skips, as root too.
func RequireRoot(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs root (not run in -short mode)")
	}
	if os.Geteuid() != 0 {
		Missing(t, "this test needs root; run it through `make test` as root")
	}
}

// RequireBinary fails the test when an external program it needs is missing.
// The Makefile installs every such program, so a miss is a failure.
func RequireBinary(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, "%s not found in PATH: run `make deps` (the Makefile installs it)", name)
	}
	return p
}

// SyncBuffer is a bytes.Buffer safe to write from a subprocess's plumbing
// (exec's copying goroutine, a logger) while the test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
