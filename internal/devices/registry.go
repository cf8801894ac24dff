// Package devices hands host devices to sandboxes through the Container
// Device Interface (CDI): a vendor's tool (for NVIDIA, `nvidia-ctk cdi
// generate`) writes specs under /etc/cdi or /var/run/cdi naming devices
// such as nvidia.com/gpu=0 and the edits each needs (device nodes, mounts,
// env, hooks). The Registry reads those specs with the library containerd
// and Podman use; the Service records which sandbox holds which device
// (exclusive unless the spec says shareable) and gives each start of a
// sandbox the edits of its devices.
package devices

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
	cdispecs "tags.cncf.io/container-device-interface/specs-go"

	"github.com/warrenhq/warren/internal/errdefs"
)

// ShareableAnnotation, set to "true" on a device or its whole spec, lets
// several sandboxes hold the device at once.
const ShareableAnnotation = "warren.dev/shareable"

// DefaultSpecDirs are where CDI specs are read from unless configured.
var DefaultSpecDirs = []string{"/etc/cdi", "/var/run/cdi"}

// MaxPerSandbox bounds how many devices one create may ask for.
const MaxPerSandbox = 64

// Options configure a Registry.
type Options struct {
	// SpecDirs are the directories of CDI specs (nil: DefaultSpecDirs).
	// A later directory's spec overrides an earlier one's device.
	SpecDirs []string
	// TrustedHookDirs are the spec directories whose specs may run hooks
	// (host programs run as root at a sandbox's start). A device whose
	// edits hold a hook from a spec elsewhere is refused.
	TrustedHookDirs []string
	Log             *slog.Logger
}

// Registry is the CDI specs on this host.
type Registry struct {
	cache   *cdi.Cache
	trusted []string
	log     *slog.Logger
}

// Device is one device the host offers.
type Device struct {
	Name      string // vendor.com/class=name
	Spec      string // the spec file that defines it
	Shareable bool
	// Hooks says its edits run host programs; Trusted that its spec's
	// directory allows them.
	Hooks, Trusted bool
}

// New reads the specs in o's directories. Missing directories are fine:
// they are read again at every look-up, so specs written later are seen.
func New(o Options) *Registry {
	dirs := o.SpecDirs
	if len(dirs) == 0 {
		dirs = DefaultSpecDirs
	}
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	// Manual refresh: every look-up rescans (a few small files), so no
	// watcher goroutine is needed and a spec written just before a create
	// is seen by it.
	cache, _ := cdi.NewCache(cdi.WithSpecDirs(dirs...), cdi.WithAutoRefresh(false))
	r := &Registry{cache: cache, log: log}
	for _, d := range o.TrustedHookDirs {
		r.trusted = append(r.trusted, filepath.Clean(d))
	}
	return r
}

// refresh rescans the spec directories; a spec that does not parse is
// logged and left out (the others still serve).
func (r *Registry) refresh() {
	if err := r.cache.Refresh(); err != nil {
		r.log.Warn("some CDI specs were left out", "err", err)
	}
}

// Devices lists the devices the host offers, by name.
func (r *Registry) Devices() []Device {
	r.refresh()
	var out []Device
	for _, name := range r.cache.ListDevices() {
		if d := r.cache.GetDevice(name); d != nil {
			out = append(out, r.describe(d))
		}
	}
	return out
}

func (r *Registry) describe(d *cdi.Device) Device {
	spec := d.GetSpec()
	hooks := len(d.ContainerEdits.Hooks) > 0 || len(spec.ContainerEdits.Hooks) > 0
	return Device{
		Name:      d.GetQualifiedName(),
		Spec:      spec.GetPath(),
		Shareable: d.Annotations[ShareableAnnotation] == "true" || spec.Annotations[ShareableAnnotation] == "true",
		Hooks:     hooks,
		Trusted:   slices.Contains(r.trusted, filepath.Dir(spec.GetPath())),
	}
}

// CheckNames checks that names are qualified CDI names, none twice,
// without looking them up (a template's defaults are looked up at each
// create, on the host it runs on).
func CheckNames(names []string) error {
	if len(names) > MaxPerSandbox {
		return fmt.Errorf("%d devices asked for, at most %d allowed: %w", len(names), MaxPerSandbox, errdefs.ErrInvalid)
	}
	seen := map[string]bool{}
	for _, name := range names {
		if _, _, _, err := parser.ParseQualifiedName(name); err != nil {
			return fmt.Errorf("device %q is not a CDI name such as vendor.com/class=name (%v): %w", name, err, errdefs.ErrInvalid)
		}
		if seen[name] {
			return fmt.Errorf("device %s is asked for twice: %w", name, errdefs.ErrInvalid)
		}
		seen[name] = true
	}
	return nil
}

