package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/client"
)

// Exit codes of `warren exec` that are not the command's own.
const (
	exitTimedOut    = 124 // as timeout(1)
	exitSignalBase  = 128 // + the signal number, as shells do
	exitInterrupted = 130 // the CLI itself got SIGINT/SIGTERM
	exitWarrenError = 255 // warren failed: bad flags, API or connection error
)

func execCmd(a *app) *cobra.Command {
	var (
		user, cwd    string
		env          []string
		timeout      time.Duration
		stdin, shell bool
		turn         bool
	)
	cmd := &cobra.Command{
		Use:   "exec [flags] ID [--] CMD [ARGS...]",
		Short: "Run a command in a sandbox",
		Long: `Run a command in a sandbox, streaming its stdout and stderr here as they arrive.

Put "--" before the command when it has flags of its own. With --shell the command
words are joined with spaces and run by "bash -lc", so pipes and variables work.
With --json the command's output is collected and printed as one JSON object.
With --turn a turn snapshot is taken when the command ends; its id is printed on
stderr as "turn snapshot: ID".

Exit status:
  the command's own exit code when it exits;
  124 when --timeout killed it;
  128+N when signal N killed it;
  130 when warren exec itself was interrupted;
  255 when warren failed (bad flags, the daemon unreachable, an API error,
      the command could not be started).`,
		Example: `  warren exec $ID -- ls -la /
  warren exec --shell $ID -- 'cd /tmp && echo $HOME | wc -c'
  echo hi | warren exec --stdin $ID -- cat`,
		RunE: func(cmd *cobra.Command, argv []string) error {
			id, words, err := splitExecArgs(argv, cmd.ArgsLenAtDash())
			if err != nil {
				return exitError{exitWarrenError, usageError{err}}
			}
			req := client.ExecRequest{User: user, Cwd: cwd, Turn: turn}
			if shell {
				req.Command = strings.Join(words, " ")
			} else {
				req.Cmd = words
			}
			if req.Env, err = parseKV("env", env); err != nil {
				return exitError{exitWarrenError, usageError{err}}
			}
			if timeout < 0 || timeout.Milliseconds() > math.MaxUint32 {
				return exitError{exitWarrenError, usageError{fmt.Errorf("--timeout %s: want between 0 and %s", timeout, time.Duration(math.MaxUint32)*time.Millisecond)}}
			}
			req.TimeoutMs = uint32(timeout.Milliseconds())
			if stdin {
				if req.Stdin, err = io.ReadAll(a.in); err != nil {
					return exitError{exitWarrenError, fmt.Errorf("read stdin: %w", err)}
				}
			}
			return a.runExec(cmd.Context(), id, req)
		},
	}
	// A mistyped flag is warren's failure, not the command's.
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return exitError{exitWarrenError, usageError{err}}
	})
	f := cmd.Flags()
	f.StringVar(&user, "user", "", "run as this user (default: the server's)")
	f.StringVar(&cwd, "cwd", "", "working directory (default: the user's home)")
	f.StringArrayVar(&env, "env", nil, "environment variable KEY=VALUE (repeatable)")
	f.DurationVar(&timeout, "timeout", 0, "kill the command after this long, e.g. 30s (default: no limit)")
	f.BoolVar(&stdin, "stdin", false, "send this command's stdin (read to the end first) to the command")
	f.BoolVar(&shell, "shell", false, "join CMD ARGS into one shell command run by bash -lc")
	f.BoolVar(&turn, "turn", false, "take a turn snapshot when the command ends (its id goes to stderr)")
	return cmd
}

// splitExecArgs separates the sandbox id from the command. dash is
// cobra's ArgsLenAtDash: the number of arguments before "--", or -1.
func splitExecArgs(argv []string, dash int) (id string, words []string, err error) {
	switch {
	case dash == 0 || len(argv) == 0:
		return "", nil, errors.New("missing sandbox ID: want ID -- CMD [ARGS...]")
	case dash > 1:
		return "", nil, fmt.Errorf("unexpected %q before \"--\": want ID -- CMD [ARGS...]", argv[1])
	}
	id, words = argv[0], argv[1:]
	if len(words) == 0 {
		return "", nil, errors.New("missing command: want ID -- CMD [ARGS...]")
	}
	return id, words, nil
}

