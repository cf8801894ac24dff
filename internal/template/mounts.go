package template

import (
	"fmt"

	"github.com/warrenhq/warren/internal/mountinfo"
)

// unmountUnder detaches every mount below dir (deepest first); dir itself
// may be a mount of the storage backend's and stays.
func unmountUnder(dir string) error {
	if err := mountinfo.DetachUnder(dir, true); err != nil {
		return fmt.Errorf("unmount what debootstrap left: %w", err)
	}
	return nil
}
