package daemon

import (
	"log/slog"
	"os"
	"testing"

	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/errdefs"
)

// Teardown removes the cgroup parent the data directory's daemon recorded,
// whatever its own configuration says; a data directory of a release that
// recorded none used the default.
func TestRecordedCgroupParent(t *testing.T) {
	t.Setenv("WARREN_CGROUP_PARENT", "")
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	if got, err := recordedCgroupParent(cfg); err != nil || got != "warren" {
		t.Fatalf("without a record: %q %v, want the default warren", got, err)
	}
	served := cfg
	served.CgroupParent = "warren-test-a/b"
	if err := recordCgroupParent(served, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if got, err := recordedCgroupParent(cfg); err != nil || got != "warren-test-a/b" {
		t.Fatalf("after a daemon recorded its own: %q %v", got, err)
	}
	if err := os.WriteFile(cfg.CgroupParentPath(), []byte("../escape\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := recordedCgroupParent(cfg); !errdefs.IsInvalid(err) {
		t.Fatalf("a record leading out of the daemon's cgroup: want ErrInvalid, got %v", err)
	}
}
