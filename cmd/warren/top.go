package main

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/client"
)

// topRow is one sandbox's line of `warren top` (and its --json element).
type topRow struct {
	SandboxID string                `json:"sandboxID"`
	Metric    *client.SandboxMetric `json:"metric"` // nil until the first sample
}

func topCmd(a *app) *cobra.Command {
	var (
		once     bool
		interval time.Duration
	)
	cmd := &cobra.Command{
		Use:   "top",
		Short: "Show your running sandboxes' CPU, memory, processes and disk, refreshed live",
		Long: `top shows the latest resource sample of each of your running sandboxes:
CPU in percent of its quota, memory used and limit, processes and their
limit, disk charged and quota. The server samples once a second.`,
		Example: `  warren top
  warren top --once --json`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if interval <= 0 {
				return usageError{fmt.Errorf("--interval %s: want a positive duration", interval)}
			}
			c := a.client()
			for {
				rows, err := topSnapshot(cmd, c)
				if err != nil {
					return err
				}
				if !once && !a.json {
					fmt.Fprint(a.out, "\x1b[H\x1b[2J") // home and clear, like top(1)
				}
				if err := a.printTop(rows); err != nil {
					return err
				}
				if once {
					return nil
				}
				select {
				case <-cmd.Context().Done():
					return nil // Ctrl-C ends top; not an error
				case <-time.After(interval):
				}
			}
		},
	}
	f := cmd.Flags()
	f.BoolVar(&once, "once", false, "print one snapshot and exit")
	f.DurationVar(&interval, "interval", time.Second, "time between refreshes")
	return cmd
}

// topSnapshot lists the caller's running sandboxes with their newest sample.
func topSnapshot(cmd *cobra.Command, c *client.Client) ([]topRow, error) {
	opts := client.ListOptions{States: []string{"running"}}
	sbs, err := allPages("sandboxes", func(token string) ([]client.ListedSandbox, string, error) {
		opts.NextToken = token
		return c.Sandboxes.List(cmd.Context(), opts)
	})
	if err != nil {
		return nil, err
	}
	since := time.Now().Add(-30 * time.Second)
	rows := make([]topRow, 0, len(sbs))
	for _, sb := range sbs {
		ms, err := c.Sandboxes.Metrics(cmd.Context(), sb.SandboxID, since, time.Time{})
		if client.StatusCode(err) == 404 {
			continue // deleted since the listing
		}
		if err != nil {
			return nil, err
		}
		r := topRow{SandboxID: sb.SandboxID}
		if len(ms) > 0 {
			r.Metric = &ms[len(ms)-1]
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func (a *app) printTop(rows []topRow) error {
	if a.json {
		return printJSON(a.out, rows)
	}
	tw := newTable(a.out)
	row(tw, "ID", "CPU%", "CPUS", "MEM", "PIDS", "DISK")
	for _, r := range rows {
		m := r.Metric
		if m == nil {
			row(tw, r.SandboxID, "-", "-", "-", "-", "-")
			continue
		}
		row(tw, r.SandboxID,
			strconv.FormatFloat(m.CPUUsedPct, 'f', 1, 64),
			strconv.Itoa(m.CPUCount),
			usedOf(m.MemUsed, m.MemTotal),
			countOf(m.Pids, m.PidsLimit),
			usedOf(m.DiskUsed, m.DiskTotal))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(rows) == 0 {
		_, err := io.WriteString(a.out, "(no running sandboxes)\n")
		return err
	}
	return nil
}

// usedOf renders "used/limit" in binary units; an unknown used (-1) is "-",
// no limit is "used/-".
func usedOf(used, limit int64) string {
	if used < 0 {
		return "-"
	}
	l := "-"
	if limit > 0 {
		l = fmtBytes(limit)
	}
	return fmtBytes(used) + "/" + l
}

func countOf(n, limit int64) string {
	l := "-"
	if limit > 0 {
		l = strconv.FormatInt(limit, 10)
	}
	return strconv.FormatInt(n, 10) + "/" + l
}
