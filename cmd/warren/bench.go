package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/internal/bench"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/selfexe"
)

// benchCmd runs a benchmark suite on a throwaway data directory and prints
// the report as JSON.
func benchCmd() *cobra.Command {
	var b benchRun
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure warren's latencies and print JSON, with a readable table on stderr (--suite core: create, exec, delete, pause, resume, warm-pool claim, port route; snapshots: turns, diff, fork, rollback; transfer: a snapshot moved between two daemons, whole and per turn; gvisor: the gvisor runtime and its memory snapshots beside native; placement: decision time on simulated fleets, no daemon; fairshare: create and fork with the default disk quota, the pool's reserve and team limits against none; fleet: a throwaway fleet of two node daemons, a gateway and a control plane — what the gateway adds, and node-loss detection)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return b.run(cmd)
		},
	}
	b.flags(cmd)
	return cmd
}

// benchRun is what the bench command's flags ask for.
type benchRun struct {
	opts       bench.Options
	snap       bench.SnapshotOptions
	transfer   bench.TransferOptions
	suite      string
	densityN   int
	tools      bench.ToolsOptions
	gvisor     bench.GVisorOptions
	quick      bool
	plot       string
	table      bool
	network    bench.NetworkOptions
	egress     bench.EgressOptions
	httpClient bool
	debug      bool
	placement  bench.PlacementOptions
	fleet      bench.FleetOptions
	userns     bench.UserNSOptions
	ui         bench.UIOptions
}

