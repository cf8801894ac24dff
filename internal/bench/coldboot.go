package bench

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/warrenhq/warren/client"
)

// ColdBootReport compares a cold boot after a filesystem-only pause (E2B's
// pause {memory: false}, then connect) with a cold create: both start a
// sandbox's processes afresh, one on the files it kept, one on a
// template's.
type ColdBootReport struct {
	// PauseFilesOnly: POST /pause {memory: false} (the processes end).
	PauseFilesOnly Stats `json:"pause_files_only"`
	// ConnectToFirstOutput: POST /resume of the paused sandbox (a cold
	// boot), then an exec of `echo`, until its first byte of output: what
	// CreateToFirstOutput measures for a create.
	ConnectToFirstOutput Stats `json:"connect_to_first_output"`
	// AddedP50Ms is ConnectToFirstOutput's p50 less CreateToFirstOutput's
	// (target: within TargetAddedMs either way).
	AddedP50Ms    float64 `json:"added_vs_create_p50_ms"`
	TargetAddedMs float64 `json:"target_within_ms"`
}

// measureColdBoot pauses sandbox id without memory and boots it again,
// rounds times after an untimed warm-up round, and compares the boots with
// the creates measured before.
func measureColdBoot(ctx context.Context, c *client.Client, id string, rounds int, create Stats) (ColdBootReport, error) {
	var pauses, boots []time.Duration
	for i := 0; i <= rounds; i++ {
		start := time.Now()
		if err := c.Lifecycle.PauseFiles(ctx, id); err != nil {
			return ColdBootReport{}, fmt.Errorf("pause without memory: %w", err)
		}
		paused := time.Since(start)
		start = time.Now()
		if _, err := c.Lifecycle.Resume(ctx, id); err != nil {
			return ColdBootReport{}, fmt.Errorf("connect after a pause without memory: %w", err)
		}
		fw := &firstWrite{}
		if _, err := c.Commands.Exec(ctx, id, client.ExecRequest{Cmd: []string{"echo", "ready"}}, fw, io.Discard); err != nil {
			return ColdBootReport{}, fmt.Errorf("first exec after a cold boot: %w", err)
		}
		if i > 0 { // the first round warms caches
			pauses = append(pauses, paused)
			boots = append(boots, fw.at.Sub(start))
		}
	}
	rep := ColdBootReport{PauseFilesOnly: Summarise(pauses), ConnectToFirstOutput: Summarise(boots), TargetAddedMs: 10}
	rep.AddedP50Ms = round2(rep.ConnectToFirstOutput.P50 - create.P50)
	return rep, nil
}
