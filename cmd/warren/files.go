package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/client"
)

func filesCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "files",
		Aliases: []string{"fs"},
		Short:   "Read, write and manage files in a sandbox or a shared volume",
		Long: `Read, write and manage files in a sandbox, or in a shared volume: give
vol:NAME where a command takes a sandbox ID (warren files ls vol:data /).`,
	}
	cmd.AddCommand(filesGetCmd(a), filesPutCmd(a), filesListCmd(a), filesStatCmd(a),
		filesMkdirCmd(a), filesMoveCmd(a), filesRemoveCmd(a))
	return cmd
}

func filesGetCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "get ID PATH [LOCAL|-]",
		Short: "Copy a file out of a sandbox (to stdout without LOCAL or with -)",
		Long: `Copy a file out of a sandbox. Without LOCAL, or with "-", the bytes go to stdout.
When LOCAL is a directory the file keeps its name inside it. LOCAL is written
whole or not at all: a failed copy leaves no partial file behind.`,
		Args: args(cobra.RangeArgs(2, 3)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			id, remote := argv[0], argv[1]
			local := "-"
			if len(argv) == 3 {
				local = argv[2]
			}
			t, err := a.fileTarget(cmd.Context(), id)
			if err != nil {
				return err
			}
			rc, err := t.Read(cmd.Context(), remote)
			if err != nil {
				return err
			}
			defer rc.Close()
			if local == "-" {
				_, err := io.Copy(a.out, rc)
				return err
			}
			if fi, err := os.Stat(local); err == nil && fi.IsDir() {
				local = filepath.Join(local, path.Base(remote))
			}
			return writeLocalFile(local, rc)
		},
	}
}

// writeLocalFile writes r to dst through a temporary file in the same
// directory and renames it into place, so dst is never left half-written.
func writeLocalFile(dst string, r io.Reader) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".warren-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", dst, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = io.Copy(tmp, r); err != nil {
		return fmt.Errorf("copy to %s: %w", dst, err)
	}
	// CreateTemp makes 0600 files; a copied file should look like one cp made.
	if err = tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("write %s: %w", dst, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", dst, err)
	}
	if err = os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("write %s: %w", dst, err)
	}
	return nil
}

func filesPutCmd(a *app) *cobra.Command {
	var mode, user string
	cmd := &cobra.Command{
		Use:   "put ID LOCAL|- PATH",
		Short: "Copy a local file (or stdin with -) into a sandbox",
		Args:  args(cobra.ExactArgs(3)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			id, local, remote := argv[0], argv[1], argv[2]
			m, err := parseMode(mode)
			if err != nil {
				return usageError{err}
			}
			var r io.Reader = a.in
			if local != "-" {
				f, err := os.Open(local)
				if err != nil {
					return err
				}
				defer f.Close()
				if fi, err := f.Stat(); err == nil && fi.IsDir() {
					return fmt.Errorf("%s is a directory: files put copies one file", local)
				}
				r = f
			}
			t, err := a.fileTarget(cmd.Context(), id)
			if err != nil {
				return err
			}
			info, err := t.Write(cmd.Context(), remote, r, m, user)
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, info)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&mode, "mode", "", "permissions in octal, e.g. 0644 (default: the server's, 0644)")
	cmd.Flags().StringVar(&user, "user", "", "owner of the file (default: the server's)")
	return cmd
}

func filesListCmd(a *app) *cobra.Command {
	var depth int
	cmd := &cobra.Command{
		Use:     "ls ID [PATH]",
		Aliases: []string{"list"},
		Short:   "List a directory in a sandbox (default /)",
		Args:    args(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			dir := "/"
			if len(argv) == 2 {
				dir = argv[1]
			}
			if depth < 0 {
				return usageError{errors.New("--depth must not be negative")}
			}
			t, err := a.fileTarget(cmd.Context(), argv[0])
			if err != nil {
				return err
			}
			entries, err := t.List(cmd.Context(), dir, depth)
			if err != nil {
				return err
			}
			if a.json {
				if entries == nil {
					entries = []client.EntryInfo{}
				}
				return printJSON(a.out, entries)
			}
			tw := newTable(a.out)
			row(tw, "NAME", "TYPE", "SIZE", "MODE", "OWNER", "MODIFIED")
			for _, e := range entries {
				name := e.Name
				if depth > 1 {
					// Deeper entries are told apart by their path below dir.
					name = strings.TrimPrefix(strings.TrimPrefix(e.Path, strings.TrimSuffix(dir, "/")), "/")
				}
				if e.SymlinkTarget != "" {
					name += " -> " + e.SymlinkTarget
				}
				row(tw, name, e.Type, fmtBytes(e.Size), entryMode(e), e.Owner, fmtTime(e.ModifiedTime))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().IntVar(&depth, "depth", 0, "levels to descend (default: the server's, 1)")
	return cmd
}

// entryMode prefers the server's "-rw-r--r--" rendering.
func entryMode(e client.EntryInfo) string {
	if e.Permissions != "" {
		return e.Permissions
	}
	return fmt.Sprintf("%04o", e.Mode&0o7777)
}

func filesStatCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "stat ID PATH",
		Short: "Describe a file in a sandbox",
		Args:  args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			t, err := a.fileTarget(cmd.Context(), argv[0])
			if err != nil {
				return err
			}
			e, err := t.Stat(cmd.Context(), argv[1])
			if err != nil {
				return err
			}
			return a.printEntry(e)
		},
	}
}

func (a *app) printEntry(e client.EntryInfo) error {
	if a.json {
		return printJSON(a.out, e)
	}
	tw := newTable(a.out)
	row(tw, "Path:", e.Path)
	row(tw, "Type:", e.Type)
	if e.SymlinkTarget != "" {
		row(tw, "Target:", e.SymlinkTarget)
	}
	row(tw, "Size:", fmt.Sprintf("%d (%s)", e.Size, fmtBytes(e.Size)))
	row(tw, "Mode:", fmt.Sprintf("%04o %s", e.Mode&0o7777, e.Permissions))
	row(tw, "Owner:", e.Owner+":"+e.Group)
	row(tw, "Modified:", fmtTime(e.ModifiedTime))
	return tw.Flush()
}

func filesMkdirCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "mkdir ID PATH",
		Short: "Create a directory (and its parents) in a sandbox",
		Args:  args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			t, err := a.fileTarget(cmd.Context(), argv[0])
			if err != nil {
				return err
			}
			e, err := t.MakeDir(cmd.Context(), argv[1])
			if err != nil || !a.json {
				return err
			}
			return printJSON(a.out, e)
		},
	}
}

func filesMoveCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "mv ID SOURCE DESTINATION",
		Aliases: []string{"move"},
		Short:   "Move or rename a file in a sandbox",
		Args:    args(cobra.ExactArgs(3)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			e, err := a.client().Files.Move(cmd.Context(), argv[0], argv[1], argv[2])
			if err != nil || !a.json {
				return err
			}
			return printJSON(a.out, e)
		},
	}
}

func filesRemoveCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "rm ID PATH...",
		Short: "Remove files or directory trees in a sandbox",
		Args:  args(cobra.MinimumNArgs(2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			t, err := a.fileTarget(cmd.Context(), argv[0])
			if err != nil {
				return err
			}
			failed := 0
			for _, p := range argv[1:] {
				if err := t.Remove(cmd.Context(), p); err != nil {
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
