package native

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/runtime/runtimetest"
)

// testRange is a host id range no real user of this machine has.
var testRange = runtime.IDRange{HostID: 3_000_000_000, Size: 65536}

// In a user namespace the sandbox's root is testRange.HostID on the host,
// every escape probe still fails, root keeps its capabilities over its own
// files, and files keep their in-sandbox owner on disk: what root creates
// is 0 in the subvolume and the mapped uid through the idmapped mount.
func TestUserNS(t *testing.T) {
	mk := newTestRuntime(t)
	r := mk(t)
	marker, port, accepted := runtimetest.HostBait(t)
	rootfs := runtimetest.BusyboxRootfs(t)
	extra := runtimetest.Probe("ownroot", "cat /proc/1/root/etc/passwd") +
		"ls /sys/class/net > /results/netifs\n" +
		"tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' > /results/netdev\n" +
		"ls /proc | grep -c '^[0-9][0-9]*$' > /results/nprocs\n" +
		"cat /proc/self/cgroup > /results/cgroup\n" +
		"hostname > /results/hostname\n" +
		"ulimit -n > /results/nofile\n" +
		"id -u > /results/uid\n" +
		"cat /proc/self/uid_map | tr -s ' ' > /results/uidmap\n" +
		"echo hi > /made-by-root && chown 1000:1000 /etc/passwd && stat -c '%u %g' /made-by-root /bin/sh > /results/owners\n" +
		"cat /proc/sys/kernel/random/boot_id > /results/myboot\n"
	b := runtimetest.RunEscapeProbesWith(t, r, rootfs, func(sp *runtime.Spec) { u := testRange; sp.UserNS = &u }, marker, port, extra)
	runtimetest.CheckEscapes(t, b, false)
	checkSandboxView(t, r, b)
	checkStatus(t, b.Read("status"), false)
	checkStatus(t, b.Read("suidstatus"), false)
	if n := accepted.Load(); n != 0 {
		t.Errorf("host loopback listener accepted %d connection(s) from the sandbox", n)
	}

	if got := b.Read("uid"); got != "0" {
		t.Errorf("id -u inside = %q; want 0", got)
	}
	if got, want := strings.TrimSpace(b.Read("uidmap")), "0 3000000000 65536"; got != want {
		t.Errorf("uid_map inside = %q; want %q", got, want)
	}
	if got := b.Read("owners"); got != "0 0\n0 0" {
		t.Errorf("owners inside = %q; want root's", got)
	}
	if len(b.Read("myboot")) != 36 {
		t.Errorf("boot id = %q; want a uuid", b.Read("myboot"))
	}
	// From the host: PID 1 runs as the range's first uid and gid.
	host := strconv.FormatUint(uint64(testRange.HostID), 10)
	status, err := os.ReadFile("/proc/" + strconv.Itoa(b.Status.InitPID) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, _ := strings.Cut(line, ":")
		if (k == "Uid" || k == "Gid") && strings.Join(strings.Fields(v), " ") != strings.Repeat(host+" ", 3)+host {
			t.Errorf("host view of PID 1: %s = %q; want %s everywhere", k, v, host)
		}
	}
	// On disk the files keep their in-sandbox owners; through the
	// sandbox's idmapped root the host sees the mapped ids.
	mapped := filepath.Join(r.roots.dir(b.Spec.ID), usernsRootName)
	for _, c := range []struct {
		path string
		uid  uint32
	}{
		{filepath.Join(rootfs, "made-by-root"), 0},
		{filepath.Join(rootfs, "etc/passwd"), 1000},
		{filepath.Join(mapped, "made-by-root"), testRange.HostID},
		{filepath.Join(mapped, "etc/passwd"), testRange.HostID + 1000},
	} {
		var st syscall.Stat_t
		if err := syscall.Stat(c.path, &st); err != nil {
			t.Errorf("stat %s: %v", c.path, err)
		} else if st.Uid != c.uid {
			t.Errorf("%s is owned by %d on the host; want %d", c.path, st.Uid, c.uid)
		}
	}
	if err := r.Destroy(t.Context(), b.Spec.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(r.roots.dir(b.Spec.ID)); !os.IsNotExist(err) {
		t.Errorf("the idmapped root's directory outlived Destroy: %v", err)
	}
	if _, err := os.Stat(filepath.Join(rootfs, "made-by-root")); err != nil {
		t.Errorf("Destroy touched the sandbox's files: %v", err)
	}
}
