package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/client"
)

func templateCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "template",
		Aliases: []string{"templates", "tpl"},
		Short:   "List, build and remove templates",
	}
	cmd.AddCommand(templateListCmd(a), templateRemoveCmd(a), templateBuildCmd(a))
	cmd.AddCommand(templateCacheCmd(a))
	cmd.AddCommand(templateShowCmd(a))
	return cmd
}

func templateListCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List templates",
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ts, err := a.client().Templates.List(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				if ts == nil {
					ts = []client.Template{}
				}
				return printJSON(a.out, ts)
			}
			tw := newTable(a.out)
			row(tw, "NAME", "SOURCE", "SIZE", "RUNTIME", "SUDO", "CREATED")
			for _, t := range ts {
				if len(t.Aliases) > 0 { // built from steps
					row(tw, t.Aliases[0], builtSource(t), "-", "-", "-", fmtTime(t.CreatedAt))
					continue
				}
				row(tw, t.TemplateID, orDash(t.Source), fmtBytes(t.SizeBytes), orDash(t.Runtime), sudoColumn(t.NoNewPrivileges), fmtTime(t.CreatedAt))
			}
			return tw.Flush()
		},
	}
}

func templateRemoveCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "rm NAME...",
		Aliases: []string{"delete"},
		Short:   "Remove templates",
		Args:    args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, names []string) error {
			c := a.client()
			return eachID(a, names, "template", func(name string) error { return c.Templates.Delete(cmd.Context(), name) })
		},
	}
}

// sudoColumn says whether setuid binaries (sudo) work in a template's
// sandboxes, as far as the template decides (the server's
// --no-new-privileges turns them off everywhere).
func sudoColumn(noNewPrivileges bool) string {
	if noNewPrivileges {
		return "off"
	}
	return "on"
}

// builtSource describes a template built from steps: its id, last
// build's status and cache hits, build count, tags and parent chain.
func builtSource(t client.Template) string {
	s := fmt.Sprintf("build %s: %s, %d/%d steps cached, %d builds", t.TemplateID, orDash(t.BuildStatus), t.CachedSteps, t.Steps, t.BuildCount)
	if len(t.Tags) > 0 {
		s += ", tags " + strings.Join(t.Tags, ",")
	}
	if t.StartMode != "" {
		s += ", " + t.StartMode
	}
	if len(t.Chain) > 0 {
		s += ", chain " + chainOf(t)
	}
	return s
}
