package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/commands"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/procs"
)

// Processes is what the background-process routes need that runs in a
// sandbox: the command service (*commands.Service). Listing and following
// output read the host's collector (Deps.Procs) and need no agent call.
type Processes interface {
	StartProcess(ctx context.Context, team, id string, req client.StartProcessRequest) (client.ProcessInfo, error)
	SendInput(ctx context.Context, team, id, ref string, data []byte) error
	CloseInput(ctx context.Context, team, id, ref string) error
	Signal(ctx context.Context, team, id, ref, signal string) error
}

// processRoutes serve a sandbox's background processes: starting and
// signalling them through the command service, listing and following
// their output from the host's collectors.
type processRoutes struct {
	processes Processes
	plane     Plane
	procs     *procs.Manager
}

// processOutputs returns the output collector of a team's running sandbox.
// It counts no call in flight: following a process's output may last as
// long as the process and must not keep the sandbox from pausing.
func (s *processRoutes) processOutputs(r *http.Request) (*procs.Collector, error) {
	id := r.PathValue("id")
	if _, err := s.plane.Agent(r.Context(), teamOf(r), id); err != nil {
		return nil, err
	}
	col, ok := s.procs.Get(id)
	if !ok {
		return nil, commands.ErrNotCollected(id)
	}
	return col, nil
}

func (s *processRoutes) startProcess(w http.ResponseWriter, r *http.Request) {
	var req client.StartProcessRequest
	if err := decodeJSON(w, r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	info, err := s.processes.StartProcess(r.Context(), teamOf(r), r.PathValue("id"), req)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, info)
}

func (s *processRoutes) listProcesses(w http.ResponseWriter, r *http.Request) {
	col, err := s.processOutputs(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	list := col.List(r.Context())
	out := make([]client.ProcessInfo, 0, len(list))
	for _, p := range list {
		out = append(out, commands.ProcessInfo(p))
	}
	writeJSON(w, http.StatusOK, out)
}

func queryOffset(r *http.Request, name string, def uint64) (uint64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s=%q is not a byte offset: %w", name, v, errdefs.ErrInvalid)
	}
	return n, nil
}

// processOutput replays a process's output from the host's ring and, with
// ?follow=true, streams it live until the process exits, as NDJSON.
func (s *processRoutes) processOutput(w http.ResponseWriter, r *http.Request) {
	col, err := s.processOutputs(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	from, err := queryOffset(r, "from", 0)
	if err != nil {
		writeError(w, r, err)
		return
	}
	outFrom, err := queryOffset(r, "stdoutFrom", from)
	if err != nil {
		writeError(w, r, err)
		return
	}
	errFrom, err := queryOffset(r, "stderrFrom", from)
	if err != nil {
		writeError(w, r, err)
		return
	}
	follow := r.URL.Query().Get("follow") == "true"
	p, err := col.Get(r.Context(), r.PathValue("ref"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	sawExit := false
	err = col.Follow(r.Context(), p, outFrom, errFrom, follow, func(ev procs.Event) error {
		out := client.ProcessEvent{Type: ev.Stream, Offset: ev.Offset, Data: ev.Data}
		if ev.Exit != nil {
			code := ev.Exit.ExitCode
			sawExit = true
			out = client.ProcessEvent{Type: "exit", ExitCode: &code, Signal: ev.Exit.Signal, TimedOut: ev.Exit.TimedOut, Error: ev.Exit.Error}
		}
		if err := enc.Encode(out); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	})
	if r.Context().Err() != nil {
		return // the client went away; the process keeps running
	}
	switch {
	case err != nil:
		_ = enc.Encode(client.ProcessEvent{Type: "error", Error: "reading the process's output failed: " + messageOf(err)})
	case follow && !sawExit:
		_ = enc.Encode(client.ProcessEvent{Type: "error", Error: "the process is gone: its sandbox restarted (a rollback restarts every process)"})
	}
}

func (s *processRoutes) processStdin(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, commands.MaxStdin))
	if err != nil {
		writeError(w, r, fmt.Errorf("stdin body is larger than %d bytes; send it in parts: %w", commands.MaxStdin, errTooLarge))
		return
	}
	noContent(w, r, s.processes.SendInput(r.Context(), teamOf(r), r.PathValue("id"), r.PathValue("ref"), data))
}

func (s *processRoutes) processCloseStdin(w http.ResponseWriter, r *http.Request) {
	noContent(w, r, s.processes.CloseInput(r.Context(), teamOf(r), r.PathValue("id"), r.PathValue("ref")))
}

func (s *processRoutes) processSignal(w http.ResponseWriter, r *http.Request) {
	var req client.SignalRequest
	if err := decodeJSON(w, r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	noContent(w, r, s.processes.Signal(r.Context(), teamOf(r), r.PathValue("id"), r.PathValue("ref"), req.Signal))
}

// noContent answers err, or 204 when it is nil.
func noContent(w http.ResponseWriter, r *http.Request, err error) {
	if err != nil {
		writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
