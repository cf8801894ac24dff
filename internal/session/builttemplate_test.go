package session

import (
	"context"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/store"
)

// A built template has no row of its own in the templates table: what its
// sandboxes and their snapshots inherit (here a required runtime) is found
// through its newest ready build's snapshot, down to the root template.
func TestTemplateOfBuiltTemplate(t *testing.T) {
	ctx := context.Background()
	m, _, st := newManager(t, 10)
	if err := st.PutTemplate(ctx, store.Template{Name: "strict", Source: "test", Runtime: "gvisor"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if err := st.CreateSnapshot(ctx, store.Snapshot{ID: "snapbuild1", Team: "a", SandboxID: "sbxbuild1", Family: "fam1",
		Template: "strict", Kind: store.SnapshotImplicit, State: store.SnapshotReady, CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	bt, err := st.EnsureBuiltTemplate(ctx, "a", "my-env", "tplmyenv1")
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range []store.TemplateBuild{
		{ID: "bld1", TemplateID: bt.ID, Status: "ready", SnapshotID: "snapbuild1", CreatedAt: now.Add(-time.Minute)},
		{ID: "bld2", TemplateID: bt.ID, Status: "error", CreatedAt: now}, // newer, but failed
	} {
		if err := st.PutTemplateBuild(ctx, b); err != nil {
			t.Fatalf("build %d: %v", i, err)
		}
	}
	got, err := m.lifecycle.templateOf(ctx, bt.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "strict" || got.Runtime != "gvisor" {
		t.Fatalf("templateOf(%s) = %+v, want the root template strict (gvisor)", bt.ID, got)
	}
	if got, err := m.lifecycle.templateOf(ctx, "no-such-template"); err != nil || got.Name != "" {
		t.Fatalf("an unknown name: %+v, %v (want the zero template)", got, err)
	}
}
