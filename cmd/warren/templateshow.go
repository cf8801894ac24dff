package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/client"
)

// templateShowCmd shows one template built from steps with its builds.
func templateShowCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "show NAME[:TAG]",
		Short: "Show a template built from steps: its parent chain, tags and builds (status, cached steps, duration, parent)",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, refs []string) error {
			d, err := a.client().Templates.Get(cmd.Context(), refs[0])
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, d)
			}
			t := d.Template
			fmt.Fprintf(a.out, "template  %s (%s)\nchain     %s\ntags      %s\nbuilds    %d\n\n",
				builtName(t), t.TemplateID, chainOf(t), orDash(strings.Join(t.Tags, ", ")), t.BuildCount)
			tw := newTable(a.out)
			row(tw, "BUILD", "STATUS", "CACHED", "DURATION", "PARENT", "TAGS", "CREATED")
			for _, b := range d.Builds {
				status := b.Status
				if b.Reason != "" {
					status += ": " + b.Reason
				}
				row(tw, b.BuildID, status, fmt.Sprintf("%d/%d", b.CachedSteps, b.Steps), buildDuration(b),
					parentOf(b.Parent), orDash(strings.Join(b.Tags, ",")), fmtTime(b.CreatedAt))
			}
			return tw.Flush()
		},
	}
}

func builtName(t client.Template) string {
	if len(t.Aliases) > 0 {
		return t.Aliases[0]
	}
	return t.TemplateID
}

// chainOf is a built template and its parents: my-env ← py-base ← base.
func chainOf(t client.Template) string {
	return strings.Join(append([]string{builtName(t)}, t.Chain...), " ← ")
}

func parentOf(p *client.TemplateParent) string {
	switch {
	case p == nil:
		return "-"
	case p.Kind == "build":
		return p.Name + " (build " + p.BuildID + ")"
	case p.Kind == "image":
		return p.Image
	}
	return p.Name
}

func buildDuration(b client.TemplateBuild) string {
	if b.DurationMs == 0 && b.FinishedAt == nil {
		return "-"
	}
	return (time.Duration(b.DurationMs) * time.Millisecond).Round(time.Millisecond).String()
}
