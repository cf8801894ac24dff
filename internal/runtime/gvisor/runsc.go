package gvisor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/runtime"
)

// baseFlags go on every runsc command. runsc also relays them to the
// sandbox and gofer processes it starts.
//
//   - systrap: the KVM platform hangs on these hosts (PVM), ptrace is slower.
//   - --host-uds=open: the agent can connect to its socket on the host
//     (never create one there).
//   - --overlay2=none: writes go to the sandbox's own subvolume, where
//     snapshots see them; runsc's default keeps them in a memory-backed
//     upper layer that a btrfs snapshot would miss.
//   - --gofer-network-namespace=new: each gofer gets an empty network
//     namespace of its own that dies with it, instead of one shared
//     namespace bind-mounted under --root that outlives every sandbox.
//   - --allow-suid: setuid and setgid bits work as on Linux (sudo). Without
//     it gVisor ignores them; with it the spec's noNewPrivileges still
//     stops every ID gain when the sandbox is started with it.
func (rc *runsc) baseFlags() []string {
	return []string{
		"--root=" + rc.root,
		"--platform=systrap",
		"--host-uds=open",
		"--overlay2=none",
		"--gofer-network-namespace=new",
		"--allow-suid",
	}
}

// runsc invokes the runsc binary: every command with runsc's own state
// directory, the flags every sandbox shares and a deadline.
type runsc struct {
	bin  string
	root string // --root: runsc's own state for every sandbox

	// callTimeout and longCallTimeout replace the deadlines of runsc's
	// commands when set (tests).
	callTimeout, longCallTimeout time.Duration
}

// runscError is a failed runsc command with what it said.
type runscError struct {
	args []string
	msg  string
	err  error
}

func (e *runscError) Error() string {
	if e.msg == "" {
		return fmt.Sprintf("runsc %s: %v", strings.Join(e.args, " "), e.err)
	}
	return fmt.Sprintf("runsc %s: %s", strings.Join(e.args, " "), e.msg)
}

func (e *runscError) Unwrap() error { return e.err }

// notExist reports whether runsc said it has no state for the container.
func (e *runscError) notExist() bool {
	return strings.Contains(e.msg, "does not exist")
}

// out runs one short runsc command (not one that starts a sandbox: its
// output goes to pipes, which a sandbox must never inherit) and returns its
// stdout.
func (rc *runsc) out(ctx context.Context, args ...string) ([]byte, error) {
	budget := rc.deadline(callTimeout, rc.callTimeout)
	if len(args) > 0 && args[0] == "checkpoint" {
		budget = rc.deadline(longCallTimeout, rc.longCallTimeout)
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	full := append(rc.baseFlags(), args...)
	cmd := exec.CommandContext(ctx, rc.bin, full...)
	// A child that keeps runsc's pipes open must not hold the call past
	// its deadline either.
	cmd.WaitDelay = waitDelay
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(stdout.String())
		}
		return stdout.Bytes(), &runscError{args: args, msg: lastLines(msg, 5), err: err}
	}
	return stdout.Bytes(), nil
}

// Deadlines of runsc's commands. The sandbox's lock is held across them,
// and a runsc that hangs (a wedged sandbox, a gofer stuck in the kernel)
// must not hold it, and every later call on that sandbox, for ever. They
// bound a hang, not a slow machine: generous.
const (
	// callTimeout bounds a short command: state, pause, resume, kill,
	// delete, update, events, an exec of the init.
	callTimeout = time.Minute
	// longCallTimeout bounds what moves a sandbox's memory: run, restore
	// and checkpoint of a sandbox of many GiB.
	longCallTimeout = 10 * time.Minute
	// waitDelay is how long a timed-out runsc's pipes may stay open.
	waitDelay = 5 * time.Second
)

// deadline is def unless the runtime was given its own (tests).
func (rc *runsc) deadline(def, own time.Duration) time.Duration {
	if own > 0 {
		return own
	}
	return def
}

// runDetached runs `runsc run --detach`, which returns once the sandbox is
// up and PID 1 has started, or `runsc restore --detach` from image. The sandbox inherits runsc's stdio as PID 1's:
// files only, since a pipe to this process would break (SIGPIPE, blocked
// writes) when the daemon dies. runsc's own errors go to the user's log
// (through stderr) and to runsc.log in the bundle, where they are read back.
func (rc *runsc) runDetached(ctx context.Context, bundle string, spec runtime.Spec, image string) error {
	stdin, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer stdin.Close()
	var out *os.File
	if spec.LogPath != "" {
		// O_APPEND: stdout and stderr share the file, and gVisor writes
		// each at its own offset otherwise.
		out, err = os.OpenFile(spec.LogPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
		if err != nil {
			return fmt.Errorf("open log file: %w", err)
		}
	} else {
		out, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
	}
	defer out.Close()

	network := "--network=none"
	if spec.NetNS != "" {
		// gVisor's netstack takes over the interfaces of the namespace
		// named in the spec.
		network = "--network=sandbox"
	}
	verb := []string{"run"}
	if image != "" {
		verb = []string{"restore", "--image-path=" + image}
	}
	args := append(rc.baseFlags(), network, "--log="+filepath.Join(bundle, "runsc.log"))
	if spec.Devices != nil {
		args = append(args, nvproxyFlags...)
	}
	args = append(args, verb...)
	args = append(args, "--detach", "--bundle="+bundle, "--pid-file="+filepath.Join(bundle, "pid"), spec.ID)
	ctx, cancel := context.WithTimeout(ctx, rc.deadline(longCallTimeout, rc.longCallTimeout))
	defer cancel()
	cmd := exec.CommandContext(ctx, rc.bin, args...)
	cmd.WaitDelay = waitDelay
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, out, out
	cmd.Dir = bundle
	if err := cmd.Run(); err != nil {
		if msg := runscLogError(bundle); msg != "" {
			return &runscError{args: verb[:1], msg: msg, err: err}
		}
		return &runscError{args: verb[:1], err: err}
	}
	return nil
}

// ociState is what `runsc state` prints.
type ociState struct {
	ID     string `json:"id"`
	Status string `json:"status"` // creating, created, running, paused, stopped
	Pid    int    `json:"pid"`
}

// state asks runsc for id's state. A missing container is a *runscError
// whose notExist() is true.
func (rc *runsc) state(ctx context.Context, id string) (ociState, error) {
	out, err := rc.out(ctx, "state", id)
	if err != nil {
		return ociState{}, err
	}
	var st ociState
	if err := json.Unmarshal(out, &st); err != nil {
		return ociState{}, fmt.Errorf("parse runsc state: %w", err)
	}
	return st, nil
}

func isNotExist(err error) bool {
	var re *runscError
	return errors.As(err, &re) && re.notExist()
}

// runscLogError returns the last error runsc wrote to a sandbox's log
// (one JSON object per line), or "".
func runscLogError(bundle string) string {
	data, err := os.ReadFile(filepath.Join(bundle, "runsc.log"))
	if err != nil {
		return ""
	}
	var last string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e struct {
			Msg string `json:"msg"`
		}
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Msg != "" {
			last = e.Msg
		}
	}
	return last
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
