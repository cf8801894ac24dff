package sandbox

import (
	"context"
	"testing"

	"github.com/warrenhq/warren/internal/runtime"
)

type fakeRanges struct{}

func (fakeRanges) Range(context.Context, string) (runtime.IDRange, error) {
	return runtime.IDRange{HostID: 1 << 20, Size: 65536}, nil
}
func (fakeRanges) Lookup(context.Context, string) (runtime.IDRange, bool, error) {
	return runtime.IDRange{}, false, nil
}
func (fakeRanges) Release(context.Context, string) error { return nil }

// capsSet is a runtime set whose default is native and which also holds
// gvisor; only native can run a user namespace.
type capsSet struct{ processStarter }

func (capsSet) Name() string { return "native" }
func (capsSet) CapabilitiesOf(name string) (runtime.Capabilities, bool) {
	switch name {
	case "native":
		return runtime.Capabilities{UserNS: true}, true
	case "gvisor":
		return runtime.Capabilities{}, true
	}
	return runtime.Capabilities{}, false
}

// A sandbox gets a user namespace only when they are on, ranges are
// there, and its runtime (the default when unnamed) can.
func TestUsesUserNS(t *testing.T) {
	for _, c := range []struct {
		name    string
		l       launcher
		runtime string
		want    bool
	}{
		{"on, native", launcher{runtime: capsSet{}, userns: fakeRanges{}, usernsOn: true}, "native", true},
		{"on, default is native", launcher{runtime: capsSet{}, userns: fakeRanges{}, usernsOn: true}, "", true},
		{"on, gvisor", launcher{runtime: capsSet{}, userns: fakeRanges{}, usernsOn: true}, "gvisor", false},
		{"on, unknown runtime", launcher{runtime: capsSet{}, userns: fakeRanges{}, usernsOn: true}, "kvm", false},
		{"off", launcher{runtime: capsSet{}, userns: fakeRanges{}}, "native", false},
		{"no ranges", launcher{runtime: capsSet{}, usernsOn: true}, "native", false},
	} {
		if got := c.l.usesUserNS(c.runtime); got != c.want {
			t.Errorf("%s: usesUserNS(%q) = %v; want %v", c.name, c.runtime, got, c.want)
		}
	}
}
