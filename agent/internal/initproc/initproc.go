// Package initproc does what the agent owes the sandbox as its first process:
// it becomes the reaper of orphans, prepares the workspace, and decides what
// termination signals mean.
package initproc

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/agent/internal/users"
)

// DefaultPath is the PATH the agent itself runs with when it has none.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// IsPID1 reports whether the agent is its pid namespace's init.
func IsPID1() bool { return os.Getpid() == 1 }

// BecomeReaper makes orphans of the agent's descendants its children. As
// PID 1 the kernel does that already; otherwise (tests, or under another
// init) PR_SET_CHILD_SUBREAPER does.
func BecomeReaper() error {
	if IsPID1() {
		return nil
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("become child subreaper: %w", err)
	}
	return nil
}

// SetPath gives the agent a sane PATH: a container's init often starts with
// none at all.
func SetPath() {
	if IsPID1() || strings.TrimSpace(os.Getenv("PATH")) == "" {
		os.Setenv("PATH", DefaultPath)
	}
}

// PrepareWorkspace creates dir (mkdir -p) and, when it was just made and the
// sandbox has the conventional user, hands it to that user. An existing
// directory keeps its owner: the template decided it.
func PrepareWorkspace(dir string, db users.DB, log *slog.Logger) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("workspace %s exists and is not a directory", dir)
		}
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create workspace %s: %w", dir, err)
	}
	if db.DefaultUser() != users.DefaultName {
		return nil
	}
	u, err := db.Lookup(users.DefaultName)
	if err != nil {
		return err
	}
	if err := os.Chown(dir, int(u.UID), int(u.GID)); err != nil {
		return fmt.Errorf("give workspace %s to %s: %w", dir, u.Name, err)
	}
	log.Info("workspace created", "dir", dir, "owner", u.Name)
	return nil
}