// Resolve checks names: each must be a qualified CDI name
// (vendor.com/class=name) of a device the host offers, none twice, and a
// device whose edits run hooks must come from a trusted directory. Bad
// input is ErrInvalid naming what the host has.
func (r *Registry) Resolve(names []string) ([]Device, error) {
	if err := CheckNames(names); err != nil {
		return nil, err
	}
	r.refresh()
	out := make([]Device, 0, len(names))
	for _, name := range names {
		d := r.cache.GetDevice(name)
		if d == nil {
			return nil, fmt.Errorf("this host has no device %s; it has %s: %w", name, r.available(), errdefs.ErrInvalid)
		}
		dev := r.describe(d)
		if dev.Hooks && !dev.Trusted {
			return nil, fmt.Errorf("device %s runs hooks from spec %s, whose directory is not trusted for hooks (--cdi-trusted-hook-dirs): %w", name, dev.Spec, errdefs.ErrInvalid)
		}
		out = append(out, dev)
	}
	return out, nil
}

// available names the host's devices for an error message.
func (r *Registry) available() string {
	names := r.cache.ListDevices()
	if len(names) == 0 {
		return "none (no CDI specs in " + strings.Join(r.cache.GetSpecDirectories(), ", ") + ")"
	}
	return strings.Join(names, ", ")
}

// Apply adds the edits of the named devices to an OCI runtime spec: device
// nodes with their device cgroup rules, mounts, env, and (trusted) hooks.
// The names are resolved again: a spec changed since the claim is checked
// as a new one would be.
func (r *Registry) Apply(s *specs.Spec, names []string) error {
	if _, err := r.Resolve(names); err != nil {
		return err
	}
	if _, err := r.cache.InjectDevices(s, names...); err != nil {
		return fmt.Errorf("apply CDI devices %s: %w", strings.Join(names, ", "), err)
	}
	if inUserNS(s) {
		bindDeviceNodes(s, r.deviceNodes(names))
	}
	return nil
}

// deviceNodes are the device nodes the named devices' edits make: each
// device's own and its spec's.
func (r *Registry) deviceNodes(names []string) []*cdispecs.DeviceNode {
	var nodes []*cdispecs.DeviceNode
	for _, name := range names {
		d := r.cache.GetDevice(name)
		if d == nil {
			continue
		}
		nodes = append(nodes, d.ContainerEdits.DeviceNodes...)
		if sp := d.GetSpec(); sp != nil && sp.Spec != nil {
			nodes = append(nodes, sp.ContainerEdits.DeviceNodes...)
		}
	}
	return nodes
}

func inUserNS(s *specs.Spec) bool {
	if s.Linux == nil {
		return false
	}
	for _, ns := range s.Linux.Namespaces {
		if ns.Type == specs.UserNamespace {
			return true
		}
	}
	return false
}

// bindDeviceNodes turns the device nodes whose host path differs from the
// sandbox's into bind mounts of the host's node. In a user namespace
// libcontainer cannot mknod, so it bind-mounts each device from the host
// path that equals the node's path inside; a spec that names another host
// path (HostPath) would fail the start. The device cgroup rule the edits
// added still decides what the sandbox may open.
func bindDeviceNodes(s *specs.Spec, nodes []*cdispecs.DeviceNode) {
	for _, n := range nodes {
		if n.HostPath == "" || n.HostPath == n.Path {
			continue
		}
		s.Linux.Devices = slices.DeleteFunc(s.Linux.Devices, func(d specs.LinuxDevice) bool { return d.Path == n.Path })
		s.Mounts = append(s.Mounts, specs.Mount{
			Destination: n.Path,
			Source:      n.HostPath,
			Type:        "bind",
			Options:     []string{"bind", "nosuid", "noexec"},
		})
	}
}

// Class is a device name's vendor.com/class.
func Class(name string) string {
	vendor, class, _ := parser.ParseDevice(name)
	return vendor + "/" + class
}
