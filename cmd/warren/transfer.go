package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func snapshotExportCmd(a *app) *cobra.Command {
	var base string
	cmd := &cobra.Command{
		Use:   "export ID",
		Short: "Write a snapshot as a portable bundle to stdout (files only, no memory image)",
		Example: `  warren snapshot export $SNAP > snap.wsnap
  warren snapshot export $TURN2 --base $TURN1 > turn2.wsnap   # a delta; the receiver holds $TURN1`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			r, err := a.client().Snapshots.Export(cmd.Context(), argv[0], base)
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
	return cmd
}

func snapshotImportCmd(a *app) *cobra.Command {
	var rename bool
	cmd := &cobra.Command{
		Use:     "import",
		Short:   "Import a snapshot bundle from stdin and print the snapshot's id",
		Example: `  warren snapshot import < snap.wsnap`,
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, argv []string) error {
			s, err := a.client().Snapshots.Import(cmd.Context(), a.in, rename)
			if err != nil {
				return err
			}
			return a.printSnapshot(s)
		},
	}
	cmd.Flags().BoolVar(&rename, "rename", false, "give the snapshot a new id if its own is taken here")
	return cmd
}
