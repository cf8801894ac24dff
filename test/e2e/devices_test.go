package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/client"
)

// The test's CDI devices (this machine has no GPU): testDevice is a
// character node with /dev/null's numbers, exclusive; testShared one with
// /dev/zero's, shareable; testHooked has a hook and sits in a directory
// the daemon does not trust.
const (
	testDevice = "test.warren.dev/dev=null"
	testShared = "test.warren.dev/shared=zero"
	testHooked = "test.warren.dev/hooked=one"
	// testDriverText is in the directory mounted as a stand-in for driver
	// libraries.
	testDriverText = "driver-lib-7f3a"
)

// testCDI writes the test's CDI specs: one directory of plain specs (with
// the host nodes they point at and the "driver" directory they mount) and
// one with a hooked spec. It returns the daemon's --cdi-spec-dirs value.
func testCDI(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	plain, hooked, drv := filepath.Join(root, "cdi"), filepath.Join(root, "hooked"), filepath.Join(root, "driver")
	for _, d := range []string{plain, hooked, drv} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Host nodes under test names with the numbers of /dev/null and
	// /dev/zero; CDI reads their type and numbers from them.
	for name, minor := range map[string]uint32{"null": 3, "zero": 5} {
		node := filepath.Join(root, "warren-test-"+name)
		if err := unix.Mknod(node, unix.S_IFCHR|0o666, int(unix.Mkdev(1, minor))); err != nil {
			t.Fatalf("mknod: %v", err)
		}
		// 0666 as the real ones are, whatever the umask: in a user namespace
		// the sandbox's root is no owner of a host node.
		if err := os.Chmod(node, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(drv, "lib.txt"), []byte(testDriverText), 0o644); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(plain, "test.yaml"), fmt.Sprintf(`cdiVersion: "0.6.0"
kind: test.warren.dev/dev
containerEdits:
  env: [WARREN_TEST_DEVICE=1]
devices:
- name: "null"
  containerEdits:
    deviceNodes: [{path: /dev/warren-test-null, hostPath: %s/warren-test-null}]
    mounts: [{hostPath: %s, containerPath: /opt/warren-driver, options: [ro, bind, nosuid, nodev]}]
`, root, drv))
	writeFile(t, filepath.Join(plain, "shared.yaml"), fmt.Sprintf(`cdiVersion: "0.6.0"
kind: test.warren.dev/shared
annotations: {warren.dev/shareable: "true"}
devices:
- name: zero
  containerEdits:
    deviceNodes: [{path: /dev/warren-test-zero, hostPath: %s/warren-test-zero}]
`, root))
	writeFile(t, filepath.Join(hooked, "hooked.yaml"), `cdiVersion: "0.6.0"
kind: test.warren.dev/hooked
devices:
- name: one
  containerEdits:
    hooks: [{hookName: createContainer, path: /bin/true}]
`)
	return plain + "," + hooked
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// withTestDevice adds the test's device to a create when the daemon was
// started with the test's CDI specs (the escape suites' device variant).
func withTestDevice(in client.NewSandbox, daemonArgs []string) client.NewSandbox {
	if slices.Contains(daemonArgs, "--cdi-spec-dirs") {
		in.Devices = []string{testDevice}
	}
	return in
}

// A sandbox gets its device node (readable and writable), its mount and
// env; the device cgroup still refuses every other device; an exclusive
// device is refused (409, naming the holder) to a second sandbox until the
// first is deleted, across a daemon restart; a shareable one is given to
// both; hooks from an untrusted directory, unknown and malformed names are
// 400s.
func TestDevices(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t, "--cdi-spec-dirs", testCDI(t))
	c := d.client()
	ctx := ctxT(t, 4*time.Minute)

	a, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Devices: []string{testDevice, testShared}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Sandboxes.Delete(context.Background(), a.SandboxID) })
	checkDeviceInside(t, ctx, c, a.SandboxID)
	if det, err := c.Sandboxes.Get(ctx, a.SandboxID); err != nil || !slices.Equal(det.Devices, []string{testDevice, testShared}) {
		t.Errorf("GET /sandboxes/{id} devices: %v, %v", det.Devices, err)
	}

	// The exclusive device is a's; the shareable one may be held twice.
	_, err = c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Devices: []string{testDevice}})
	if client.StatusCode(err) != 409 || !strings.Contains(err.Error(), a.SandboxID) {
		t.Fatalf("second sandbox asking for a held exclusive device: %v; want 409 naming %s", err, a.SandboxID)
	}
	b, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Devices: []string{testShared}})
	if err != nil {
		t.Fatalf("second holder of a shareable device: %v", err)
	}
	if out := execAs(t, ctx, c, b.SandboxID, "root", "head -c 3 /dev/warren-test-zero | od -An -tx1").Stdout; strings.TrimSpace(out) != "00 00 00" {
		t.Errorf("reading the shared zero device: %q", out)
	}
	for name, want := range map[string]string{
		testHooked:               "trusted",
		"test.warren.dev/dev=no": testDevice, // names what exists
		"not-a-device-name":      "vendor.com/class=name",
	} {
		_, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Devices: []string{name}})
		if client.StatusCode(err) != 400 || !strings.Contains(err.Error(), want) {
			t.Errorf("device %q: %v; want 400 saying %q", name, err, want)
		}
	}
	listed := d.mustCLI("devices")
	if !strings.Contains(listed, testDevice) || !strings.Contains(listed, a.SandboxID) || !strings.Contains(listed, testHooked) {
		t.Errorf("warren devices:\n%s", listed)
	}

	// The claims survive a restart: a still holds (and uses) the device.
	d.stop(syscall.SIGKILL)
	d.start()
	c = d.client()
	checkDeviceInside(t, ctx, c, a.SandboxID)
	if _, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Devices: []string{testDevice}}); client.StatusCode(err) != 409 {
		t.Fatalf("exclusive device after a restart: %v; want 409", err)
	}
	holders := heldBy(t, ctx, c)
	if h := holders[testShared]; len(h) != 2 || !slices.Contains(h, a.SandboxID) || !slices.Contains(h, b.SandboxID) {
		t.Errorf("GET /devices after restart: %v", holders)
	}

	// Deleting a frees it.
	if err := c.Sandboxes.Delete(ctx, a.SandboxID); err != nil {
		t.Fatal(err)
	}
	e, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Devices: []string{testDevice}})
	if err != nil {
		t.Fatalf("the device once its holder was deleted: %v", err)
	}
	checkDeviceInside(t, ctx, c, e.SandboxID)
	if h := heldBy(t, ctx, c); !slices.Equal(h[testDevice], []string{e.SandboxID}) || !slices.Equal(h[testShared], []string{b.SandboxID}) {
		t.Errorf("GET /devices after the delete: %v", h)
	}
	devicesFollowLifecycle(t, ctx, c, e.SandboxID)

	// A template's default devices: a create that asks for none gets them.
	d.mustCLI("template", "build", "bbdev", "--busybox", "--device", testShared, "--data-dir", d.dataDir)
	f, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bbdev"})
	if err != nil {
		t.Fatal(err)
	}
	if res := execAs(t, ctx, c, f.SandboxID, "root", "head -c 1 /dev/warren-test-zero | od -An -tx1"); strings.TrimSpace(res.Stdout) != "00" {
		t.Errorf("a sandbox of a template with a default device: %+v", res)
	}
	if _, _, code := d.cli("", "template", "build", "bbbad", "--busybox", "--device", "nonsense", "--data-dir", d.dataDir); code == 0 {
		t.Errorf("a template with a malformed device name was built")
	}
	// The CLI's --device.
	id := strings.TrimSpace(d.mustCLI("sandbox", "create", "--template", "bb", "--device", testShared))
	if h := heldBy(t, ctx, c); !slices.Contains(h[testShared], id) {
		t.Errorf("warren sandbox create --device: %s not among the holders %v", id, h[testShared])
	}
}

