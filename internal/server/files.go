package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/agentconn"
	"github.com/warrenhq/warren/internal/errdefs"
)

const (
	maxPathLen = 4096
	chunkSize  = 1 << 20
)

// pathParam returns the request's ?path=, checked for shape only: the
// agent resolves it inside the sandbox, where `..` cannot leave the root.
func pathParam(r *http.Request, name string) (string, error) {
	p := r.URL.Query().Get(name)
	switch {
	case p == "":
		return "", fmt.Errorf("query parameter %q (a path inside the sandbox) is missing: %w", name, errdefs.ErrInvalid)
	case len(p) > maxPathLen:
		return "", fmt.Errorf("%s is longer than %d bytes: %w", name, maxPathLen, errdefs.ErrInvalid)
	case strings.IndexByte(p, 0) >= 0:
		return "", fmt.Errorf("%s holds a NUL byte: %w", name, errdefs.ErrInvalid)
	}
	return p, nil
}

// sandboxAgent resolves the request's path and admits the call into its
// sandbox; the caller calls release when the call ends.
func (s *Server) sandboxAgent(w http.ResponseWriter, r *http.Request) (agent *agentconn.Conn, path string, release func(), ok bool) {
	p, err := pathParam(r, "path")
	if err != nil {
		writeError(w, r, err)
		return nil, "", nil, false
	}
	agent, release, err = s.deps.Sessions.Acquire(r.Context(), teamOf(r), r.PathValue("id"))
	if err != nil {
		writeError(w, r, err)
		return nil, "", nil, false
	}
	return agent, p, release, true
}

func entryOf(e *agentv1.EntryInfo) client.EntryInfo {
	if e == nil {
		return client.EntryInfo{}
	}
	t := "other"
	switch e.GetType() {
	case agentv1.FileType_FILE_TYPE_FILE:
		t = "file"
	case agentv1.FileType_FILE_TYPE_DIRECTORY:
		t = "dir"
	case agentv1.FileType_FILE_TYPE_SYMLINK:
		t = "symlink"
	}
	return client.EntryInfo{
		Name:          e.GetName(),
		Path:          e.GetPath(),
		Type:          t,
		Size:          e.GetSize(),
		Mode:          e.GetMode(),
		Permissions:   os.FileMode(e.GetMode() & 0o777).String(),
		Owner:         e.GetOwner(),
		Group:         e.GetGroup(),
		ModifiedTime:  time.Unix(0, e.GetModifiedUnixNano()).UTC(),
		SymlinkTarget: e.GetSymlinkTarget(),
	}
}

func (s *Server) readFile(w http.ResponseWriter, r *http.Request) {
	agent, p, release, ok := s.sandboxAgent(w, r)
	if !ok {
		return
	}
	defer release()
	stream, err := agent.Files().ReadFile(r.Context(), connect.NewRequest(&agentv1.ReadFileRequest{Path: p}))
	if err != nil {
		writeError(w, r, err)
		return
	}
	defer stream.Close()
	// The first message carries the file's info; errors (not found, a
	// directory) arrive before it, so the status line can still say so.
	if !stream.Receive() {
		err := stream.Err()
		if err == nil {
			err = fmt.Errorf("the sandbox's agent sent nothing: %w", errdefs.ErrUnavailable)
		}
		writeError(w, r, err)
		return
	}
	first := stream.Msg()
	w.Header().Set("Content-Type", "application/octet-stream")
	// The agent reads to EOF, so what arrives can differ from the size stat
	// gave: procfs and sysfs report 0 for files that have content, and a
	// file may grow or shrink while it is read. A known size is announced
	// and delivered exactly (the file as it was when stat'ed, cut there if
	// it grew); a zero size is streamed without a length.
	size := int64(-1)
	if info := first.GetInfo(); info != nil && info.GetSize() > 0 {
		size = info.GetSize()
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	}
	w.WriteHeader(http.StatusOK)
	// A download slower than the idle timeout keeps the sandbox running.
	meter := s.deps.Sessions.ActivityMeter(r.PathValue("id"))
	written := int64(0)
	write := func(data []byte) error {
		if size >= 0 && written+int64(len(data)) > size {
			data = data[:size-written]
		}
		n, err := w.Write(data)
		written += int64(n)
		if n > 0 {
			meter.Note()
		}
		return err
	}
	if err := write(first.GetData()); err != nil {
		return
	}
	for (size < 0 || written < size) && stream.Receive() {
		if err := write(stream.Msg().GetData()); err != nil {
			return
		}
	}
	err = stream.Err()
	if err == nil && size >= 0 && written < size {
		err = fmt.Errorf("the file shrank to %d of the %d bytes announced while it was read", written, size)
	}
	if err != nil {
		// Too late for a status: cut the response so the client sees a
		// short body rather than a silently truncated file.
		s.deps.Log.Warn("read file cut short", "path", p, "err", err)
		panic(http.ErrAbortHandler)
	}
}

