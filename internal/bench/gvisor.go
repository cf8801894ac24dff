package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/config"
)

// ErrNoGVisor: the machine cannot run the gvisor suite (no runsc).
var ErrNoGVisor = errors.New("no gvisor runtime")

// GVisorOptions configure the gvisor suite.
type GVisorOptions struct {
	Options
	// Rounds is how many times each memory item (checkpoint, hibernate,
	// wake, fork ×5) is measured.
	Rounds int
	// HeldMB is the memory the "held" sandbox's process holds.
	HeldMB int
	// Progress, if set, hears what the suite is doing.
	Progress io.Writer
}

// GVisorReport is the gvisor suite's answer: each gvisor figure beside the
// native runtime's measured in the same run.
type GVisorReport struct {
	Machine  string `json:"machine"`
	Template string `json:"template"`
	Runsc    string `json:"runsc_version"`
	// CreateToFirstOutput and ExecTrueAPI as in the core suite, per runtime.
	CreateToFirstOutput RuntimePair `json:"create_to_first_output"`
	ExecTrueAPI         RuntimePair `json:"exec_true_api"`
	// Idle is a sandbox doing nothing; Held one whose process holds HeldMB
	// of memory (written, so every page is saved).
	Idle MemoryReport `json:"idle"`
	Held MemoryReport `json:"held"`
	// ForkWithMemory5 is POST /fork {count: 5} of a snapshot taken with
	// memory, until all five run on (restored from one image); the native
	// baseline forks five from a files-only snapshot (fresh processes).
	ForkWithMemory5 Stats   `json:"fork_with_memory_x5"`
	NativeFork5     Stats   `json:"native_fork_files_only_x5"`
	RatioForkP50    float64 `json:"fork_x5_gvisor_memory_vs_native_p50"`
	// StartCost: the CPU a create costs and creates per second at
	// saturation, per runtime.
	StartCost StartCostPair `json:"start_cost"`
	// PoolClaim: creates served from a gVisor warm pool
	// (--pool TEMPLATE@gvisor=1), to first output, against the target for a
	// gVisor create.
	PoolClaim PoolClaimReport `json:"pool_claim_gvisor"`
}

// StartCostPair is the start-cost item on each runtime.
type StartCostPair struct {
	Native StartCost `json:"native"`
	GVisor StartCost `json:"gvisor"`
}

// RuntimePair is one operation measured on each runtime.
type RuntimePair struct {
	Native Stats   `json:"native"`
	GVisor Stats   `json:"gvisor"`
	Ratio  float64 `json:"gvisor_vs_native_p50"`
}

// MemoryReport is the memory items for one sandbox.
type MemoryReport struct {
	HeldMB int `json:"held_mb"`
	// Checkpoint: POST /snapshots {memory: true} (files snapshot and
	// memory image, the sandbox paused meanwhile); FilesOnly the same
	// snapshot without memory, its baseline.
	Checkpoint Stats `json:"snapshot_with_memory"`
	FilesOnly  Stats `json:"snapshot_files_only"`
	ImageBytes int64 `json:"image_bytes"`
	// Hibernate: POST /hibernate; Wake: POST /resume of the hibernated
	// sandbox until its agent answers. NativePause/NativeResume: the
	// native runtime's freeze and thaw of the same sandbox, the
	// nearest baseline (memory kept in RAM).
	Hibernate    Stats `json:"hibernate"`
	Wake         Stats `json:"wake"`
	NativePause  Stats `json:"native_pause"`
	NativeResume Stats `json:"native_resume"`
}

