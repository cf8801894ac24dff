package main

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/client"
)

func snapshotCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "snapshot",
		Aliases: []string{"snapshots", "snap"},
		Short:   "Take, list, inspect and remove snapshots of sandboxes",
	}
	cmd.AddCommand(snapshotCreateCmd(a), snapshotListCmd(a), snapshotGetCmd(a), snapshotRemoveCmd(a),
		snapshotExportCmd(a), snapshotImportCmd(a))
	return cmd
}

func snapshotCreateCmd(a *app) *cobra.Command {
	var (
		name   string
		labels []string
		memory bool
	)
	cmd := &cobra.Command{
		Use:   "create ID",
		Short: "Snapshot a sandbox's live tree and print the snapshot's id",
		Example: `  SNAP=$(warren snapshot create $ID --name before-refactor --label step=3)
  SNAP=$(warren snapshot create $ID --memory)   # gvisor: its processes too`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			in := client.NewSnapshot{Name: name, Memory: memory}
			var err error
			if in.Labels, err = parseKV("label", labels); err != nil {
				return usageError{err}
			}
			s, err := a.client().Snapshots.Create(cmd.Context(), argv[0], in)
			if err != nil {
				return err
			}
			return a.printSnapshot(s)
		},
	}
	f := cmd.Flags()
	f.StringVar(&name, "name", "", "a name to find the snapshot by")
	f.StringArrayVar(&labels, "label", nil, "label KEY=VALUE (repeatable)")
	f.BoolVar(&memory, "memory", false, "save the sandbox's memory and processes too (gvisor runtime): forks and rollbacks carry on with them")
	return cmd
}

func snapshotListCmd(a *app) *cobra.Command {
	var (
		opts client.SnapshotListOptions
		all  bool
	)
	cmd := &cobra.Command{
		Use:     "ls [SANDBOX]",
		Aliases: []string{"list"},
		Short:   "List snapshots (of one sandbox: SANDBOX or --sandbox)",
		Args:    args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if len(argv) == 1 {
				if opts.SandboxID != "" && opts.SandboxID != argv[0] {
					return fmt.Errorf("two sandboxes given (%s and --sandbox %s): give one", argv[0], opts.SandboxID)
				}
				opts.SandboxID = argv[0]
			}
			// Explicit states rather than the server's default, so that the
			// listing means the same whatever the server assumes. Archived
			// turns are usable (restored when used), so they are listed.
			opts.States = []string{"ready", "archived"}
			if all {
				opts.States = append(opts.States, "deleted")
			}
			c := a.client()
			snaps, err := allPages("snapshots", func(token string) ([]client.Snapshot, string, error) {
				opts.NextToken = token
				return c.Snapshots.List(cmd.Context(), opts)
			})
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, snaps)
			}
			tw := newTable(a.out)
			head := []string{"ID", "NAME", "KIND", "TURN", "SANDBOX", "SIZE", "CREATED"}
			// The state is worth a column once some snapshot is not plain
			// ready (archived, or a tombstone with --all).
			states := all || slices.ContainsFunc(snaps, func(s client.Snapshot) bool { return s.State != "ready" })
			if states {
				head = append(head, "STATE")
			}
			row(tw, head...)
			for _, s := range snaps {
				cols := []string{s.SnapshotID, orDash(s.Name), s.Kind, fmtTurn(s.Turn), s.SandboxID,
					fmtSize(s.ExclusiveBytes), fmtTime(s.CreatedAt)}
				if states {
					cols = append(cols, s.State)
				}
				row(tw, cols...)
			}
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.SandboxID, "sandbox", "", "only the snapshots of this sandbox")
	f.StringVar(&opts.Name, "name", "", "only the snapshots with this name")
	f.BoolVar(&all, "all", false, "include deleted snapshots (kept as tombstones in the lineage)")
	f.IntVar(&opts.Limit, "page-size", 0, "snapshots fetched per request (default: the server's)")
	return cmd
}

func snapshotGetCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "get SNAP",
		Aliases: []string{"inspect"},
		Short:   "Describe a snapshot",
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			ref, err := a.snapshotRef(cmd.Context(), argv[0], "")
			if err != nil {
				return err
			}
			s, err := a.client().Snapshots.Get(cmd.Context(), ref)
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, s)
			}
			tw := newTable(a.out)
			row(tw, "ID:", s.SnapshotID)
			row(tw, "Name:", orDash(s.Name))
			row(tw, "Kind:", s.Kind)
			row(tw, "Turn:", fmtTurn(s.Turn))
			row(tw, "State:", s.State)
			row(tw, "Sandbox:", s.SandboxID)
			row(tw, "Family:", orDash(s.Family))
			row(tw, "Template:", orDash(s.Template))
			row(tw, "Parent:", orDash(s.ParentID))
			row(tw, "Size:", fmtSize(s.ExclusiveBytes)+" exclusive, "+fmtSize(s.ReferencedBytes)+" referenced")
			row(tw, "Created:", fmtTime(s.CreatedAt))
			if s.DeletedAt != nil {
				row(tw, "Deleted:", fmtTimePtr(s.DeletedAt))
			}
			if s.FrozenMs > 0 {
				row(tw, "Frozen:", fmtFloat(s.FrozenMs)+"ms")
			}
			row(tw, "Labels:", fmtKV(s.Labels))
			return tw.Flush()
		},
	}
}

func snapshotRemoveCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "rm SNAP...",
		Aliases: []string{"delete"},
		Short:   "Delete snapshots (the lineage keeps them as tombstones)",
		Args:    args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, ids []string) error {
			c := a.client()
			return eachID(a, ids, "snapshot", func(id string) error {
				ref, err := a.snapshotRef(cmd.Context(), id, "")
				if err != nil {
					return err
				}
				return c.Snapshots.Delete(cmd.Context(), ref)
			})
		},
	}
}

func turnCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "turn ID",
		Short: "End an agent turn: take the sandbox's next turn snapshot and print its id",
		Long: `End an agent turn: take a read-only snapshot named turn-N of the sandbox's live tree.
The snapshot's id goes to stdout and its name to stderr. "warren exec --turn" does
the same after a command.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			s, err := a.client().Snapshots.Turn(cmd.Context(), argv[0])
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, s)
			}
			fmt.Fprintln(a.out, s.SnapshotID)
			fmt.Fprintln(a.errOut, snapshotName(s.Name, s.Kind, s.Turn))
			return nil
		},
	}
}

func rollbackCmd(a *app) *cobra.Command {
	var force, filesOnly bool
	cmd := &cobra.Command{
		Use:   "rollback ID SNAP",
		Short: "Replace a sandbox's files with a snapshot of it",
		Long: `Replace a sandbox's live tree with one of its snapshots. Changes made since are
lost unless snapshotted first. The sandbox's processes are restarted, or, from a
snapshot taken with memory (gvisor), restored as they were; --files-only takes
only such a snapshot's files. A sandbox that is running commands is refused
unless --force, which kills them.`,
		Args: args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			id := argv[0]
			snap, err := a.snapshotRef(cmd.Context(), argv[1], id)
			if err != nil {
				return err
			}
			res, err := a.client().Snapshots.Rollback(cmd.Context(), id, client.RollbackRequest{SnapshotID: snap, Force: force, FilesOnly: filesOnly})
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, res)
			}
			if res.SnapshotID != "" {
				snap = res.SnapshotID
			}
			msg := fmt.Sprintf("rolled back %s to %s", id, snap)
			if res.ProcessesRestarted {
				msg += " (processes restarted)"
			} else if res.ProcessesRestored {
				msg += " (processes restored from its memory)"
			}
			fmt.Fprintln(a.out, msg)
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "roll back even while commands run (they are killed)")
	cmd.Flags().BoolVar(&filesOnly, "files-only", false, "from a snapshot taken with memory, take only its files: processes start afresh")
	return cmd
}

func forkCmd(a *app) *cobra.Command {
	var (
		count     int
		meta      []string
		timeout   int64
		memory    bool
		filesOnly bool
		devices   []string
	)
	cmd := &cobra.Command{
		Use:   "fork ID [SNAP]",
		Short: "Start new sandboxes from a snapshot (or the live state) and print their ids",
		Long: `Start new sandboxes from one of ID's snapshots, or from its live state when SNAP is