func (s *Server) writeFile(w http.ResponseWriter, r *http.Request) {
	limit := s.uploadLimit()
	if r.ContentLength > limit {
		writeError(w, r, errUploadTooLarge(limit))
		return
	}
	mode := uint32(0o644)
	if v := r.URL.Query().Get("mode"); v != "" {
		m, err := strconv.ParseUint(v, 8, 32)
		if err != nil || m > 0o7777 {
			writeError(w, r, fmt.Errorf("mode %q: want octal permission bits such as 0644: %w", v, errdefs.ErrInvalid))
			return
		}
		mode = uint32(m)
	}
	agent, p, release, ok := s.sandboxAgent(w, r)
	if !ok {
		return
	}
	defer release()
	body := http.MaxBytesReader(w, r.Body, limit)
	// Cancelling the stream is what abandons an upload: a stream closed
	// in order would have the agent keep what it got so far.
	ctx, abandon := context.WithCancel(r.Context())
	defer abandon()
	stream := agent.Files().WriteFile(ctx)
	err := stream.Send(&agentv1.WriteFileRequest{Header: &agentv1.WriteFileHeader{
		Path:        p,
		Mode:        mode,
		User:        r.URL.Query().Get("user"),
		MakeParents: r.URL.Query().Get("parents") != "false",
	}})
	// An upload slower than the idle timeout keeps the sandbox running.
	meter := s.deps.Sessions.ActivityMeter(r.PathValue("id"))
	buf := make([]byte, chunkSize)
	for err == nil {
		n, rerr := body.Read(buf)
		if n > 0 {
			meter.Note()
			err = stream.Send(&agentv1.WriteFileRequest{Data: buf[:n]})
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			var tooBig *http.MaxBytesError
			if errors.As(rerr, &tooBig) {
				rerr = errUploadTooLarge(limit)
			}
			// Abandon the upload: the agent drops its temporary file.
			abandon()
			_, _ = stream.CloseAndReceive()
			writeError(w, r, rerr)
			return
		}
	}
	// A Send error means the agent ended the stream; its reason comes from
	// CloseAndReceive.
	res, cerr := stream.CloseAndReceive()
	if cerr != nil {
		writeError(w, r, cerr)
		return
	}
	writeJSON(w, http.StatusOK, entryOf(res.Msg.GetEntry()))
}

func (s *Server) removeFile(w http.ResponseWriter, r *http.Request) {
	agent, p, release, ok := s.sandboxAgent(w, r)
	if !ok {
		return
	}
	defer release()
	if _, err := agent.Files().Remove(r.Context(), connect.NewRequest(&agentv1.RemoveRequest{Path: p})); err != nil {
		writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) statFile(w http.ResponseWriter, r *http.Request) {
	agent, p, release, ok := s.sandboxAgent(w, r)
	if !ok {
		return
	}
	defer release()
	res, err := agent.Files().Stat(r.Context(), connect.NewRequest(&agentv1.StatRequest{Path: p}))
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, entryOf(res.Msg.GetEntry()))
}

const maxListDepth = 16

func (s *Server) listDir(w http.ResponseWriter, r *http.Request) {
	agent, p, release, ok := s.sandboxAgent(w, r)
	if !ok {
		return
	}
	defer release()
	depth := uint64(1)
	if v := r.URL.Query().Get("depth"); v != "" {
		d, err := strconv.ParseUint(v, 10, 32)
		if err != nil || d < 1 || d > maxListDepth {
			writeError(w, r, fmt.Errorf("depth %q: want 1..%d: %w", v, maxListDepth, errdefs.ErrInvalid))
			return
		}
		depth = d
	}
	res, err := agent.Files().ListDir(r.Context(), connect.NewRequest(&agentv1.ListDirRequest{Path: p, Depth: uint32(depth)}))
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := make([]client.EntryInfo, 0, len(res.Msg.GetEntries()))
	for _, e := range res.Msg.GetEntries() {
		out = append(out, entryOf(e))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) makeDir(w http.ResponseWriter, r *http.Request) {
	agent, p, release, ok := s.sandboxAgent(w, r)
	if !ok {
		return
	}
	defer release()
	res, err := agent.Files().MakeDir(r.Context(), connect.NewRequest(&agentv1.MakeDirRequest{Path: p, User: r.URL.Query().Get("user")}))
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, entryOf(res.Msg.GetEntry()))
}

func (s *Server) moveFile(w http.ResponseWriter, r *http.Request) {
	var body client.MoveRequest
	if err := decodeJSON(w, r, &body); err != nil {
		writeError(w, r, err)
		return
	}
	if body.Source == "" || body.Destination == "" || len(body.Source) > maxPathLen || len(body.Destination) > maxPathLen {
		writeError(w, r, fmt.Errorf("give source and destination paths (each at most %d bytes): %w", maxPathLen, errdefs.ErrInvalid))
		return
	}
	agent, release, err := s.deps.Sessions.Acquire(r.Context(), teamOf(r), r.PathValue("id"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	defer release()
	res, err := agent.Files().Move(r.Context(), connect.NewRequest(&agentv1.MoveRequest{Source: body.Source, Destination: body.Destination}))
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, entryOf(res.Msg.GetEntry()))
}

// uploadLimit bounds one file upload, through warren's API and E2B's
// sandbox plane alike (--max-upload-mb).
func (s *Server) uploadLimit() int64 {
	if s.deps.MaxUploadBytes > 0 {
		return s.deps.MaxUploadBytes
	}
	return defaultMaxUpload
}

func errUploadTooLarge(limit int64) error {
	return fmt.Errorf("upload is over this server's limit of %d bytes (--max-upload-mb): %w", limit, errTooLarge)
}
