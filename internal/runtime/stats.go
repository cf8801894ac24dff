package runtime

import (
	"context"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

// Stats is one reading of a sandbox's resource counters.
type Stats struct {
	// CPUUsageNanos is the CPU time all of the sandbox's processes have
	// used since it started (a counter: rates come from two readings).
	CPUUsageNanos uint64
	// CPULimitMillis is the sandbox's CPU quota in thousandths of a CPU
	// (0 = no quota).
	CPULimitMillis int64
	// MemoryBytes is the memory in use, without the page cache the kernel
	// can drop (what would count against the limit under pressure).
	MemoryBytes int64
	MemoryLimit int64 // 0 = no limit
	Pids        int64
	PidsLimit   int64 // 0 = no limit
	At          time.Time
}

// StatsReader is implemented by runtimes that can read a sandbox's
// resource counters. It is optional: find it with a type assertion.
type StatsReader interface {
	// Stats reads id's counters. A sandbox that does not exist, or whose
	// resources are gone (stopped), is ErrNotFound.
	Stats(ctx context.Context, id string) (Stats, error)
}

// DirtyReader is implemented by runtimes that can tell how much file data
// a sandbox's processes have written that is not on disk yet (its cgroup's
// dirty and under-writeback page cache). It is optional: find it with a
// type assertion.
type DirtyReader interface {
	DirtyBytes(ctx context.Context, id string) (int64, error)
}

// LivenessChecker is implemented by runtimes that can tell whether a
// sandbox's init process lives more cheaply than Status (the liveness watch
// asks once a second for every sandbox). Optional, like StatsReader.
type LivenessChecker interface {
	// Alive reports whether id's init process runs (paused counts as
	// running). A sandbox that does not exist is not alive, and no error.
	Alive(ctx context.Context, id string) (bool, error)
}

// IsAlive asks rt whether id's init process runs: through Alive when rt is
// a LivenessChecker, else from its Status (stopped or missing: not alive).
func IsAlive(ctx context.Context, rt Runtime, id string) (bool, error) {
	if lc, ok := rt.(LivenessChecker); ok {
		return lc.Alive(ctx, id)
	}
	st, err := rt.Status(ctx, id)
	if errdefs.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return st.State != StateStopped, nil
}
