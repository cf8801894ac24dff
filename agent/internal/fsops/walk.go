package fsops

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"connectrpc.com/connect"
)

// Walk says how far ListDir goes.
type Walk struct {
	// Depth is how many levels to descend; 1 is root's own entries.
	Depth uint32
	// Limit bounds the entries of one answer; more is ResourceExhausted.
	Limit int
	// SkipSubdir says whether a subdirectory that cannot be read is listed
	// but not entered rather than failing the whole listing.
	SkipSubdir func(error) bool
	Errors     Errors
}

// Run calls visit for each entry below root, depth first in name order.
// Symlinks are visited but never descended, so a link cycle cannot loop.
func (w Walk) Run(root string, visit func(path string, info fs.FileInfo)) error {
	n := 0
	var walk func(dir string, level uint32) error
	walk = func(dir string, level uint32) error {
		ents, err := os.ReadDir(dir)
		if err != nil {
			if dir != root && w.SkipSubdir(err) {
				return nil
			}
			return w.Errors.Connect("list", dir, err)
		}
		for _, de := range ents {
			info, err := de.Info()
			if err != nil {
				continue // removed while listing
			}
			if n >= w.Limit {
				return connect.NewError(connect.CodeResourceExhausted,
					fmt.Errorf("list %s: more than %d entries; list a subdirectory or use a smaller depth", root, w.Limit))
			}
			n++
			p := filepath.Join(dir, de.Name())
			visit(p, info)
			if de.IsDir() && level < w.Depth {
				if err := walk(p, level+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(root, 1)
}
