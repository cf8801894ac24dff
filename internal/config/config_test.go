package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
)

// A server that refuses timeout 0 cannot default to it; one that allows it
// (the default) can.
func TestValidateNoTimeout(t *testing.T) {
	agent := filepath.Join(t.TempDir(), "warren-agent")
	if err := os.WriteFile(agent, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	base := func() Config {
		c := Default()
		c.DataDir, c.AgentBinary = t.TempDir(), agent
		return c
	}
	c := base()
	if !c.AllowNoTimeout {
		t.Fatal("timeout 0 is refused by default; existing users and the bench rely on it")
	}
	c.DefaultTimeout = 0
	if err := c.Validate(); err != nil {
		t.Fatalf("default timeout 0 with timeout 0 allowed: %v", err)
	}
	c = base()
	c.AllowNoTimeout = false
	if err := c.Validate(); err != nil {
		t.Fatalf("timeout 0 refused, default 300 s: %v", err)
	}
	c.DefaultTimeout = 0
	if err := c.Validate(); !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), "--allow-no-timeout") {
		t.Fatalf("default timeout 0 with timeout 0 refused: want ErrInvalid naming the flag, got %v", err)
	}
}

// A cgroup parent nests under the daemon's own cgroup: an absolute path, a
// way out ('..') or an empty part is refused, naming the flag.
func TestValidateCgroupParent(t *testing.T) {
	for _, p := range []string{"warren", "warren-test-1", "a/b"} {
		if err := ValidateCgroupParent(p); err != nil {
			t.Errorf("%q refused: %v", p, err)
		}
	}
	for _, p := range []string{"", "/warren", "a/../b", "..", ".", "a//b", "a/"} {
		if err := ValidateCgroupParent(p); !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), "--cgroup-parent") {
			t.Errorf("%q: want ErrInvalid naming the flag, got %v", p, err)
		}
	}
}

// User namespaces are on by default but not asked for; WARREN_USERNS, in
// either direction, is an explicit choice.
func TestUserNSDefault(t *testing.T) {
	t.Setenv("WARREN_USERNS", "")
	if c := Default(); !c.UserNS || c.UserNSExplicit {
		t.Errorf("default: UserNS=%v explicit=%v; want on, not explicit", c.UserNS, c.UserNSExplicit)
	}
	for v, want := range map[string]bool{"false": false, "0": false, "true": true, "1": true} {
		t.Setenv("WARREN_USERNS", v)
		if c := Default(); c.UserNS != want || !c.UserNSExplicit {
			t.Errorf("WARREN_USERNS=%s: UserNS=%v explicit=%v; want %v, explicit", v, c.UserNS, c.UserNSExplicit, want)
		}
	}
}