// devicesFollowLifecycle: the claim of id (holding testDevice) stays
// through a pause, and its forks ask for their own: one asking for none
// gets none, one asking for the held device is refused with 409. A stop
// (the sandbox never runs again) frees the device.
func devicesFollowLifecycle(t *testing.T, ctx context.Context, c *client.Client, id string) {
	t.Helper()
	if err := c.Lifecycle.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	if h := heldBy(t, ctx, c); !slices.Equal(h[testDevice], []string{id}) {
		t.Errorf("a paused sandbox's claim: %v", h)
	}
	if _, err := c.Lifecycle.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	checkDeviceInside(t, ctx, c, id)
	forks, err := c.Snapshots.Fork(ctx, id, client.ForkRequest{})
	if err != nil || len(forks) != 1 || forks[0].Sandbox == nil {
		t.Fatalf("fork without devices: %+v %v", forks, err)
	}
	if res := execAs(t, ctx, c, forks[0].Sandbox.SandboxID, "root", "ls /dev/warren-test-null"); res.ExitCode == 0 {
		t.Errorf("a fork that asked for no device has its parent's")
	}
	forks, err = c.Snapshots.Fork(ctx, id, client.ForkRequest{Devices: []string{testDevice}})
	if err != nil || len(forks) != 1 || forks[0].Error == nil || forks[0].Error.Code != 409 {
		t.Errorf("fork asking for its parent's exclusive device: %+v %v; want a 409", forks, err)
	}
	if _, err := c.Lifecycle.Stop(ctx, id, 0, true); err != nil {
		t.Fatal(err)
	}
	if h := heldBy(t, ctx, c); len(h[testDevice]) != 0 {
		t.Errorf("a stopped sandbox still holds its device: %v", h)
	}
	forks, err = c.Snapshots.Fork(ctx, id, client.ForkRequest{Devices: []string{testDevice}})
	if err != nil || len(forks) != 1 || forks[0].Sandbox == nil {
		t.Fatalf("fork of a stopped sandbox, with its freed device: %+v %v", forks, err)
	}
	checkDeviceInside(t, ctx, c, forks[0].Sandbox.SandboxID)
}
func heldBy(t *testing.T, ctx context.Context, c *client.Client) map[string][]string {
	t.Helper()
	ds, err := c.Meta.Devices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, d := range ds {
		out[d.Name] = d.HeldBy
	}
	return out
}