// flags binds b to the command's flags.
func (b *benchRun) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&b.suite, "suite", "core", "which suite to run: core, snapshots, transfer (snapshot export piped into a second daemon's import, beside the disk's rates and btrfs send), density (memory per idle sandbox), tools (agent tool calls, grep vs GNU grep), network, gvisor (the gvisor runtime, memory snapshots, hibernation, fork with memory), placement (decision time on simulated fleets; needs no daemon), egress (the egress proxy: intercepted vs spliced HTTPS, spliced vs direct downloads), fairshare (create and fork with fair shares on and off), templates (template builds: a fully cached rebuild, one changed last step, an unchanged copy's upload), fleet (its own throwaway fleet: control plane, two node daemons, a gateway; not part of all), userns (create and fork with and without --userns), merge (two forks' merges into a --files tree, a summary of 10 forks), ui (the dashboard: first paint with many sandboxes, keystroke echo, JS size) or all")
	f.IntVar(&b.userns.Rounds, "userns-rounds", 30, "userns: creates and forks timed with and without user namespaces")
	f.BoolVar(&b.debug, "debug", false, "log the throwaway daemon's debug lines to stderr (each snapshot's phases, for one)")
	f.BoolVar(&b.table, "table", true, "also print a readable table of every figure and ratio to stderr (stdout stays JSON)")
	f.StringVar(&b.plot, "plot", "", "also draw every figure's distribution (min–max, p50–p90, p99, log scale) into this SVG file")
	f.BoolVar(&b.quick, "quick", false, "tiny sizes for every figure: checks that each scenario runs (a few minutes for --suite all); the numbers mean little")
	f.IntVar(&b.gvisor.Rounds, "memory-rounds", 5, "gvisor: rounds of each memory item (checkpoint, hibernate, wake, fork ×5)")
	f.IntVar(&b.gvisor.HeldMB, "held-mb", 256, "gvisor: memory the held sandbox's process holds, in MB")
	f.IntVar(&b.tools.Calls, "tool-calls", 200, "tools: read and edit round trips")
	f.IntVar(&b.tools.GrepFiles, "grep-files", 100_000, "tools: files in the tree grep searches")
	f.IntSliceVar(&b.placement.Nodes, "placement-nodes", []int{1000, 10000}, "placement: sizes of the simulated fleets decisions are timed on")
	f.IntVar(&b.placement.Decisions, "placement-decisions", 10000, "placement: decisions timed on each fleet")
	f.IntVar(&b.placement.Sample, "placement-sample", 3, "placement: K, the feasible nodes scored per decision")
	f.Uint64Var(&b.placement.Seed, "placement-seed", 1, "placement: seed of the simulated fleets and requests")
	f.IntVar(&b.fleet.Creates, "fleet-creates", 30, "fleet: creates timed through the gateway, and as many directly on a node")
	f.IntVar(&b.fleet.Execs, "fleet-execs", 300, "fleet: execs of true (through the API, and the E2B SDK's way: a process.Process/Start stream on the sandbox plane), and GETs of a sandbox, timed through the gateway and as many directly")
	f.DurationVar(&b.fleet.Lease, "fleet-lease", 3*time.Second, "fleet: the nodes' --lease-duration (node loss is detected after it)")
	f.IntVar(&b.fleet.LostSandboxes, "fleet-lost-sandboxes", 3, "fleet: sandboxes on the node killed for the node-loss item")
	f.StringVar(&b.fleet.CacheDir, "cache-dir", config.Default().CacheDir, "fleet: where envtest's control plane is (<cache-dir>/envtest/k8s-"+bench.EnvtestVersion+", unless KUBEBUILDER_ASSETS says; `make envtest` builds it); the nodes' --cache-dir (env WARREN_CACHE_DIR)")
	f.IntVar(&b.densityN, "sandboxes", 200, "density suite: idle sandboxes to start")
	f.IntVar(&b.opts.Creates, "creates", 30, "core: sandboxes to create and delete")
	f.IntVar(&b.opts.Execs, "execs", 300, "core: exec round trips per method")
	f.IntVar(&b.opts.PoolClaims, "pool-claims", 20, "core: creates served from a warm pool (each waits for the refill)")
	f.IntSliceVar(&b.opts.Concurrency, "concurrency", []int{1, 10, 50}, "core: numbers of sandboxes busy at once for the concurrency item")
	f.IntVar(&b.opts.FileOps, "file-ops", 50, "core: 4 KiB file writes and reads through the API (a tenth as many of 10 MB)")
	f.IntVar(&b.opts.ForkRounds, "fork-rounds", 5, "core: forks of the live state, of one and of ten")
	f.IntVar(&b.opts.ExecsEach, "execs-each", 20, "core: execs, 4 KiB file writes and reads, and routed GETs each sandbox makes in the concurrency item (also the samples of its pause and resume)")
	f.IntVar(&b.opts.StartConcurrent, "start-concurrent", 0, "core, gvisor: create → first output → delete cycles in flight for creates_per_second and the saturated CPU per create (default 4 per CPU)")
	f.StringVar(&b.opts.StartProfile, "start-cpuprofile", "", "core, gvisor: write a Go CPU profile of the bench's process (the daemon) during the start-cost item's one-at-a-time creates to this file (gvisor: FILE.native and FILE.gvisor)")
	f.IntVar(&b.opts.PortRequests, "port-requests", 300, "core: HTTP GETs of each kind through the port route and to the loopback baseline")
	f.IntVar(&b.network.DownloadMB, "download-mb", 100, "network: size of each download in MB")
	f.IntVar(&b.network.Downloads, "downloads", 21, "network: downloads of each kind (through a sandbox, plain namespaces, a plain routed path)")
	f.IntVar(&b.network.PolicyRounds, "policy-rounds", 30, "network: live policy changes timed (PUT /network until a new connection follows it)")
	f.IntVar(&b.snap.Files, "files", 100_000, "snapshots: files in the workspace")
	f.IntVar(&b.snap.WorkspaceMB, "workspace-mb", 1024, "snapshots: total size of the workspace in MB")
	f.IntVar(&b.snap.Turns, "turns", 300, "snapshots: turns (25 files written, then a turn snapshot)")
	f.IntVar(&b.snap.ArchiveAfter, "archive-after", 0, "snapshots: turns kept in the pool before archiving (default: the daemon's)")
	f.IntVar(&b.snap.AnchorEvery, "anchor-every", 0, "snapshots: spacing of the turns kept as archive anchors (default: the daemon's)")
	f.IntVar(&b.snap.Concurrent, "concurrent", 32, "snapshots: forks taking a turn snapshot at once")
	f.IntVar(&b.transfer.Files, "transfer-files", 4096, "transfer: files in the sandbox's workspace")
	f.IntVar(&b.transfer.WorkspaceMB, "transfer-mb", 1024, "transfer: total size of the workspace in MB")
	f.IntVar(&b.transfer.Rounds, "transfer-rounds", 5, "transfer: whole transfers timed (each beside the disk's read rate, btrfs send and the export alone)")
	f.IntVar(&b.transfer.Turns, "transfer-turns", 30, "transfer: one-turn deltas timed")
	f.IntVar(&b.transfer.MemoryMB, "transfer-memory-mb", 256, "transfer: memory held by the gvisor sandbox moved with its memory between the two daemons (0: skip; skipped without gvisor)")
	f.StringVar(&b.opts.Storage, "storage", "btrfs", "storage backend")
	f.StringVar(&b.opts.Template, "template", "", "an existing template in --data-dir (default: build a busybox one)")
	f.StringVar(&b.opts.AgentBinary, "agent", "", "warren-agent binary (default: beside warren)")
	// The core suite's port-route item times its GETs from a process of its
	// own, this binary run with --http-client.
	f.BoolVar(&b.httpClient, "http-client", false, "time the GETs described on stdin and print the durations (used by the core suite)")
	_ = f.MarkHidden("http-client")
	b.uiFlags(f)
}

