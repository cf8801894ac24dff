package sharedvol

import (
	"fmt"
	"path"
	"strings"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
)

// maxNameLen and maxMounts bound what a caller can ask for.
const (
	maxNameLen = 64
	maxMounts  = 16
	maxPathLen = 1024
)

// ValidateName accepts a volume name: a letter or digit, then letters,
// digits, '.', '_' or '-', at most 64 in all; never a path.
func ValidateName(name string) error {
	if name == "" || len(name) > maxNameLen {
		return fmt.Errorf("volume name %q must be 1 to %d characters: %w", name, maxNameLen, errdefs.ErrInvalid)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
		if i > 0 && (c == '.' || c == '_' || c == '-') {
			ok = true
		}
		if !ok {
			return fmt.Errorf("volume name %q must start with a letter or digit and hold only letters, digits, '.', '_' and '-': %w", name, errdefs.ErrInvalid)
		}
	}
	if strings.Contains(name, "..") {
		return fmt.Errorf("volume name %q must not hold '..': %w", name, errdefs.ErrInvalid)
	}
	return nil
}

// reservedPrefixes are the sandbox paths no volume may cover: the kernel's
// file systems and warren's own agent.
var reservedPrefixes = []string{"/proc", "/sys", "/dev", "/.warren"}

// ValidateMountPath accepts where a volume may be mounted in a sandbox: an
// absolute, clean path (no '..', no '//', no trailing '/'), not '/', and
// not in or over /proc, /sys, /dev or warren's /.warren.
func ValidateMountPath(p string) error {
	if p == "" || len(p) > maxPathLen || !strings.HasPrefix(p, "/") {
		return fmt.Errorf("volume mount path %q must be an absolute path inside the sandbox: %w", p, errdefs.ErrInvalid)
	}
	for _, part := range strings.Split(p[1:], "/") {
		if part == ".." || part == "." {
			return fmt.Errorf("volume mount path %q must not hold '.' or '..': %w", p, errdefs.ErrInvalid)
		}
	}
	if path.Clean(p) != p || strings.ContainsAny(p, "\x00\n") {
		return fmt.Errorf("volume mount path %q must be clean (no '//', no trailing '/'): %w", p, errdefs.ErrInvalid)
	}
	if p == "/" {
		return fmt.Errorf("a volume cannot be mounted over the sandbox's root '/': %w", errdefs.ErrInvalid)
	}
	for _, r := range reservedPrefixes {
		if p == r || strings.HasPrefix(p, r+"/") {
			return fmt.Errorf("volume mount path %q is inside %s, which the sandbox's system owns: %w", p, r, errdefs.ErrInvalid)
		}
	}
	return nil
}

// checkMounts validates a create's mounts as a whole: each name and path,
// and no volume or path named twice.
func checkMounts(mounts []store.VolumeMount) error {
	if len(mounts) > maxMounts {
		return fmt.Errorf("volumeMounts: at most %d volumes per sandbox: %w", maxMounts, errdefs.ErrInvalid)
	}
	names := map[string]bool{}
	paths := map[string]bool{}
	for _, m := range mounts {
		if err := ValidateName(m.Name); err != nil {
			return fmt.Errorf("volumeMounts: %w", err)
		}
		if err := ValidateMountPath(m.Path); err != nil {
			return fmt.Errorf("volumeMounts: %w", err)
		}
		if names[m.Name] {
			return fmt.Errorf("volumeMounts: volume %q is named twice; mount each volume once: %w", m.Name, errdefs.ErrInvalid)
		}
		if paths[m.Path] {
			return fmt.Errorf("volumeMounts: two volumes at %s: %w", m.Path, errdefs.ErrInvalid)
		}
		names[m.Name], paths[m.Path] = true, true
	}
	return nil
}
