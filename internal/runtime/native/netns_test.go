package native

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/network/fakenet"
	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/runtime/runtimetest"
)

// A sandbox given a network namespace runs in it (with what was set up
// there, not a fresh loopback-only one), and cannot reconfigure it: it has
// no CAP_NET_ADMIN or CAP_NET_RAW over it. In a user namespace too, where
// /sys is a sysfs the runtime mounts for it: it lists the namespace's
// interfaces, not the host's.
func TestJoinsGivenNetworkNamespace(t *testing.T) {
	mk := newTestRuntime(t)
	r := mk(t)
	for _, userns := range []bool{false, true} {
		t.Run("userns="+strconv.FormatBool(userns), func(t *testing.T) { joinsGivenNetNS(t, r, userns) })
	}
}

func joinsGivenNetNS(t *testing.T, r *Runtime, userns bool) {
	nsPath := filepath.Join(t.TempDir(), "sandbox-net")
	if err := fakenet.CreateNS(nsPath); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fakenet.RemoveNS(nsPath) })
	h, err := netns.GetFromPath(nsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	la := netlink.NewLinkAttrs()
	la.Name = "probe0"
	if err := nl.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "probe1"}); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(nsPath, &st); err != nil {
		t.Fatal(err)
	}

	b := runtimetest.RunScript(t, r, runtimetest.BusyboxRootfs(t), `
ls /sys/class/net > /results/ifs
readlink /proc/self/ns/net > /results/ns
ip addr add 10.99.0.2/32 dev probe0 2> /results/addr; echo $? >> /results/addr
ip link set probe0 up 2> /results/up; echo $? >> /results/up
ping -c 1 -W 1 127.0.0.1 > /results/ping 2>&1; echo $? >> /results/ping
`, func(s *runtime.Spec) {
		s.NetNS = nsPath
		if userns {
			u := testRange
			s.UserNS = &u
		}
	})
	b.WaitDone(t, 20*time.Second)
	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join(b.Results, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	if ifs := strings.Join(strings.Fields(read("ifs")), " "); ifs != "lo probe0 probe1" {
		t.Fatalf("interfaces inside: %q, want the namespace's: lo probe0 probe1", ifs)
	}
	if got, want := strings.TrimSpace(read("ns")), "net:["+strconv.FormatUint(st.Ino, 10)+"]"; got != want {
		t.Fatalf("the sandbox's netns is %s, want %s", got, want)
	}
	for _, f := range []string{"addr", "up", "ping"} {
		out := read(f)
		if strings.HasSuffix(strings.TrimSpace(out), "\n0") || strings.TrimSpace(out) == "0" {
			t.Errorf("%s succeeded inside the sandbox: %q", f, out)
		}
		if !strings.Contains(out, "not permitted") && !strings.Contains(out, "denied") {
			t.Errorf("%s: %q, want a permission error", f, out)
		}
	}
	probe, err := nl.LinkByName("probe0")
	if err != nil {
		t.Fatal(err)
	}
	if addrs, _ := nl.AddrList(probe, netlink.FAMILY_V4); len(addrs) != 0 {
		t.Fatalf("the sandbox added addresses: %v", addrs)
	}
}

// A relative namespace path is refused.
func TestRejectsRelativeNetNS(t *testing.T) {
	if err := validateSpec(runtime.Spec{RootFS: "/x", Init: []string{"/bin/sh"}, NetNS: "netns/x"}); err == nil {
		t.Fatal("a relative network namespace path was accepted")
	}
}