// run runs the suite the flags name and prints its report.
func (b *benchRun) run(cmd *cobra.Command) error {
	if b.httpClient {
		return bench.RunHTTPClient(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout())
	}
	switch b.suite {
	case "core", "snapshots", "transfer", "density", "tools", "network", "egress", "gvisor", "placement", "fleet", "fairshare", "userns", "merge", "ui", "templates", "all":
	default:
		return fmt.Errorf("--suite %q: want core, snapshots, transfer, density, tools, network, egress, gvisor, placement, fleet, fairshare, userns, merge, ui, templates or all", b.suite)
	}
	if b.quick {
		quickSizes(cmd, &b.opts, &b.snap, &b.transfer, &b.tools, &b.network, &b.gvisor, &b.densityN, &b.userns.Rounds)
		if !cmd.Flags().Changed("placement-decisions") {
			b.placement.Decisions = 200
		}
		quickFleet(cmd, &b.fleet)
		quickUI(cmd, b)
	}
	if b.suite == "placement" {
		// A pure function timed on simulated nodes: no daemon, no data
		// directory, no privileges.
		return b.runPlacement(cmd)
	}
	dir, _ := cmd.Flags().GetString("data-dir")
	tempData := !cmd.Flags().Changed("data-dir") || dir == "" || dir == "/var/lib/warren"
	// Before anything is made or started: this may re-execute the
	// process. A temporary data directory will be made in TMPDIR,
	// which stands for it here.
	stateDir := (&config.Config{DataDir: dir}).RuntimeStateDir()
	if tempData {
		stateDir = os.TempDir()
	}
	if err := selfexe.SealIfCopied(slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)), stateDir); err != nil {
		return err
	}
	if b.suite == "fleet" {
		// Its nodes run on data directories of their own, under a
		// temporary directory of its own.
		return b.runFleet(cmd)
	}
	if tempData {
		tmp, err := os.MkdirTemp("", "warren-bench-")
		if err != nil {
			return err
		}
		defer func() {
			if err := bench.RemoveDataDir(tmp); err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "warren bench:", err)
			}
		}()
		dir = tmp
	}
	if exe, err := selfexe.Path(); err == nil {
		b.opts.WarrenBinary = exe
	}
	level := slog.LevelWarn
	if b.debug {
		level = slog.LevelDebug // e.g. each snapshot's phases
	}
	b.opts.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	out, err := b.runSuites(cmd.Context(), dir, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	if b.plot != "" {
		if err := writePlot(b.plot, b.suite, out); err != nil {
			return err
		}
	}
	if b.table {
		// stderr: stdout stays one JSON document for tools.
		if err := bench.WriteTable(cmd.ErrOrStderr(), "warren bench --suite "+b.suite, reportOf(b.suite, out)); err != nil {
			return err
		}
	}
	return printBench(cmd, b.suite, out)
}

// runPlacement runs the placement suite alone and prints its report.
func (b *benchRun) runPlacement(cmd *cobra.Command) error {
	rep, err := bench.RunPlacement(b.placement)
	if err != nil {
		return err
	}
	out := map[string]any{"placement": rep}
	if b.plot != "" {
		if err := writePlot(b.plot, b.suite, out); err != nil {
			return err
		}
	}
	if b.table {
		if err := bench.WriteTable(cmd.ErrOrStderr(), "warren bench --suite placement", rep); err != nil {
			return err
		}
	}
	return printBench(cmd, b.suite, out)
}

