package gateway

import (
	"context"
	"testing"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/internal/errdefs"
)

// staticFleet is a fleet of fixed nodes, for the move target's choice.
type staticFleet []Node

func (f staticFleet) Nodes(context.Context) ([]Node, error) { return f, nil }
func (f staticFleet) Node(_ context.Context, name string) (Node, bool, error) {
	for _, n := range f {
		if n.Name == name {
			return n, true, nil
		}
	}
	return Node{}, false, nil
}
func (f staticFleet) LostSandbox(string) (*warrenv1.Sandbox, bool) { return nil, false }
func (f staticFleet) LostSandboxes() []*warrenv1.Sandbox           { return nil }

func (f staticFleet) SandboxNode(context.Context, string) (string, bool, error) {
	return "", false, nil
}

func TestMoveTarget(t *testing.T) {
	ctx := context.Background()
	src := Node{Name: "a", Ready: true, FreeMemory: 100 << 30}
	g := &mover{fleet: staticFleet{
		src,
		{Name: "b", Ready: true, FreeMemory: 1 << 30},
		{Name: "c", Ready: true, FreeMemory: 4 << 30},
		{Name: "d", Ready: true, Unschedulable: true, FreeMemory: 64 << 30},
		{Name: "e", Ready: false, FreeMemory: 64 << 30},
	}}
	for _, c := range []struct {
		name, want string
		kind       func(error) bool
	}{
		{"", "c", nil}, // the most free memory among Ready, schedulable others
		{"b", "b", nil},
		{"d", "d", nil}, // named: a cordoned node may still be chosen by hand
		{"a", "", errdefs.IsInvalid},
		{"e", "", errdefs.IsConflict},
		{"zz", "", errdefs.IsNotFound},
	} {
		n, err := g.moveTarget(ctx, src, c.name)
		switch {
		case c.kind == nil && (err != nil || n.Name != c.want):
			t.Errorf("target %q: %s %v, want %s", c.name, n.Name, err, c.want)
		case c.kind != nil && !c.kind(err):
			t.Errorf("target %q: %s %v, want an error of its kind", c.name, n.Name, err)
		}
	}
	lone := &mover{fleet: staticFleet{src}}
	if _, err := lone.moveTarget(ctx, src, ""); !errdefs.IsResourceExhausted(err) {
		t.Errorf("no other node: %v, want ErrResourceExhausted", err)
	}
}
