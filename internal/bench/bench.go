package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"sync"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/config"

	"connectrpc.com/connect"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
)

// Options tune a benchmark run.
type Options struct {
	// DataDir is a throwaway data directory; the run mounts its own pool
	// there and unmounts it at the end.
	DataDir     string
	Storage     string
	AgentBinary string
	// Template is an existing template to use; empty builds a busybox one.
	Template string
	Creates  int // sandboxes created (and deleted) one after another
	Execs    int // `true` round trips per method
	// PortRequests is the GETs of each kind in the port-route item.
	PortRequests int
	// PoolClaims are creates served from a warm pool.
	PoolClaims int
	// Concurrency lists the numbers of sandboxes busy at once for the
	// concurrency item (default 1, 10, 50); ExecsEach is each one's execs,
	// file writes, file reads and routed GETs, and the samples of its
	// pause and resume (in rounds of all at once; ForkRounds those of its
	// forks).
	Concurrency []int
	ExecsEach   int
	// FileOps are the 4 KiB writes and reads (a tenth as many of 10 MB);
	// ForkRounds the forks of one and of ten.
	FileOps    int
	ForkRounds int
	// StartConcurrent is the create cycles in flight for the start-cost
	// item's saturation figures (default 4 per CPU).
	StartConcurrent int
	// StartProfile, if set, is a file for a Go CPU profile of the bench's
	// process (the daemon) during the start-cost item's one-at-a-time
	// cycles.
	StartProfile string
	// WarrenBinary runs the runc-exec-style baseline (`warren exec-naive`);
	// empty skips it.
	WarrenBinary string
	Log          *slog.Logger
}

// Report is what a run prints.
type Report struct {
	Machine  string `json:"machine"`
	Storage  string `json:"storage"`
	Runtime  string `json:"runtime"`
	Template string `json:"template"`
	// CreateToFirstOutput: POST /sandboxes, then an exec of `echo`, until its
	// first byte of output arrives (template build excluded).
	CreateToFirstOutput Stats `json:"create_to_first_output"`
	// ExecTrueAPI: POST /sandboxes/{id}/exec?wait=true of `true`, over HTTP.
	ExecTrueAPI Stats `json:"exec_true_api"`
	// ExecTrueAgent: the agent's Exec RPC of `true`, as the daemon sees it.
	ExecTrueAgent Stats `json:"exec_true_agent"`
	// ExecTrueRuncExec: the baseline — `runc exec` rebuilt on warren's
	// runtime (the hidden `warren exec-naive`): a new runtime process per
	// command that loads the sandbox's state and enters its namespaces and
	// cgroups.
	ExecTrueRuncExec Stats `json:"exec_true_runc_exec_style"`
	// ExecTrueSetns: the same entry done from inside the daemon (no CLI
	// process start): a lower bound for any per-command entry.
	ExecTrueSetns Stats `json:"exec_true_setns_in_process"`
	// Speedups are baseline p50 / warren p50.
	SpeedupAgentVsRuncExec float64 `json:"speedup_agent_vs_runc_exec_p50"`
	SpeedupAPIVsRuncExec   float64 `json:"speedup_api_vs_runc_exec_p50"`
	SpeedupAgentVsSetns    float64 `json:"speedup_agent_vs_setns_p50"`
	Delete                 Stats   `json:"delete"`
	// Pause and Resume: POST /sandboxes/{id}/pause and /resume (resume
	// includes seeing the agent answer again).
	Pause  Stats `json:"pause"`
	Resume Stats `json:"resume"`
	// ColdBoot: a filesystem-only pause and the cold boot of the next
	// connect, against CreateToFirstOutput.
	ColdBoot ColdBootReport `json:"cold_boot_after_files_only_pause"`
	// PoolClaim: creates served from a warm pool, to first output.
	PoolClaim PoolClaimReport `json:"pool_claim"`
	// PortRoute: HTTP through the daemon's port route against the same
	// server on the host's loopback.
	PortRoute PortRouteReport `json:"port_route"`
	// Files: PUT/GET /sandboxes/{id}/files of 4 KiB and 10 MB, beside the
	// host's own disk; Fork: POST /fork of the live state, ×1 and ×10.
	Files FilesReport `json:"files"`
	Fork  ForkReport  `json:"fork"`
	// VolumeIO: a shared volume's write and read throughput against the
	// sandbox's own root, from inside one sandbox.
	VolumeIO VolumeIOReport `json:"volume_io"`
	// Concurrency: create, exec, file write and read, pause and resume,
	// port route, turn, fork ×1 and delete with 1, 10 and 50 sandboxes at
	// it at once.
	Concurrency []ConcurrencyLevel `json:"concurrency"`
	// StartCost: the CPU a create costs and creates per second at
	// saturation.
	StartCost StartCost `json:"start_cost"`
	Targets   Targets   `json:"targets"`
}

