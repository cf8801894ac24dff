package gvisor

import (
	"fmt"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/runtime"
)

// NVIDIAClass is the one CDI device class gVisor passes through: runsc's
// nvproxy forwards the NVIDIA driver's ioctls from the sandbox's kernel to
// the host's device nodes. Other devices would need a driver inside gVisor.
const NVIDIAClass = "nvidia.com/gpu"

// nvproxyFlags turn nvproxy on for a sandbox holding GPUs; the device
// nodes, driver library mounts and env come from the CDI edits in the
// bundle's config.json, as with runsc under containerd.
var nvproxyFlags = []string{"--nvproxy"}

// applyDevices adds d's CDI edits to the bundle's spec, refusing any
// device that is not an NVIDIA GPU (the daemon checks this at create; this
// guards a spec changed since).
func applyDevices(oci *specs.Spec, d *runtime.Devices) error {
	if d == nil {
		return nil
	}
	for _, n := range d.Names {
		if !strings.HasPrefix(n, NVIDIAClass+"=") {
			return fmt.Errorf("device %s: gVisor passes through only %s devices (nvproxy): %w", n, NVIDIAClass, errdefs.ErrUnsupported)
		}
	}
	return d.Apply(oci)
}
