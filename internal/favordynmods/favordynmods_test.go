package favordynmods

import (
	"errors"
	"slices"
	"testing"

	"github.com/warrenhq/warren/internal/mountinfo"
	"github.com/warrenhq/warren/internal/testutil"
)

func mounts(t *testing.T, lines ...string) []mountinfo.Mount {
	t.Helper()
	var out []mountinfo.Mount
	for _, l := range lines {
		m, ok := mountinfo.ParseLine(l)
		if !ok {
			t.Fatalf("bad line %q", l)
		}
		out = append(out, m)
	}
	return out
}

var allFeatures = []string{"nsdelegate", "favordynmods", "memory_localevents", "memory_recursiveprot"}

func TestPlanKeepsTheSuperblockOptions(t *testing.T) {
	ms := mounts(t,
		`24 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw`,
		`31 24 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot`,
	)
	p, err := plan(ms, allFeatures)
	if err != nil {
		t.Fatal(err)
	}
	if p.MountPoint != "/sys/fs/cgroup" || p.Already {
		t.Fatalf("plan = %+v", p)
	}
	if want := []string{"nsdelegate", "memory_recursiveprot", Option}; !slices.Equal(p.options, want) {
		t.Fatalf("options = %q, want %q (the mount's rw left out, the rest kept)", p.options, want)
	}
}

func TestPlanHybridHostUsesTheUnifiedMount(t *testing.T) {
	ms := mounts(t,
		`35 31 0:30 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory`,
		`41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw`,
	)
	p, err := plan(ms, allFeatures)
	if err != nil || p.MountPoint != "/sys/fs/cgroup/unified" || !slices.Equal(p.options, []string{Option}) {
		t.Fatalf("plan = %+v, %v", p, err)
	}
}

func TestPlanAlreadyOn(t *testing.T) {
	ms := mounts(t, `41 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,favordynmods`)
	p, err := plan(ms, allFeatures)
	if err != nil || !p.Already || p.options != nil {
		t.Fatalf("plan = %+v, %v", p, err)
	}
}

func TestPlanUnsupported(t *testing.T) {
	v2 := mounts(t, `41 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw`)
	if _, err := plan(v2, []string{"nsdelegate"}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("kernel without the feature: %v", err)
	}
	v1 := mounts(t, `35 31 0:30 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory`)
	if _, err := plan(v1, allFeatures); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("no cgroup2 mount: %v", err)
	}
}

// TestEnable turns the option on for this host, as the daemon does at
// start (on kernel 6.18 it then stays on until reboot), and checks that
// the cgroup2 superblock kept its other options.
func TestEnable(t *testing.T) {
	testutil.RequireRoot(t)
	before, err := mountinfo.Read()
	if err != nil {
		t.Fatal(err)
	}
	res, err := Enable()
	if errors.Is(err, ErrUnsupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	after, err := mountinfo.Read()
	if err != nil {
		t.Fatal(err)
	}
	old, cur := superOptions(before, res.MountPoint), superOptions(after, res.MountPoint)
	if !slices.Contains(cur, Option) {
		t.Fatalf("%s has options %q after Enable", res.MountPoint, cur)
	}
	for _, o := range old {
		if !slices.Contains(cur, o) {
			t.Errorf("option %q of %s was lost: %q → %q", o, res.MountPoint, old, cur)
		}
	}
	again, err := Enable()
	if err != nil || !again.Already || again.MountPoint != res.MountPoint {
		t.Fatalf("second Enable = %+v, %v; want already on at %s", again, err, res.MountPoint)
	}
}

func superOptions(ms []mountinfo.Mount, mountPoint string) []string {
	for _, m := range ms {
		if m.MountPoint == mountPoint && m.FSType == "cgroup2" {
			return m.SuperOptions
		}
	}
	return nil
}