// runFleet runs the fleet suite alone and prints its report.
func (b *benchRun) runFleet(cmd *cobra.Command) error {
	if err := handOffToFleet(); err != nil {
		return err
	}
	o := b.fleet
	exe, err := selfexe.Path()
	if err != nil {
		return fmt.Errorf("the fleet suite runs this binary as its nodes and gateway: %w", err)
	}
	o.Binary = exe
	o.Nodes = 2
	level := slog.LevelWarn
	if b.debug {
		level = slog.LevelDebug
	}
	o.Log = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
	rep, err := bench.RunFleet(cmd.Context(), o)
	if err != nil {
		return err
	}
	out := map[string]any{"fleet": rep}
	if b.plot != "" {
		if err := writePlot(b.plot, b.suite, out); err != nil {
			return err
		}
	}
	if b.table {
		if err := bench.WriteTable(cmd.ErrOrStderr(), "warren bench --suite fleet", rep); err != nil {
			return err
		}
	}
	return printBench(cmd, b.suite, out)
}

// quickFleet shrinks the fleet suite to a smoke run.
func quickFleet(cmd *cobra.Command, o *bench.FleetOptions) {
	set := func(name string, p *int, v int) {
		if !cmd.Flags().Changed(name) {
			*p = v
		}
	}
	set("fleet-creates", &o.Creates, 3)
	set("fleet-execs", &o.Execs, 20)
	set("fleet-lost-sandboxes", &o.LostSandboxes, 1)
}

// runSuites runs the suite the flags name, or all of them in turn, in data
// directory dir, and returns each one's report by name.
// benchSuite is one suite: its name and how it runs in a data directory.
type benchSuite struct {
	name string
	run  func(dataDir string) (any, error)
}

// suites are every suite --suite can name, in the order all runs them.
func (b *benchRun) suites(ctx context.Context, progress io.Writer) []benchSuite {
	opts := b.opts
	return []benchSuite{
		{"core", func(dataDir string) (any, error) {
			o := opts
			o.DataDir = dataDir
			return bench.Run(ctx, o)
		}},
		{"snapshots", func(dataDir string) (any, error) {
			o := b.snap
			o.Options, o.DataDir, o.Progress = opts, dataDir, progress
			return bench.RunSnapshots(ctx, o)
		}},
		{"transfer", func(dataDir string) (any, error) {
			o := b.transfer
			o.Options, o.DataDir, o.Progress = opts, dataDir, progress
			return bench.RunTransfer(ctx, o)
		}},
		{"density", func(dataDir string) (any, error) {
			o := opts
			o.DataDir = dataDir
			return bench.RunDensity(ctx, o, b.densityN)
		}},
		{"tools", func(dataDir string) (any, error) {
			o := b.tools
			o.Options, o.DataDir, o.Progress = opts, dataDir, progress
			return bench.RunTools(ctx, o)
		}},
		{"network", func(dataDir string) (any, error) {
			o := b.network
			o.Options, o.Creates, o.Claims, o.Progress = opts, opts.Creates, opts.PoolClaims, progress
			o.DataDir = dataDir
			return bench.RunNetwork(ctx, o)
		}},
		{"egress", func(dataDir string) (any, error) {
			o := b.egress
			o.Options, o.Progress, o.DataDir = opts, progress, dataDir
			o.DownloadMB = b.network.DownloadMB
			return bench.RunEgress(ctx, o)
		}},
		{"gvisor", func(dataDir string) (any, error) {
			o := b.gvisor
			o.Options, o.DataDir, o.Progress = opts, dataDir, progress
			o.Creates = min(opts.Creates, 10)
			o.Execs = min(opts.Execs, 100)
			return bench.RunGVisor(ctx, o)
		}},
		{"placement", func(string) (any, error) { return bench.RunPlacement(b.placement) }},
		{"fairshare", func(dataDir string) (any, error) {
			o := opts
			o.DataDir = dataDir
			return bench.RunFairShare(ctx, o)
		}},
		{"templates", func(dataDir string) (any, error) {
			o := bench.TemplatesOptions{Options: opts}
			o.DataDir = dataDir
			if b.quick {
				o.Rounds, o.CopyMB = 2, 4
			}
			return bench.RunTemplates(ctx, o)
		}},
		{"userns", func(dataDir string) (any, error) {
			o := b.userns
			o.Options, o.DataDir = opts, dataDir
			return bench.RunUserNS(ctx, o)
		}},
		{"merge", func(dataDir string) (any, error) { return bench.RunMerge(ctx, b.mergeOptions(dataDir, progress)) }},
		{"ui", func(dataDir string) (any, error) {
			o := b.ui
			o.Options, o.DataDir, o.Progress = opts, dataDir, progress
			if o.BrowserDir == "" {
				o.BrowserDir = uiBrowserDir()
			}
			return bench.RunUI(ctx, o)
		}},
	}
}

