package client

import "time"

// StartProcessRequest is the body of POST /sandboxes/{id}/processes: what
// to run, as for exec (Turn and OutputLimit do not apply), plus an optional
// tag that names the process while it runs. The process keeps running when
// the client goes away; its stdin stays open for SendInput.
type StartProcessRequest struct {
	ExecRequest
	// Tag is unique among a sandbox's running processes: 1–128 letters,
	// digits, '.', '_' or '-'.
	Tag string `json:"tag,omitempty"`
}

// ProcessInfo describes a background process (GET /sandboxes/{id}/processes).
type ProcessInfo struct {
	PID   int32    `json:"pid"`
	Tag   string   `json:"tag,omitempty"`
	Cmd   []string `json:"cmd"`
	Cwd   string   `json:"cwd,omitempty"`
	User  string   `json:"user,omitempty"`
	State string   `json:"state"` // "running" or "exited"
	// Set once exited: as in ExecEvent.
	ExitCode  *int32     `json:"exitCode,omitempty"`
	Signal    string     `json:"signal,omitempty"`
	TimedOut  bool       `json:"timedOut,omitempty"`
	Error     string     `json:"error,omitempty"`
	StartedAt time.Time  `json:"startedAt"`
	EndedAt   *time.Time `json:"endedAt,omitempty"`
	// StdoutBytes and StderrBytes count what the process has printed;
	// the host keeps the newest 8 MiB of each (from *Start on).
	StdoutBytes uint64 `json:"stdoutBytes"`
	StderrBytes uint64 `json:"stderrBytes"`
	StdoutStart uint64 `json:"stdoutStart,omitempty"`
	StderrStart uint64 `json:"stderrStart,omitempty"`
}

// ProcessEvent is one line of GET /sandboxes/{id}/processes/{pid|tag}/output.
// Type is "stdout" or "stderr" (Data found at byte Offset of that stream; a
// jump in offsets means older output was dropped), "exit" (last), or
// "error" (the stream broke).
type ProcessEvent struct {
	Type     string `json:"type"`
	Offset   uint64 `json:"offset,omitempty"`
	Data     []byte `json:"data,omitempty"` // base64 in JSON
	ExitCode *int32 `json:"exitCode,omitempty"`
	Signal   string `json:"signal,omitempty"`
	TimedOut bool   `json:"timedOut,omitempty"`
	Error    string `json:"error,omitempty"`
}

// SignalRequest is the body of POST /sandboxes/{id}/processes/{pid|tag}/signal.
type SignalRequest struct {
	// Signal is one of SIGTERM, SIGKILL, SIGINT, SIGHUP, SIGQUIT, SIGUSR1,
	// SIGUSR2, SIGSTOP, SIGCONT ("TERM" works too).
	Signal string `json:"signal"`
}

// OutputOptions say where a process's output replay starts and whether it
// follows the live output.
type OutputOptions struct {
	// From is the offset in both streams to replay from (0: everything kept).
	From uint64
	// StdoutFrom and StderrFrom override From per stream when non-zero.
	StdoutFrom, StderrFrom uint64
	// Follow streams new output until the process exits.
	Follow bool
}