// Targets restates the goals the numbers are held against.
type Targets struct {
	CreateToFirstOutputP50Ms    float64 `json:"create_to_first_output_p50_ms"`
	ExecTrueP50Ms               float64 `json:"exec_true_p50_ms"`
	SpeedupVsNaive              float64 `json:"speedup_vs_naive"`
	PoolClaimToFirstOutputP50Ms float64 `json:"pool_claim_to_first_output_p50_ms"`
	PortRouteAddedP50Ms         float64 `json:"port_route_added_p50_ms"`
}

// naiveExecer is implemented by runtimes that can enter a sandbox with a new
// process per command (the baseline the agent is measured against).
type naiveExecer interface {
	ExecNaive(ctx context.Context, id string, argv []string) (int, error)
}

// Run measures and returns the report.
func Run(ctx context.Context, opts Options) (_ Report, retErr error) {
	opts.defaults()
	// The port-route item also times the TLS listener (warren's own CA).
	tlsAddr, err := freeLoopback()
	if err != nil {
		return Report{}, err
	}
	meter := startMeter(opts.Log)
	defer func() { retErr = errors.Join(retErr, meter.stop()) }()
	h, err := startHarness(ctx, opts, func(cfg *config.Config) {
		cfg.ImageSize = 4 << 30
		// The pool's sandboxes, and its claims kept to the end, count; so
		// do the concurrency item's forks, one per sandbox at once.
		cfg.MaxSandboxes = opts.Creates + opts.PoolClaims + 8 + max(2*slices.Max(opts.Concurrency), 10)
		cfg.Pools = []string{poolTemplate + "=1"}
		cfg.TLS = config.TLSConfig{Listen: tlsAddr, CA: config.TLSCAAuto}
	})
	if err != nil {
		return Report{}, err
	}
	defer func() { retErr = errors.Join(retErr, h.close()) }()
	d, c, tmpl, cfg := h.d, h.c, h.tmpl, h.cfg

	rep := Report{
		Machine: machine(), Storage: d.Storage.Name(), Runtime: d.Runtime.Name(), Template: tmpl,
		Targets: Targets{CreateToFirstOutputP50Ms: 40, ExecTrueP50Ms: 1.5, SpeedupVsNaive: 10, PoolClaimToFirstOutputP50Ms: 3, PortRouteAddedP50Ms: 1},
	}
	keepSB, err := measureCreateDelete(ctx, c, tmpl, opts.Creates, &rep)
	if err != nil {
		return rep, err
	}
	keep := keepSB.SandboxID
	if rep.StartCost, err = measureStartCost(ctx, c, client.NewSandbox{TemplateID: tmpl}, meter, opts); err != nil {
		return rep, fmt.Errorf("start cost: %w", err)
	}
	if err := measureExecs(ctx, h, keep, opts, &rep); err != nil {
		return rep, err
	}
	if rep.Pause, rep.Resume, err = measurePauseResume(ctx, c, keep, 30); err != nil {
		return rep, err
	}
	if rep.ColdBoot, err = measureColdBoot(ctx, c, keep, min(opts.Creates, 30), rep.CreateToFirstOutput); err != nil {
		return rep, err
	}
	if rep.Files, err = measureFiles(ctx, c, keep, cfg.DataDir, opts.FileOps); err != nil {
		return rep, fmt.Errorf("files: %w", err)
	}
	if rep.VolumeIO, err = measureVolumeIO(ctx, c, tmpl, max(2, opts.FileOps/5)); err != nil {
		return rep, fmt.Errorf("volume io: %w", err)
	}
	if rep.Fork, err = measureForks(ctx, c, keep, opts.ForkRounds); err != nil {
		return rep, fmt.Errorf("fork: %w", err)
	}
	if rep.PoolClaim, err = measurePoolClaims(ctx, h, opts.PoolClaims); err != nil {
		return rep, fmt.Errorf("pool claims: %w", err)
	}
	if rep.PortRoute, err = measurePortRoute(ctx, h, keepSB, opts.PortRequests, opts.WarrenBinary); err != nil {
		return rep, fmt.Errorf("port route: %w", err)
	}
	if err := c.Sandboxes.Delete(ctx, keep); err != nil {
		return rep, fmt.Errorf("delete: %w", err)
	}
	if rep.Concurrency, err = measureConcurrency(ctx, h, opts); err != nil {
		return rep, fmt.Errorf("concurrency: %w", err)
	}
	return rep, nil
}

