package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/client"
)

func snapshotExportCmd(a *app) *cobra.Command {
	var base string
	var filesOnly bool
	cmd := &cobra.Command{
		Use:   "export ID",
		Short: "Write a snapshot as a portable bundle to stdout (its files, and its memory image if it has one)",
		Example: `  warren snapshot export $SNAP > snap.wsnap
  warren snapshot export $TURN2 --base $TURN1 > turn2.wsnap   # a delta; the receiver holds $TURN1`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			r, err := a.client().Snapshots.ExportWith(cmd.Context(), argv[0], client.ExportOptions{Base: base, FilesOnly: filesOnly})
			if err != nil {
				return err
			}
			defer r.Close()
			if _, err := io.Copy(a.out, r); err != nil {
				return fmt.Errorf("export %s: the transfer broke off (the bundle written is incomplete; run the export again): %w", argv[0], err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&base, "base", "", "send a delta against this snapshot, which the importing daemon already holds")
	cmd.Flags().BoolVar(&filesOnly, "files-only", false, "leave the snapshot's memory image out of the bundle")
	return cmd
}

func snapshotImportCmd(a *app) *cobra.Command {
	var rename, requireMemory bool
	cmd := &cobra.Command{
		Use:     "import",
		Short:   "Import a snapshot bundle from stdin and print the snapshot's id",
		Example: `  warren snapshot import < snap.wsnap`,
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, argv []string) error {
			s, err := a.client().Snapshots.ImportWith(cmd.Context(), a.in, client.ImportOptions{Rename: rename, RequireMemory: requireMemory})
			if err != nil {
				return err
			}
			if s.MemoryDropped != "" {
				fmt.Fprintf(a.errOut, "warning: imported the files of snapshot %s only: %s\n", s.SnapshotID, s.MemoryDropped)
			}
			return a.printSnapshot(s)
		},
	}
	cmd.Flags().BoolVar(&rename, "rename", false, "give the snapshot a new id if its own is taken here")
	cmd.Flags().BoolVar(&requireMemory, "require-memory", false, "refuse a bundle whose memory image this daemon cannot restore (else its files are imported alone)")
	return cmd
}
