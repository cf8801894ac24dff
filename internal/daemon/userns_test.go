package daemon

import (
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/runtime"
)

// The user namespace mode at start: on where the host can, a fallback with
// the reason where it cannot (procfs has no idmapped mounts) unless the
// operator asked explicitly, and off when turned off.
func TestUserNSMode(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (the probe makes a user namespace with a mapping)")
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := config.Default()
	cfg.UserNSBase = 3_200_000_000
	if on, off, err := userNSMode(cfg, t.TempDir(), log); err != nil || !on || off != "" {
		t.Errorf("default on a capable directory: on=%v off=%q err=%v; want on", on, off, err)
	}
	on, off, err := userNSMode(cfg, "/proc", log)
	if err != nil || on || !strings.Contains(off, "idmapped") {
		t.Errorf("default where the host cannot: on=%v off=%q err=%v; want a fallback naming idmapped mounts", on, off, err)
	}
	explicit := cfg
	explicit.UserNSExplicit = true
	if _, _, err := userNSMode(explicit, "/proc", log); err == nil || !strings.Contains(err.Error(), "--userns=false") {
		t.Errorf("explicit where the host cannot: %v; want an error pointing at --userns=false", err)
	}
	cfg.UserNS = false
	if on, off, err := userNSMode(cfg, "/proc", log); err != nil || on || !strings.Contains(off, "--userns=false") {
		t.Errorf("turned off: on=%v off=%q err=%v", on, off, err)
	}

	infos := []client.RuntimeInfo{{Name: "native"}, {Name: "gvisor"}}
	caps := func(name string) (runtime.Capabilities, bool) {
		return runtime.Capabilities{UserNS: name == "native"}, true
	}
	markUserNS(infos, caps, false, "why")
	if infos[0].UserNSOff != "why" || infos[1].UserNSOff != "" {
		t.Errorf("marked %+v; want only native to say why it is off", infos)
	}
}
