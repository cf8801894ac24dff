package template

import (
	"fmt"
	"strings"

	"github.com/warrenhq/warren/internal/errdefs"
)

// BasePackages are installed into the `base` template on top of minbase:
// what an agent expects of a Linux box, and what E2B's Template SDK
// assumes of its base image: pip for pipInstall, and iproute2's `ss` for
// waitForPort.
var BasePackages = []string{"bash", "coreutils", "ca-certificates", "python3", "python-is-python3", "git", "curl", "sudo", "iproute2", "python3-pip"}

// BaseSource is the source of the default template `base`: Debian
// bookworm (minbase) with BasePackages.
func BaseSource() Source {
	return Source{Debootstrap: "bookworm", Packages: append([]string(nil), BasePackages...)}
}

// Validate checks that exactly one source kind is set and that its fields
// are well-formed.
func (s Source) Validate() error {
	var set []string
	if s.RootFS != "" {
		set = append(set, "rootfs")
	}
	if s.Debootstrap != "" {
		set = append(set, "debootstrap")
	}
	if s.Image != "" {
		set = append(set, "image")
	}
	if s.Busybox {
		set = append(set, "busybox")
	}
	switch len(set) {
	case 0:
		return fmt.Errorf("template source: set one of rootfs, debootstrap, image or busybox: %w", errdefs.ErrInvalid)
	case 1:
	default:
		return fmt.Errorf("template source: set only one of rootfs, debootstrap, image or busybox (got %s): %w", strings.Join(set, ", "), errdefs.ErrInvalid)
	}
	if len(s.Packages) > 0 && s.Debootstrap == "" {
		return fmt.Errorf("template source: packages can only be added to a debootstrap build: %w", errdefs.ErrInvalid)
	}
	if s.Debootstrap != "" && !validDebName(s.Debootstrap) {
		return fmt.Errorf("template source: suite %q is not a Debian suite name: %w", s.Debootstrap, errdefs.ErrInvalid)
	}
	for _, p := range s.Packages {
		if !validDebName(p) {
			return fmt.Errorf("template source: %q is not a Debian package name: %w", p, errdefs.ErrInvalid)
		}
	}
	return nil
}

// validDebName accepts Debian package and suite names ([a-z0-9][a-z0-9+.-]*),
// which also keeps them from being read as debootstrap options.
func validDebName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
		if i > 0 && (c == '+' || c == '.' || c == '-') {
			ok = true
		}
		if !ok {
			return false
		}
	}
	return true
}

// String describes the source for people ("debootstrap bookworm +git,curl").
func (s Source) String() string {
	switch {
	case s.RootFS != "":
		return "rootfs " + s.RootFS
	case s.Debootstrap != "":
		if len(s.Packages) == 0 {
			return "debootstrap " + s.Debootstrap
		}
		return "debootstrap " + s.Debootstrap + " +" + strings.Join(s.Packages, ",")
	case s.Image != "":
		return "image " + s.Image
	case s.Busybox:
		return "busybox"
	}
	return "none"
}
