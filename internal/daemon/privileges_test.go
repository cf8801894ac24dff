package daemon

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/warrenhq/warren/internal/store"
)

// A sandbox starts with no_new_privs when the server says so for all, or
// its template does; an unknown template follows the server.
func TestNoNewPrivileges(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "warren.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, tmpl := range []store.Template{{Name: "open"}, {Name: "locked", NoNewPrivileges: true}} {
		if err := st.PutTemplate(ctx, tmpl); err != nil {
			t.Fatal(err)
		}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, c := range []struct {
		server   bool
		template string
		want     bool
	}{
		{false, "open", false},
		{false, "locked", true},
		{false, "gone", false},
		{true, "open", true},
		{true, "gone", true},
	} {
		if got := noNewPrivileges(c.server, st, c.template, log); got != c.want {
			t.Errorf("server %v, template %s: %v, want %v", c.server, c.template, got, c.want)
		}
	}
}
