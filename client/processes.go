package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// ProcessesService starts background processes in sandboxes, streams their
// output and feeds their stdin (the /sandboxes/{id}/processes routes).
type ProcessesService struct{ t *transport }

func processPath(id, ref, suffix string) string {
	return sandboxPath(id, "/processes/"+url.PathEscape(ref)+suffix)
}

// Start starts a background process in a sandbox and returns at once.
func (s *ProcessesService) Start(ctx context.Context, id string, req StartProcessRequest) (ProcessInfo, error) {
	var p ProcessInfo
	r, err := jsonBody(http.MethodPost, sandboxPath(id, "/processes"), req)
	if err != nil {
		return p, err
	}
	err = s.t.call(ctx, r, &p)
	return p, err
}

// List lists a sandbox's background processes: the running ones
// and those that exited in the last ten minutes.
func (s *ProcessesService) List(ctx context.Context, id string) ([]ProcessInfo, error) {
	var out []ProcessInfo
	err := s.t.call(ctx, request{method: http.MethodGet, path: sandboxPath(id, "/processes")}, &out)
	return out, err
}

// Output replays a process's output (ref is its pid or tag) and,
// with opts.Follow, streams it live; fn sees every event. It returns the
// "exit" event, or nil when the stream ended without one (not following
// a running process).
func (s *ProcessesService) Output(ctx context.Context, id, ref string, opts OutputOptions, fn func(ProcessEvent) error) (*ProcessEvent, error) {
	q := url.Values{"from": {strconv.FormatUint(opts.From, 10)}}
	if opts.StdoutFrom > 0 {
		q.Set("stdoutFrom", strconv.FormatUint(opts.StdoutFrom, 10))
	}
	if opts.StderrFrom > 0 {
		q.Set("stderrFrom", strconv.FormatUint(opts.StderrFrom, 10))
	}
	if opts.Follow {
		q.Set("follow", "true")
	}
	resp, err := s.t.send(ctx, request{method: http.MethodGet, path: processPath(id, ref, "/output"), query: q})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventLine)
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var ev ProcessEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("output of process %s: bad event from the server: %w", ref, err)
		}
		if ev.Type == "error" {
			return nil, fmt.Errorf("output of process %s: %s", ref, ev.Error)
		}
		if fn != nil {
			if err := fn(ev); err != nil {
				return nil, err
			}
		}
		if ev.Type == "exit" {
			return &ev, nil
		}
	}
	if err := sc.Err(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("output of process %s: stream broke: %w", ref, err)
	}
	return nil, nil
}

// Attach copies a process's output to stdout and stderr (either may
// be nil), replaying from opts and following it if asked.
func (s *ProcessesService) Attach(ctx context.Context, id, ref string, opts OutputOptions, stdout, stderr io.Writer) (*ProcessEvent, error) {
	return s.Output(ctx, id, ref, opts, func(ev ProcessEvent) error {
		switch ev.Type {
		case "stdout":
			return writeAll(stdout, ev.Data)
		case "stderr":
			return writeAll(stderr, ev.Data)
		}
		return nil
	})
}

// SendInput writes data to a process's stdin.
func (s *ProcessesService) SendInput(ctx context.Context, id, ref string, data []byte) error {
	r := request{method: http.MethodPost, path: processPath(id, ref, "/stdin"), body: bytes.NewReader(data), contentType: "application/octet-stream"}
	return s.t.call(ctx, r, nil)
}

// CloseStdin closes a process's stdin: it reads EOF.
func (s *ProcessesService) CloseStdin(ctx context.Context, id, ref string) error {
	return s.t.call(ctx, request{method: http.MethodPost, path: processPath(id, ref, "/stdin/close")}, nil)
}

// Signal sends a signal to a process's process group.
func (s *ProcessesService) Signal(ctx context.Context, id, ref, signal string) error {
	r, err := jsonBody(http.MethodPost, processPath(id, ref, "/signal"), SignalRequest{Signal: signal})
	if err != nil {
		return err
	}
	return s.t.call(ctx, r, nil)
}
