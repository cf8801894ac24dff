package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/client"
)

// mergeCmds are the merge commands (added to the root in one line).
func mergeCmds(a *app) []*cobra.Command { return []*cobra.Command{mergeCmd(a), forksCmd(a)} }

func mergeCmd(a *app) *cobra.Command {
	var in client.MergeRequest
	cmd := &cobra.Command{
		Use:   "merge ID --from FORK|SNAP",
		Short: "Merge a fork's changes into a sandbox, or cherry-pick paths from it",
		Long: `Merge the changes a fork (or a snapshot) made since its fork point (or --base)
into sandbox ID's live tree. Text files both sides changed are merged line by
line; conflicts get markers (--strategy three-way, the default) or are resolved
by --strategy ours, theirs or union. With --path, those paths are copied from
the fork as they are (a cherry-pick). A turn snapshot is taken before and after:
"warren rollback ID BEFORE" undoes the merge. --dry-run reports without writing.
A sandbox running commands is refused unless --force (they see the files change).`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			res, err := a.client().Snapshots.Merge(cmd.Context(), argv[0], in)
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, res)
			}
			t := newTable(a.out)
			fmt.Fprintln(t, "PATH\tOUTCOME\tRESOLUTION\tREASON")
			for _, e := range res.Entries {
				fmt.Fprintf(t, "%s\t%s\t%s\t%s\n", e.Path, e.Outcome, e.Resolution, e.Reason)
			}
			t.Flush()
			verb := "merged"
			if res.DryRun {
				verb = "would merge"
			}
			fmt.Fprintf(a.out, "%s %d path(s) from %s into %s, %d conflict(s)", verb, len(res.Entries), res.From, argv[0], res.Conflicts)
			if res.BeforeSnapshotID != "" {
				fmt.Fprintf(a.out, "; undo with: warren rollback %s %s", argv[0], res.BeforeSnapshotID)
			}
			fmt.Fprintln(a.out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.From, "from", "", "the fork (sandbox id) or snapshot whose changes to merge")
	f.StringVar(&in.Base, "base", "", "the common ancestor snapshot (default: the fork's fork point)")
	f.StringVar(&in.Strategy, "strategy", "three-way", "how conflicts are resolved: three-way (markers), ours, theirs or union")
	f.StringArrayVar(&in.Paths, "path", nil, "cherry-pick this path as it is in the fork (repeatable)")
	f.BoolVar(&in.DryRun, "dry-run", false, "report what would be merged without writing")
	f.BoolVar(&in.Force, "force", false, "merge even while commands run (they keep running)")
	_ = cmd.MarkFlagRequired("from")
	return cmd
}

func forksCmd(a *app) *cobra.Command {
	var threshold float64
	cmd := &cobra.Command{
		Use:   "forks ID",
		Short: "A verdict per fork of a sandbox: discard, review or merge",
		Long: `For each fork of sandbox ID (of its live state or its snapshots): the files
added, modified and removed since its fork point, the bytes changed, a
divergence in [0, 1] (bytes changed over the fork point's file bytes), whether
it merges cleanly into ID now, and a recommendation: discard (no change),
review (conflicts, or divergence above --threshold) or merge.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			res, err := a.client().Snapshots.ForksSummary(cmd.Context(), argv[0], threshold)
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, res)
			}
			t := newTable(a.out)
			fmt.Fprintln(t, "FORK\tADDED\tMODIFIED\tREMOVED\tBYTES\tDIVERGENCE\tCLEAN\tVERDICT\tWHY")
			for _, v := range res.Forks {
				fmt.Fprintf(t, "%s\t%d\t%d\t%d\t%d\t%.3f\t%t\t%s\t%s\n", v.SandboxID, v.Added, v.Modified, v.Removed,
					v.BytesChanged, v.Divergence, v.MergesCleanly, v.Recommendation, v.Reason)
			}
			return t.Flush()
		},
	}
	cmd.Flags().Float64Var(&threshold, "threshold", 0, "divergence above which a clean fork is still to review (default 0.8)")
	return cmd
}
