package devices

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	cdispecs "tags.cncf.io/container-device-interface/specs-go"

	"github.com/warrenhq/warren/internal/errdefs"
)

func writeSpec(t *testing.T, dir, file, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, file), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Names resolve against the specs; unknown and malformed names are
// ErrInvalid naming what exists; hooks need a trusted directory; Apply
// adds env and mounts.
func TestRegistry(t *testing.T) {
	plain, hooked := t.TempDir(), t.TempDir()
	writeSpec(t, plain, "a.yaml", `cdiVersion: "0.6.0"
kind: test.warren.dev/thing
devices:
- name: one
  annotations: {warren.dev/shareable: "true"}
  containerEdits:
    env: [THING=one]
    mounts: [{hostPath: /tmp, containerPath: /thing}]
`)
	writeSpec(t, hooked, "h.yaml", `cdiVersion: "0.6.0"
kind: test.warren.dev/hooked
devices:
- name: one
  containerEdits:
    hooks: [{hookName: createContainer, path: /bin/true}]
`)
	r := New(Options{SpecDirs: []string{plain, hooked}})
	if _, err := r.Resolve([]string{"test.warren.dev/thing=two"}); !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "test.warren.dev/thing=one") {
		t.Errorf("unknown name: %v; want ErrInvalid naming the one that exists", err)
	}
	if _, err := r.Resolve([]string{"thing"}); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("malformed name: %v", err)
	}
	if _, err := r.Resolve([]string{"test.warren.dev/hooked=one"}); !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "trusted") {
		t.Errorf("hook from an untrusted dir: %v", err)
	}
	devs, err := r.Resolve([]string{"test.warren.dev/thing=one"})
	if err != nil || !devs[0].Shareable {
		t.Fatalf("Resolve = %+v, %v; want one shareable device", devs, err)
	}
	oci := &specs.Spec{Process: &specs.Process{}, Linux: &specs.Linux{}}
	if err := r.Apply(oci, []string{"test.warren.dev/thing=one"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(oci.Process.Env, " "), "THING=one") || len(oci.Mounts) != 1 {
		t.Errorf("applied spec: env %v mounts %v", oci.Process.Env, oci.Mounts)
	}
	trusting := New(Options{SpecDirs: []string{hooked}, TrustedHookDirs: []string{hooked}})
	if _, err := trusting.Resolve([]string{"test.warren.dev/hooked=one"}); err != nil {
		t.Errorf("hook from a trusted dir: %v", err)
	}
}

func TestBindDeviceNodes(t *testing.T) {
	s := &specs.Spec{Linux: &specs.Linux{
		Namespaces: []specs.LinuxNamespace{{Type: specs.UserNamespace}},
		Devices:    []specs.LinuxDevice{{Path: "/dev/a"}, {Path: "/dev/same"}},
	}}
	if !inUserNS(s) {
		t.Fatal("a spec with a user namespace is not seen as one")
	}
	bindDeviceNodes(s, []*cdispecs.DeviceNode{
		{Path: "/dev/a", HostPath: "/srv/test/a"},
		{Path: "/dev/same", HostPath: "/dev/same"},
		{Path: "/dev/unset"},
	})
	if len(s.Linux.Devices) != 1 || s.Linux.Devices[0].Path != "/dev/same" {
		t.Fatalf("devices left: %+v (want only /dev/same, which libcontainer binds itself)", s.Linux.Devices)
	}
	if len(s.Mounts) != 1 || s.Mounts[0].Source != "/srv/test/a" || s.Mounts[0].Destination != "/dev/a" {
		t.Fatalf("mounts: %+v (want /srv/test/a bound on /dev/a)", s.Mounts)
	}
	for _, o := range s.Mounts[0].Options {
		if o == "nodev" {
			t.Fatal("a device's bind mount must not be nodev")
		}
	}
	if inUserNS(&specs.Spec{Linux: &specs.Linux{}}) {
		t.Fatal("a spec without a user namespace is seen as one")
	}
}
