package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/daemon"
	"github.com/warrenhq/warren/internal/template"
)

// poolTemplate is the template of the core suite's warm pool: one of its
// own, so that the suite's other creates are not claims.
const poolTemplate = "bench-pool"

// PoolClaimReport is a create served from a warm pool: the create (the
// claim: a started sandbox taken and recorded), then an exec of `echo`
// until its first byte of output.
type PoolClaimReport struct {
	ClaimToFirstOutput Stats   `json:"claim_to_first_output"`
	Create             Stats   `json:"create"`
	TargetP50Ms        float64 `json:"target_p50_ms"`
	Met                bool    `json:"met"`
}

// measurePoolClaims claims n+1 sandboxes (the first is not counted), each
// once the pool has refilled, and keeps them until the end so that no
// teardown runs beside a claim.
func measurePoolClaims(ctx context.Context, h *harness, n int) (PoolClaimReport, error) {
	return measurePoolClaimsOn(ctx, h, n, "", 3)
}

// measurePoolClaimsOn is measurePoolClaims of the pool of runtime rt (""
// for the one that follows the template), against a target.
func measurePoolClaimsOn(ctx context.Context, h *harness, n int, rt string, targetMs float64) (PoolClaimReport, error) {
	rep := PoolClaimReport{TargetP50Ms: targetMs}
	if _, err := h.d.Templates.Build(ctx, poolTemplate, template.Source{Busybox: true}, daemon.BuildOptions{Replace: true}); err != nil {
		return rep, fmt.Errorf("build the pool's template: %w", err)
	}
	var total, create []time.Duration
	for i := range n + 1 {
		hits, err := untilPoolReady(ctx, h.c, rt)
		if err != nil {
			return rep, err
		}
		start := time.Now()
		sb, err := h.c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: poolTemplate, Runtime: rt})
		if err != nil {
			return rep, fmt.Errorf("create from the pool: %w", err)
		}
		created := time.Since(start)
		fw := &firstWrite{}
		if _, err := h.c.Commands.Exec(ctx, sb.SandboxID, client.ExecRequest{Cmd: []string{"echo", "ready"}}, fw, io.Discard); err != nil {
			return rep, fmt.Errorf("first exec: %w", err)
		}
		if now, err := poolOf(ctx, h.c, rt); err != nil || now.Hits != hits+1 {
			return rep, fmt.Errorf("create %d was not served from the pool (hits %d, then %+v): %v", i, hits, now, err)
		}
		if i > 0 {
			total = append(total, fw.at.Sub(start))
			create = append(create, created)
		}
	}
	// The refill after the last claim would run beside the next item.
	if _, err := untilPoolReady(ctx, h.c, rt); err != nil {
		return rep, err
	}
	rep.ClaimToFirstOutput, rep.Create = Summarise(total), Summarise(create)
	rep.Met = rep.ClaimToFirstOutput.P50 <= rep.TargetP50Ms
	return rep, nil
}

// untilPoolReady waits until the pool has a ready sandbox and returns its
// hits so far.
func untilPoolReady(ctx context.Context, c *client.Client, rt string) (int64, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		p, err := poolOf(ctx, c, rt)
		if err != nil {
			return 0, err
		}
		if p.Ready > 0 {
			return p.Hits, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the warm pool of %s did not refill: %s", poolTemplate, p.LastFailure)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// poolOf is the pool of poolTemplate on runtime rt ("": any).
func poolOf(ctx context.Context, c *client.Client, rt string) (client.Pool, error) {
	pools, err := c.Pools.List(ctx)
	if err != nil {
		return client.Pool{}, err
	}
	for _, p := range pools {
		if p.TemplateID == poolTemplate && (rt == "" || p.Runtime == rt) {
			return p, nil
		}
	}
	return client.Pool{}, errors.New("the bench daemon has no warm pool of " + poolTemplate)
}
