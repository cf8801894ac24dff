// Package oci holds the parts of an OCI runtime spec that both runtimes
// build the same way from a runtime.Spec.
package oci

import (
	"path/filepath"

	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/warrenhq/warren/internal/runtime"
)

// BindMounts turns the spec's host mounts into private, nosuid, nodev bind
// mounts (read-only where asked).
func BindMounts(ms []runtime.Mount) []specs.Mount {
	out := make([]specs.Mount, 0, len(ms))
	for _, m := range ms {
		opts := []string{"rbind", "rprivate", "nosuid", "nodev"}
		if m.ReadOnly {
			opts = append(opts, "ro")
		}
		out = append(out, specs.Mount{
			Destination: filepath.Clean(m.Destination),
			Type:        "bind",
			Source:      m.Source,
			Options:     opts,
		})
	}
	return out
}
