package main

import (
	"io"

	"github.com/warrenhq/warren/internal/bench"
)

// mergeOptions are the merge suite's: the snapshot suite's workspace
// (--files, --workspace-mb), two rounds when --quick.
func (b *benchRun) mergeOptions(dataDir string, progress io.Writer) bench.MergeOptions {
	o := bench.MergeOptions{Options: b.opts, Files: b.snap.Files, WorkspaceMB: b.snap.WorkspaceMB, Progress: progress}
	o.DataDir = dataDir
	if b.quick {
		o.Rounds, o.Forks, o.Changed = 2, 3, 20
	}
	return o
}
