package devices

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
)

// Claims go through the registry (names checked, classes the runtime can
// pass) into the store; List shows holders, a held device whose spec went
// away included; EditsOf is nil for a sandbox holding nothing.
func TestService(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeSpec(t, dir, "a.yaml", `cdiVersion: "0.6.0"
kind: test.warren.dev/thing
devices:
- name: one
  containerEdits: {env: [THING=one]}
- name: two
  containerEdits: {env: [THING=two]}
`)
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc := NewService(New(Options{SpecDirs: []string{dir}}), st)
	if err := svc.Claim(ctx, "a", []string{"test.warren.dev/thing=one"}, []string{"nvidia.com/gpu"}); !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "nvidia.com/gpu") {
		t.Errorf("a class the runtime cannot pass: %v", err)
	}
	if err := svc.Claim(ctx, "a", []string{"test.warren.dev/thing=one", "test.warren.dev/thing=two"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := svc.Claim(ctx, "b", []string{"test.warren.dev/thing=two"}, nil); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("an exclusive device held by a: %v", err)
	}
	if err := st.ClaimDevices(ctx, "c", []store.DeviceClaim{{Device: "gone.com/x=0", Exclusive: true}}); err != nil {
		t.Fatal(err)
	}
	list, err := svc.List(ctx)
	if err != nil || len(list) != 3 || list[0].Name != "gone.com/x=0" || list[0].Holders[0] != "c" || list[1].Holders[0] != "a" {
		t.Errorf("List = %+v, %v", list, err)
	}
	d, err := svc.EditsOf(ctx, "a")
	if err != nil || d == nil || len(d.Names) != 2 {
		t.Fatalf("EditsOf(a) = %+v, %v", d, err)
	}
	if env, err := d.Env([]string{"PATH=/bin"}); err != nil || !strings.Contains(strings.Join(env, " "), "THING=") {
		t.Errorf("the devices' env: %v, %v", env, err)
	}
	if d, err := svc.EditsOf(ctx, "b"); d != nil || err != nil {
		t.Errorf("EditsOf(b) = %+v, %v; want nil", d, err)
	}
	if err := svc.Release(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := svc.Claim(ctx, "b", []string{"test.warren.dev/thing=two"}, nil); err != nil {
		t.Errorf("after a's release: %v", err)
	}
}
