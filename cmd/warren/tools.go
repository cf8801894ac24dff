package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/client"
)

// toolCmd is `warren tool`: with ID and TOOL it calls the tool (as `tool
// call` does), else one of its subcommands.
func toolCmd(a *app) *cobra.Command {
	call := toolCallCmd(a)
	cmd := &cobra.Command{
		Use:     "tool [ID TOOL]",
		Short:   "Call the typed tools an agent uses in a sandbox (bash, read, write, edit, ls, glob, grep, apply_patch)",
		Example: call.Example,
		Args:    args(cobra.ExactArgs(2)),
		RunE:    call.RunE,
	}
	cmd.Flags().AddFlagSet(call.Flags())
	cmd.AddCommand(toolListCmd(a), call, toolCallsCmd(a))
	return cmd
}

// toolsCmd is `warren tools`, the same as `warren tool ls`.
func toolsCmd(a *app) *cobra.Command {
	ls := toolListCmd(a)
	ls.Use, ls.Aliases = "tools", nil
	return ls
}

func toolListCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the tools with their parameters (--json: with their JSON Schemas)",
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			tools, err := a.client().Tools.List(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, tools)
			}
			for _, t := range tools {
				var schema struct {
					Properties map[string]json.RawMessage `json:"properties"`
					Required   []string                   `json:"required"`
				}
				_ = json.Unmarshal(t.Params, &schema)
				var params []string
				for name := range schema.Properties {
					p := name
					if !slices.Contains(schema.Required, name) {
						p += "?"
					}
					params = append(params, p)
				}
				slices.Sort(params)
				first, _, _ := strings.Cut(t.Description, "\n")
				fmt.Fprintf(a.out, "%-12s %s\n%-12s %s\n", t.Name, strings.Join(params, " "), "", first)
			}
			return nil
		},
	}
}

func toolCallCmd(a *app) *cobra.Command {
	var (
		paramsJSON string
		kv         []string
		callID     string
		turn       bool
		stream     bool
		user, cwd  string
	)
	cmd := &cobra.Command{
		Use:   "call ID TOOL",
		Short: "Call one tool in a sandbox and print what the model would read",
		Long: `Call one tool in a sandbox and print its content. Params come as a JSON object
(--params, or - to read it from stdin) and/or as KEY=VALUE pairs (-p; a value
that parses as JSON — a number, true, an array — is taken as such, else as a
string). The exit code is 1 when the tool reports an error, bash's own exit
code when bash ran, else 0.`,
		Example: `  warren tool $ID bash -p command='ls -la /'
  warren tool $ID read -p path=/etc/os-release -p limit=5
  warren tool $ID edit -p path=app.py -p oldString=foo -p newString=bar --turn
  echo '{"pattern": "TODO", "path": "/workspace"}' | warren tool $ID grep --params -`,
		Args: args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			params, err := toolParams(a.in, paramsJSON, kv)
			if err != nil {
				return usageError{err}
			}
			in := client.ToolCall{ToolCallID: callID, Params: params, Turn: turn, User: user, Cwd: cwd}
			var progress func([]byte)
			if stream && !a.json {
				progress = func(b []byte) { _, _ = a.errOut.Write(b) }
			}
			res, err := a.client().Tools.Call(cmd.Context(), argv[0], argv[1], in, progress)
			if err != nil {
				return err
			}
			if a.json {
				if err := printJSON(a.out, res); err != nil {
					return err
				}
			} else {
				fmt.Fprint(a.out, res.Content)
				if !strings.HasSuffix(res.Content, "\n") && res.Content != "" {
					fmt.Fprintln(a.out)
				}
				if res.SnapshotID != "" {
					fmt.Fprintf(a.errOut, "snapshot %s\n", res.SnapshotID)
				}
				if res.SnapshotError != "" {
					fmt.Fprintf(a.errOut, "warren: %s\n", res.SnapshotError)
				}
			}
			switch {
			case res.ExitCode != nil && *res.ExitCode != 0:
				return exitError{code: int(*res.ExitCode)}
			case res.IsError:
				return exitError{code: 1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&paramsJSON, "params", "", "the params as a JSON object (- reads it from stdin)")
	f.StringArrayVarP(&kv, "param", "p", nil, "one param KEY=VALUE (repeatable)")
	f.StringVar(&callID, "call-id", "", "your id of this call, kept in its record")
	f.BoolVar(&turn, "turn", false, "take a turn snapshot after the call")
	f.BoolVar(&stream, "stream", false, "print bash's output to stderr as it comes")
	f.StringVar(&user, "user", "", "run as this user (default: user, where the sandbox has one)")
	f.StringVar(&cwd, "cwd", "", "directory relative paths resolve against (default: the user's home)")
	return cmd
}

// toolParams puts a call's params together from a JSON object and
// KEY=VALUE pairs (which win).
func toolParams(stdin io.Reader, paramsJSON string, kv []string) (json.RawMessage, error) {
	params := map[string]json.RawMessage{}
	if paramsJSON == "-" {
		b, err := io.ReadAll(io.LimitReader(stdin, 64<<20))
		if err != nil {
			return nil, fmt.Errorf("read params from stdin: %w", err)
		}
		paramsJSON = string(b)
	}
	if strings.TrimSpace(paramsJSON) != "" {
		if err := json.Unmarshal([]byte(paramsJSON), &params); err != nil {
			return nil, fmt.Errorf("--params is not a JSON object: %w", err)
		}
	}
	for _, p := range kv {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("-p %q: want KEY=VALUE", p)
		}
		if json.Valid([]byte(v)) && !isBareString(v) {
			params[k] = json.RawMessage(v)
			continue
		}
		b, _ := json.Marshal(v)
		params[k] = b
	}
	return json.Marshal(params)
}

// isBareString: a JSON string literal given to -p is taken as the string
// it spells, quotes included, only when asked for with --params.
func isBareString(v string) bool { return strings.HasPrefix(v, `"`) }

func toolCallsCmd(a *app) *cobra.Command {
	var after int64
	var limit int
	cmd := &cobra.Command{
		Use:   "calls ID",
		Short: "List a sandbox's tool calls: tool, duration, result, snapshot",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			calls, err := a.client().Tools.Calls(cmd.Context(), argv[0], after, limit)
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, calls)
			}
			tw := newTable(a.out)
			row(tw, "ID", "TIME", "TOOL", "CALL", "MS", "RESULT", "EXIT", "SNAPSHOT")
			for _, c := range calls {
				res := "ok"
				if c.IsError {
					res = "error"
				}
				exit := "-"
				if c.ExitCode != nil {
					exit = strconv.Itoa(int(*c.ExitCode))
				}
				row(tw, strconv.FormatInt(c.ID, 10), fmtTime(c.At), c.Tool, orDash(c.ToolCallID),
					strconv.FormatUint(c.DurationMs, 10), fmt.Sprintf("%s (%d B)", res, c.ResultBytes), exit, orDash(c.SnapshotID))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().Int64Var(&after, "after", 0, "list the calls after this id")
	cmd.Flags().IntVar(&limit, "limit", 0, "list at most this many")
	return cmd
}
