package template

import (
	"fmt"
	"github.com/warrenhq/warren/internal/mountinfo"
	"path/filepath"
	"sort"

	"golang.org/x/sys/unix"
)

// unmountUnder detaches every mount at or below dir (deepest first).
func unmountUnder(dir string) error {
	dir = filepath.Clean(dir)
	mps, err := mountinfo.Under(dir)
	if err != nil {
		return err
	}
	sort.Slice(mps, func(i, j int) bool { return len(mps[i]) > len(mps[j]) })
	for _, mp := range mps {
		if mp == dir {
			continue // the volume itself may be a mount (a backend's business)
		}
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && err != unix.EINVAL && err != unix.ENOENT {
			return fmt.Errorf("unmount %s left by debootstrap: %w", mp, err)
		}
	}
	return nil
}
