package daemon

import (
	"os"
	"testing"

	"github.com/warrenhq/warren/internal/runtime/native"
)

// TestMain makes the test binary usable as libcontainer's "init": the
// daemon under test starts native sandboxes by re-executing it.
func TestMain(m *testing.M) {
	native.Init()
	os.Exit(m.Run())
}
