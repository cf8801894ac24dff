package daemon

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/store"
)

// TestSandboxesByStateCountsEveryStateButDestroyed: the warren_sandboxes
// gauge has a series for every state of the lifecycle (hibernated was left
// out), and none for destroyed sandboxes, which are history.
func TestSandboxesByStateCountsEveryStateButDestroyed(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "w.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	states := session.States()
	for _, s := range states {
		if err := st.CreateSandbox(ctx, store.Sandbox{ID: "sb" + string(s), Team: "t", Template: "base", Runtime: "native", State: s}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := sandboxesByState(st)(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range states {
		n, ok := got[string(s)]
		switch {
		case s == session.StateDestroyed && ok:
			t.Errorf("destroyed sandboxes counted: %d", n)
		case s != session.StateDestroyed && n != 1:
			t.Errorf("%s: %d (present %v), want 1", s, n, ok)
		}
	}
}
