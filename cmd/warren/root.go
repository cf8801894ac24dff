package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/client"
)

const (
	defaultURL     = "http://127.0.0.1:3000"
	defaultDataDir = "/var/lib/warren"
)

// app is what every CLI command shares: the global flags, the standard
// streams, and how to reach the daemon. Tests build one around a fake
// server and buffers.
type app struct {
	url     string
	apiKey  string
	dataDir string
	json    bool

	in     io.Reader
	out    io.Writer
	errOut io.Writer
	getenv func(string) string
	// httpClient overrides the HTTP client (tests); nil = http.DefaultClient.
	httpClient *http.Client

	// keySource says where the API key came from, for error hints.
	keySource string
}

// run executes the CLI with args and returns the process's exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	a := &app{in: stdin, out: stdout, errOut: stderr, getenv: getenv}
	root := newRootCmd(a)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	return a.exitCode(cmd, err)
}

func newRootCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "warren",
		Short: "Self-hosted sandboxes for AI agents",
		Long: `warren runs isolated Linux sandboxes for AI agents on this host.

"warren serve" runs the daemon; the other commands talk to it over its HTTP API.
The API key comes from --api-key, else $WARREN_API_KEY, else <data-dir>/admin.key.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			a.applyEnv(cmd)
			return nil
		},
	}
	root.SetIn(a.in)
	root.SetOut(a.out)
	root.SetErr(a.errOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })

	pf := root.PersistentFlags()
	pf.StringVar(&a.url, "url", defaultURL, "the daemon's address (env WARREN_URL)")
	pf.StringVar(&a.apiKey, "api-key", "", "API key (env WARREN_API_KEY; default: the contents of <data-dir>/admin.key)")
	pf.StringVar(&a.dataDir, "data-dir", defaultDataDir, "warren's data directory (env WARREN_DATA_DIR)")
	pf.BoolVar(&a.json, "json", false, "print the API's JSON instead of text")

	root.AddCommand(
		sandboxCmd(a),
		execCmd(a),
		filesCmd(a),
		volumeCmd(a),
		keyCmd(a),
		teamCmd(a),
		secretCmd(a),
		templateCmd(a),
		snapshotCmd(a),
		turnCmd(a),
		rollbackCmd(a),
		forkCmd(a),
		promoteCmd(a),
		diffCmd(a),
		lineageCmd(a),
		logsCmd(a),
		toolCmd(a),
		toolsCmd(a),
		mcpCmd(a),
		topCmd(a),
		serveCmd(),
		benchCmd(),
		execNaiveCmd(),
		teardownCmd(),
		poolsCmd(a),
		healthCmd(a),
		caCmd(a),
		portForwardCmd(a),
		shellCmd(a),
		gatewayCmd(),
		nodeCmd(a),
	)
	root.AddCommand(processCmds(a)...)
	root.AddCommand(mergeCmds(a)...)
	root.AddCommand(devicesCmd(a))
	root.AddCommand(nodesCmd(a))
	return root
}

// applyEnv fills the global flags the user did not set from the
// environment. Done at run time, not as flag defaults, so that --help never
// prints a secret taken from $WARREN_API_KEY.
func (a *app) applyEnv(cmd *cobra.Command) {
	fill := func(flag, env string, dst *string) {
		if f := cmd.Flags().Lookup(flag); f != nil && f.Changed {
			return
		}
		if v := a.getenv(env); v != "" {
			*dst = v
			// Keep the flag's value in step, for commands (serve) that read
			// it through cmd.Flags().
			if f := cmd.Flags().Lookup(flag); f != nil {
				_ = f.Value.Set(v)
			}
		}
	}
	fill("url", "WARREN_URL", &a.url)
	fill("data-dir", "WARREN_DATA_DIR", &a.dataDir)
	a.keySource = "--api-key"
	if f := cmd.Flags().Lookup("api-key"); f == nil || !f.Changed {
		a.keySource = ""
		fill("api-key", "WARREN_API_KEY", &a.apiKey)
		if a.apiKey != "" {
			a.keySource = "$WARREN_API_KEY"
		}
	}
}

// client returns an API client, reading the admin key from the data
// directory when no key was given. An unreadable key file is not an error
// here: the daemon's 401 says what is missing, and exitCode adds the hint.
func (a *app) client() *client.Client {
	if a.apiKey == "" {
		path := filepath.Join(a.dataDir, "admin.key")
		if b, err := os.ReadFile(path); err == nil {
			a.apiKey = strings.TrimSpace(string(b))
			a.keySource = path
		}
	}
	var opts []client.Option
	if a.httpClient != nil {
		opts = append(opts, client.WithHTTPClient(a.httpClient))
	}
	return client.New(a.url, a.apiKey, opts...)
}

// exitCode prints err the way the CLI reports failures and returns the
// process's exit code.
func (a *app) exitCode(cmd *cobra.Command, err error) int {
	if err == nil {
		return 0
	}
	var ee exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(a.errOut, "error: %s\n", a.describe(ee.err))
		}
		return ee.code
	}
	fmt.Fprintf(a.errOut, "error: %s\n", a.describe(err))
	var ue usageError
	if errors.As(err, &ue) && cmd != nil {
		fmt.Fprintf(a.errOut, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return 1
}

// describe is the text of err a user sees, with a hint where one helps.
func (a *app) describe(err error) string {
	msg := err.Error()
	switch {
	case errors.Is(err, context.Canceled):
		return "interrupted"
	case client.StatusCode(err) == http.StatusUnauthorized && a.keySource == "":
		return msg + " (no API key found: pass --api-key, set WARREN_API_KEY, or make " +
			filepath.Join(a.dataDir, "admin.key") + " readable)"
	case client.StatusCode(err) == http.StatusUnauthorized:
		return msg + " (the API key from " + a.keySource + " was refused)"
	}
	return msg
}

// exitError ends the CLI with code after printing err (when not nil).
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e exitError) Unwrap() error { return e.err }

// usageError is a mistake in the command line; the CLI points at --help.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// args wraps a cobra argument check so that its failure is a usageError.
func args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := check(cmd, a); err != nil {
			return usageError{err}
		}
		return nil
	}
}