// RunGVisor measures the gvisor runtime against the native one.
func RunGVisor(ctx context.Context, opts GVisorOptions) (_ GVisorReport, retErr error) {
	opts.defaults()
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	meter := startMeter(opts.Log)
	defer func() { retErr = errors.Join(retErr, meter.stop()) }()
	h, err := startHarness(ctx, opts.Options, func(cfg *config.Config) {
		cfg.ImageSize = 8 << 30
		cfg.MaxSandboxes = 40 + opts.Creates
		cfg.Pools = []string{poolTemplate + "@gvisor=1"}
	})
	if err != nil {
		return GVisorReport{}, err
	}
	defer func() { retErr = errors.Join(retErr, h.close()) }()
	c := h.c
	rep := GVisorReport{Machine: machine(), Template: h.tmpl}
	health, err := c.Meta.Health(ctx)
	if err != nil {
		return rep, err
	}
	gv, ok := findRuntime(health, "gvisor")
	if !ok || !gv.Available {
		return rep, fmt.Errorf("the gvisor runtime is not available here (%s): build runsc with `make runsc` or pass --runsc: %w", gv.Error, ErrNoGVisor)
	}
	rep.Runsc = gv.Version

	if err := measureRuntimes(ctx, c, h.tmpl, opts, progress, &rep); err != nil {
		return rep, err
	}

	if rep.StartCost, err = measureStartCosts(ctx, c, h.tmpl, meter, opts, progress); err != nil {
		return rep, err
	}
	fmt.Fprintln(progress, "gvisor suite: idle sandbox checkpoints")
	if rep.Idle, err = measureMemory(ctx, c, h.tmpl, 0, opts.Rounds); err != nil {
		return rep, fmt.Errorf("idle: %w", err)
	}
	fmt.Fprintf(progress, "gvisor suite: checkpoints of a sandbox holding %d MB\n", opts.HeldMB)
	if rep.Held, err = measureMemory(ctx, c, h.tmpl, opts.HeldMB, opts.Rounds); err != nil {
		return rep, fmt.Errorf("held: %w", err)
	}
	fmt.Fprintln(progress, "gvisor suite: fork ×5 with memory, and native ×5 from files")
	if rep.ForkWithMemory5, err = measureFork5(ctx, c, h.tmpl, "gvisor", opts.Rounds); err != nil {
		return rep, fmt.Errorf("fork with memory: %w", err)
	}
	if rep.NativeFork5, err = measureFork5(ctx, c, h.tmpl, "native", opts.Rounds); err != nil {
		return rep, fmt.Errorf("native fork: %w", err)
	}
	rep.RatioForkP50 = ratio(rep.ForkWithMemory5, rep.NativeFork5)
	// Last: its claims stay until the end, and the pool only fills once
	// its template is built, here.
	fmt.Fprintln(progress, "gvisor suite: claims from a gVisor warm pool")
	if rep.PoolClaim, err = measurePoolClaimsOn(ctx, h, opts.Creates, "gvisor", 150); err != nil {
		return rep, fmt.Errorf("gvisor pool claims: %w", err)
	}
	return rep, nil
}

// defaults fills in the gvisor suite's sizes left at zero.
func (opts *GVisorOptions) defaults() {
	defaultSize(&opts.Creates, 10)
	defaultSize(&opts.Execs, 100)
	defaultSize(&opts.Rounds, 5)
	defaultSize(&opts.HeldMB, 256)
	defaultSize(&opts.StartConcurrent, 4*numCPU())
}

// measureStartCosts measures the start-cost item on each runtime.
func measureStartCosts(ctx context.Context, c *client.Client, tmpl string, m *cpuMeter, opts GVisorOptions, progress io.Writer) (StartCostPair, error) {
	var out StartCostPair
	for _, rt := range []struct {
		name string
		to   *StartCost
	}{{"native", &out.Native}, {"gvisor", &out.GVisor}} {
		fmt.Fprintf(progress, "gvisor suite: %s start cost, %d at once\n", rt.name, opts.StartConcurrent)
		o := opts.Options
		if o.StartProfile != "" {
			o.StartProfile += "." + rt.name // one profile per runtime
		}
		sc, err := measureStartCost(ctx, c, client.NewSandbox{TemplateID: tmpl, Runtime: rt.name}, m, o)
		if err != nil {
			return out, fmt.Errorf("%s start cost: %w", rt.name, err)
		}
		*rt.to = sc
	}
	return out, nil
}

