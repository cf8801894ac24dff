package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/config"
)

// UserNSOptions tune the userns suite.
type UserNSOptions struct {
	Options
	Rounds int // creates and forks timed in each mode
}

// UserNSReport is what a user namespace costs: create to first output and
// a fork of a live sandbox, on a daemon without --userns (the baseline)
// and one with it, in alternation in the same run.
type UserNSReport struct {
	Machine        string  `json:"machine"`
	CreatePlain    Stats   `json:"create_to_first_output_plain"`
	CreateUserNS   Stats   `json:"create_to_first_output_userns"`
	ForkPlain      Stats   `json:"fork_plain"`
	ForkUserNS     Stats   `json:"fork_userns"`
	CreateAddedP50 float64 `json:"create_added_p50_ms"`
	ForkAddedP50   float64 `json:"fork_added_p50_ms"`
	// Ratios are userns p50 / plain p50.
	CreateRatio float64 `json:"create_ratio_p50"`
	ForkRatio   float64 `json:"fork_ratio_p50"`
	TargetAdded float64 `json:"target_added_ms"`
}

// RunUserNS measures the userns suite on two throwaway daemons under
// o.DataDir.
func RunUserNS(ctx context.Context, o UserNSOptions) (_ UserNSReport, retErr error) {
	if o.Rounds <= 0 {
		o.Rounds = 30
	}
	rep := UserNSReport{Machine: machine(), TargetAdded: 3}
	open := func(name string, userns bool) (*harness, error) {
		opts := o.Options
		opts.DataDir = filepath.Join(o.DataDir, name)
		return startHarness(ctx, opts, func(cfg *config.Config) {
			cfg.ImageSize = 2 << 30
			cfg.UserNS = userns
			// A host that cannot must fail the suite, not time plain twice.
			cfg.UserNSExplicit = userns
		})
	}
	plain, err := open("plain", false)
	if err != nil {
		return rep, err
	}
	defer func() { retErr = errors.Join(retErr, plain.close()) }()
	ns, err := open("userns", true)
	if err != nil {
		return rep, err
	}
	defer func() { retErr = errors.Join(retErr, ns.close()) }()

	var create, fork [2][]time.Duration
	for i := 0; i <= o.Rounds; i++ {
		for k, h := range []*harness{plain, ns} {
			c, f, err := createAndFork(ctx, h)
			if err != nil {
				return rep, fmt.Errorf("userns=%v: %w", k == 1, err)
			}
			if i > 0 { // the first round warms caches
				create[k] = append(create[k], c)
				fork[k] = append(fork[k], f)
			}
		}
	}
	rep.CreatePlain, rep.CreateUserNS = Summarise(create[0]), Summarise(create[1])
	rep.ForkPlain, rep.ForkUserNS = Summarise(fork[0]), Summarise(fork[1])
	rep.CreateAddedP50 = round2(rep.CreateUserNS.P50 - rep.CreatePlain.P50)
	rep.ForkAddedP50 = round2(rep.ForkUserNS.P50 - rep.ForkPlain.P50)
	rep.CreateRatio = round2(rep.CreateUserNS.P50 / rep.CreatePlain.P50)
	rep.ForkRatio = round2(rep.ForkUserNS.P50 / rep.ForkPlain.P50)
	return rep, nil
}

// createAndFork times a create until its first output and a fork of the
// sandbox's live state, then deletes both.
func createAndFork(ctx context.Context, h *harness) (create, fork time.Duration, _ error) {
	start := time.Now()
	sb, err := h.c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: h.tmpl})
	if err != nil {
		return 0, 0, fmt.Errorf("create: %w", err)
	}
	defer h.c.Sandboxes.Delete(context.WithoutCancel(ctx), sb.SandboxID)
	fw := &firstWrite{}
	if _, err := h.c.Commands.Exec(ctx, sb.SandboxID, client.ExecRequest{Cmd: []string{"echo", "ready"}}, fw, io.Discard); err != nil {
		return 0, 0, fmt.Errorf("first exec: %w", err)
	}
	create = fw.at.Sub(start)
	fork, forks, err := forkTimed(ctx, h.c, sb.SandboxID, 1)
	for _, f := range forks {
		_ = h.c.Sandboxes.Delete(context.WithoutCancel(ctx), f)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("fork: %w", err)
	}
	return create, fork, nil
}
