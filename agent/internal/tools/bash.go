package tools

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/agent/internal/initproc"
	"github.com/warrenhq/warren/agent/internal/users"
)

const (
	// maxBashOutput bounds the output a bash result carries; more is cut
	// from the middle.
	maxBashOutput = 30_000
	// maxProgressBytes bounds the progress a bash call streams: past it the
	// command keeps running and its output still reaches the result's tail.
	maxProgressBytes   = 16 << 20
	defaultBashTimeout = 2 * time.Minute
	maxBashTimeoutMs   = 60 * 60 * 1000
	// drainGrace is how long output is still read after the shell exits: a
	// background child that inherited the pipe would otherwise hold the call
	// open for as long as it lives.
	drainGrace = 200 * time.Millisecond
	readChunk  = 32 << 10
)

type bashParams struct {
	Command   string            `json:"command"`
	Cwd       string            `json:"cwd"`
	Env       map[string]string `json:"env"`
	TimeoutMs int64             `json:"timeoutMs"`
}

func bashTool() *tool {
	return define("bash",
		"Run a shell command in the sandbox with bash (`bash -l -c COMMAND`; /bin/sh when the sandbox has no bash) "+
			"and return its combined stdout and stderr. Standard input is empty (/dev/null), so interactive "+
			"commands do not wait for input: pass flags such as -y instead. Each call starts a fresh shell: "+
			"`cd` and exported variables do not carry over to the next call (use cwd and env). "+
			"Output longer than 30000 bytes is cut from the middle with a note; redirect big output to a file "+
			"and read or grep it. A non-zero exit status is reported as an error with the status appended; "+
			"a command still running at the timeout is killed with its whole process group. "+
			"Background processes started with `&` (or nohup) keep running after the call returns. "+
			"Prefer the read, edit, write, ls, glob and grep tools over cat, sed, echo >, ls, find and grep.",
		[]param{
			str("command", "The command line to run, as you would type it into bash. Pipes, redirections, && and ; work.").req(),
			str("cwd", "Working directory; relative paths resolve against the call's directory (by default the user's home). Default: the call's directory."),
			stringMap("env", "Environment variables to add to (or override in) the login environment, e.g. {\"CI\": \"1\"}."),
			integer("timeoutMs", "Kill the command after this many milliseconds. Default 120000 (2 minutes), at most 3600000.", 1, maxBashTimeoutMs),
		},
		runBash)
}

func runBash(ctx context.Context, c *call, p bashParams) Result {
	if strings.IndexByte(p.Command, 0) >= 0 {
		return fail("the command contains a NUL byte, which no shell command can carry")
	}
	for k, v := range p.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return fail("env %q: names must be non-empty without '=' or NUL bytes, values without NUL bytes", k)
		}
	}
	dir, err := c.absOr(p.Cwd)
	if err != nil {
		return fail("cwd: %v", err)
	}
	if fi, err := os.Stat(dir); err != nil {
		return fail("%s", errText("working directory", dir, err))
	} else if !fi.IsDir() {
		return fail("working directory %s is not a directory", dir)
	}
	if c.reaper == nil {
		return fail("bash is not available: the agent runs without a process reaper")
	}
	timeout := defaultBashTimeout
	if p.TimeoutMs > 0 {
		timeout = time.Duration(p.TimeoutMs) * time.Millisecond
	}

	cmd, err := startShell(c, dir, p.Command, p.Env)
	if err != nil {
		return fail("could not start the command: %v", err)
	}
	out := newHeadTail(maxBashOutput)
	ex := cmd.follow(ctx, timeout, func(b []byte) {
		_, _ = out.Write(b)
		if c.progress != nil && out.total <= maxProgressBytes {
			c.progress(b)
		}
	})

	text := out.String()
	if text == "" {
		text = "(no output)\n"
	} else if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	code := ex.code
	res := Result{ExitCode: &code}
	switch {
	case ex.timedOut:
		res.IsError = true
		text += fmt.Sprintf("[timed out after %s: the command and its process group were killed; "+
			"raise timeoutMs or run it in the background (nohup ... > log 2>&1 &) and poll the log]", timeout)
	case ex.canceled:
		res.IsError = true
		text += "[cancelled: the call was abandoned and the command was killed]"
	case ex.signal != "":
		res.IsError = true
		text += fmt.Sprintf("[killed by signal %s, exit code %d]", ex.signal, code)
	case code != 0:
		res.IsError = true
		text += fmt.Sprintf("[exit code %d]", code)
	}
	res.Content = strings.TrimSuffix(text, "\n")
	return res
}