// defaults fills in the core suite's sizes left at zero.
func (opts *Options) defaults() {
	defaultSize(&opts.Creates, 30)
	defaultSize(&opts.Execs, 300)
	defaultSize(&opts.PortRequests, 300)
	defaultSize(&opts.PoolClaims, 20)
	if len(opts.Concurrency) == 0 {
		opts.Concurrency = []int{1, 10, 50}
	}
	defaultSize(&opts.ExecsEach, 20)
	defaultSize(&opts.FileOps, 50)
	defaultSize(&opts.ForkRounds, 5)
	defaultSize(&opts.StartConcurrent, 4*numCPU())
}

// defaultSize sets *n to def when it is not positive.
func defaultSize(n *int, def int) {
	if *n <= 0 {
		*n = def
	}
}

// measureCreateDelete creates sandboxes one after another, each until its
// first output, and deletes all but the last, which it returns for the
// items that follow. The first round warms caches and is not counted.
func measureCreateDelete(ctx context.Context, c *client.Client, tmpl string, creates int, rep *Report) (client.Sandbox, error) {
	var created, deleted []time.Duration
	for i := 0; ; i++ {
		start := time.Now()
		sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: tmpl})
		if err != nil {
			return client.Sandbox{}, fmt.Errorf("create: %w", err)
		}
		fw := &firstWrite{}
		if _, err := c.Commands.Exec(ctx, sb.SandboxID, client.ExecRequest{Cmd: []string{"echo", "ready"}}, fw, io.Discard); err != nil {
			return client.Sandbox{}, fmt.Errorf("first exec: %w", err)
		}
		if i > 0 { // the first run warms caches; it is not counted
			created = append(created, fw.at.Sub(start))
		}
		if i == creates {
			rep.CreateToFirstOutput = Summarise(created)
			rep.Delete = Summarise(deleted)
			return sb, nil
		}
		start = time.Now()
		if err := c.Sandboxes.Delete(ctx, sb.SandboxID); err != nil {
			return client.Sandbox{}, fmt.Errorf("delete: %w", err)
		}
		if i > 0 {
			deleted = append(deleted, time.Since(start))
		}
	}
}

