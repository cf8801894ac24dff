package tplbuild

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
)

func testStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "warren.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func testService(t *testing.T) (context.Context, *store.Store, *Service) {
	st := testStore(t)
	return context.Background(), st, New(Config{Store: st, Dir: t.TempDir()})
}

// builtWith records a ready build of a new template name with parent.
func builtWith(t *testing.T, st *store.Store, team, name string, parent store.BuildParent, cached, steps int) store.TemplateBuild {
	t.Helper()
	ctx := context.Background()
	tmpl, err := st.EnsureBuiltTemplate(ctx, team, name, "tpl"+name)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	b := store.TemplateBuild{ID: "b" + name + now.Format("150405.000000000"), TemplateID: tmpl.ID, Status: StatusReady, SnapshotID: "snap-" + name,
		Parent: parent, CachedSteps: cached, Steps: steps, CreatedAt: now, StartedAt: now, FinishedAt: now.Add(time.Second)}
	if err := st.PutTemplateBuild(ctx, b); err != nil {
		t.Fatal(err)
	}
	return b
}

// A build records its parent; a list shows the chain up to the server
// template and the last build's cache hits; a template others were
// built from cannot be deleted (409 naming them) until they are gone.
func TestParentChainAndDelete(t *testing.T) {
	ctx, st, s := testService(t)
	py := builtWith(t, st, "t1", "py-base", store.BuildParent{Kind: store.ParentTemplate, Name: "base"}, 0, 3)
	builtWith(t, st, "t1", "my-env", store.BuildParent{Kind: store.ParentBuild, Name: "py-base", TemplateID: py.TemplateID, BuildID: py.ID}, 5, 7)

	sums, err := s.List(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != 2 || sums[0].Name != "my-env" || !slices.Equal(sums[0].Chain, []string{"py-base", "base"}) ||
		sums[0].CachedSteps != 5 || sums[0].Steps != 7 || !slices.Equal(sums[1].Chain, []string{"base"}) {
		t.Fatalf("list = %+v", sums)
	}
	d, err := s.Show(ctx, "t1", "my-env")
	if err != nil || len(d.Builds) != 1 || d.Builds[0].Parent.BuildID != py.ID || d.Builds[0].Parent.Kind != store.ParentBuild {
		t.Fatalf("show = %+v, %v", d, err)
	}
	if _, err := s.Show(ctx, "t2", "my-env"); !errdefs.IsNotFound(err) {
		t.Fatalf("another team's show: %v, want not found", err)
	}

	err = s.Delete(ctx, "t1", "py-base")
	if !errdefs.IsConflict(err) || !strings.Contains(err.Error(), "my-env") {
		t.Fatalf("delete of a parent: %v, want a conflict naming my-env", err)
	}
	if err := s.Delete(ctx, "t1", "my-env"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "t1", "py-base"); err != nil {
		t.Fatalf("delete of a parent whose dependants are gone: %v", err)
	}
}

// A template built from itself (a rebuild on its own last build) or one
// whose only dependant build failed is no parent that blocks a delete.
func TestDeleteSelfParentAndFailedDependant(t *testing.T) {
	ctx, st, s := testService(t)
	a := builtWith(t, st, "t1", "a", store.BuildParent{Kind: store.ParentTemplate, Name: "base"}, 0, 1)
	builtWith(t, st, "t1", "a", store.BuildParent{Kind: store.ParentBuild, Name: "a", TemplateID: a.TemplateID, BuildID: a.ID}, 0, 1)
	failed := builtWith(t, st, "t1", "b", store.BuildParent{Kind: store.ParentBuild, Name: "a", TemplateID: a.TemplateID, BuildID: a.ID}, 0, 1)
	failed.Status = StatusError
	if err := st.PutTemplateBuild(ctx, failed); err != nil {
		t.Fatal(err)
	}
	if sums, _ := s.List(ctx, "t1"); len(sums) != 2 || !slices.Equal(sums[0].Chain, []string{"a", "base"}) {
		t.Fatalf("list = %+v", sums)
	}
	if err := s.Delete(ctx, "t1", "a"); err != nil {
		t.Fatal(err)
	}
}

// The chain is the ready build's: a newer build from another parent that
// failed does not change what a create starts from.
func TestChainOfTheReadyBuild(t *testing.T) {
	ctx, st, s := testService(t)
	ready := builtWith(t, st, "t1", "a", store.BuildParent{Kind: store.ParentTemplate, Name: "base"}, 0, 1)
	failed := builtWith(t, st, "t1", "a", store.BuildParent{Kind: store.ParentTemplate, Name: "other"}, 0, 1)
	failed.Status, failed.CreatedAt = StatusError, ready.CreatedAt.Add(time.Second) // the newer
	if err := st.PutTemplateBuild(ctx, failed); err != nil {
		t.Fatal(err)
	}
	if sums, _ := s.List(ctx, "t1"); len(sums) != 1 || !slices.Equal(sums[0].Chain, []string{"base"}) || sums[0].LastStatus != StatusError {
		t.Fatalf("list = %+v", sums)
	}
}
