package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// CommandsService runs commands in sandboxes (POST /sandboxes/{id}/exec).
type CommandsService struct{ t *transport }

// maxEventLine bounds one NDJSON line of an exec stream. The server sends
// output in chunks far below this; the bound keeps a broken server from
// making us buffer without limit.
const maxEventLine = 16 << 20

// Exec runs a command in a sandbox and copies its output to stdout and
// stderr as it arrives (either may be nil to drop that stream). It returns
// the "exit" event, which carries the exit code, the signal, or the reason
// the command could not run. A stream that ends without an exit event is an
// error.
func (s *CommandsService) Exec(ctx context.Context, id string, req ExecRequest, stdout, stderr io.Writer) (ExecEvent, error) {
	r, err := jsonBody(http.MethodPost, sandboxPath(id, "/exec"), req)
	if err != nil {
		return ExecEvent{}, err
	}
	resp, err := s.t.send(ctx, r)
	if err != nil {
		return ExecEvent{}, err
	}
	defer resp.Body.Close()

	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventLine)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var ev ExecEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return ExecEvent{}, fmt.Errorf("exec in sandbox %s: bad event from the server: %w", id, err)
		}
		switch ev.Type {
		case "stdout":
			if err := writeAll(stdout, ev.Data); err != nil {
				return ExecEvent{}, fmt.Errorf("exec in sandbox %s: write stdout: %w", id, err)
			}
		case "stderr":
			if err := writeAll(stderr, ev.Data); err != nil {
				return ExecEvent{}, fmt.Errorf("exec in sandbox %s: write stderr: %w", id, err)
			}
		case "exit":
			return ev, nil
		case "error":
			// The server lost the command's stream after sending the
			// status line (the sandbox went away).
			return ExecEvent{}, fmt.Errorf("exec in sandbox %s: %s", id, ev.Error)
		}
		// "start" and event types added later are not needed here.
	}
	if err := sc.Err(); err != nil {
		if ctx.Err() != nil {
			return ExecEvent{}, ctx.Err()
		}
		return ExecEvent{}, fmt.Errorf("exec in sandbox %s: output stream broke: %w", id, err)
	}
	return ExecEvent{}, fmt.Errorf("exec in sandbox %s: the stream ended without an exit event (did the daemon restart?)", id)
}

func writeAll(w io.Writer, b []byte) error {
	if w == nil || len(b) == 0 {
		return nil
	}
	_, err := w.Write(b)
	return err
}

// ExecWait runs a command in a sandbox and returns its whole output once it
// has finished.
func (s *CommandsService) ExecWait(ctx context.Context, id string, req ExecRequest) (ExecResult, error) {
	var res ExecResult
	r, err := jsonBody(http.MethodPost, sandboxPath(id, "/exec"), req)
	if err != nil {
		return res, err
	}
	r.query = url.Values{"wait": {"true"}}
	err = s.t.call(ctx, r, &res)
	return res, err
}