// measureRuntimes times creates to first output and exec round trips on
// the native runtime and on gvisor, and their ratios.
func measureRuntimes(ctx context.Context, c *client.Client, tmpl string, opts GVisorOptions, progress io.Writer, rep *GVisorReport) error {
	for _, rt := range []string{"native", "gvisor"} {
		fmt.Fprintf(progress, "gvisor suite: %s create → first output, exec\n", rt)
		created, keep, err := createRuns(ctx, c, tmpl, rt, opts.Creates)
		if err != nil {
			return fmt.Errorf("%s: %w", rt, err)
		}
		execs, err := timeN(opts.Execs, func() error {
			res, err := c.Commands.ExecWait(ctx, keep, client.ExecRequest{Cmd: []string{"true"}})
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("true exited %d", res.ExitCode)
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("%s exec: %w", rt, err)
		}
		if err := c.Sandboxes.Delete(ctx, keep); err != nil {
			return err
		}
		if rt == "native" {
			rep.CreateToFirstOutput.Native, rep.ExecTrueAPI.Native = Summarise(created), Summarise(execs)
		} else {
			rep.CreateToFirstOutput.GVisor, rep.ExecTrueAPI.GVisor = Summarise(created), Summarise(execs)
		}
	}
	rep.CreateToFirstOutput.Ratio = ratio(rep.CreateToFirstOutput.GVisor, rep.CreateToFirstOutput.Native)
	rep.ExecTrueAPI.Ratio = ratio(rep.ExecTrueAPI.GVisor, rep.ExecTrueAPI.Native)
	return nil
}

func findRuntime(h client.Health, name string) (client.RuntimeInfo, bool) {
	if h.Capabilities != nil {
		for _, r := range h.Capabilities.Runtimes {
			if r.Name == name {
				return r, true
			}
		}
	}
	return client.RuntimeInfo{}, false
}

// createRuns times n creates on rt to their first byte of output (after
// one untimed, which warms caches), then creates one more to keep and
// returns its id.
func createRuns(ctx context.Context, c *client.Client, tmpl, rt string, n int) ([]time.Duration, string, error) {
	in := client.NewSandbox{TemplateID: tmpl, Runtime: rt}
	var out []time.Duration
	for i := 0; i <= n; i++ {
		d, err := createToFirstOutput(ctx, c, in, true)
		if err != nil {
			return nil, "", err
		}
		if i > 0 {
			out = append(out, d)
		}
	}
	sb, err := c.Sandboxes.Create(ctx, in)
	if err != nil {
		return nil, "", err
	}
	return out, sb.SandboxID, nil
}

// holdMemory starts a process in id that holds mb MB of memory it wrote
// (busybox awk doubling a string), and waits until it holds it all.
func holdMemory(ctx context.Context, c *client.Client, id string, mb int) error {
	if mb == 0 {
		return nil
	}
	script := fmt.Sprintf(`awk 'BEGIN { s = "x"; while (length(s) < %d) s = s s; print length(s) > "/tmp/held"; close("/tmp/held"); system("sleep 100000") }'`, mb<<20)
	if _, err := c.Processes.Start(ctx, id, client.StartProcessRequest{Tag: "held", ExecRequest: client.ExecRequest{Cmd: []string{"/bin/sh", "-c", script}}}); err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		res, err := c.Commands.ExecWait(ctx, id, client.ExecRequest{Cmd: []string{"cat", "/tmp/held"}})
		if err == nil && res.ExitCode == 0 && len(res.Stdout) > 0 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the process did not come to hold %d MB", mb)
}

// measureMemory measures one gvisor sandbox holding mb MB (0 = idle) and
// a native one holding the same.
func measureMemory(ctx context.Context, c *client.Client, tmpl string, mb, rounds int) (MemoryReport, error) {
	rep := MemoryReport{HeldMB: mb}
	limits := &client.Limits{MemoryMB: int64(mb*2 + 512)}
	var gid, nid string
	defer func() {
		for _, id := range []string{gid, nid} {
			if id != "" {
				_ = c.Sandboxes.Delete(context.WithoutCancel(ctx), id)
			}
		}
	}()
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: tmpl, Runtime: "gvisor", Limits: limits})
	if err != nil {
		return rep, err
	}
	gid = sb.SandboxID
	if sb, err = c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: tmpl, Runtime: "native", Limits: limits}); err != nil {
		return rep, err
	}
	nid = sb.SandboxID
	for _, id := range []string{gid, nid} {
		if err := holdMemory(ctx, c, id, mb); err != nil {
			return rep, err
		}
	}
	var ckpt, files, hib, wake, pause, resume []time.Duration
	for i := 0; i < rounds; i++ {
		start := time.Now()
		snap, err := c.Snapshots.Create(ctx, gid, client.NewSnapshot{Memory: true})
		if err != nil {
			return rep, fmt.Errorf("snapshot with memory: %w", err)
		}
		ckpt = append(ckpt, time.Since(start))
		rep.ImageBytes = snap.MemoryBytes
		start = time.Now()
		if _, err := c.Snapshots.Create(ctx, gid, client.NewSnapshot{}); err != nil {
			return rep, fmt.Errorf("snapshot: %w", err)
		}
		files = append(files, time.Since(start))

		start = time.Now()
		if _, err := c.Lifecycle.Hibernate(ctx, gid); err != nil {
			return rep, fmt.Errorf("hibernate: %w", err)
		}
		hib = append(hib, time.Since(start))
		start = time.Now()
		if _, err := c.Lifecycle.Resume(ctx, gid); err != nil {
			return rep, fmt.Errorf("wake: %w", err)
		}
		wake = append(wake, time.Since(start))

		start = time.Now()
		if err := c.Lifecycle.Pause(ctx, nid); err != nil {
			return rep, fmt.Errorf("native pause: %w", err)
		}
		pause = append(pause, time.Since(start))
		start = time.Now()
		if _, err := c.Lifecycle.Resume(ctx, nid); err != nil {
			return rep, fmt.Errorf("native resume: %w", err)
		}
		resume = append(resume, time.Since(start))
	}
	// The held process must have lived through all of it.
	if mb > 0 {
		if err := heldAlive(ctx, c, gid, "the hibernations"); err != nil {
			return rep, err
		}
	}
	rep.Checkpoint, rep.FilesOnly = Summarise(ckpt), Summarise(files)
	rep.Hibernate, rep.Wake = Summarise(hib), Summarise(wake)
	rep.NativePause, rep.NativeResume = Summarise(pause), Summarise(resume)
	return rep, nil
}

