package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/client"
)

// stdinChunk bounds one send-input request (the server takes 4 MiB).
const stdinChunk = 1 << 20

// processCmds are the commands for background processes.
func processCmds(a *app) []*cobra.Command {
	return []*cobra.Command{psCmd(a), startCmd(a), attachCmd(a), killCmd(a), sendInputCmd(a)}
}

func psCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "ps ID",
		Short: "List a sandbox's background processes",
		Long: `List a sandbox's background processes: those running and those that exited in the
last ten minutes, with their exit codes.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			list, err := a.client().Processes.List(cmd.Context(), argv[0])
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, list)
			}
			tw := newTable(a.out)
			row(tw, "PID", "TAG", "STATE", "EXIT", "STARTED", "OUTPUT", "COMMAND")
			for _, p := range list {
				exit := "-"
				if p.ExitCode != nil {
					exit = strconv.Itoa(int(*p.ExitCode))
				}
				tag := p.Tag
				if tag == "" {
					tag = "-"
				}
				row(tw, strconv.Itoa(int(p.PID)), tag, p.State, exit, fmtTime(p.StartedAt),
					fmtBytes(int64(p.StdoutBytes+p.StderrBytes)), strings.Join(p.Cmd, " "))
			}
			return tw.Flush()
		},
	}
}

func startCmd(a *app) *cobra.Command {
	var (
		tag, user, cwd string
		env            []string
		timeout        time.Duration
		shell, stdin   bool
	)
	cmd := &cobra.Command{
		Use:   "start [flags] ID [--] CMD [ARGS...]",
		Short: "Start a background process in a sandbox",
		Long: `Start a command in a sandbox in the background and print its pid. It keeps running
after this command returns (and across daemon restarts); its output is kept on the
host (the newest 8 MiB of each stream) for "warren attach". Its stdin stays open for
"warren send-input".`,
		Example: `  warren start --tag server $ID -- python3 -m http.server 8000
  warren attach $ID server
  warren kill $ID server`,
		Args: args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			id, words, err := splitExecArgs(argv, cmd.ArgsLenAtDash())
			if err != nil {
				return usageError{err}
			}
			req := client.StartProcessRequest{Tag: tag}
			req.User, req.Cwd = user, cwd
			if shell {
				req.Command = strings.Join(words, " ")
			} else {
				req.Cmd = words
			}
			if req.Env, err = parseKV("env", env); err != nil {
				return usageError{err}
			}
			if timeout < 0 || timeout.Milliseconds() > math.MaxUint32 {
				return usageError{fmt.Errorf("--timeout %s is out of range", timeout)}
			}
			req.TimeoutMs = uint32(timeout.Milliseconds())
			if stdin {
				if req.Stdin, err = io.ReadAll(a.in); err != nil {
					return fmt.Errorf("read stdin: %w", err)
				}
			}
			p, err := a.client().Processes.Start(cmd.Context(), id, req)
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, p)
			}
			fmt.Fprintln(a.out, p.PID)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&tag, "tag", "", "name the process (unique among running processes)")
	f.StringVar(&user, "user", "", "run as this user (default: the server's)")
	f.StringVar(&cwd, "cwd", "", "working directory")
	f.StringArrayVar(&env, "env", nil, "environment variable KEY=VALUE (repeatable)")
	f.DurationVar(&timeout, "timeout", 0, "kill the process after this long (default: no limit)")
	f.BoolVar(&shell, "shell", false, "join CMD ARGS into one shell command run by bash -lc")
	f.BoolVar(&stdin, "stdin", false, "send this command's stdin (read to the end) to the process first")
	return cmd
}

func attachCmd(a *app) *cobra.Command {
	var (
		noFollow bool
		from     uint64
	)
	cmd := &cobra.Command{
		Use:   "attach ID PID|TAG",
		Short: "Replay a background process's output, then follow it",
		Long: `Print a background process's output from the start (as much as the host keeps),
then follow it live until the process exits. Interrupting detaches: the process
keeps running. The exit status is the process's own when it exits.`,
		Args: args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			opts := client.OutputOptions{From: from, Follow: !noFollow}
			var ev *client.ProcessEvent
			var err error
			if a.json {
				enc := func(e client.ProcessEvent) error { return printJSONLine(a.out, e) }
				ev, err = a.client().Processes.Output(cmd.Context(), argv[0], argv[1], opts, enc)
			} else {
				ev, err = a.client().Processes.Attach(cmd.Context(), argv[0], argv[1], opts, a.out, a.errOut)
			}
			if errors.Is(err, context.Canceled) {
				return nil // detached
			}
			if err != nil || ev == nil {
				return err
			}
			code, note := execStatus{exitCode: ev.ExitCode, signal: ev.Signal, timedOut: ev.TimedOut, err: ev.Error}.exit()
			if note != "" && !a.json {
				fmt.Fprintf(a.errOut, "warren: %s\n", note)
			}
			if code != 0 {
				return exitError{code: code}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&noFollow, "no-follow", false, "print what is kept and return")
	cmd.Flags().Uint64Var(&from, "from", 0, "start at this byte offset of each stream")
	return cmd
}

// printJSONLine writes v as one line of JSON (NDJSON, for streams).
func printJSONLine(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

func killCmd(a *app) *cobra.Command {
	var signal string
	cmd := &cobra.Command{
		Use:   "kill ID PID|TAG",
		Short: "Send a signal to a background process (default SIGTERM)",
		Long: `Send a signal to a background process and everything it started (its process group).
Allowed: SIGTERM, SIGKILL, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGSTOP, SIGCONT.`,
		Args: args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			return a.client().Processes.Signal(cmd.Context(), argv[0], argv[1], signal)
		},
	}
	cmd.Flags().StringVarP(&signal, "signal", "s", "SIGTERM", "the signal to send")
	return cmd
}

func sendInputCmd(a *app) *cobra.Command {
	var closeAfter bool
	cmd := &cobra.Command{
		Use:   "send-input ID PID|TAG",
		Short: "Send this command's stdin to a background process's stdin",
		Long: `Copy this command's stdin to a background process's stdin as it is read. With
--close the process's stdin is closed afterwards (it reads EOF).`,
		Example: `  echo 'print(1+1)' | warren send-input $ID repl
  warren send-input --close $ID repl </dev/null`,
		Args: args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			c := a.client()
			buf := make([]byte, stdinChunk)
			for {
				n, rerr := a.in.Read(buf)
				if n > 0 {
					if err := c.Processes.SendInput(cmd.Context(), argv[0], argv[1], buf[:n]); err != nil {
						return err
					}
				}
				if errors.Is(rerr, io.EOF) {
					break
				}
				if rerr != nil {
					return fmt.Errorf("read stdin: %w", rerr)
				}
			}
			if closeAfter {
				return c.Processes.CloseStdin(cmd.Context(), argv[0], argv[1])
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&closeAfter, "close", false, "close the process's stdin after sending")
	return cmd
}
