package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/client"
)

func sandboxCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "sandbox",
		Aliases: []string{"sandboxes", "sb"},
		Short:   "Create, list, inspect and remove sandboxes",
	}
	cmd.AddCommand(sandboxCreateCmd(a), sandboxListCmd(a), sandboxGetCmd(a), sandboxRemoveCmd(a),
		sandboxPauseCmd(a), sandboxHibernateCmd(a), sandboxResumeCmd(a), sandboxTimeoutCmd(a), sandboxEventsCmd(a), sandboxStopCmd(a), sandboxLimitsCmd(a),
		sandboxNetworkCmd(a))
	return cmd
}

// sandboxCreateFlags are the flags of `warren sandbox create`.
type sandboxCreateFlags struct {
	template  string
	timeout   int64
	memoryMB  int64
	diskMB    int64
	autoPause bool
	// autoPauseFiles: the auto-pause keeps only the files.
	autoPauseFiles bool
	autoRes        bool
	public         bool
	maskHost       string
	toolSnaps      bool
	filesOnly      bool
	cpus           float64
	pids           int64
	meta, env      []string
	volumes        []string
	egress         egressFlags
	rtName         string
	idemKey        string
	devices        []string
}

func sandboxCreateCmd(a *app) *cobra.Command {
	var o sandboxCreateFlags
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Start a sandbox and print its id",
		Example: `  warren sandbox create
  warren sandbox create --template base --timeout 0 --memory-mb 1024 --cpus 2 --meta owner=alice
  warren sandbox create --allow-out pypi.org --allow-out files.pythonhosted.org
  warren sandbox create --internet --deny-out 203.0.113.0/24
  warren sandbox create --runtime gvisor
  warren sandbox create --volume data:/data
  warren sandbox create --device nvidia.com/gpu=0`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := o.request(cmd.Flags().Changed("timeout"))
			if err != nil {
				return err
			}
			sb, err := a.client().Sandboxes.Create(cmd.Context(), in)
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, sb)
			}
			fmt.Fprintln(a.out, sb.SandboxID)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.template, "template", "", "template to start from (default: the server's, \"base\")")
	f.Int64Var(&o.timeout, "timeout", 0, "seconds until the sandbox is killed; 0 = never (default: the server's, 300)")
	f.Int64Var(&o.memoryMB, "memory-mb", 0, "memory limit in MiB (default: the server's)")
	f.Float64Var(&o.cpus, "cpus", 0, "CPU limit, may be fractional (default: the server's)")
	f.Int64Var(&o.pids, "pids", 0, "process limit (default: the server's)")
	f.Int64Var(&o.diskMB, "disk-mb", 0, "disk quota in MiB: what the sandbox may write, snapshots included (default: the server's; btrfs only)")
	f.BoolVar(&o.autoPause, "auto-pause", false, "pause at the run timeout instead of being killed")
	f.BoolVar(&o.autoPauseFiles, "auto-pause-no-memory", false, "with --auto-pause: end the processes and keep only the files (the next connect boots cold; not with --auto-resume)")
	f.BoolVar(&o.autoRes, "auto-resume", false, "resume by itself when a call needs it while paused")
	f.BoolVar(&o.public, "public-ports", false, "ports answer requests without the sandbox's tokens or a team API key (E2B's allowPublicTraffic=true)")
	f.StringVar(&o.maskHost, "mask-request-host", "", "Host header the servers inside see on port URLs, ${PORT} for the port, e.g. 'localhost:${PORT}' (E2B's maskRequestHost; default the caller's)")
	f.BoolVar(&o.toolSnaps, "snapshot-every-tool-call", false, "take a turn snapshot after every tool call (warren tool call)")
	f.StringArrayVar(&o.meta, "meta", nil, "metadata KEY=VALUE (repeatable)")
	f.StringArrayVar(&o.env, "env", nil, "environment variable KEY=VALUE for every command (repeatable)")
	f.StringArrayVar(&o.volumes, "volume", nil, "mount the shared volume NAME read-write at /PATH: NAME:/PATH (repeatable; warren volume create)")
	f.StringVar(&o.rtName, "runtime", "", "runtime: native, or gvisor for gVisor's stronger isolation (default: the server's; GET /health lists the runtimes)")
	f.StringVar(&o.idemKey, "idempotency-key", "", "make at most one sandbox for this key (per team, 24 hours): running the same command again prints the first one's id")
	f.StringArrayVar(&o.devices, "device", nil, "give the sandbox a host device by CDI name, e.g. nvidia.com/gpu=0 (repeatable; warren devices lists them)")
	f.BoolVar(&o.filesOnly, "files-only", false, "from a snapshot taken with memory (--template SNAP), take only its files: processes start afresh, on any runtime")
	o.egress.getenv = a.getenv
	o.egress.register(cmd, false)
	return cmd
}