// runExec runs req and turns its outcome into the CLI's exit status.
func (a *app) runExec(ctx context.Context, id string, req client.ExecRequest) error {
	c := a.client()
	var (
		st   execStatus
		snap string
	)
	if a.json {
		res, err := c.Commands.ExecWait(ctx, id, req)
		if err != nil {
			return execFailure(err)
		}
		if err := printJSON(a.out, res); err != nil {
			return exitError{exitWarrenError, err}
		}
		st, snap = resultStatus(res), res.SnapshotID
	} else {
		ev, err := c.Commands.Exec(ctx, id, req, a.out, a.errOut)
		if err != nil {
			return execFailure(err)
		}
		st, snap = eventStatus(ev), ev.SnapshotID
	}
	// The snapshot's id goes to stderr so that stdout stays the command's.
	switch {
	case snap != "":
		fmt.Fprintf(a.errOut, "turn snapshot: %s\n", snap)
	case req.Turn:
		fmt.Fprintln(a.errOut, "warren: no turn snapshot was taken")
	}
	code, note := st.exit()
	if note != "" {
		fmt.Fprintf(a.errOut, "warren: %s\n", note)
	}
	if code == 0 {
		return nil
	}
	return exitError{code: code}
}

func execFailure(err error) error {
	if errors.Is(err, context.Canceled) {
		return exitError{exitInterrupted, err}
	}
	return exitError{exitWarrenError, err}
}

// execStatus is how a command ended, from either answer shape.
type execStatus struct {
	exitCode  *int32
	signal    string
	timedOut  bool
	truncated bool
	err       string
}

func eventStatus(ev client.ExecEvent) execStatus {
	return execStatus{exitCode: ev.ExitCode, signal: ev.Signal, timedOut: ev.TimedOut, truncated: ev.OutputTruncated, err: ev.Error}
}

func resultStatus(r client.ExecResult) execStatus {
	st := execStatus{signal: r.Signal, timedOut: r.TimedOut, truncated: r.OutputTruncated, err: r.Error}
	// ExecResult always carries a code; with an error and code 0 the
	// command never ran, so there is no code of its own to pass on.
	if r.Error == "" || r.ExitCode != 0 {
		code := r.ExitCode
		st.exitCode = &code
	}
	return st
}

// exit returns the CLI's exit code and a note for stderr ("" for none).
func (st execStatus) exit() (int, string) {
	var notes []string
	if st.truncated {
		notes = append(notes, "output truncated at the server's limit")
	}
	code := exitWarrenError
	switch {
	case st.timedOut:
		code = exitTimedOut
		notes = append(notes, "command timed out")
	case st.signal != "":
		code = exitSignalBase + signalNumber(st.signal)
		if st.exitCode != nil && *st.exitCode > exitSignalBase {
			// The agent already gave 128+N; its signal name may be prose.
			code = int(*st.exitCode) & 0xff
		}
		notes = append(notes, "command killed by signal "+st.signal)
	case st.exitCode != nil && *st.exitCode >= 0:
		code = int(*st.exitCode) & 0xff
		if st.err != "" {
			notes = append(notes, st.err)
		}
	case st.err != "":
		notes = append(notes, "command failed: "+st.err)
	default:
		notes = append(notes, "the command ended without an exit code")
	}
	return code, strings.Join(notes, "; ")
}

// signalNumber reads a signal given as "SIGKILL", "KILL" or "9"; an
// unknown name is 0, giving exit code 128.
func signalNumber(name string) int {
	if n, err := strconv.Atoi(name); err == nil && n > 0 && n < 128 {
		return n
	}
	up := strings.ToUpper(name)
	if !strings.HasPrefix(up, "SIG") {
		up = "SIG" + up
	}
	return int(unix.SignalNum(up))
}