func (b *benchRun) runSuites(ctx context.Context, dir string, progress io.Writer) (map[string]any, error) {
	out := map[string]any{}
	for _, s := range b.suites(ctx, progress) {
		if b.suite != s.name && b.suite != "all" {
			continue
		}
		// Each suite gets its own daemon; with all, each its own data
		// directory beside the others.
		dataDir := dir
		if b.suite == "all" {
			dataDir = filepath.Join(dir, s.name)
		}
		rep, err := s.run(dataDir)
		switch {
		case err != nil && s.name == "gvisor" && b.suite == "all" && errors.Is(err, bench.ErrNoGVisor):
			// A machine without runsc still measures the rest.
			out[s.name] = map[string]string{"skipped": err.Error()}
		case err != nil:
			return nil, err
		default:
			out[s.name] = rep
		}
	}
	return out, nil
}

// printBench prints one suite's report as it is (the core suite's output
// keeps its shape), or both under their names.
func printBench(cmd *cobra.Command, suite string, out map[string]any) error {
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	return enc.Encode(reportOf(suite, out))
}

// reportOf is what a run reports: one suite's report as it is, or all of
// them under their names.
func reportOf(suite string, out map[string]any) any {
	if suite != "all" {
		return out[suite]
	}
	return out
}

// quickSizes shrinks every suite to a smoke run, leaving alone what the
// command line set explicitly.
func quickSizes(cmd *cobra.Command, opts *bench.Options, snap *bench.SnapshotOptions, transfer *bench.TransferOptions, tools *bench.ToolsOptions,
	network *bench.NetworkOptions, gvisor *bench.GVisorOptions, densityN, userns *int) {
	set := func(name string, p *int, v int) {
		if !cmd.Flags().Changed(name) {
			*p = v
		}
	}
	set("creates", &opts.Creates, 3)
	set("execs", &opts.Execs, 20)
	set("pool-claims", &opts.PoolClaims, 3)
	set("port-requests", &opts.PortRequests, 20)
	if !cmd.Flags().Changed("concurrency") {
		opts.Concurrency = []int{1, 3}
	}
	set("execs-each", &opts.ExecsEach, 5)
	set("file-ops", &opts.FileOps, 5)
	set("fork-rounds", &opts.ForkRounds, 1)
	set("start-concurrent", &opts.StartConcurrent, 2)
	set("userns-rounds", userns, 3)
	set("files", &snap.Files, 500)
	set("workspace-mb", &snap.WorkspaceMB, 8)
	set("turns", &snap.Turns, 6)
	// Archive in a short run too (2 scattered + 2 local turns stay), so that
	// rollback_archived has turns to restore.
	set("archive-after", &snap.ArchiveAfter, 4)
	set("concurrent", &snap.Concurrent, 3)
	set("transfer-files", &transfer.Files, 200)
	set("transfer-mb", &transfer.WorkspaceMB, 32)
	set("transfer-rounds", &transfer.Rounds, 2)
	set("transfer-turns", &transfer.Turns, 3)
	set("transfer-memory-mb", &transfer.MemoryMB, 16)
	set("sandboxes", densityN, 5)
	set("tool-calls", &tools.Calls, 10)
	set("grep-files", &tools.GrepFiles, 500)
	tools.GrepRuns = 2
	set("download-mb", &network.DownloadMB, 8)
	set("downloads", &network.Downloads, 3)
	set("policy-rounds", &network.PolicyRounds, 3)
	set("memory-rounds", &gvisor.Rounds, 1)
	set("held-mb", &gvisor.HeldMB, 16)
}

// writePlot draws the report's figures into an SVG file.
func writePlot(path, suite string, out map[string]any) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	if err := bench.WritePlot(f, "warren bench --suite "+suite, reportOf(suite, out)); err != nil {
		f.Close()
		return fmt.Errorf("--plot: %w", err)
	}
	return f.Close()
}
