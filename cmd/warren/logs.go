package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/client"
)

// followWait is how long one follow request waits for new entries.
const followWait = 30 * time.Second

func logsCmd(a *app) *cobra.Command {
	var follow bool
	var tail int
	var cursor int64
	var level, search string
	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "Print a sandbox's log: its processes' output and its lifecycle, in order (-f follows)",
		Long: `Print a sandbox's log: every line its processes print (stdout and stderr),
processes starting and exiting, and the steps of its life (created, paused,
resumed, timed out, ...), in order. The log is kept on the host within
--log-mb of the daemon (older entries rotate out).

-f keeps printing new entries as they come until interrupted; --cursor N
starts after entry N (each entry's number is printed with --json), so a
follower can resume where it stopped.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if tail < 0 {
				return usageError{errors.New("-n must not be negative")}
			}
			ctx, id, c := cmd.Context(), argv[0], a.client()
			q := client.LogsQuery{Cursor: cursor, Level: level, Search: search}
			if tail > 0 {
				// The newest N, printed oldest first; then on from the newest.
				page, err := c.Sandboxes.Logs(ctx, id, client.LogsQuery{Backward: true, Limit: tail, Level: level, Search: search})
				if err != nil {
					return err
				}
				for i := len(page.LogEntries) - 1; i >= 0; i-- {
					if err := printLogEntry(a, page.LogEntries[i]); err != nil {
						return err
					}
				}
				if !follow {
					return nil
				}
				if len(page.LogEntries) > 0 {
					q.Cursor = entrySeq(page.LogEntries[0])
				} else if q.Cursor, err = logEnd(cmd, c, id); err != nil {
					return err
				}
			}
			for {
				if follow {
					q.Wait = followWait
				}
				page, err := c.Sandboxes.Logs(ctx, id, q)
				if err != nil {
					if ctx.Err() != nil {
						return nil // interrupted while following
					}
					return err
				}
				for _, e := range page.LogEntries {
					if err := printLogEntry(a, e); err != nil {
						return err
					}
				}
				q.Cursor = page.NextCursor
				if len(page.LogEntries) == 0 && !follow {
					return nil
				}
			}
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&follow, "follow", "f", false, "keep printing new entries until interrupted")
	f.IntVarP(&tail, "tail", "n", 0, "start with the newest N entries (0: from the start)")
	f.Int64Var(&cursor, "cursor", 0, "start after the entry with this number")
	f.StringVar(&level, "level", "", "least severe level to print: debug, info, warn or error (stderr lines are error)")
	f.StringVar(&search, "search", "", "print only entries whose message contains this")
	return cmd
}

// logEnd is the cursor of the newest entry (0 for an empty log).
func logEnd(cmd *cobra.Command, c *client.Client, id string) (int64, error) {
	page, err := c.Sandboxes.Logs(cmd.Context(), id, client.LogsQuery{Backward: true, Limit: 1})
	if err != nil || len(page.LogEntries) == 0 {
		return 0, err
	}
	return entrySeq(page.LogEntries[0]), nil
}

func entrySeq(e client.LogEntry) int64 {
	var n int64
	fmt.Sscan(e.Fields["seq"], &n)
	return n
}

// printLogEntry writes one entry: a JSON line with --json, else
// "TIME SOURCE[PID TAG] MESSAGE".
func printLogEntry(a *app, e client.LogEntry) error {
	if a.json {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(a.out, "%s\n", b)
		return err
	}
	who := e.Fields["source"]
	if pid := e.Fields["pid"]; pid != "" {
		who += "[" + pid
		if tag := e.Fields["tag"]; tag != "" {
			who += " " + tag
		}
		who += "]"
	}
	_, err := fmt.Fprintf(a.out, "%s %s %s\n", e.Timestamp.Local().Format("2006-01-02 15:04:05.000"), who, e.Message)
	return err
}
