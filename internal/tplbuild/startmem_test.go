package tplbuild

import (
	"context"
	"strings"
	"testing"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
)

var testRuntimes = []client.RuntimeInfo{
	{Name: "native", Default: true, Available: true},
	{Name: "gvisor", Available: true, MemorySnapshot: true},
}

func TestCheckRuntime(t *testing.T) {
	noRunsc := []client.RuntimeInfo{testRuntimes[0], {Name: "gvisor", Error: "no runsc found"}}
	for _, c := range []struct {
		rts  []client.RuntimeInfo
		name string
		want string // "" ok, else part of the error
	}{
		{testRuntimes, "", ""},
		{testRuntimes, "gvisor", ""},
		{testRuntimes, "kvm", `runtime "kvm": want one of native, gvisor`},
		{noRunsc, "gvisor", "not available on this server (no runsc found)"},
	} {
		err := checkRuntime(c.rts, c.name)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !errdefs.IsInvalid(err)) {
			t.Errorf("checkRuntime(%q) = %v, want %q (invalid)", c.name, err, c.want)
		}
	}
	if !savesMemory(testRuntimes, "gvisor") || savesMemory(testRuntimes, "native") || savesMemory(testRuntimes, "") || savesMemory(nil, "gvisor") {
		t.Error("savesMemory: want gvisor only")
	}
}

// snapshotsOnly is the part of Sandboxes StartSource uses.
type snapshotsOnly struct {
	Sandboxes
	snaps map[string]store.Snapshot
}

func (f snapshotsOnly) GetSnapshot(_ context.Context, _, id string) (store.Snapshot, error) {
	if s, ok := f.snaps[id]; ok {
		return s, nil
	}
	return store.Snapshot{}, errdefs.ErrNotFound
}

// A create starts warm from the memory snapshot unless it asks for another
// runtime or files only, or the snapshot is gone.
func TestStartSource(t *testing.T) {
	s := New(Config{Sandboxes: snapshotsOnly{snaps: map[string]store.Snapshot{"mem": {ID: "mem", MemoryBytes: 1 << 20}}}})
	ctx := context.Background()
	b := store.TemplateBuild{SnapshotID: "files", MemorySnapshotID: "mem", Runtime: "gvisor", StartCmd: "srv"}
	gone := b
	gone.MemorySnapshotID = "deleted"
	cold := b
	cold.MemorySnapshotID = ""
	for _, c := range []struct {
		b         store.TemplateBuild
		runtime   string
		filesOnly bool
		want      string
		warm      bool
	}{
		{b, "", false, "mem", true},
		{b, "gvisor", false, "mem", true},
		{b, "native", false, "files", false},
		{b, "", true, "files", false},
		{gone, "", false, "files", false},
		{cold, "", false, "files", false},
	} {
		if got, warm := s.StartSource(ctx, "t", c.b, c.runtime, c.filesOnly); got != c.want || warm != c.warm {
			t.Errorf("StartSource(%s, %q, %v) = %s %v, want %s %v", c.b.MemorySnapshotID, c.runtime, c.filesOnly, got, warm, c.want, c.warm)
		}
	}
	if StartMode(b) != StartMemory || StartMode(cold) != StartEachCreate || StartMode(store.TemplateBuild{}) != "" {
		t.Error("StartMode")
	}
}