left out (an implicit snapshot is taken). Each new sandbox's id is printed on its
own line; a fork that failed is reported on stderr and makes the exit status 1.`,
		Example: `  warren fork $ID $SNAP -n 3 --meta try=a
  warren fork $ID
  warren fork $ID --memory -n 3   # gvisor: each fork carries on with ID's processes`,
		Args: args(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			in := client.ForkRequest{Count: count, Memory: memory, FilesOnly: filesOnly, Devices: devices}
			if count < 1 {
				return usageError{fmt.Errorf("-n %d: want at least 1 fork", count)}
			}
			var err error
			if in.Metadata, err = parseKV("meta", meta); err != nil {
				return usageError{err}
			}
			if cmd.Flags().Changed("timeout") {
				if timeout < 0 {
					return usageError{fmt.Errorf("--timeout %d: want seconds >= 0 (0 = never)", timeout)}
				}
				in.Timeout = &timeout
			}
			if len(argv) == 2 {
				if in.SnapshotID, err = a.snapshotRef(cmd.Context(), argv[1], argv[0]); err != nil {
					return err
				}
			}
			res, err := a.client().Snapshots.Fork(cmd.Context(), argv[0], in)
			if err != nil {
				return err
			}
			return a.printForks(res)
		},
	}
	f := cmd.Flags()
	f.IntVarP(&count, "count", "n", 1, "how many sandboxes to start")
	f.StringArrayVar(&meta, "meta", nil, "metadata KEY=VALUE for the new sandboxes (repeatable)")
	f.Int64Var(&timeout, "timeout", 0, "seconds until each new sandbox is killed; 0 = never (default: the server's)")
	f.BoolVar(&memory, "memory", false, "fork the live state with its memory and processes (gvisor runtime)")
	f.BoolVar(&filesOnly, "files-only", false, "from a snapshot taken with memory, take only its files: processes start afresh")
	f.StringArrayVar(&devices, "device", nil, "give each fork this host device by CDI name (repeatable; forks get none of ID's)")
	return cmd
}

// printForks prints each new sandbox's id and each failure; any failure
// makes the exit status 1, after everything is printed.
func (a *app) printForks(res []client.ForkResult) error {
	failed := 0
	for i, r := range res {
		switch {
		case r.Sandbox != nil && r.Error == nil:
			if !a.json {
				fmt.Fprintln(a.out, r.Sandbox.SandboxID)
			}
		case r.Error != nil:
			failed++
			fmt.Fprintf(a.errOut, "error: fork %d: %s\n", i+1, a.describe(r.Error))
		default:
			failed++
			fmt.Fprintf(a.errOut, "error: fork %d: the server answered with neither a sandbox nor an error\n", i+1)
		}
	}
	if a.json {
		if res == nil {
			res = []client.ForkResult{}
		}
		if err := printJSON(a.out, res); err != nil {
			return err
		}
	}
	if failed > 0 {
		return exitError{code: 1}
	}
	return nil
}

func promoteCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "promote FORK",
		Short: "Make a fork's files its parent's (the parent's old state is kept as a snapshot)",
		Long: `Make a fork's tree the tree of the sandbox it was forked from: "try it in a branch,
then keep it". The parent's processes are restarted; the state it had is kept as a
snapshot, so the promote can be undone with "warren rollback PARENT SNAP".`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			fork := argv[0]
			res, err := a.client().Snapshots.Promote(cmd.Context(), fork)
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, res)
			}
			msg := fmt.Sprintf("promoted %s into %s", fork, res.Sandbox.SandboxID)
			if res.PreviousSnapshotID != "" {
				msg += fmt.Sprintf(" (previous state kept as snapshot %s)", res.PreviousSnapshotID)
			}
			fmt.Fprintln(a.out, msg)
			return nil
		},
	}
}

// fmtTurn renders a turn number, "-" for snapshots that are not turns.
func fmtTurn(n int) string {
	if n <= 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

// fmtSize renders a size the server may not know (-1), as "-".
func fmtSize(n int64) string {
	if n < 0 {
		return "-"
	}
	return fmtBytes(n)
}

// snapshotName is how a snapshot is called in text output: its name, a
// turn's "turn-N", or its kind in parentheses.
func snapshotName(name, kind string, turn int) string {
	switch {
	case name != "":
		return name
	case kind == "turn" && turn > 0:
		return "turn-" + strconv.Itoa(turn)
	case kind != "":
		return "(" + kind + ")"
	}
	return "(unnamed)"
}

// printSnapshot prints a snapshot the command made: its id, or the whole
// record with --json.
func (a *app) printSnapshot(s client.Snapshot) error {
	if a.json {
		return printJSON(a.out, s)
	}
	fmt.Fprintln(a.out, s.SnapshotID)
	return nil
}