// measureExecs times `true` round trips in sandbox id: through the API,
// through the agent directly, and the baselines that enter the sandbox
// with a new process per command (in the daemon's process and as a
// runc-exec-style CLI).
func measureExecs(ctx context.Context, h *harness, id string, opts Options, rep *Report) error {
	d, c := h.d, h.c
	api, err := timeN(opts.Execs, func() error {
		res, err := c.Commands.ExecWait(ctx, id, client.ExecRequest{Cmd: []string{"true"}})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("true exited %d: %s", res.ExitCode, res.Error)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("exec via API: %w", err)
	}
	rep.ExecTrueAPI = Summarise(api)

	agent, err := d.Sessions.Agent(ctx, "admin", id)
	if err != nil {
		return err
	}
	direct, err := timeN(opts.Execs, func() error {
		stream, err := agent.Process().Exec(ctx, connect.NewRequest(&agentv1.ExecRequest{Argv: []string{"true"}}))
		if err != nil {
			return err
		}
		defer stream.Close()
		for stream.Receive() {
		}
		return stream.Err()
	})
	if err != nil {
		return fmt.Errorf("exec via agent: %w", err)
	}
	rep.ExecTrueAgent = Summarise(direct)

	n := max(opts.Execs/5, 20)
	if ne, ok := d.Runtime.(naiveExecer); ok {
		setns, err := timeN(n, func() error {
			code, err := ne.ExecNaive(ctx, id, []string{"/bin/true"})
			if err == nil && code != 0 {
				err = fmt.Errorf("true exited %d", code)
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("in-process setns exec: %w", err)
		}
		rep.ExecTrueSetns = Summarise(setns)
		rep.SpeedupAgentVsSetns = ratio(rep.ExecTrueSetns, rep.ExecTrueAgent)
	}
	if opts.WarrenBinary != "" {
		runcExec, err := timeN(n, func() error {
			out, err := exec.CommandContext(ctx, opts.WarrenBinary, "exec-naive", "--state-dir", h.cfg.RuntimeStateDir(), id, "--", "/bin/true").CombinedOutput()
			if err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("runc-exec-style exec: %w", err)
		}
		rep.ExecTrueRuncExec = Summarise(runcExec)
		rep.SpeedupAgentVsRuncExec = ratio(rep.ExecTrueRuncExec, rep.ExecTrueAgent)
		rep.SpeedupAPIVsRuncExec = ratio(rep.ExecTrueRuncExec, rep.ExecTrueAPI)
	}
	return nil
}

// measurePauseResume pauses and resumes sandbox id rounds times.
func measurePauseResume(ctx context.Context, c *client.Client, id string, rounds int) (pause, resume Stats, _ error) {
	var pauses, resumes []time.Duration
	for range rounds {
		start := time.Now()
		if err := c.Lifecycle.Pause(ctx, id); err != nil {
			return pause, resume, fmt.Errorf("pause: %w", err)
		}
		pauses = append(pauses, time.Since(start))
		start = time.Now()
		if _, err := c.Lifecycle.Resume(ctx, id); err != nil {
			return pause, resume, fmt.Errorf("resume: %w", err)
		}
		resumes = append(resumes, time.Since(start))
	}
	return Summarise(pauses), Summarise(resumes), nil
}

func timeN(n int, fn func() error) ([]time.Duration, error) {
	// One untimed warm-up call.
	if err := fn(); err != nil {
		return nil, err
	}
	out := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		if err := fn(); err != nil {
			return nil, err
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}

// firstWrite records when the first byte arrives.
type firstWrite struct {
	mu sync.Mutex
	at time.Time
}

func (f *firstWrite) Write(p []byte) (int, error) {
	f.mu.Lock()
	if f.at.IsZero() && len(p) > 0 {
		f.at = time.Now()
	}
	f.mu.Unlock()
	return len(p), nil
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}

func ratio(base, ours Stats) float64 {
	if ours.P50 <= 0 {
		return 0
	}
	return round2(base.P50 / ours.P50)
}

func round2(f float64) float64 { return float64(int(f*100+0.5)) / 100 }

func machine() string {
	h, _ := os.Hostname()
	b, _ := os.ReadFile("/proc/loadavg")
	return fmt.Sprintf("%s, %d CPUs, loadavg %s", h, numCPU(), string(trimNL(b)))
}