// heldAlive fails unless the process holdMemory started in id runs
// after what the sandbox went through.
func heldAlive(ctx context.Context, c *client.Client, id, after string) error {
	procs, err := c.Processes.List(ctx, id)
	if err != nil {
		return err
	}
	for _, p := range procs {
		if p.Tag == "held" && p.State == "running" {
			return nil
		}
	}
	return fmt.Errorf("the process holding memory did not survive %s: %+v", after, procs)
}

// measureFork5 times forks of five from one snapshot of a sandbox on rt:
// with memory on gvisor, files only on native.
func measureFork5(ctx context.Context, c *client.Client, tmpl, rt string, rounds int) (Stats, error) {
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: tmpl, Runtime: rt})
	if err != nil {
		return Stats{}, err
	}
	defer func() { _ = c.Sandboxes.Delete(context.WithoutCancel(ctx), sb.SandboxID) }()
	snap, err := c.Snapshots.Create(ctx, sb.SandboxID, client.NewSnapshot{Memory: rt == "gvisor"})
	if err != nil {
		return Stats{}, err
	}
	var samples []time.Duration
	for i := 0; i < rounds; i++ {
		start := time.Now()
		res, err := c.Snapshots.Fork(ctx, sb.SandboxID, client.ForkRequest{SnapshotID: snap.SnapshotID, Count: 5})
		if err != nil {
			return Stats{}, err
		}
		took := time.Since(start)
		for _, f := range res {
			if f.Sandbox == nil {
				return Stats{}, fmt.Errorf("a fork failed: %+v", f.Error)
			}
		}
		samples = append(samples, took)
		for _, f := range res {
			if err := c.Sandboxes.Delete(ctx, f.Sandbox.SandboxID); err != nil {
				return Stats{}, err
			}
		}
	}
	return Summarise(samples), nil
}