// shell is one started command.
type shell struct {
	pid    int
	status <-chan unix.WaitStatus
	out    *os.File // stdout and stderr share one pipe, so they interleave as written
}

type exit struct {
	code     int
	signal   string
	timedOut bool
	canceled bool
}

// startShell forks the shell in its own process group as the call's user,
// through the reaper (which alone may wait for the agent's children).
func startShell(c *call, dir, command string, env map[string]string) (*shell, error) {
	argv := []string{"/bin/bash", "-l", "-c", command}
	if _, err := os.Stat(argv[0]); err != nil {
		argv = []string{"/bin/sh", "-c", command}
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	defer devnull.Close()
	rd, wr, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("make output pipe: %w", err)
	}
	defer wr.Close()
	attr := &syscall.ProcAttr{
		Dir:   dir,
		Env:   shellEnv(c.user, env),
		Files: []uintptr{devnull.Fd(), wr.Fd(), wr.Fd()},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Credential: c.user.Credential()},
	}
	pid, status, err := c.reaper.Start(func() (int, error) {
		return syscall.ForkExec(argv[0], argv, attr)
	})
	if err != nil {
		rd.Close()
		return nil, fmt.Errorf("%s: %w", argv[0], err)
	}
	return &shell{pid: pid, status: status, out: rd}, nil
}

// follow passes output to emit until the shell has exited and its pipe is
// drained, killing the process group at the timeout or when ctx ends.
func (s *shell) follow(ctx context.Context, timeout time.Duration, emit func([]byte)) exit {
	defer s.out.Close()
	type chunk struct {
		data []byte
		err  error
	}
	chunks := make(chan chunk, 4)
	go func() {
		for {
			buf := make([]byte, readChunk)
			n, err := s.out.Read(buf)
			if n > 0 {
				chunks <- chunk{data: buf[:n]}
			}
			if err != nil {
				chunks <- chunk{err: err}
				return
			}
		}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var (
		ex        exit
		status    = s.status
		done      = ctx.Done()
		gotStatus bool
		open      = true
	)
	for !gotStatus || open {
		select {
		case ch := <-chunks:
			if ch.err != nil {
				open = false
				continue
			}
			emit(ch.data)
		case ws := <-status:
			gotStatus, status = true, nil
			if ws.Signaled() {
				ex.code, ex.signal = 128+int(ws.Signal()), unix.SignalName(ws.Signal())
			} else {
				ex.code = ws.ExitStatus()
			}
			_ = s.out.SetReadDeadline(time.Now().Add(drainGrace))
		case <-timer.C:
			// Once the shell has exited only its drain is left: children
			// it left running in the background are not the call's to kill.
			if !gotStatus {
				ex.timedOut = true
				s.kill()
			}
		case <-done:
			done = nil
			if !gotStatus {
				ex.canceled = true
				s.kill()
			}
		}
	}
	return ex
}

// kill ends the command's whole process group.
func (s *shell) kill() { _ = syscall.Kill(-s.pid, syscall.SIGKILL) }

// shellEnv is the environment of a bash call: the sandbox's variables, the
// user's identity, and the call's overrides. TERM is dumb because the output
// goes to a pipe a model reads, not a terminal.
func shellEnv(u users.User, overrides map[string]string) []string {
	return initproc.CommandEnv(u, "dumb", overrides)
}
