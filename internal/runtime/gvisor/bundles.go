package gvisor

import "path/filepath"

// bundles is the directory of the sandboxes' bundles (<StateDir>/sandboxes):
// one directory per sandbox holding its OCI spec and what the runtime
// records about it (proc.go, limits.go, cgroups.go).
type bundles struct {
	dir string
}

func (b bundles) bundle(id string) string { return filepath.Join(b.dir, id) }
