package main

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/internal/daemon"
	"github.com/warrenhq/warren/internal/mcpserver"
)

func mcpCmd(a *app) *cobra.Command {
	var verbose bool
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve warren's sandboxes and tools to an MCP client over stdio",
		Long: `warren mcp speaks the Model Context Protocol on stdin/stdout, for an MCP client
(an agent, an IDE) to start as a subprocess. Its tools act through the daemon
named by --url with the usual API key: sandbox_create, sandbox_list,
sandbox_kill, the in-sandbox tools (bash, read, write, edit, ls, glob, grep,
apply_patch), snapshot, rollback, fork and diff. It logs to stderr only.

The daemon also serves the same tools over HTTP at <url>/mcp.`,
		Example: `  # In an MCP client's configuration:
  {"mcpServers": {"warren": {"command": "warren", "args": ["mcp"],
    "env": {"WARREN_URL": "http://127.0.0.1:3000", "WARREN_API_KEY": "..."}}}}`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelWarn
			if verbose {
				level = slog.LevelDebug
			}
			log := slog.New(slog.NewTextHandler(a.errOut, &slog.HandlerOptions{Level: level}))
			srv := mcpserver.New(a.client(), daemon.Version, mcpserver.WithLogger(log))
			ctx := cmd.Context()
			ss, err := srv.Connect(ctx, &mcp.IOTransport{
				Reader: io.NopCloser(a.in), Writer: nopWriteCloser{a.out}, MaxLineLength: mcpserver.MaxMessageBytes,
			}, nil)
			if err != nil {
				return err
			}
			// The session ends when the client closes stdin; an interrupt
			// closes it from this side.
			stop := context.AfterFunc(ctx, func() { ss.Close() })
			defer stop()
			err = ss.Wait()
			if ctx.Err() != nil || errors.Is(err, io.EOF) {
				return nil
			}
			return err
		},
	}
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "log the protocol's debug messages to stderr")
	return cmd
}

// nopWriteCloser leaves stdout open when the session closes.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