// request is the create the flags ask for; withTimeout says --timeout was
// given (0 is then "never", not "the server's").
func (o *sandboxCreateFlags) request(withTimeout bool) (client.NewSandbox, error) {
	in := client.NewSandbox{TemplateID: o.template, IdempotencyKey: o.idemKey}
	var err error
	if in.Metadata, err = parseKV("meta", o.meta); err != nil {
		return in, usageError{err}
	}
	if in.EnvVars, err = parseKV("env", o.env); err != nil {
		return in, usageError{err}
	}
	if withTimeout {
		if o.timeout < 0 {
			return in, usageError{fmt.Errorf("--timeout %d: want seconds >= 0 (0 = never)", o.timeout)}
		}
		in.Timeout = &o.timeout
	}
	if o.memoryMB < 0 || o.cpus < 0 || o.pids < 0 || o.diskMB < 0 {
		return in, usageError{fmt.Errorf("--memory-mb, --cpus, --pids and --disk-mb must not be negative")}
	}
	if o.memoryMB != 0 || o.cpus != 0 || o.pids != 0 || o.diskMB != 0 {
		in.Limits = &client.Limits{MemoryMB: o.memoryMB, CPUCount: o.cpus, Pids: o.pids, DiskMB: o.diskMB}
	}
	in.AutoPause = o.autoPause
	if o.autoPauseFiles {
		if !o.autoPause || o.autoRes {
			return in, usageError{fmt.Errorf("--auto-pause-no-memory needs --auto-pause and cannot go with --auto-resume (a sandbox paused without memory resumes only by connect)")}
		}
		keep := false
		in.AutoPauseMemory = &keep
	}
	if o.autoRes {
		in.AutoResume = &client.AutoResume{Enabled: true}
	}
	if o.public || o.maskHost != "" {
		in.Network = &client.Network{MaskRequestHost: o.maskHost}
		if o.public {
			in.Network.AllowPublicTraffic = &o.public
		}
	}
	if err := o.egress.apply(&in); err != nil {
		return in, err
	}
	in.SnapshotEveryToolCall = o.toolSnaps
	in.Runtime = o.rtName
	in.FilesOnly = o.filesOnly
	in.Devices = o.devices
	if in.VolumeMounts, err = parseVolumeMounts(o.volumes); err != nil {
		return in, err
	}
	return in, nil
}

func sandboxListCmd(a *app) *cobra.Command {
	var (
		states         []string
		meta           []string
		limit          int
		order, since   string
		templateFilter string
	)
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List sandboxes, the latest started first",
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			md, err := parseKV("meta", meta)
			if err != nil {
				return usageError{err}
			}
			opts := client.ListOptions{Metadata: md, States: states, Limit: limit, Template: templateFilter}
			if opts.Order, err = listOrder(order); err != nil {
				return usageError{err}
			}
			if opts.StartedAfter, err = parseSince(since, time.Now()); err != nil {
				return usageError{err}
			}
			c := a.client()
			all, err := allPages("sandboxes", func(token string) ([]client.ListedSandbox, string, error) {
				opts.NextToken = token
				return c.Sandboxes.List(cmd.Context(), opts)
			})
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, all)
			}
			tw := newTable(a.out)
			row(tw, "ID", "TEMPLATE", "STATE", "CPUS", "MEMORY", "STARTED")
			for _, s := range all {
				row(tw, s.SandboxID, s.TemplateID, s.State, fmtFloat(s.CPUCount), fmtBytes(s.MemoryMB<<20), fmtTime(s.StartedAt))
			}
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&states, "state", nil, "only sandboxes in this state: running, paused (repeatable)")
	f.StringArrayVar(&meta, "meta", nil, "only sandboxes with this metadata KEY=VALUE (repeatable)")
	f.StringVar(&templateFilter, "template", "", "only sandboxes made from this template")
	f.StringVar(&since, "since", "", "only sandboxes started after this time: RFC 3339 (2025-06-01T12:00:00Z) or a duration ago (90m, 2h)")
	f.StringVar(&order, "order", "desc", "desc (the latest started first) or asc (the earliest first)")
	f.IntVar(&limit, "page-size", 0, "sandboxes fetched per request (default: the server's)")
	return cmd
}

