package session

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
)

// canSave is a TransferHost whose runtimes restore memory or not (err).
type canSave struct {
	TransferHost
	err error
}

func (c canSave) CanSaveMemory(string) error { return c.err }

// TestImportKeepsOrDropsMemory: a bundle's memory image is kept where a
// runtime restores it; elsewhere it is dropped and the caller told, or the
// import refused when the caller asked for the memory.
func TestImportKeepsOrDropsMemory(t *testing.T) {
	noGVisor := canSave{err: errdefs.ErrUnsupported}
	mem := &MemoryImage{Bytes: 10, Runtime: "gvisor"}
	for _, c := range []struct {
		name    string
		host    canSave
		memory  *MemoryImage
		require bool
		keep    bool
		dropped bool
		refused bool
	}{
		{name: "no memory", host: noGVisor},
		{name: "gvisor here", host: canSave{}, memory: mem, keep: true},
		{name: "no gvisor: dropped", host: noGVisor, memory: mem, dropped: true},
		{name: "no gvisor, memory required", host: noGVisor, memory: mem, require: true, refused: true},
	} {
		tr := &transfers{registry: &registry{log: slog.Default()}, host: c.host}
		var why string
		keep, err := tr.keepMemory(ImportRequest{Snapshot: store.Snapshot{ID: "s1"}, Memory: c.memory, RequireMemory: c.require,
			MemoryDropped: func(w string) { why = w }})
		if c.refused {
			if !errdefs.IsUnsupported(err) || !strings.Contains(err.Error(), "without requiring memory") || why != "" {
				t.Errorf("%s: %v, want refused saying what to do", c.name, err)
			}
			continue
		}
		if err != nil || keep != c.keep || (why != "") != c.dropped {
			t.Errorf("%s: keep %v, dropped %q, err %v", c.name, keep, why, err)
		}
	}
}
