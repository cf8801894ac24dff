package template

import (
	"fmt"
	"slices"
)

// pipConf lets `pip install` as root install into the system Python of a
// debootstrap tree that has pip. Debian 12 marks its Python "externally
// managed" (PEP 668), so pip refuses such installs unless told otherwise;
// E2B's base image takes them, and its Template SDK's pipInstall runs
// `pip install PKGS` as root. The file is written when the tree is
// populated (after the cache), so it is no part of the cached tarball.
const pipConf = `# Written by warren: pip may install into the system Python (PEP 668's
# EXTERNALLY-MANAGED guard off), as on E2B's base image.
[global]
break-system-packages = true
`

// writePipConf writes /etc/pip.conf into root when pkgs includes pip and
// the tree has none of its own.
func writePipConf(root string, pkgs []string) error {
	if !slices.Contains(pkgs, "python3-pip") {
		return nil
	}
	t, err := openTree(root)
	if err != nil {
		return err
	}
	defer t.Close()
	if t.exists("etc/pip.conf") {
		return nil
	}
	if err := t.writeFile("etc/pip.conf", []byte(pipConf), 0o644, 0, 0); err != nil {
		return fmt.Errorf("pip configuration: %w", err)
	}
	return nil
}
