// Package dirsize adds up the bytes a directory's files hold, for the
// memory images the runtimes write and the hosts move between nodes.
package dirsize

import (
	"io/fs"
	"path/filepath"
)

// Of adds up the sizes of the regular files under dir.
func Of(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			total += info.Size()
		}
		return nil
	})
	return total, err
}
