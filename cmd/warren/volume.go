package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/client"
)

func volumeCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "volume",
		Aliases: []string{"volumes", "vol"},
		Short:   "Manage shared volumes (mounted into sandboxes by name; outside their snapshots)",
		Long: `Manage shared volumes: trees of their own, mounted read-write into every sandbox
that names them at create (warren sandbox create --volume NAME:/path), kept when
those sandboxes go, never part of their snapshots. Reach their files with
warren files ... vol:NAME PATH.`,
	}
	cmd.AddCommand(volumeCreateCmd(a), volumeListCmd(a), volumeRemoveCmd(a))
	return cmd
}

func volumeCreateCmd(a *app) *cobra.Command {
	var sizeMB int64
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a shared volume and print its id",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if sizeMB < 0 {
				return usageError{fmt.Errorf("--size-mb must not be negative")}
			}
			v, err := a.client().Volumes.Create(cmd.Context(), argv[0], sizeMB)
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, v)
			}
			fmt.Fprintln(a.out, v.VolumeID)
			return nil
		},
	}
	cmd.Flags().Int64Var(&sizeMB, "size-mb", 0, "size cap in MiB (default: the server's --volume-size-mb)")
	return cmd
}

func volumeListCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List shared volumes",
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			vs, err := a.client().Volumes.List(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				if vs == nil {
					vs = []client.Volume{}
				}
				return printJSON(a.out, vs)
			}
			tw := newTable(a.out)
			row(tw, "ID", "NAME", "SIZE", "USED", "CREATED")
			for _, v := range vs {
				size, used := "-", "-"
				if v.SizeMB > 0 {
					size = fmtBytes(v.SizeMB << 20)
				}
				if v.UsedBytes >= 0 {
					used = fmtBytes(v.UsedBytes)
				}
				row(tw, v.VolumeID, v.Name, size, used, fmtTime(v.CreatedAt))
			}
			return tw.Flush()
		},
	}
}

func volumeRemoveCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "rm ID|NAME...",
		Aliases: []string{"delete"},
		Short:   "Delete shared volumes and their content (refused while a sandbox mounts one)",
		Args:    args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			c := a.client()
			failed := 0
			for _, v := range argv {
				if err := c.Volumes.Delete(cmd.Context(), v); err != nil {
					failed++
					fmt.Fprintf(a.errOut, "error: %s\n", a.describe(err))
				}
			}
			if failed > 0 {
				return exitError{code: 1}
			}
			return nil
		},
	}
}

// parseVolumeMounts reads --volume NAME:/path flags.
func parseVolumeMounts(flags []string) ([]client.VolumeMount, error) {
	var out []client.VolumeMount
	for _, f := range flags {
		name, path, ok := strings.Cut(f, ":")
		if !ok || name == "" || path == "" {
			return nil, usageError{fmt.Errorf("--volume %q: want NAME:/path", f)}
		}
		out = append(out, client.VolumeMount{Name: name, Path: path})
	}
	return out, nil
}