// listOrder checks ls's --order.
func listOrder(order string) (string, error) {
	if order != "asc" && order != "desc" {
		return "", fmt.Errorf("--order %q: want asc (the earliest started first) or desc (the latest first)", order)
	}
	return order, nil
}

// parseSince reads ls's --since: an RFC 3339 time, or a duration before
// now ("" = no bound).
func parseSince(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("--since %q: want an RFC 3339 time (2025-06-01T12:00:00Z) or a positive duration ago (90m, 2h)", v)
}

func sandboxGetCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "get ID",
		Aliases: []string{"inspect"},
		Short:   "Describe a sandbox",
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			s, err := a.client().Sandboxes.Get(cmd.Context(), argv[0])
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, s)
			}
			tw := newTable(a.out)
			row(tw, "ID:", s.SandboxID)
			row(tw, "Template:", s.TemplateID)
			row(tw, "State:", s.State)
			if s.Reason != "" {
				row(tw, "Reason:", s.Reason)
			}
			row(tw, "Runtime:", s.Runtime)
			row(tw, "CPUs:", fmtFloat(s.CPUCount))
			row(tw, "Memory:", fmtBytes(s.MemoryMB<<20))
			disk := fmtBytes(s.DiskSizeMB << 20)
			if s.DiskSizeMB == 0 {
				disk = "no quota"
			}
			if s.DiskUsedBytes >= 0 {
				disk = fmtBytes(s.DiskUsedBytes) + " used of " + disk
			}
			row(tw, "Disk:", disk)
			row(tw, "Pids:", fmt.Sprint(s.Pids))
			row(tw, "Started:", fmtTime(s.StartedAt))
			row(tw, "Ends:", fmtTimePtr(s.EndAt))
			row(tw, "Metadata:", fmtKV(s.Metadata))
			row(tw, "Network:", fmtNetwork(s))
			if s.Family != "" && s.Family != s.SandboxID {
				row(tw, "Family:", s.Family)
			}
			if s.ForkedFrom != "" {
				row(tw, "Forked from:", s.ForkedFrom)
			}
			if s.Head != "" {
				row(tw, "Head:", s.Head)
			}
			if s.Turn > 0 {
				row(tw, "Turns:", fmt.Sprint(s.Turn))
			}
			row(tw, "Envd:", s.EnvdVersion)
			row(tw, "Access token:", s.EnvdAccessToken)
			if s.TrafficAccessToken != "" {
				row(tw, "Traffic token:", s.TrafficAccessToken)
			}
			return tw.Flush()
		},
	}
}

// fmtKV renders a map as sorted k=v pairs, "-" when empty.
func fmtKV(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	pairs := make([]string, 0, len(m))
	for k, v := range m {
		pairs = append(pairs, k+"="+v)
	}
	sort.Strings(pairs)
	return strings.Join(pairs, " ")
}

func sandboxRemoveCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "rm ID...",
		Aliases: []string{"delete", "kill"},
		Short:   "Kill and remove sandboxes",
		Args:    args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, ids []string) error {
			c := a.client()
			return eachID(a, ids, "sandbox", func(id string) error { return c.Sandboxes.Delete(cmd.Context(), id) })
		},
	}
}

// eachID runs fn for every id, printing each id done (unless --json) and
// each failure; it fails if any did, after trying them all.
func eachID(a *app, ids []string, what string, fn func(id string) error) error {
	failed := 0
	for _, id := range ids {
		if err := fn(id); err != nil {
			failed++
			// Name the id unless the server's message does already.
			if msg := a.describe(err); len(ids) == 1 || strings.Contains(msg, id) {
				fmt.Fprintf(a.errOut, "error: %s\n", msg)
			} else {
				fmt.Fprintf(a.errOut, "error: %s %s: %s\n", what, id, msg)
			}
			continue
		}
		if !a.json {
			fmt.Fprintln(a.out, id)
		}
	}
	if failed > 0 {
		return exitError{code: 1}
	}
	return nil
}