// checkDeviceInside: sandbox id holds testDevice: the node is there and
// works, the mount and env are there, and other devices stay refused.
func checkDeviceInside(t *testing.T, ctx context.Context, c *client.Client, id string) {
	t.Helper()
	run := func(cmd string) client.ExecResult { return execAs(t, ctx, c, id, "root", cmd) }
	if res := run("echo x > /dev/warren-test-null && cat /dev/warren-test-null && stat -c %t:%T /dev/warren-test-null"); res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != "1:3" {
		t.Errorf("using the device node: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if out := run("cat /opt/warren-driver/lib.txt").Stdout; out != testDriverText {
		t.Errorf("the device's mount: %q", out)
	}
	if res := run("echo y > /opt/warren-driver/new"); res.ExitCode == 0 {
		t.Errorf("the read-only device mount took a write")
	}
	if out := run("tr '\\0' '\\n' </proc/1/environ | grep WARREN_TEST_DEVICE").Stdout; strings.TrimSpace(out) != "WARREN_TEST_DEVICE=1" {
		t.Errorf("the device's env in PID 1: %q", out)
	}
	if out := run("echo $WARREN_TEST_DEVICE").Stdout; out != "1\n" {
		t.Errorf("the device's env in a command: %q", out)
	}
	// The device cgroup allows that node and no other: a node made inside
	// for another device (a disk, /dev/mem's numbers) cannot be opened,
	// and the cgroup's own list has a rule for 1:3 but none for all
	// devices or any block device.
	for _, cmd := range []string{
		"mknod /tmp/disk b 8 0 2>/dev/null; head -c 1 /tmp/disk",
		"mknod /tmp/mem c 1 1 2>/dev/null; head -c 1 /tmp/mem",
	} {
		if res := run(cmd); res.ExitCode == 0 {
			t.Errorf("%s: succeeded inside a sandbox holding a device (%q)", cmd, res.Stdout)
		}
	}
	rules := run("cat /sys/fs/cgroup/devices/devices.list 2>/dev/null || cat /sys/fs/cgroup/devices.list").Stdout
	if !strings.Contains(rules, "c 1:3 rw") || strings.Contains(rules, "a *:* rwm") || strings.Contains(rules, "b 8:") || strings.Contains(rules, "c 1:1 ") {
		t.Errorf("device cgroup rules of a sandbox holding 1:3:\n%s", rules)
	}
}

// On gvisor, an NVIDIA GPU goes through runsc's nvproxy and any other
// class is refused. This machine has no NVIDIA driver, so a spec naming a
// fake nvidia.com/gpu device shows the path is taken: runsc, started with
// --nvproxy, fails looking for /dev/nvidiactl, and the failed create frees
// its claim. (On a host with the driver the sandbox starts.)
func TestDevicesGVisor(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "gpu.yaml"), `cdiVersion: "0.6.0"
kind: nvidia.com/gpu
devices:
- name: fake
  containerEdits:
    env: [WARREN_FAKE_GPU=1]
`)
	d := gvisorDaemon(t, "--cdi-spec-dirs", dir+","+strings.Split(testCDI(t), ",")[0])
	c := d.client()
	ctx := ctxT(t, 2*time.Minute)
	if _, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Runtime: "gvisor", Devices: []string{testDevice}}); client.StatusCode(err) != 400 || !strings.Contains(err.Error(), "nvidia.com/gpu") {
		t.Errorf("a non-GPU device on gvisor: %v; want 400 naming the class it can pass", err)
	}
	_, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Runtime: "gvisor", Devices: []string{"nvidia.com/gpu=fake"}})
	if _, statErr := os.Stat("/dev/nvidiactl"); statErr == nil {
		if err != nil {
			t.Fatalf("a GPU sandbox on a host with NVIDIA's driver: %v", err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), "nvidiactl") {
		t.Errorf("a fake GPU on gvisor without NVIDIA's driver: %v; want runsc's nvproxy failing on /dev/nvidiactl", err)
	}
	if h := heldBy(t, ctx, c); len(h["nvidia.com/gpu=fake"]) != 0 {
		t.Errorf("a failed create still holds its device: %v", h)
	}
}
